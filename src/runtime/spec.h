/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "policy.h"

/* A bundle's config.json (OCI runtime spec 1.x), validated strictly: what
 * Airlock cannot honour is refused naming the key, never ignored
 * (docs/kubernetes.md lists what is accepted). */

struct oci_process {
        char **argv; /* NULL-terminated */
        char **env;  /* NULL-terminated, "K=V" */
        char *cwd;   /* absolute */
        uint32_t uid, gid;
        bool terminal;
        uint16_t rows, cols; /* consoleSize, 0: none */
        bool oom_score_adj_set;
        int oom_score_adj;
        uint64_t nofile, fsize, cpu; /* rlimits (hard), 0 = not given */
};

struct oci_spec {
        char *oci_version;
        char *root; /* absolute host path of root.path */
        bool root_readonly;
        struct oci_process process;
        char *cgroups_path;
        char *hostname;      /* the container's own uts namespace's, or NULL: "airlock" */
        uint64_t memory;     /* linux.resources.memory.limit, 0 = none */
        uint64_t pids;       /* linux.resources.pids.limit */
        uint64_t cpus_milli; /* linux.resources.cpu quota/period */
        uint64_t cpu_shares; /* linux.resources.cpu.shares, 0 = not given */
        struct policy_kv *annotations;
        size_t n_annotations;
        struct policy_mount *binds; /* bind mounts from "mounts" */
        size_t n_binds;
        char **tmpfs;          /* tmpfs mounts' destinations, NULL-terminated */
        uint64_t *tmpfs_sizes; /* their size= in bytes, 0: limits.disk */
        size_t n_tmpfs;
        char *join_net, *join_ipc, *join_uts; /* namespace paths to join, or NULL */
        char *seccomp_json;                   /* linux.seccomp as given, or NULL (seccomp-spec.h) */
};

/* Parse `json` (the bundle's config.json); `bundle` is the absolute bundle
 * directory root.path is relative to. */
int oci_spec_parse(const char *json, const char *bundle, struct oci_spec **ret,
                   struct al_error *err);
/* A LinuxResources document alone (update --resources): memory, pids and
 * cpus_milli of *ret set (0 = not given), the rest refused as in config.json. */
int oci_resources_parse(const char *json, struct oci_spec *ret, struct al_error *err);
/* A process document alone (exec --process). */
int oci_process_parse(const char *json, struct oci_process *ret, struct al_error *err);
void oci_process_clear(struct oci_process *p);
struct oci_spec *oci_spec_free(struct oci_spec *s);
const char *oci_spec_annotation(const struct oci_spec *s, const char *key);

/* The policy a container runs under: the annotation airlock.io/policy (a
 * policy JSON document, or the name of one installed on the node as
 * <policy_dir>/<name>.json) if any, then the spec's user, limits and binds. */
int oci_spec_policy(const struct oci_spec *s, const char *policy_dir, struct policy **ret,
                    struct al_error *err);
