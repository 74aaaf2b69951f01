/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the files of the review module share and nothing outside it uses:
 * the state directory's names, the manifest and plan types, and the helpers
 * one file defines for the others. review.h is the module's API; the state
 * layout and the caps are described there and in docs/internals/review.md. */

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "review.h"
#include "util.h"

#define META_FILE     "meta.json"
#define MANIFEST_FILE "manifest.json"
#define CHANGES_DIR   "changes"
#define JSON_MAX      (512u << 20)
#define ID_MAX        64
#define PREFIX_MIN    4
#define BINARY_PROBE  8000
#define COPY_CHUNK    (1 << 16)

enum etype { T_FILE, T_DIR, T_SYMLINK };

struct entry {
        char *path;
        enum etype type;
        mode_t mode;
};

struct strarr {
        char **v;
        size_t n, cap;
};

struct manifest {
        struct entry *e;
        size_t n_e, cap_e;
        struct strarr deleted;
        struct strarr opaque;
        json_t *skipped;
};

/* One open state directory, locked, with its meta.json. */
struct review {
        int dir_fd;
        int changes_fd;
        int ws_fd;
        json_t *meta;
        const char *id;
        const char *workspace;
        const char *state;
        uint64_t started_ns;
        struct manifest m;
};

/* How a directory of the upper layer meets the workspace's. */
enum hstate {
        H_NONE,    /* nothing of the workspace's below it survives */
        H_MERGE,   /* the workspace's entries show through */
        H_REPLACE, /* opaque: the workspace's entries it lacks are removed */
};

struct host {
        mode_t mode; /* 0: absent */
        uint64_t ctime_ns;
        uid_t uid;
        gid_t gid;
        dev_t dev; /* which entry it is */
        uint64_t ino;
};

enum op { OP_REMOVE, OP_DIR, OP_FILE, OP_SYMLINK };

struct item {
        char *path;
        enum op op;
        mode_t mode; /* proposed permission bits */
        struct host host;
        bool selected;
        bool noop;
};

struct plan {
        struct item *v;
        size_t n, cap;
        struct strarr accepted;
};

/* Files with more than one name, by inode, and the path of the copy made
 * of them first: in changes/ for a capture, in the workspace (with the
 * copy's own inode) for an accept. */
struct link_slot {
        dev_t dev;
        ino_t ino;
        dev_t to_dev;
        ino_t to_ino;
        char *path;
};

struct linktab {
        struct link_slot *v; /* open addressing, n < cap / 2 */
        size_t n, cap;
};

/* names.c: name checks */
size_t review_utf8_next(const unsigned char *s, size_t n, uint32_t *ret_cp);
bool review_is_hidden_codepoint(uint32_t cp);
bool review_name_valid(const char *name);
size_t review_hidden_end(const char *path);
bool review_path_valid(const char *path);
bool review_id_valid(const char *id);

/* fsio.c: file helpers */
int review_open_beneath(int dirfd, const char *path, int flags);
/* For r == -EXDEV (a mount point crossed): err's message, saying so;
 * returns r. */
int review_xdev_explain(int r, struct al_error *err);
int review_host_stat(int dirfd, const char *path, struct host *ret);
const char *review_split_path(const char *path, char dir[static PATH_MAX]);
bool review_is_beneath(const char *path, const char *top);
int review_write_json_at(int dirfd, const char *name, json_t *j);
/* -EPERM, as root, for a file another user could have written (trusted.h). */
int review_read_json_at(int dirfd, const char *name, json_t **ret);
/* The message for review_read_json_at's -EPERM; returns -EPERM. */
int review_foreign_json(struct al_error *err, const char *state_dir, const char *name);
int review_remove_tree_at(int at, const char *name, unsigned depth);
int review_copy_data(int in, int out, uint64_t max, uint64_t *ret_bytes);
int review_files_equal(int a, int b, bool *ret);
int review_is_binary(int fd, bool *ret);
int review_read_link(int dirfd, const char *path, char buf[static PATH_MAX]);

/* manifest.c: string arrays and the manifest */
void strarr_add(struct strarr *a, const char *s);
void strarr_done(struct strarr *a);
bool strarr_has(const struct strarr *a, const char *s);
void manifest_add(struct manifest *m, const char *path, enum etype type, mode_t mode);
void manifest_done(struct manifest *m);
void manifest_sort(struct manifest *m);
const struct entry *manifest_find(const struct manifest *m, const char *path);
int manifest_load(struct review *rv, const char *state_dir, struct al_error *err);
int manifest_save(int dir_fd, const struct manifest *m);

/* links.c: the table of files with several names */
void linktab_done(struct linktab *t);
struct link_slot *link_find(struct linktab *t, dev_t dev, ino_t ino);
void link_set(struct linktab *t, struct link_slot *s, const struct link_slot *val);

/* state.c: the state directory under its lock */
void review_done(struct review *rv);
int review_open(const char *state_dir, bool exclusive, struct review *rv, struct al_error *err);
int review_load(const char *state_dir, bool exclusive, struct review *rv, struct al_error *err);

/* plan.c: what accepting would do */
void plan_done(struct plan *p);
bool plan_request_takes(const char *req, const char *path);
int plan_build(struct review *rv, struct plan *p, struct al_error *err);
