/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "audit.h"
#include "events.h"
#include "netgate/netgate.h"
#include "review.h"
#include "util.h"

static const char *const read_modes[] = {"system", "host"};
static const char *const ws_modes[] = {"rw", "ro", "overlay"};
static const char *const net_modes[] = {"none", "gated"};

static json_t *sandbox_created(const struct policy *p);

/* The tier, and what the repository's .airlock/isolation.json applied. */
json_t *events_sandbox_created(const struct policy *p)
{
        json_t *o = sandbox_created(p);
        json_t *s = json_object_get(o, "summary");
        json_object_set_new(s, "tier", json_string(policy_tier_name(p->tier)));
        if (p->image)
                json_object_set_new(s, "image", json_string(p->image));
        json_t *repo = p->repo_applied ? json_loads(p->repo_applied, 0, NULL) : NULL;
        if (repo)
                json_object_set_new(o, "repoConfig", repo);
        return o;
}

static json_t *sandbox_created(const struct policy *p)
{
        _cleanup_free_ char *canon = policy_to_json(p);
        char digest[AUDIT_HASH_HEX + 1] = "";
        if (canon)
                audit_hash_hex(canon, strlen(canon), digest);
        json_t *allow = json_array();
        for (size_t i = 0; i < p->n_net_allow; i++)
                json_array_append_new(allow, json_string(p->net_allow[i]));
        return json_pack(
            "{s:s, s:{s:o, s:s, s:s, s:s, s:o, s:i, s:{s:I, s:I, s:I, s:I}}}", "policyDigest",
            digest, "summary", "workspace", p->workspace ? json_string(p->workspace) : json_null(),
            "workspaceMode", ws_modes[p->workspace_mode], "read", read_modes[p->read], "network",
            net_modes[p->net_mode], "allow", allow, "uid", (int)p->uid, "limits", "memory",
            (json_int_t)p->limits.memory, "pids", (json_int_t)p->limits.pids, "cpusMilli",
            (json_int_t)p->limits.cpus_milli, "timeoutMs", (json_int_t)p->limits.timeout_ms);
}

json_t *events_argv(char *const *argv)
{
        json_t *a = json_array();
        for (size_t i = 0; argv && argv[i]; i++)
                json_array_append_new(a, json_stringn(argv[i], strnlen(argv[i], 4096)));
        return a;
}

json_t *events_process_started(int pid, json_t *argv)
{
        return json_pack("{s:i, s:o}", "pid", pid, "argv", argv ? argv : json_array());
}

static json_t *measured(bool yes, uint64_t v)
{
        return yes ? json_integer((json_int_t)v) : json_null();
}

json_t *events_process_ended(const struct events_end *e)
{
        json_t *o = json_pack(
            "{s:i, s:i, s:o, s:o, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:I, s:I, s:o}}",
            "pid", e->pid, "exitCode", e->exit_code, "signal",
            e->signal ? json_integer(e->signal) : json_null(), "errorCode",
            e->error_code ? json_string(e->error_code) : json_null(), "durationMs",
            (json_int_t)e->duration_ms, "usage", "cpuMs", (json_int_t)e->cpu_ms, "cpuUserMs",
            (json_int_t)e->cpu_user_ms, "cpuSystemMs", (json_int_t)e->cpu_system_ms,
            "memoryPeakBytes", (json_int_t)e->memory_peak, "maxRssKb", (json_int_t)e->max_rss_kb,
            "outputBytes", (json_int_t)e->output_bytes, "ioReadBytes",
            measured(e->io_measured, e->io_read_bytes), "ioWriteBytes",
            measured(e->io_measured, e->io_write_bytes), "netSentBytes",
            (json_int_t)e->net_sent_bytes, "netReceivedBytes", (json_int_t)e->net_received_bytes,
            "workspaceAddedBytes", measured(e->workspace_measured, e->workspace_added_bytes));
        json_t *u = o ? json_object_get(o, "usage") : NULL;
        if (u)
                json_object_set_new(u, "diskPeakBytes",
                                    measured(e->disk_measured, e->disk_peak_bytes));
        return o;
}

const char *events_limit_name(const char *error_code)
{
        if (!error_code)
                return NULL;
        if (STREQ(error_code, "timeout"))
                return "timeout";
        if (STREQ(error_code, "oom_killed"))
                return "memory";
        if (STREQ(error_code, "output_limit"))
                return "output";
        if (STREQ(error_code, "disk_limit"))
                return "disk";
        return NULL;
}

void events_limit_message(const char *error_code, uint64_t value, char *buf, size_t size)
{
        const char *limit = events_limit_name(error_code);
        if (!limit)
                snprintf(buf, size, "%s", "");
        else if (STREQ(limit, "timeout"))
                snprintf(buf, size, "the command ran past its %" PRIu64 " ms timeout", value);
        else if (STREQ(limit, "memory"))
                snprintf(buf, size, "%s",
                         "the memory limit was reached and the kernel killed the command");
        else if (STREQ(limit, "disk"))
                snprintf(buf, size,
                         "the workspace reached its %" PRIu64 " byte limit (limits.workspaceDisk)",
                         value);
        else
                snprintf(buf, size, "the output passed its %" PRIu64 " byte limit", value);
}

json_t *events_limit_hit(const struct events_end *e)
{
        const char *limit = events_limit_name(e->error_code);
        if (!limit)
                return NULL;
        return json_pack("{s:i, s:s, s:s}", "pid", e->pid, "limit", limit, "message",
                         e->message ? e->message : "");
}

json_t *events_violation(const struct events_end *e)
{
        if (e->signal != SIGSYS)
                return NULL;
        return json_pack("{s:i, s:s, s:i}", "pid", e->pid, "what", "seccomp", "signal", SIGSYS);
}

json_t *events_sandbox_destroyed(uint64_t duration_ms)
{
        return json_pack("{s:I}", "durationMs", (json_int_t)duration_ms);
}

json_t *events_review_counts(const struct review_summary *sum)
{
        return json_pack("{s:I, s:I, s:I, s:I, s:I}", "added", (json_int_t)sum->added, "modified",
                         (json_int_t)sum->modified, "deleted", (json_int_t)sum->deleted, "bytes",
                         (json_int_t)sum->bytes, "skipped", (json_int_t)sum->skipped);
}

json_t *events_review_kept(const char *dir, const struct review_summary *sum)
{
        json_t *f = events_review_counts(sum);
        json_object_set_new(f, "dir", json_string(dir ? dir : ""));
        return f;
}

json_t *events_review_failed(const char *dir, int r, const char *message)
{
        return json_pack("{s:s, s:s, s:s}", "dir", dir ? dir : "", "reason",
                         r == -EDQUOT ? "disk_limit" : "error", "message", message ? message : "");
}

static json_t *str_or_null(const char *s)
{
        return s ? json_string(s) : json_null();
}

const char *events_net_kind(const struct netgate_record *rec)
{
        if (STREQ(rec->protocol, "gate"))
                return "net.budget_exceeded";
        return STREQ(rec->protocol, "route") ? "route.call" : "net.decision";
}

/* An aggregated refusal stands for `count` of them; a crossing through
 * the parent proxy says what the parent was handed. */
static json_t *with_count(json_t *o, const struct netgate_record *rec)
{
        if (o && rec->count > 0)
                json_object_set_new(o, "count", json_integer((json_int_t)rec->count));
        if (o && rec->parent)
                json_object_set_new(o, "parent", json_string(rec->parent));
        return o;
}

json_t *events_net_decision(const struct netgate_record *rec)
{
        if (STREQ(rec->protocol, "gate"))
                return json_pack("{s:s, s:s, s:s, s:I, s:s}", "decision", rec->decision, "reason",
                                 rec->reason, "rule", rec->rule ? rec->rule : "", "refusals",
                                 (json_int_t)rec->count, "message",
                                 "the refusal budget is spent: the gate closes every new "
                                 "connection from now on, without a record");
        if (STREQ(rec->protocol, "route"))
                return with_count(events_route_call(rec), rec);
        return with_count(
            json_pack("{s:s, s:o, s:o, s:i, s:o, s:s, s:o, s:o, s:i, s:I, s:I, s:I}", "protocol",
                      rec->protocol, "method", str_or_null(rec->method), "host",
                      str_or_null(rec->host), "port", (int)rec->port, "address",
                      str_or_null(rec->address), "decision", rec->decision, "reason",
                      str_or_null(rec->reason), "rule", str_or_null(rec->rule), "status",
                      rec->status, "bytesUp", (json_int_t)rec->bytes_up, "bytesDown",
                      (json_int_t)rec->bytes_down, "durationMs", (json_int_t)rec->duration_ms),
            rec);
}

json_t *events_route_call(const struct netgate_record *rec)
{
        json_t *recorded = json_object();
        for (size_t i = 0; i < rec->n_recorded; i++)
                json_object_set_new(recorded, rec->recorded[i].name,
                                    json_string(rec->recorded[i].value));
        json_t *o = json_pack("{s:o, s:o, s:o, s:i, s:I, s:I, s:I, s:o, s:o, s:s, s:o, s:o, s:o}",
                              "route", str_or_null(rec->route), "method", str_or_null(rec->method),
                              "path", str_or_null(rec->path), "status", rec->status, "bytesUp",
                              (json_int_t)rec->bytes_up, "bytesDown", (json_int_t)rec->bytes_down,
                              "durationMs", (json_int_t)rec->duration_ms, "upstream",
                              str_or_null(rec->upstream), "address", str_or_null(rec->address),
                              "decision", rec->decision, "reason", str_or_null(rec->reason), "rule",
                              str_or_null(rec->rule), "recorded", recorded);
        /* A host tool's request (netgate_route_fetch()), not the sandbox's. */
        if (o && rec->tool)
                json_object_set_new(o, "tool", json_string(rec->tool));
        return o;
}

json_t *events_port_opened(const struct events_port *p)
{
        return json_pack("{s:i, s:i, s:s}", "port", (int)p->port, "hostPort", (int)p->host_port,
                         "bind", p->bind);
}

json_t *events_port_connect(const struct events_port *p, const char *peer, uint64_t to_sandbox,
                            uint64_t from_sandbox, uint64_t duration_ms, const char *result,
                            const char *message)
{
        json_t *o =
            json_pack("{s:i, s:i, s:s, s:s, s:I, s:I, s:I, s:s}", "port", (int)p->port, "hostPort",
                      (int)p->host_port, "bind", p->bind, "peer", peer, "bytesToSandbox",
                      (json_int_t)to_sandbox, "bytesFromSandbox", (json_int_t)from_sandbox,
                      "durationMs", (json_int_t)duration_ms, "result", result);
        if (o && message)
                json_object_set_new(o, "message", json_string(message));
        return o;
}

json_t *events_port_refused(const struct events_port *p, unsigned limit)
{
        return json_pack("{s:i, s:i, s:s, s:i}", "port", (int)p->port, "hostPort",
                         (int)p->host_port, "reason", "too_many_connections", "limit", (int)limit);
}

json_t *events_port_closed(const struct events_port *p, const char *reason, uint64_t accepted,
                           uint64_t refused)
{
        return json_pack("{s:i, s:i, s:s, s:s, s:I, s:I}", "port", (int)p->port, "hostPort",
                         (int)p->host_port, "bind", p->bind, "reason", reason, "accepted",
                         (json_int_t)accepted, "refused", (json_int_t)refused);
}
