/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <string.h>

#include "audit.h"
#include "events.h"
#include "netgate/netgate.h"
#include "supervisor.h"
#include "util.h"

static const char *const read_modes[] = {"system", "host"};
static const char *const ws_modes[] = {"rw", "ro", "overlay"};
static const char *const net_modes[] = {"none", "gated"};

json_t *events_sandbox_created(const struct policy *p)
{
        _cleanup_free_ char *canon = policy_to_json(p);
        char digest[AUDIT_HASH_HEX + 1] = "";
        if (canon)
                audit_hash_hex(canon, strlen(canon), digest);
        json_t *allow = json_array();
        for (size_t i = 0; i < p->n_net_allow; i++)
                json_array_append_new(allow, json_string(p->net_allow[i]));
        return json_pack("{s:s, s:{s:o, s:s, s:s, s:s, s:o, s:i, s:{s:I, s:I, s:I, s:I}}}",
                         "policyDigest", digest,
                         "summary",
                         "workspace", p->workspace ? json_string(p->workspace) : json_null(),
                         "workspaceMode", ws_modes[p->workspace_mode],
                         "read", read_modes[p->read],
                         "network", net_modes[p->net_mode],
                         "allow", allow,
                         "uid", (int)p->uid,
                         "limits",
                         "memory", (json_int_t)p->limits.memory,
                         "pids", (json_int_t)p->limits.pids,
                         "cpusMilli", (json_int_t)p->limits.cpus_milli,
                         "timeoutMs", (json_int_t)p->limits.timeout_ms);
}

json_t *events_process_started(char *const *argv)
{
        json_t *a = json_array();
        for (size_t i = 0; argv && argv[i]; i++)
                json_array_append_new(a, json_stringn(argv[i], strnlen(argv[i], 4096)));
        return json_pack("{s:o}", "argv", a);
}

json_t *events_process_ended(const struct supervisor_result *r)
{
        /* null: not measured (no blkio controller, no workspace quota). */
        bool io = r->usage.io_measured, ws = r->usage.workspace_measured;
        return json_pack("{s:i, s:o, s:o, s:I, s:{s:I, s:I, s:I, s:I, s:I, s:o, s:o, s:I, s:I, s:o}}",
                         "exitCode", r->exit_code,
                         "signal", r->signal ? json_integer(r->signal) : json_null(),
                         "errorCode", r->error_code ? json_string(r->error_code) : json_null(),
                         "durationMs", (json_int_t)r->duration_ms,
                         "usage",
                         "cpuMs", (json_int_t)r->usage.cpu_ms,
                         "cpuUserMs", (json_int_t)r->usage.cpu_user_ms,
                         "cpuSystemMs", (json_int_t)r->usage.cpu_system_ms,
                         "memoryPeakBytes", (json_int_t)r->usage.memory_peak,
                         "outputBytes", (json_int_t)r->usage.output_bytes,
                         "ioReadBytes", io ? json_integer((json_int_t)r->usage.io_read_bytes) : json_null(),
                         "ioWriteBytes", io ? json_integer((json_int_t)r->usage.io_write_bytes) : json_null(),
                         "netSentBytes", (json_int_t)r->usage.net_sent_bytes,
                         "netReceivedBytes", (json_int_t)r->usage.net_received_bytes,
                         "workspaceAddedBytes",
                         ws ? json_integer((json_int_t)r->usage.workspace_added_bytes) : json_null());
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

/* An aggregated refusal stands for `count` of them. */
static json_t *with_count(json_t *o, const struct netgate_record *rec)
{
        if (o && rec->count > 0)
                json_object_set_new(o, "count", json_integer((json_int_t)rec->count));
        return o;
}

json_t *events_net_decision(const struct netgate_record *rec)
{
        if (STREQ(rec->protocol, "gate"))
                return json_pack("{s:s, s:s, s:s, s:I, s:s}", "decision", rec->decision, "reason",
                                 rec->reason, "rule", rec->rule ? rec->rule : "",
                                 "refusals", (json_int_t)rec->count, "message",
                                 "the refusal budget is spent: the gate closes every new "
                                 "connection from now on, without a record");
        if (STREQ(rec->protocol, "route"))
                return with_count(events_route_call(rec), rec);
        return with_count(json_pack("{s:s, s:o, s:o, s:i, s:o, s:s, s:o, s:o, s:i, s:I, s:I, s:I}",
                         "protocol", rec->protocol,
                         "method", str_or_null(rec->method),
                         "host", str_or_null(rec->host),
                         "port", (int)rec->port,
                         "address", str_or_null(rec->address),
                         "decision", rec->decision,
                         "reason", str_or_null(rec->reason),
                         "rule", str_or_null(rec->rule),
                         "status", rec->status,
                         "bytesUp", (json_int_t)rec->bytes_up,
                         "bytesDown", (json_int_t)rec->bytes_down,
                         "durationMs", (json_int_t)rec->duration_ms), rec);
}

json_t *events_route_call(const struct netgate_record *rec)
{
        json_t *recorded = json_object();
        for (size_t i = 0; i < rec->n_recorded; i++)
                json_object_set_new(recorded, rec->recorded[i].name,
                                    json_string(rec->recorded[i].value));
        return json_pack("{s:o, s:o, s:o, s:i, s:I, s:I, s:I, s:o, s:o, s:s, s:o, s:o, s:o}",
                         "route", str_or_null(rec->route),
                         "method", str_or_null(rec->method),
                         "path", str_or_null(rec->path),
                         "status", rec->status,
                         "bytesUp", (json_int_t)rec->bytes_up,
                         "bytesDown", (json_int_t)rec->bytes_down,
                         "durationMs", (json_int_t)rec->duration_ms,
                         "upstream", str_or_null(rec->upstream),
                         "address", str_or_null(rec->address),
                         "decision", rec->decision,
                         "reason", str_or_null(rec->reason),
                         "rule", str_or_null(rec->rule),
                         "recorded", recorded);
}
