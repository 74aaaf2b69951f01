/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "policy.h"

/* The host-side owner of one sandbox: creates its cgroup, spawns it, moves
 * its output, enforces the wall clock and the output limit, and reports how
 * it ended. One libevent loop; the gates join it. */

struct supervisor_usage {
        uint64_t cpu_user_ms;
        uint64_t cpu_system_ms;
        uint64_t cpu_ms; /* cgroup total */
        uint64_t memory_peak;
        uint64_t max_rss_kb;
        uint64_t output_bytes;
        uint64_t io_read_bytes; /* block I/O, from the cgroup (blkio/io.stat) */
        uint64_t io_write_bytes;
        uint64_t net_sent_bytes; /* through the network gate, each way */
        uint64_t net_received_bytes;
        uint64_t tool_calls; /* tool gateway calls, allowed or refused */
        uint64_t workspace_added_bytes; /* what a quota-limited workspace grew by, at the end */
        bool io_measured;               /* io_*_bytes were read from the cgroup */
        bool workspace_measured;        /* a workspace quota counted workspace_added_bytes */
        uint64_t disk_peak_bytes;       /* the most the workspace grew by (diskuse.h) */
        bool disk_measured;             /* disk_peak_bytes was sampled */
};

struct supervisor_result {
        char sandbox[32];
        int exit_code;
        int signal;             /* 0 = none */
        const char *error_code; /* NULL, "timeout", "oom_killed", ... */
        uint64_t duration_ms;
        struct supervisor_usage usage;
        char message[AL_ERROR_MAX]; /* why, when error_code is set */
        const char *tier;           /* the isolation tier (policy_tier_name); NULL: unknown */
        /* An overlay workspace: where the proposed changes were kept. */
        char review_dir[512];
        uint64_t review_added, review_modified, review_deleted;
        /* A sandbox process existed (false: refused before its namespaces
         * were made, so nothing inside ran). */
        bool sandbox_made;
};

struct secrets;
struct audit_options;
struct sv_port_req;

struct supervisor_config {
        const struct policy *policy;
        const char *audit_path;   /* the audit log; NULL: none */
        const struct audit_options *audit_rotate; /* its rotation; NULL: the defaults */
        const char *net_log_path; /* network decisions as JSON lines; NULL: none */
        struct secrets *secrets;  /* host-side secrets; NULL: none */
        const char *account;      /* ${account} in route templates */
        const char *state_root;   /* where review state is kept (overlay workspace) */
        const char *sandbox_id;   /* 16 lowercase hex digits chosen by the caller; NULL: random */
        /* Where the host tool calls under way are kept (opencalls.h), made
         * at the first call; NULL: not kept. */
        const char *open_calls_dir;
        char *const *argv;
        const char *caller_home;
        const char *term;
        int stdin_fd;
        int stdout_fd; /* where the command's output goes on the host */
        int stderr_fd;
        /* -P: port forwards opened once the sandbox runs (ports.h); one that
         * cannot be opened fails the run (125). on_port (may be NULL) is told
         * each one's port, host port and address. */
        const struct sv_port_req *ports;
        size_t n_ports;
        void (*on_port)(void *ud, unsigned port, unsigned host_port, const char *bind);
        void *on_port_ud;
        /* -t: the command gets a fresh pty of the sandbox's own; stdin_fd is
         * copied into it and its output goes to stdout_fd (pty-run.c).
         * tty_fd, when >= 0, is the user's terminal: its size is passed at
         * the start and on SIGWINCH. Its mode is the caller's business. */
        bool tty;
        int tty_fd;
        /* --control PATH: a unix socket (0600) serving the caps op, so a
         * host program can change the run's capabilities; NULL: none. */
        const char *control_path;
        /* --ask: the user's terminal (/dev/tty, O_RDWR), where each ask of
         * the gates is put to them (askprompt.h); -1 or 0: nobody is asked, and
         * asks wait for their timeout. The caller keeps it. */
        int ask_tty_fd;
        /* -T with the terminal as stdin: the write end of stdin_fd's pipe,
         * fed by the prompt (askprompt.h); taken. -1: none. */
        int ask_stdin_fd;
};

/* Run to the end. Returns 0 whenever a result was produced (including setup
 * and exec failures, described by the result); -errno only for failures
 * before a sandbox could even be attempted, with `err` set. */
int supervisor_run(const struct supervisor_config *cfg, struct supervisor_result *ret,
                   struct al_error *err);

/* The result as the JSON document of docs/cli.md; caller frees. */
char *supervisor_result_json(const struct supervisor_result *r);
