/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the agent leaves for the host's git. A read-write workspace (and
 * every read-write mount) is on the host after the run, and the host's next
 * `git status` in it reads whatever repositories the agent left there:
 * their config can name programs git runs (core.fsmonitor, hooks, filters,
 * aliases, pagers, credential helpers…), and pointers (a `.git` file,
 * commondir, a `.git` the agent created) can make git read such a config
 * from elsewhere. At the end of a run gitguard walks each of those trees,
 * bounded and without following a symbolic link, finds every repository and
 * pointer, and moves each thing that would make git run code, or read git
 * metadata from outside the tree, to a name git never reads:
 * NAME.airlock-quarantine (NAME.airlock-quarantine.N when taken). Nothing
 * is deleted; each move is audited (git.neutralised) and reported. See
 * docs/git.md. */

#include <stdbool.h>
#include <stddef.h>

struct policy;
struct audit;
struct audit_options;

#define GITGUARD_SUFFIX      ".airlock-quarantine"
#define GITGUARD_ENTRIES_MAX (1000 * 1000)
#define GITGUARD_DEPTH_MAX   64
#define GITGUARD_CONFIG_MAX  (1024 * 1024)

struct gitguard;

/* Before the sandbox starts: note what each read-write tree's own `.git`
 * is (none, a directory, a pointer file and its text), so that one made or
 * rewritten by the agent is told from the host's, and each write-protected
 * name at any depth (gitguard-protect.c). Returns NULL when there is
 * nothing to guard: no read-write workspace or mount. With
 * workspace.protectGit false only the write-protected names are guarded,
 * not git's metadata. */
struct gitguard *gitguard_begin(const struct policy *p);

/* A read-write tree mounted while the sandbox runs (the capabilities
 * API): note what it is now, before the sandbox can write it, and scan it
 * with the others at the end. g may be NULL (made here); returns g. */
struct gitguard *gitguard_add_root(struct gitguard *g, const struct policy *p, const char *path);

/* After the sandbox has ended: scan, neutralise and report. Each finding
 * is appended to a (when not NULL) as a "git.neutralised" event of sandbox
 * id, {"path", "reason", "movedTo"} ("movedTo" null and "error" set when
 * the move failed), and given to warn (when not NULL) as one line, the
 * agent's bytes escaped. Returns the number of findings; frees g (NULL is
 * fine: 0). */
typedef void (*gitguard_warn_fn)(const char *line, void *userdata);
int gitguard_finish(struct gitguard *g, struct audit *a, const char *id, gitguard_warn_fn warn,
                    void *userdata);

/* Free g without scanning: for a run in which no sandbox process ever
 * existed (refused before its namespaces were made), so nothing inside
 * could have written, and what changed in the trees meanwhile is the
 * host's own (NULL is fine). */
void gitguard_discard(struct gitguard *g);

/* The same, appending to the audit log at audit_path (NULL: none). */
int gitguard_finish_logged(struct gitguard *g, const char *audit_path,
                           const struct audit_options *opt, const char *id, gitguard_warn_fn warn,
                           void *userdata);

/* Why one config key makes git run a program or read elsewhere, or NULL.
 * section and name are compared case-insensitively, subsection (NULL:
 * none) as it is; value NULL is a key without '='. */
const char *gitguard_key_reason(const char *section, const char *subsection, const char *name,
                                const char *value);

/* Parse a git config file's text and classify each key. Returns 1 and puts
 * the first reason in reason (e.g. "core.fsmonitor runs a program") when
 * one key is risky or the text is not a config this parser reads through
 * (a config git might read differently fails closed), else 0. */
int gitguard_config_check(const char *text, size_t len, char *reason, size_t reason_len);

/* What the config of the git directory gitdir (a path; worktree: its
 * working tree's, NULL for a bare one) makes host git run or read as
 * config from inside root: its core.hooksPath directory (or, without one,
 * the user's own), the programs its keys name by a path, the files it
 * includes. Absolute paths beneath root, for write protection at the start
 * (a strv; *ret_n of them). */
char **gitguard_config_targets(const char *root, const char *gitdir, const char *worktree,
                               size_t *ret_n);

/* The git directory of the repository root lies in without being its top
 * (the nearest .git above it; NULL: none), its working tree in
 * *ret_worktree. Caller frees both. */
char *gitguard_enclosing_gitdir(const char *root, char **ret_worktree);
