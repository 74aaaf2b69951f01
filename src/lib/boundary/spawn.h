/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "policy.h"

struct cgroup;
struct sock_fprog;

/* The host uid/gid a sandbox started by root runs as: never a privileged one. */
#define SPAWN_ROOT_HOST_UID 65534
#define SPAWN_ROOT_HOST_GID 65534

/* Listeners a gated sandbox gets, created inside its network namespace. */
enum spawn_listener {
        SPAWN_LISTEN_HTTP = 0, /* 127.0.0.1:3128 */
        SPAWN_LISTEN_SOCKS,    /* 127.0.0.1:1080 */
        SPAWN_LISTEN_ROUTES,   /* 127.0.0.1:8080 */
        SPAWN_LISTEN_MAX,
};

extern const uint16_t spawn_listen_ports[SPAWN_LISTEN_MAX];

/* The tool gateway's endpoint inside a sandbox whose policy allows a tool
 * (docs/tools.md): a small read-only tmpfs holding the gateway's socket and
 * the client, airlock-tool, bound read-only from the host. */
#define SPAWN_TOOL_DIR "/run/airlock"
#define SPAWN_TOOL_SOCKET SPAWN_TOOL_DIR "/tool.sock"
#define SPAWN_TOOL_BIN_DIR SPAWN_TOOL_DIR "/bin"
#define SPAWN_TOOL_BIN SPAWN_TOOL_BIN_DIR "/airlock-tool"
/* Where the sandbox's CA bundle (the host's and the sandbox's TLS
 * authority, netgate/ca.h) covers the system one. */
#define SPAWN_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* Which step failed, for exit codes: setup (125), exec (126/127). */
enum spawn_failure {
        SPAWN_OK = 0,
        SPAWN_FAILED_SETUP,
        SPAWN_FAILED_EXEC_NOT_FOUND,
        SPAWN_FAILED_EXEC,
};

/* A terminal for a command: rows and columns at the start. */
struct spawn_pty {
        bool on;
        uint16_t rows, cols;
};

struct spawn_config {
        const struct policy *policy;
        char *const *argv;     /* the first command; NULL: an idle sandbox whose pid 1
                                * runs processes on request (spawn_exec_request) */
        char *const *envp;     /* the clean environment */
        const char *home;      /* $HOME inside */
        const char *caller_home;
        int stdin_fd;          /* given to the command as 0 */
        int stdout_fd;         /* write ends, given as 1 and 2 */
        int stderr_fd;
        struct cgroup *cgroup; /* may be NULL */
        struct spawn_pty pty;  /* on: the command gets a fresh pty instead of the
                                * three fds (pty.c) */
        const char *ca_bundle; /* host file bound read-only at SPAWN_CA_BUNDLE; NULL: none */
        const char *tool_bin;  /* host path of airlock-tool: the sandbox gets the tool
                                * gateway's endpoint (SPAWN_TOOL_*); NULL: none */
        const char *rootfs;    /* a container's root file system (airlock-runtime):
                                * its top-level entries replace the host's system
                                * directories; NULL: the host's (policy.read) */
        bool rootfs_readonly;
        char *const *tmpfs_dirs; /* fresh tmpfs directories (mounts_config) */
        const uint64_t *tmpfs_sizes;
        /* A second seccomp filter installed after Airlock's own in every
         * process (a container's profile): stacked, it can only narrow. */
        const struct sock_fprog *extra_filter;
        /* Stay in the caller's network, ipc or uts namespace instead of a
         * new one (a pod's, joined by the caller): the sandbox holds no
         * capability there. A shared network gets no gate (refused with a
         * gated policy) and keeps its own lo; a shared uts its host name. */
        bool share_net, share_ipc, share_uts;
        /* The host name set in the sandbox's own uts namespace; NULL:
         * "airlock" (airlock-runtime: the spec's, a pod's name). */
        const char *hostname;
};

struct spawn_result {
        pid_t pid;      /* the sandbox's pid 1, as the host sees it */
        int sync_fd;    /* pid 1 reports the command's wait status here */
        int pidfd;      /* of pid 1 */
        int listen_fds[SPAWN_LISTEN_MAX]; /* -1 when network mode is none */
        int upper_fd;   /* overlay workspace: the upper layer's directory, else -1 */
        int netns_fd;   /* its network namespace, for port forwards (ports.h); -1: none */
        int pty_fd;     /* spawn_config.pty: the terminal's master, else -1 */
        int tool_fd;    /* the listening socket at SPAWN_TOOL_SOCKET, else -1 */
        int dns_fd;     /* gated: the gate's name server, UDP 127.0.0.1:53 inside; else -1 */
        int relay_fd;   /* gated: the gate's relay listener, TCP 127.0.0.1 inside; else -1 */
        int notify_fd;  /* gated: seccomp notifications of the sandbox's connect(); else -1 */
        enum spawn_failure failure;
        uid_t host_uid; /* what the sandbox user is on the host */
        bool cloned;    /* a sandbox process existed, even if the spawn then failed */
};

/* Run the spawn sequence up to the command's successful execve. On failure
 * `ret->failure` says which kind and `err` says why; a sandbox that was
 * started is already killed and reaped. */
int spawn_sandbox(const struct spawn_config *cfg, struct spawn_result *ret, struct al_error *err);

/* Read pid 1's report of the command's end from the sync fd: its wait status. */
int spawn_read_exit(int sync_fd, int *ret_status);

/* A short explanation when user namespaces are switched off on this host. */
const char *spawn_userns_disabled_reason(void);

/* Idle sandboxes: ask pid 1 to start a process with the same confinement as
 * a first command. `id` names it in the events; fds are its stdin, stdout
 * and stderr (pid 1 gets copies). */
int spawn_exec_request(int sync_fd, int id, char *const *argv, char *const *envp, const char *cwd,
                       const int fds[3]);
/* The same with a fresh terminal (pty.c) instead of fds: its master
 * comes with the SPAWN_EVENT_STARTED event (spawn_event.pty_fd). */
int spawn_exec_pty_request(int sync_fd, int id, char *const *argv, char *const *envp,
                           const char *cwd, const struct spawn_pty *pty);
/* Either of the two as inside uid `uid` (and the gid of the same number),
 * one of the policy's "users" (idrange.h): fds NULL when pty is given.
 * SPAWN_EXEC_OWN_USER: the sandbox's own user, as the two above. */
#define SPAWN_EXEC_OWN_USER (-1L)
int spawn_exec_request_as(int sync_fd, int id, char *const *argv, char *const *envp,
                          const char *cwd, const int fds[3], const struct spawn_pty *pty, long uid);
/* Signal a started process's group. */
int spawn_kill_request(int sync_fd, int id, int sig);

enum spawn_event_type {
        SPAWN_EVENT_STARTED = 1,
        SPAWN_EVENT_FAILED,
        SPAWN_EVENT_EXIT,
};

struct spawn_event {
        enum spawn_event_type type;
        int id;
        int status; /* EXIT: wait status */
        enum spawn_failure failure; /* FAILED */
        int err;
        char message[1024];
        int pty_fd; /* STARTED of a process with a terminal: its master (the
                     * reader owns it), else -1 */
        uint64_t cpu_user_ms, cpu_system_ms, max_rss_kb;
};

/* Read pid 1's next report on the sync fd. -ECONNRESET when pid 1 is gone. */
int spawn_read_event(int sync_fd, struct spawn_event *ev);
