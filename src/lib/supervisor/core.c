/* SPDX-License-Identifier: Apache-2.0 */
#include <event2/event.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
#include "caps.h"
#include "cgroup.h"
#include "env.h"
#include "connect-notify.h"
#include "core.h"
#include "opencalls.h"
#include "gitguard.h"
#include "diskuse.h"
#include "gates.h"
#include "ports.h"
#include "netgate/ca.h"
#include "netgate/netgate.h"
#include "netgate/sentinel.h"
#include "secrets.h"
#include "paths.h"
#include "quota.h"
#include "hwgate/hwgate.h"
#include "toolgate/toolgate.h"
#include "util.h"
#include "volume.h"

void sv_core_init(struct sv_core *c, const struct policy *p, sv_core_fault_fn on_fault,
                  void *driver)
{
        memset(c, 0, sizeof(*c));
        c->policy = p;
        c->on_fault = on_fault;
        c->driver = driver;
        c->sp.pid = -1;
        c->sp.pidfd = -1;
        c->sp.sync_fd = -1;
        c->sp.upper_fd = -1;
        c->sp.netns_fd = -1;
        c->sp.pty_fd = -1;
        c->sp.tool_fd = -1;
        c->sp.dns_fd = c->sp.relay_fd = c->sp.notify_fd = -1;
        for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                c->sp.listen_fds[i] = -1;
        c->start_us = now_monotonic_us();
        c->caps = caps_new(p);
}

int sv_core_set_id(struct sv_core *c, const char *id, struct al_error *err)
{
        int rr = random_hex(c->run_id, 32);
        if (rr < 0)
                return al_error_set(err, rr, "generating a run id");
        if (!id) {
                int r = random_hex(c->id, 16);
                return r < 0 ? al_error_set(err, r, "generating a sandbox id") : 0;
        }
        if (strspn(id, "0123456789abcdef") != 16 || id[16] != '\0')
                return al_error_set(err, 0, "sandbox id \"%s\": expected 16 hex digits", id);
        memcpy(c->id, id, 17);
        return 0;
}

int sv_core_open_audit(struct sv_core *c, const char *path, const struct audit_options *rot,
                       struct secrets *s, struct al_error *err)
{
        int r = gates_open_audit(path, s, rot, &c->audit, err);
        if (r < 0)
                return r;
        /* The event loop relays the gate's bytes: the periodic sync runs in
         * the log's helper process, never in the loop (a sync takes 0.5 ms,
         * tens on a busy disk). sv_core_commit() still waits for the disk.
         * The helper is a process, forked by the first sync handed to it
         * (sync.c): a run that ends within one batch forks none. */
        r = audit_set_background_sync(c->audit);
        if (r < 0)
                return al_error_set(err, r, "starting the audit log's sync helper");
        return 0;
}

/* An event that cannot be written is not silently lost: the driver stops
 * what runs. The first cause and the last are kept. */
static void fault(struct sv_core *c, struct al_error *e)
{
        al_error_wrap(e, "audit");
        if (!c->audit_failed)
                memcpy(c->audit_first, e->msg, sizeof(c->audit_first));
        memcpy(c->audit_last, e->msg, sizeof(c->audit_last));
        c->audit_failed = true;
        if (c->on_fault)
                c->on_fault(c, c->driver);
}

/* ---- the gate's closing records, batched per loop turn ----
 *
 * A record the gate marks `ended` (a request answered, a tunnel closed,
 * refusals counted) describes something already done: nothing waits for
 * its line. The driver's recorder still builds it and calls
 * sv_core_record(); while it runs for such a record, the record is queued
 * instead of written, and the queue is appended in one audit_append_many()
 * (one lock, one write) by ev_records, made active by the first record of
 * the turn so that it runs after the turn's other callbacks, before the
 * loop waits again. Any other record first writes what is queued, so the
 * log's order is the order of the calls; so do a sync, sv_core_free() and
 * closing the log. A failed append stops the sandbox as a single one
 * does. */

#define BATCH_MAX 64 /* records queued before they are written anyway */

static int batch_flush(struct sv_core *c)
{
        struct sv_core_batch *b = &c->batch;
        if (b->n == 0)
                return 0;
        int r = 0;
        if (c->audit) {
                struct al_error e = {0};
                r = audit_append_many(c->audit, b->recs, b->n, &e);
                if (r < 0)
                        fault(c, &e);
        }
        for (size_t i = 0; i < b->n; i++)
                json_decref(b->recs[i].fields);
        b->n = 0;
        return r;
}

static void on_records(evutil_socket_t fd, short what, void *arg)
{
        batch_flush(arg);
}

static void batch_release(struct sv_core *c)
{
        struct sv_core_batch *b = &c->batch;
        batch_flush(c);
        if (b->ev_records)
                event_free(b->ev_records);
        free(b->recs);
        b->ev_records = NULL;
        b->recs = NULL;
        b->cap = 0;
}

static int batch_add(struct sv_core *c, const char *kind, json_t *fields)
{
        struct sv_core_batch *b = &c->batch;
        if (b->n == b->cap) {
                b->cap = b->cap ? b->cap * 2 : 8;
                b->recs = xrealloc(b->recs, b->cap, sizeof(*b->recs));
        }
        b->recs[b->n++] = (struct audit_record){.sandbox = c->id, .kind = kind, .fields = fields};
        if (b->n == 1)
                event_active(b->ev_records, 0, 0);
        return b->n >= BATCH_MAX ? batch_flush(c) : 0;
}

void sv_core_gate_records(struct sv_core *c,
                          void (*recorder)(void *ud, const struct netgate_record *rec), void *ud)
{
        c->batch.recorder = recorder;
        c->batch.recorder_ud = ud;
        if (recorder && c->base && !c->batch.ev_records)
                c->batch.ev_records = event_new(c->base, -1, 0, on_records, c);
}

void sv_core_gate_record(void *core, const struct netgate_record *rec)
{
        struct sv_core *c = core;
        struct sv_core_batch *b = &c->batch;
        if (!b->recorder)
                return;
        b->deferring = rec->ended && b->ev_records;
        b->recorder(b->recorder_ud, rec);
        b->deferring = false;
}

int sv_core_record(struct sv_core *c, const char *kind, json_t *fields)
{
        int r = 0;
        if (!fields)
                return 0;
        if (c->audit && c->batch.deferring)
                return batch_add(c, kind, fields);
        batch_flush(c);
        if (c->audit) {
                struct al_error e = {0};
                r = audit_append(c->audit, c->id, kind, fields, &e);
                if (r < 0)
                        fault(c, &e);
        }
        json_decref(fields);
        return r;
}

int sv_core_record_ahead(struct sv_core *c, const char *kind, json_t *fields)
{
        if (!c->audit) {
                json_decref(fields);
                return 0;
        }
        struct al_error e = {0};
        int r = audit_reserve(c->audit, &e);
        if (r < 0) {
                json_decref(fields);
                fault(c, &e);
                return r;
        }
        return sv_core_record(c, kind, fields);
}

int sv_core_commit(struct sv_core *c)
{
        batch_flush(c);
        int r = c->audit ? audit_flush(c->audit) : 0;
        if (r < 0) {
                struct al_error e = {0};
                al_error_set(&e, r, "syncing the audit log");
                fault(c, &e);
        }
        return r;
}

void sv_core_process_ended(struct sv_core *c, const struct events_end *e)
{
        sv_core_record(c, "process.ended", events_process_ended(e));
        sv_core_record(c, "limit.hit", events_limit_hit(e));
        sv_core_record(c, "violation", events_violation(e));
}

static void drop_event_log(int severity, const char *msg)
{
}

int sv_core_loop_new(struct sv_core *c, struct al_error *err)
{
        event_set_log_callback(drop_event_log);
        c->base = event_base_new();
        return c->base ? 0 : al_error_set(err, ENOMEM, "creating the event loop");
}

static int start_sentinels(struct sv_core *c, struct secrets *s, struct al_error *err);

static void drop_bundle(struct sv_core *c)
{
        if (c->ca_bundle)
                unlink(c->ca_bundle);
        free(c->ca_bundle);
        c->ca_bundle = NULL;
}

int sv_core_start_gate(struct sv_core *c, struct secrets *s, const char *account,
                       void (*recorder)(void *ud, const struct netgate_record *rec), void *ud,
                       struct al_error *err)
{
        /* The sandbox has its CA bundle bound by now. */
        drop_bundle(c);
        sv_core_gate_records(c, recorder, ud);
        int r = gates_start_netgate(c->base, c->policy, c->id, s, account, c->ca, c->sp.listen_fds,
                                    recorder ? sv_core_gate_record : NULL, c, &c->gate, err);
        if (r >= 0 && c->gate)
                r = gates_start_transparent(c->base, c->gate, &c->sp.dns_fd, &c->sp.relay_fd,
                                            &c->sp.notify_fd, &c->connect_notify, err);
        sv_connect_notify_set_sandbox(c->connect_notify, c->sp.pid);
        if (r >= 0 && c->gate && c->policy->net_ask) {
                sv_core_asks_begin(c);
                netgate_set_asker(c->gate, sv_core_net_asker(c));
        }
        return r < 0 ? r : start_sentinels(c, s, err);
}

static int sentinels_env(struct sv_core *c, struct secrets *s, char ***envp, struct al_error *err)
{
        const struct policy *p = c->policy;
        if (p->n_sentinels == 0 || p->net_mode != POLICY_NET_GATED)
                return 0;
        c->sentinels = xcalloc(p->n_sentinels + 1, sizeof(*c->sentinels));
        for (size_t i = 0; i < p->n_sentinels; i++) {
                const struct policy_sentinel *ps = &p->sentinels[i];
                if (!secrets_get(s, ps->secret))
                        return al_error_set(err, 0,
                                            "network.sentinels[%zu] (%s): the secret %s is not in "
                                            "--secrets nor in the host's environment; add it to "
                                            "the secrets file",
                                            i, ps->env, ps->secret);
                char ph[NETGATE_SENTINEL_LEN + 1];
                int r = netgate_sentinel_make(ph);
                if (r < 0)
                        return al_error_set(err, r, "making the placeholder of %s", ps->env);
                c->sentinels[i] = xstrdup(ph);
                env_set(envp, ps->env, ph);
        }
        return 0;
}

static int start_sentinels(struct sv_core *c, struct secrets *s, struct al_error *err)
{
        const struct policy *p = c->policy;
        if (!c->gate || !c->sentinels)
                return 0;
        struct netgate_sentinel_def *defs = xcalloc(p->n_sentinels + 1, sizeof(*defs));
        for (size_t i = 0; i < p->n_sentinels; i++)
                defs[i] = (struct netgate_sentinel_def){
                    .env = p->sentinels[i].env,
                    .placeholder = c->sentinels[i],
                    .secret = p->sentinels[i].secret,
                    .hosts = p->sentinels[i].hosts,
                    .n_hosts = p->sentinels[i].n_hosts,
                    .cleartext = p->sentinels[i].cleartext,
                    .cleartext_at = p->sentinels[i].cleartext_at,
                    .n_cleartext_at = p->sentinels[i].n_cleartext_at,
                };
        int r = netgate_set_sentinels(c->gate, defs, p->n_sentinels, s, err);
        free(defs);
        return r;
}

int sv_core_gate_env(struct sv_core *c, struct secrets *s, char ***envp, struct al_error *err)
{
        const struct policy *p = c->policy;
        bool wanted = false;
        for (size_t i = 0; i < p->n_routes; i++)
                wanted = wanted || p->routes[i].terminate;
        int r = sentinels_env(c, s, envp, err);
        if (r >= 0 && wanted && p->net_mode == POLICY_NET_GATED) {
                r = netgate_ca_new(c->id, &c->ca, err);
                if (r >= 0)
                        r = netgate_ca_write_bundle(c->ca, SPAWN_CA_BUNDLE, "/tmp", &c->ca_bundle,
                                                    err);
                if (r >= 0)
                        env_add_ca(envp, SPAWN_CA_BUNDLE);
        }
        if (r < 0)
                sv_core_gate_env_release(c);
        return r;
}

void sv_core_gate_env_release(struct sv_core *c)
{
        drop_bundle(c);
        c->ca = netgate_ca_free(c->ca);
        strv_free(c->sentinels);
        c->sentinels = NULL;
}

int sv_core_tool_endpoint(struct sv_core *c, char ***envp, char **ret_bin, struct al_error *err)
{
        *ret_bin = NULL;
        if (!toolgate_wanted(c->policy))
                return 0;
        *ret_bin = paths_beside_self("airlock-tool");
        if (!*ret_bin)
                return al_error_set(err, EINVAL,
                                    "finding the tool gateway's client (airlock-tool)");
        env_add_tool(envp, c->run_id);
        /* ssh reads no proxy variable: its ProxyCommand goes through the
         * gate's CONNECT listener with the tool gateway's client. */
        if (c->policy->net_mode == POLICY_NET_GATED)
                env_set(envp, "GIT_SSH_COMMAND",
                        "ssh -o ProxyCommand='" SPAWN_TOOL_BIN " connect %h %p'");
        return 0;
}

/* The tool gateway asks the live capabilities, not the policy. */
static bool core_tool_allowed(void *ud, const char *name)
{
        struct sv_core *c = ud;
        return c->caps && caps_tool_allowed(c->caps, name);
}

static void on_tool_call(void *ud, const struct toolgate_record *rec)
{
        struct sv_core *c = ud;
        json_t *fields = toolgate_record_json(rec);
        /* The audit line says whose it is itself (the same id). */
        json_object_del(fields, "sandbox");
        c->tool_calls++;
        /* Marked as ending first: a kill between the line and the file's
         * rewrite leaves a call whose sweep finds its line (opencalls.h). */
        if (c->open_calls)
                open_calls_ending(c->open_calls, rec->seq);
        sv_core_record(c, "tool.call", fields);
        if (c->open_calls)
                open_calls_end(c->open_calls, rec->seq);
}

/* Before a host tool runs: its record on the log first, or no run. */
static int on_tool_started(void *ud, const struct toolgate_record *rec)
{
        struct sv_core *c = ud;
        json_t *fields = toolgate_started_json(rec);
        json_object_del(fields, "sandbox");
        /* Kept as under way first: a supervisor killed once the line is
         * written leaves what its closing line needs (opencalls.h). */
        if (c->open_calls) {
                int r = open_calls_start(c->open_calls, rec->seq, rec->call_id, rec->tool, rec->args_digest,
                                         rec->rule, now_realtime_us() / 1000);
                if (r < 0) {
                        json_decref(fields);
                        return r;
                }
        }
        return sv_core_record_ahead(c, "tool.started", fields);
}

static int on_hw(void *ud, const char *kind, json_t *fields)
{
        return sv_core_record(ud, kind, fields);
}

int sv_core_start_tools(struct sv_core *c, struct secrets *s, const char *account,
                        struct al_error *err)
{
        if (c->policy->hardware_json && !c->hw) {
                struct hwgate_config hc = {
                    .policy_text = c->policy->hardware_json,
                    .policy = c->policy,
                    .recorder = on_hw,
                    .ud = c,
                };
                c->hw = hwgate_new(c->base, &hc, err);
                if (!c->hw)
                        return -EINVAL;
        }
        if (c->sp.tool_fd < 0)
                return 0;
        struct toolgate_config tc = {
            .policy = c->policy,
            .sandbox = c->id,
            .run_id = c->run_id,
            .secrets = s,
            .account = account,
            .netgate = c->gate,
            .recorder = on_tool_call,
            .ahead = on_tool_started,
            .ud = c,
            .allowed = core_tool_allowed,
            .allowed_ud = c,
            .hw = c->hw,
        };
        if (c->policy->tools_ask) {
                sv_core_asks_begin(c);
                tc.asker = sv_core_tool_asker(c);
        }
        c->tools = toolgate_new(c->base, &tc, err);
        if (!c->tools)
                return -EINVAL;
        int r = toolgate_add_listener(c->tools, c->sp.tool_fd, err);
        c->sp.tool_fd = -1; /* taken over, even on failure */
        return r;
}

int sv_core_estop(struct sv_core *c, const char *by)
{
        if (!c->hw)
                return -ENODEV;
        int r = hwgate_estop(c->hw, by);
        sv_core_commit(c);
        return r;
}

void sv_core_close_gates(struct sv_core *c)
{
        c->ports = sv_ports_free(c->ports, "sandbox_ended");
        if (c->tools) {
                toolgate_free(c->tools);
                c->tools = NULL;
        }
        c->connect_notify = sv_connect_notify_free(c->connect_notify);
        /* After the tool gateway (it calls the hardware gate): every
         * actuator is stopped and the driver closed. */
        hwgate_free(c->hw);
        c->hw = NULL;
        c->gate = netgate_free(c->gate);
        batch_flush(c); /* the gate's last records: the loop may not turn again */
        sv_core_asks_end(c);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
        struct sv_core *c = arg;
        uint64_t now = now_monotonic_us();
        if (c->audit && audit_needs_flush(c->audit, now)) {
                batch_flush(c);
                int r = audit_flush_soon(c->audit);
                if (r < 0) {
                        struct al_error e = {0};
                        al_error_set(&e, r, "syncing the audit log");
                        fault(c, &e);
                }
        }
        disk_meter_sample(c->dm, now, false);
}

void sv_core_disk_begin(struct sv_core *c)
{
        const struct policy *p = c->policy;
        if (c->dm)
                return;
        if (c->wq)
                c->dm = disk_meter_quota(c->wq);
        else if (p->workspace && p->workspace_mode == POLICY_WORKSPACE_RW)
                c->dm = disk_meter_tree(p->workspace);
}

bool sv_core_disk_usage(struct sv_core *c, uint64_t *ret_peak, uint64_t *ret_last)
{
        disk_meter_sample(c->dm, now_monotonic_us(), true);
        return disk_meter_result(c->dm, ret_peak, ret_last);
}

void sv_core_arm(struct sv_core *c, event_callback_fn on_sync, event_callback_fn on_signal,
                 void *arg)
{
        c->ev_sync = event_new(c->base, c->sp.sync_fd, EV_READ | EV_PERSIST, on_sync, arg);
        event_add(c->ev_sync, NULL);
        if (!c->dm && c->sp.upper_fd >= 0)
                c->dm = disk_meter_fs(c->sp.upper_fd);
        if (c->audit || c->dm) {
                c->ev_flush = event_new(c->base, -1, EV_PERSIST, on_flush, c);
                struct timeval tv = {.tv_sec = 0, .tv_usec = 100000};
                event_add(c->ev_flush, &tv);
        }
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
        for (size_t i = 0; i < ARRAY_SIZE(sigs); i++) {
                c->ev_signals[i] = evsignal_new(c->base, sigs[i], on_signal, arg);
                event_add(c->ev_signals[i], NULL);
        }
}

void sv_core_kill(struct sv_core *c)
{
        if (c->sp.pidfd >= 0)
                syscall(SYS_pidfd_send_signal, c->sp.pidfd, SIGKILL, NULL, 0);
        else if (c->sp.pid > 0)
                kill(c->sp.pid, SIGKILL);
}

static void on_volume_saved(void *arg, const char *name, int r)
{
        struct sv_core *c = arg;
        json_t *f = json_pack("{s:s}", "volume", name);
        if (r < 0)
                json_object_set_new(f, "error", json_string(strerror(-r)));
        sv_core_record(c, r < 0 ? "volume.save_failed" : "volume.saved", f);
        sv_core_commit(c);
}

void sv_core_stop(struct sv_core *c)
{
        sv_core_close_gates(c);
        if (c->sp.pid > 0) {
                sv_core_kill(c);
                while (waitpid(c->sp.pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                c->sp.pid = -1;
        }
        /* Every process of the sandbox is gone (pid 1's end empties its
         * namespace): a caller's directory volumes are saved now. */
        volume_save_all(on_volume_saved, c);
        /* Read-write trees mounted at run time are host trees the agent
         * wrote, as a --rw mount is: its git metadata is moved aside. */
        gitguard_finish(c->live_gitguard, c->audit, c->id, NULL, NULL);
        c->live_gitguard = NULL;
}

void sv_core_free(struct sv_core *c)
{
        c->open_calls = open_calls_free(c->open_calls);
        gitguard_discard(c->live_gitguard); /* no process of the sandbox ran */
        c->live_gitguard = NULL;
        sv_core_caps_free(c);
        batch_release(c);
        if (c->ev_sync)
                event_free(c->ev_sync);
        if (c->ev_flush)
                event_free(c->ev_flush);
        for (size_t i = 0; i < ARRAY_SIZE(c->ev_signals); i++)
                if (c->ev_signals[i])
                        event_free(c->ev_signals[i]);
        c->ev_sync = c->ev_flush = NULL;
        memset(c->ev_signals, 0, sizeof(c->ev_signals));
        if (c->base)
                event_base_free(c->base);
        c->base = NULL;
        c->dm = disk_meter_free(c->dm); /* before the review layer's fd it borrows */
        int *fds[] = {&c->sp.sync_fd,  &c->sp.pidfd,    &c->sp.upper_fd,
                      &c->sp.netns_fd, &c->sp.pty_fd,   &c->sp.tool_fd,
                      &c->sp.dns_fd,   &c->sp.relay_fd, &c->sp.notify_fd};
        for (size_t i = 0; i < ARRAY_SIZE(fds); i++)
                if (*fds[i] >= 0) {
                        close(*fds[i]);
                        *fds[i] = -1;
                }
        for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                if (c->sp.listen_fds[i] >= 0) {
                        close(c->sp.listen_fds[i]);
                        c->sp.listen_fds[i] = -1;
                }
        c->wq = quota_release(c->wq);
        c->cg = cgroup_free(c->cg);
        sv_core_gate_env_release(c); /* the gate that used the CA is gone */
}

void sv_core_destroyed(struct sv_core *c, uint64_t duration_ms)
{
        sv_core_record(c, "sandbox.destroyed", events_sandbox_destroyed(duration_ms));
        sv_core_commit(c);
}

void sv_core_close_audit(struct sv_core *c)
{
        batch_flush(c);
        c->audit = audit_close(c->audit);
}
