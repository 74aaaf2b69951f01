/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Reviewable workspaces: a sandbox run with `--review` writes to an overlay
 * whose upper layer is captured into a state directory when it ends; the
 * user then diffs, accepts (all or some paths) or discards the changes.
 *
 * State layout, every directory 0700:
 *
 *   <state_root>/sandboxes/<id>/
 *     meta.json      {"id", "workspace": absolute host path,
 *                     "startedNs": CLOCK_REALTIME ns when the sandbox started,
 *                     "state": "pending" | "accepted" | "discarded" | "failed",
 *                     "error": why a failed capture kept nothing,
 *                     "accepted": [paths taken by partial accepts]}
 *     manifest.json  {"deleted": [paths], "opaque": [dir paths],
 *                     "entries": [{"path", "type": "file"|"dir"|"symlink",
 *                                  "mode"}],
 *                     "skipped": [{"path", "reason"}]}
 *     changes/       the new and modified files, directories and symlinks as
 *                    the upper layer held them (files at least 0600, dirs
 *                    0700; the manifest holds the real modes)
 *
 * Paths are relative to the workspace, '/'-separated, sorted, without "."
 * or ".." components or control characters. "deleted" are whiteouts (the
 * path, file or whole directory, is gone); "opaque" directories replace the
 * workspace's directory of that name instead of merging with it.
 *
 * state_root is /var/lib/airlock for root and ~/.local/state/airlock for
 * everyone else. */

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "error.h"

/* Bounds on what a capture walks: the upper layer is the agent's. */
#define REVIEW_MAX_DEPTH   256
#define REVIEW_MAX_ENTRIES 1000000
/* What a capture may cost the host when the caller gives no limit. */
#define REVIEW_DEFAULT_MAX_BYTES (1ULL << 30)

struct review_summary {
        uint64_t added;    /* files and symlinks the workspace lacks */
        uint64_t modified; /* files and symlinks that replace a workspace entry */
        uint64_t deleted;  /* whiteouts */
        uint64_t bytes;    /* file content captured */
        uint64_t skipped;  /* special files and bad names, not captured */
};

struct review_report {
        uint64_t written;   /* files and symlinks written */
        uint64_t removed;   /* workspace entries removed */
        uint64_t dirs;      /* directories created or given a new mode */
        uint64_t bytes;     /* file content written */
        uint64_t remaining; /* changes left for a later accept, as a diff shows them */
        uint64_t held;      /* of those, names with hidden characters nobody named */
        bool complete;      /* nothing is left: the state is now "accepted" */
};

/* /var/lib/airlock for root, else <home>/.local/state/airlock; NULL when
 * home is not an absolute path. Caller frees. */
char *review_state_root(uid_t uid, const char *home);

/* The start time a review's accept compares host change times against
 * (ns since the epoch). File times are not the fine clock's: mostly the
 * coarse clock's (one tick, up to 10 ms, behind), sometimes finer. The stamp
 * is the time the kernel gives a file changed now, returned once the coarse
 * clock has moved past it (at most one tick's wait, bounded at 50 ms): a
 * host change made before the call is not later than the stamp, one made
 * after it is, and is seen as a conflict. */
uint64_t review_start_ns(void);

/* Create <state_root>/sandboxes/<id>/ (missing parents included) with
 * meta.json in state "pending", an empty manifest and changes/. id is 1 to
 * 64 of [A-Za-z0-9_-]; workspace an absolute path. -EEXIST when id is taken.
 * ret_dir (may be NULL) gets the directory's path; caller frees. */
int review_create(const char *state_root, const char *id, const char *workspace,
                  uint64_t started_ns, char **ret_dir, struct al_error *err);

/* Which directory a workspace path names (its inode and file handle, or
 * device), taken when the sandbox starts: diff and accept refuse (-ESTALE)
 * once the path names another directory (moved, or a component replaced by
 * a symlink), so that they never write where the sandbox did not run. */
struct review_ws_id {
        char s[320];
};
int review_ws_pin(const char *workspace, struct review_ws_id *ret);

/* review_create with the workspace's identity taken earlier (at the start;
 * NULL or empty: taken now). */
int review_create_pinned(const char *state_root, const char *id, const char *workspace,
                         uint64_t started_ns, const struct review_ws_id *pin, char **ret_dir,
                         struct al_error *err);

/* Copy the overlay upper directory upper_fd (any open fd of it; it is
 * neither closed nor moved) into state_dir: changes/ and manifest.json.
 * Nothing in the upper layer is trusted: no symlink is followed, depth and
 * entry count are bounded, names with C0 or C1 control characters or
 * invalid UTF-8 are skipped. Whiteouts (character device 0:0) become
 * "deleted", opaque directories "opaque"; a file or symlink whose workspace
 * counterpart is identical in content and mode is left out. A file with
 * several names is copied once and linked. What is kept may cost the host
 * at most max_bytes (0: REVIEW_DEFAULT_MAX_BYTES), each file counted at its
 * apparent size rounded up to 4 KiB and each directory and symlink as
 * 4 KiB; past it the capture fails with -EDQUOT. A redirected directory or
 * a metadata-only copy (overlay features review does not use) fails the
 * capture. On failure changes/ is left empty and meta.json's state is
 * "failed", with the message as "error"; diff and accept then refuse with
 * -ENODATA, naming it. */
int review_capture(int upper_fd, const char *state_dir, uint64_t max_bytes,
                   struct review_summary *ret, struct al_error *err);

/* The same, for a sandbox that still runs: what an earlier capture left in
 * changes/ is replaced by the upper layer as it is now. The agent may be
 * writing meanwhile, so a file it is changing can be caught half-written;
 * the capture its sandbox's end makes is the one to accept. */
int review_recapture(int upper_fd, const char *state_dir, uint64_t max_bytes,
                     struct review_summary *ret, struct al_error *err);

/* Write a git-style unified diff of the workspace as it is now (a/) against
 * the result of accepting what is left (b/) to out. Files are compared in
 * process (libgit2's diff, 3 lines of context); a text file over 1 GiB gets
 * a line saying so instead of hunks, and so do two versions of a file
 * holding more than 256 MiB or 2,000,000 lines together. A file shown whole
 * (added or deleted) is streamed. Content is written as it is: a caller
 * printing to a terminal should neutralize control characters. */
int review_diff(const char *state_dir, FILE *out, struct al_error *err);

/* Apply the pending changes to the workspace: all of them (n == 0) or those
 * at or beneath each of paths (relative to the workspace, or absolute inside
 * it; "." is everything), plus the directories they need. Every workspace
 * path is resolved beneath the workspace without following any symlink;
 * each file and symlink is written to a temporary name and renamed into
 * place. Before anything is applied, every workspace entry about to be
 * overwritten or removed is checked: one whose ctime is later than the
 * sandbox's start (and whose content is not already the proposed one)
 * refuses the whole accept with -EBUSY, naming it.
 * Other errors: -ENOENT a path names no pending change, -EINVAL a path is
 * malformed or outside the workspace, -EALREADY the sandbox is not pending,
 * -ELOOP a workspace path turned into a symlink while accepting. */
int review_accept(const char *state_dir, char *const *paths, size_t n, struct review_report *ret,
                  struct al_error *err);

/* The host workspace a review sandbox's changes are for (caller frees). */
int review_workspace(const char *state_dir, char **ret, struct al_error *err);

/* With no paths: remove changes/ and mark the sandbox "discarded";
 * meta.json and the manifest stay. -EALREADY when it was accepted.
 * Discarding twice is fine. With paths: the pending changes they name (as
 * review_accept's paths do, with the same errors) are dropped, the host
 * keeping its own there, and the rest stays pending (*ret_remaining says
 * how many); when nothing would remain, the whole is discarded. */
int review_discard(const char *state_dir, char *const *paths, size_t n, size_t *ret_remaining,
                   struct al_error *err);

/* Resolve a sandbox id, or a prefix of at least 4 characters naming one
 * sandbox, to its state directory. -ENOENT when there is none, -EINVAL when
 * the id is malformed or the prefix ambiguous. Caller frees ret_dir. */
int review_find(const char *state_root, const char *id, char **ret_dir, struct al_error *err);

/* A pending review sandbox and what accepting all of it now would do, as
 * `airlock diff` shows it: files and symlinks added to the workspace or
 * replacing one of its entries, and entries removed. */
struct review_pending {
        char id[65];
        char *workspace; /* NULL when error is set */
        uint64_t started_ns;
        uint64_t added, modified, deleted;
        char *error; /* why it could not be counted (e.g. an accept holds it) */
};

/* The most review_list_pending returns. */
#define REVIEW_LIST_MAX 10000

/* The sandboxes under state_root whose changes are pending, newest first
 * (none when state_root has no sandboxes directory). Caller frees with
 * review_pending_free. */
int review_list_pending(const char *state_root, struct review_pending **ret, size_t *ret_n,
                        struct al_error *err);
void review_pending_free(struct review_pending *v, size_t n);
