/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* airlock-runtime: the OCI runtime command line (docs/kubernetes.md,
 * docs/internals/runtime.md). One file per verb group; this header is what
 * they share. */

#define RUNTIME_ROOT_DEFAULT "/run/airlock-runtime"
#define RUNTIME_STATE_MAX    (256 * 1024)
#define RUNTIME_CTL          "ctl.sock"
/* Policies installed on the node, named by airlock.io/policy. */
#define RUNTIME_POLICY_DIR_DEFAULT "/etc/airlock/policies"

struct rt_globals {
        const char *root; /* state directory, one subdirectory (0700) per container */
        const char *log;  /* errors appended here too */
        bool log_json;
};

/* What state.json holds: written by the keeper (create.c). */
struct rt_state {
        char *id;
        char *bundle;
        pid_t pid;          /* the keeper: the process the caller waits for */
        uint64_t pid_start; /* its start time (/proc/PID/stat), against pid reuse */
        char *created;      /* RFC 3339 */
        bool started;
        char *cgroup_dir;       /* cgroup.procs lives here */
        char *freeze_file;      /* cgroup.freeze (v2) or freezer.state (v1), or NULL */
        char *cgroup_name;      /* airlock-<16 hex> */
        char *annotations_json; /* the spec's annotations, as given */
        char **cgroup_parents;  /* where the leaf (cgroup_name) lies, one per hierarchy */
        char **cgroup_leaves;   /* linux.cgroupsPath: the named leaf in every hierarchy
                                 * (cgpath.h); NULL: the leaf is airlock-<hex> */
        char **cgroup_leaf_ids; /* rt_cgpath_id of each leaf as made (NULL in a state
                                 * written before they were kept) */
        bool cgroup_v2;
        uint64_t max_memory, max_pids, max_cpus_milli; /* the limits at create: update
                                                        * may not go above them */
};

void rt_state_clear(struct rt_state *s);
int rt_id_check(const char *id, struct al_error *err);
char *rt_dir(const struct rt_globals *g, const char *id);
int rt_state_load(const struct rt_globals *g, const char *id, struct rt_state *ret,
                  struct al_error *err);
int rt_state_save(const struct rt_globals *g, const struct rt_state *s, struct al_error *err);
/* "created", "running", "paused" or "stopped". */
const char *rt_status(const struct rt_state *s);
bool rt_alive(const struct rt_state *s);
uint64_t rt_pid_start(pid_t pid);
/* End this process the way `status` (a wait status) ended the container's
 * process: the same exit code, or the same signal (without a core), so the
 * shim and kubectl see what the process did. */
_Noreturn void rt_exit_like(int status);
int rt_write_pid_file(const char *path, pid_t pid, struct al_error *err);

int rt_create(const struct rt_globals *g, int argc, char **argv, struct al_error *err);
int rt_start(const struct rt_globals *g, int argc, char **argv, struct al_error *err);
int rt_exec(const struct rt_globals *g, int argc, char **argv, struct al_error *err);
int rt_state_cmd(const struct rt_globals *g, int argc, char **argv, struct al_error *err);
int rt_kill(const struct rt_globals *g, int argc, char **argv, struct al_error *err);
int rt_delete(const struct rt_globals *g, int argc, char **argv, struct al_error *err);
int rt_ps(const struct rt_globals *g, int argc, char **argv, struct al_error *err);
int rt_pause(const struct rt_globals *g, int argc, char **argv, struct al_error *err);
int rt_resume(const struct rt_globals *g, int argc, char **argv, struct al_error *err);
int rt_update(const struct rt_globals *g, int argc, char **argv, struct al_error *err);
int rt_features(const struct rt_globals *g, int argc, char **argv, struct al_error *err);
