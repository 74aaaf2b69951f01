/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <signal.h>
#include <sys/types.h>

#include "cgpath.h"
#include "policy.h"
#include "runtime.h"
#include "runtime-audit.h"
#include "spawn.h"
#include "spec.h"

/* The keeper (create.c): the process that holds a container's sandbox.
 * keeper-setup.c makes what it holds; create.c runs it. */

#define KEEPER_EXECS_MAX 64

struct keeper {
        const struct rt_globals *g;
        struct oci_spec *spec;
        struct policy *policy;
        struct rt_state st;
        struct cgroup *cg;    /* the container's cgroup (cgp.cg when cgroupsPath) */
        struct rt_cgpath cgp; /* linux.cgroupsPath followed, or .leaves NULL */
        struct spawn_result sp;
        int listen_fd;
        int sig_fd;
        int next_id;
        int conns[KEEPER_EXECS_MAX]; /* exec connections, by slot */
        int conn_ids[KEEPER_EXECS_MAX];
        struct rt_audit audit;
        struct sock_fprog filter; /* the spec's seccomp profile, or .filter NULL */
        const char *console_socket;
        int console_fd;          /* process.terminal: the host pty's slave side, else -1 */
        int inner_pty;           /* ... and the sandbox's pty master once started, else -1 */
        pid_t gate_pid;          /* the gates' process (gate.c), or -1 */
        struct secrets *secrets; /* the node's, when the policy has routes or tools */
        char run_id[33];         /* the tool gateway's, when the policy allows a tool */
        char *tool_bin;          /* airlock-tool on the host, bound into the sandbox */
        struct netgate_ca *ca;   /* the sandbox's TLS authority, when a route terminates */
        int pod_netns_fd;        /* gated in a pod: the pod's network namespace, for the
                                  * gates' connections (podnet.h); else -1 */
        char *pod_resolv;        /* ... and the pod's resolv.conf, or NULL */
        int report_fd;           /* create's pipe, until the keeper has reported */
};

/* The cgroup, the sandbox, the gates, the control socket and state.json
 * (keeper-setup.c). */
int keeper_setup(struct keeper *k, struct al_error *err);
/* The container's cgroup goes (the keeper leaves it first when it is in). */
void keeper_cgroup_free(struct keeper *k);
/* The container's process environment: the spec's `env` and the gates'
 * variables (strv, the caller frees). */
char **keeper_env(const struct keeper *k, char *const *env);
