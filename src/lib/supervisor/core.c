/* SPDX-License-Identifier: Apache-2.0 */
#include <event2/event.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
#include "cgroup.h"
#include "env.h"
#include "core.h"
#include "diskuse.h"
#include "gates.h"
#include "ports.h"
#include "netgate/netgate.h"
#include "paths.h"
#include "quota.h"
#include "toolgate/toolgate.h"
#include "util.h"

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
        for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                c->sp.listen_fds[i] = -1;
        c->start_us = now_monotonic_us();
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
        return gates_open_audit(path, s, rot, &c->audit, err);
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

int sv_core_record(struct sv_core *c, const char *kind, json_t *fields)
{
        int r = 0;
        if (!fields)
                return 0;
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

int sv_core_start_gate(struct sv_core *c, struct secrets *s, const char *account,
                       void (*recorder)(void *ud, const struct netgate_record *rec), void *ud,
                       struct al_error *err)
{
        int r = gates_start_netgate(c->base, c->policy, c->id, s, account, c->sp.listen_fds,
                                    recorder, ud, &c->gate, err);
        if (r >= 0 && c->gate && c->policy->net_ask) {
                sv_core_asks_begin(c);
                netgate_set_asker(c->gate, sv_core_net_asker(c));
        }
        return r;
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
        return 0;
}

static void on_tool_call(void *ud, const struct toolgate_record *rec)
{
        struct sv_core *c = ud;
        json_t *fields = toolgate_record_json(rec);
        /* The audit line says whose it is itself (the same id). */
        json_object_del(fields, "sandbox");
        c->tool_calls++;
        sv_core_record(c, "tool.call", fields);
}

int sv_core_start_tools(struct sv_core *c, struct secrets *s, const char *account,
                        struct al_error *err)
{
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
            .ud = c,
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

void sv_core_close_gates(struct sv_core *c)
{
        c->ports = sv_ports_free(c->ports, "sandbox_ended");
        if (c->tools) {
                toolgate_free(c->tools);
                c->tools = NULL;
        }
        c->gate = netgate_free(c->gate);
        sv_core_asks_end(c);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
        struct sv_core *c = arg;
        uint64_t now = now_monotonic_us();
        if (c->audit && audit_needs_flush(c->audit, now))
                sv_core_commit(c);
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

void sv_core_stop(struct sv_core *c)
{
        sv_core_close_gates(c);
        if (c->sp.pid > 0) {
                sv_core_kill(c);
                while (waitpid(c->sp.pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                c->sp.pid = -1;
        }
}

void sv_core_free(struct sv_core *c)
{
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
        int *fds[] = {&c->sp.sync_fd,  &c->sp.pidfd,  &c->sp.upper_fd,
                      &c->sp.netns_fd, &c->sp.pty_fd, &c->sp.tool_fd};
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
}

void sv_core_destroyed(struct sv_core *c, uint64_t duration_ms)
{
        sv_core_record(c, "sandbox.destroyed", events_sandbox_destroyed(duration_ms));
        sv_core_commit(c);
}

void sv_core_close_audit(struct sv_core *c)
{
        c->audit = audit_close(c->audit);
}
