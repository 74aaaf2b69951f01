/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <event2/event.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "events.h"
#include "policy.h"
#include "spawn.h"

/* The supervisor core: what `airlock run` (supervisor.c) and `airlock
 * supervise` (control.c) share for one sandbox, so that the two differ only
 * in how they are driven (docs/internals/supervisor.md). The core owns the
 * sandbox's id, its audit log and what a failed write does, its pid 1 (the
 * spawn result), its cgroup, its network gate, and the event loop with the
 * audit log's flush tick and the signal events. The driver (`run`: one
 * command on stdio; `supervise`: many processes on a control socket) owns
 * its processes' pipes and decides what a signal or pid 1's report means. */

struct audit;
struct audit_record;
struct audit_options;
struct cgroup;
struct disk_meter;
struct netgate;
struct sv_connect_notify;
struct netgate_record;
struct secrets;
struct sv_core;
struct sv_ports;
struct caps;
struct sv_live_mount;
struct gitguard;
struct open_calls;

/* A write to the audit log failed: nothing may go on running unrecorded.
 * The driver kills what it runs. */
typedef void (*sv_core_fault_fn)(struct sv_core *c, void *driver);

struct sv_core {
        char id[17];
        char run_id[33]; /* host-generated, 32 random hex: a tool call must name it */
        const struct policy *policy;
        struct event_base *base;
        struct spawn_result sp;
        struct cgroup *cg;
        struct quota *wq;      /* limits.workspaceDisk, released at the end */
        struct disk_meter *dm; /* the workspace's peak growth (diskuse.h) */
        struct audit *audit;
        struct netgate *gate;
        struct netgate_ca *ca; /* the sandbox's TLS authority, when a route terminates */
        char *ca_bundle;       /* its bundle on the host, until the sandbox has it bound */
        char **sentinels;      /* the placeholders, one per policy sentinel */
        /* Transparent mode's connect() notifications (connect-notify.h). */
        struct sv_connect_notify *connect_notify;
        struct sv_ports *ports; /* port forwards (ports.h), made on the first */
        struct toolgate *tools; /* the tool gateway, when the policy allows a tool */
        struct hwgate *hw;      /* the hardware gate, when the policy has a hardware section */
        uint64_t tool_calls;    /* tool.call records */
        /* The calls under way, kept for whoever sees us die (opencalls.h);
         * NULL: not kept (airlock run, whose caller dies with it). */
        struct open_calls *open_calls;
        struct caps *caps; /* the effective capabilities (caps.h), from the policy */
        struct sv_live_mount *live_mounts; /* mounts added at run time (caps-live.c) */
        struct gitguard *live_gitguard;    /* their read-write trees, scanned at the end */
        size_t n_live_mounts;
        const char *caller_home; /* the caller's home on the host, for the deny list */
        /* The operator's asks (ask.c), when the policy asks; the next
         * ask's timeout; the driver's prompt (airlock run --ask), told of
         * each new ask ({"id", "request"}, borrowed). */
        struct approvals *approvals;
        struct event *ev_ask;
        void (*on_ask)(void *ud, const json_t *approval);
        void *on_ask_ud;
        struct event *ev_sync, *ev_flush, *ev_signals[3];
        /* The gate's closing records (netgate_record.ended) of this loop
         * turn, appended together by ev_records at its end (core.c). */
        struct sv_core_batch {
                struct audit_record *recs; /* fields owned */
                size_t n, cap;
                struct event *ev_records;
                bool deferring; /* the driver's recorder runs for an ended record */
                void (*recorder)(void *ud, const struct netgate_record *rec);
                void *recorder_ud;
        } batch;
        uint64_t start_us;
        bool audit_failed;              /* a write failed at some point */
        char audit_first[AL_ERROR_MAX]; /* the first failed write's cause */
        char audit_last[AL_ERROR_MAX];  /* the last one's */
        sv_core_fault_fn on_fault;
        void *driver;
};

/* ---- live capabilities (caps-live.c, docs/internals/caps.md) ---- */

/* The caps op of the control protocol, {"op": "caps", "grant": [...],
 * "revoke": [...], "by": WHO}: check the whole change, apply it to the
 * network gate, the tool gateway, the mounts and later commands' env, one
 * capability.granted or capability.revoked audit event per entry, and
 * answer {"ok": true, "capabilities": {...}} or {"ok": false, "error",
 * "message"} with nothing applied. `by` when the request names no one. */
json_t *sv_core_caps_request(struct sv_core *c, const json_t *req, const char *by);
/* Detach what was mounted at run time (at the end; the namespace goes
 * with pid 1 anyway). */
void sv_core_caps_free(struct sv_core *c);
static inline void sv_core_caps_freep(struct sv_core **c)
{
        if (*c)
                sv_core_caps_free(*c);
}

/* Empty: no pid 1, no fds, no log. */
void sv_core_init(struct sv_core *c, const struct policy *p, sv_core_fault_fn on_fault,
                  void *driver);
/* The sandbox's id: `id` checked (16 lowercase hex digits), or a random one
 * when NULL; and a fresh random run id. */
int sv_core_set_id(struct sv_core *c, const char *id, struct al_error *err);
/* Open the audit log at `path` with the secrets' redactor and the rotation
 * `rot` (gates.h). */
int sv_core_open_audit(struct sv_core *c, const char *path, const struct audit_options *rot,
                       struct secrets *s, struct al_error *err);

/* Append one event (fields taken over; NULL is no event). A failed write
 * calls the driver's on_fault. */
int sv_core_record(struct sv_core *c, const char *kind, json_t *fields);
/* The gate's records go through sv_core_gate_record(core, rec), which
 * calls `recorder` (the driver's: it builds the event and calls
 * sv_core_record()). A record the gate marks `ended` is queued there and
 * appended with the loop turn's other ended records in one
 * audit_append_many() when the turn's callbacks are done, before the loop
 * waits again; any other record, a sync, sv_core_free() and closing the log
 * write the queue first, so the log keeps the order of the calls.
 * sv_core_start_gate() wires both. */
void sv_core_gate_records(struct sv_core *c,
                          void (*recorder)(void *ud, const struct netgate_record *rec), void *ud);
void sv_core_gate_record(void *core, const struct netgate_record *rec);
/* Before an action: room for its end records, then its first line. A full
 * disk fails here, before anything runs. */
int sv_core_record_ahead(struct sv_core *c, const char *kind, json_t *fields);
/* Make what was appended durable: before an action is reported. */
int sv_core_commit(struct sv_core *c);
/* How one process ended: process.ended, then limit.hit and violation when
 * they apply. */
void sv_core_process_ended(struct sv_core *c, const struct events_end *e);

/* The event loop (libevent's own diagnostics dropped: library code does not
 * print). */
int sv_core_loop_new(struct sv_core *c, struct al_error *err);
/* The network gate on the listeners pid 1 handed over (gates.h). */
int sv_core_start_gate(struct sv_core *c, struct secrets *s, const char *account,
                       void (*recorder)(void *ud, const struct netgate_record *rec), void *ud,
                       struct al_error *err);
/* Whether the sandbox gets the tool gateway's endpoint (its policy allows
 * a tool); if so, *ret_bin is the client's host path (airlock-tool, next to
 * the running program) for spawn_config.tool_bin, and envp gains the
 * endpoint's variables (env_add_tool). */
int sv_core_tool_endpoint(struct sv_core *c, char ***envp, char **ret_bin, struct al_error *err);
/* What the gate puts in the sandbox's environment, before the spawn. When a
 * route terminates TLS (netgate/ca.h): the sandbox's CA, made now, its
 * bundle written for spawn_config.ca_bundle (removed once the gate starts,
 * the sandbox having it bound), and the CA variables. For each sentinel
 * (network.sentinels): a fresh placeholder in its variable; its secret
 * must be in `s`. */
int sv_core_gate_env(struct sv_core *c, struct secrets *s, char ***envp, struct al_error *err);
/* Forget what sv_core_gate_env() made (sv_core_free() does it too). */
void sv_core_gate_env_release(struct sv_core *c);
/* The tool gateway on the socket pid 1 handed over (spawn_result.tool_fd),
 * and first the hardware gate when the policy has a hardware section (its
 * driver started or connected: a failure is a setup error),
 * every call recorded as a tool.call; HTTP tools go through the network
 * gate, so this comes after sv_core_start_gate. Nothing without a socket. */
int sv_core_start_tools(struct sv_core *c, struct secrets *s, const char *account,
                        struct al_error *err);
/* The host's emergency stop (hwgate_estop): every actuator stopped now and
 * motion refused until the sandbox ends. -ENODEV: no hardware gate. */
int sv_core_estop(struct sv_core *c, const char *by);
/* ask.c: the approvals of a policy with network.onUnlisted or
 * tools.onUnlisted "ask" (approvals.h), wired to the gates as they start;
 * every ask and decision is an audit event. An empty list when nothing
 * asks. */
json_t *sv_core_approvals_list(struct sv_core *c);
/* Decide `id` ("<sandbox>-<n>"); `by` is recorded. -ENOENT: not pending,
 * -EINVAL: not a decision. */
int sv_core_approvals_decide(struct sv_core *c, const char *id, const char *decision,
                             const char *by, json_t **ret);
/* Internal to the core: make the approvals (when the policy asks), and end
 * them (every ask still held is denied) after the gates closed. */
void sv_core_asks_begin(struct sv_core *c);
void sv_core_asks_end(struct sv_core *c);
struct netgate_asker;
struct toolgate_asker;
const struct netgate_asker *sv_core_net_asker(struct sv_core *c);
const struct toolgate_asker *sv_core_tool_asker(struct sv_core *c);

/* Close the port forwards and the gates, the tool gateway before the
 * network gate (its HTTP calls use it): their open connections and running
 * tools are ended and recorded. */
void sv_core_close_gates(struct sv_core *c);
/* Measure the workspace's growth: call before the sandbox starts (after
 * the quota, if any), so that nothing it writes is in the base; a review
 * layer is measured from sv_core_arm(). */
void sv_core_disk_begin(struct sv_core *c);
/* Watch pid 1's sync fd with on_sync, SIGINT, SIGTERM and SIGHUP with
 * on_signal (both given `arg`), and flush the audit log within 100 ms. */
void sv_core_arm(struct sv_core *c, event_callback_fn on_sync, event_callback_fn on_signal,
                 void *arg);

/* Its peak and its last growth, after a last sample; false: not measured. */
bool sv_core_disk_usage(struct sv_core *c, uint64_t *ret_peak, uint64_t *ret_last);

/* SIGKILL pid 1, and so the whole sandbox. */
void sv_core_kill(struct sv_core *c);
/* The end, in order: sv_core_close_gates(), then pid 1 killed and reaped
 * if it still runs. */
void sv_core_stop(struct sv_core *c);
/* Free the loop and its events, close pid 1's fds, remove the cgroup. */
void sv_core_free(struct sv_core *c);
/* Record sandbox.destroyed and make the log durable; then close it. */
void sv_core_destroyed(struct sv_core *c, uint64_t duration_ms);
void sv_core_close_audit(struct sv_core *c);
