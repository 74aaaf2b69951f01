/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* gitguard's walk, shared by its parts (gitguard.c: git's metadata,
 * gitguard-protect.c: the write-protected names). */

#include <openssl/sha.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

#include "gitguard.h"

#define VISITED_MAX 4096
#define ROOTS_MAX   64
#define PDIRS_MAX   32

/* What a finding was at the start: the host's own hooks and settings,
 * unchanged by the run, are left where they are. */
struct fingerprint {
        char *rel;
        mode_t mode;
        unsigned char hash[SHA256_DIGEST_LENGTH];
};

struct root_start {
        char *path;
        bool had_git;
        dev_t dev;
        ino_t ino;
        mode_t mode;
        char *pointer; /* a .git file's text */
        struct fingerprint *known;
        size_t n_known;
        struct { /* write-protected directories there at the start */
                const char *name;
                dev_t dev;
                ino_t ino;
        } pdirs[PDIRS_MAX];
        size_t n_pdirs;
};

struct gitguard {
        struct root_start roots[ROOTS_MAX];
        size_t n_roots;
        struct timespec started; /* changes made after this are the run's */
};

/* The audit log gitguard_finish_logged() names: opened for the first
 * finding, so that a run with nothing to record does not open, lock and
 * read the tail of the log at its end. */
struct guard_audit {
        const char *path;
        const struct audit_options *opt;
        struct audit *a;
        bool tried;
};

struct guard_run {
        bool record;       /* at the start: note what is there, move nothing */
        const char *event; /* the audit event of a finding (NULL: git.neutralised) */
        struct root_start *start;
        struct audit *audit;
        struct guard_audit *lazy; /* gitguard_finish_logged(): opened for the first finding */
        const char *id;
        gitguard_warn_fn warn;
        void *userdata;
        const struct root_start *root;
        const struct timespec *started; /* NULL while recording the start */
        int root_fd;
        size_t entries;
        bool stopped;
        bool too_deep;
        int findings;
        struct {
                dev_t dev;
                ino_t ino;
        } visited[VISITED_MAX];
        size_t n_visited;
};

/* Move dfd/name aside to name.airlock-quarantine[.N] and report it; at the
 * start, note it instead. What is exactly as it was at the start (a file's
 * bytes, a link's target) is the host's and stays. */
void gitguard_quarantine(struct guard_run *g, int dfd, const char *name, const char *rel,
                         const char *reason);

/* At the top of a tree (fd): each write-protected name the run made or
 * changed, moved aside. */
void gitguard_protect_names(struct guard_run *g, int fd);
