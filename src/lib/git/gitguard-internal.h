/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* gitguard's walk, shared by its parts (gitguard.c: git's metadata,
 * gitguard-protect.c: the write-protected names). */

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "gitguard.h"
#include "sha256.h"

#define VISITED_MAX 4096
#define ROOTS_MAX   64
/* What is noted at the start: past these, what the host had is moved aside
 * at the end like the agent's (more refused, never less). */
#define KNOWN_MAX (64 * 1024)
#define PDIRS_MAX 4096
/* How deep a write-protected directory's contents are compared. */
#define PROTECT_DEPTH_MAX 16
/* Git reads includes ten deep, then stops with an error. */
#define INCLUDE_DEPTH_MAX 10
/* How many included files one scan of a tree reads at most (git's depth
 * bounds a chain, not its fan-out). */
#define INCLUDES_MAX 4096
/* How many directories one scan opens, at most, to find where the paths
 * configs name lead (a megabyte of "/usr/../usr/../…" includes cost the
 * start 12 s): past it, a path is one Airlock cannot place (failed
 * closed). */
#define WALK_STEPS_MAX (32 * 1024)
/* How many bytes of config one scan reads as a repository's (28 ms a
 * megabyte): past it, a config is moved aside unread (100 MiB of the
 * agent's configs cost the end 2.8 s). */
#define CONFIG_BYTES_MAX (16 * 1024 * 1024)

/* What a finding was at the start: the host's own hooks and settings,
 * unchanged by the run, are left where they are. */
struct fingerprint {
        char *rel;
        mode_t mode;
        off_t size;
        unsigned char hash[SHA256_LEN];
};

struct root_start {
        char *path;
        bool had_git;
        dev_t dev;
        ino_t ino;
        mode_t mode;
        char *pointer;             /* a .git file's text */
        struct fingerprint *known; /* sorted by rel once noted */
        size_t n_known;
        struct pdir { /* write-protected directories there at the start */
                char *rel;
                dev_t dev;
                ino_t ino;
        } * pdirs;
        size_t n_pdirs;
};

struct gitguard {
        struct root_start roots[ROOTS_MAX];
        size_t n_roots;
        bool git;                /* workspace.protectGit: git's metadata too */
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
        bool git;          /* git's metadata too, not only the write-protected names */
        const char *event; /* the audit event of a finding (NULL: git.neutralised) */
        struct root_start *start;
        struct audit *audit;
        struct guard_audit *lazy; /* gitguard_finish_logged(): opened for the first finding */
        const char *id;
        gitguard_warn_fn warn;
        void *userdata;
        const struct root_start *root;
        const struct root_start *roots; /* every tree of the run: root is one */
        size_t n_roots;
        const struct timespec *started; /* NULL while recording the start */
        int root_fd;
        size_t entries;
        bool stopped;
        bool too_deep;
        int findings;
        char **global_hooks; /* the host user's core.hooksPath values, once read */
        size_t n_global_hooks;
        bool global_read;
        /* The programs the host user's own configs name by a relative
         * path (run from each working tree), once read. */
        char **global_progs;
        size_t n_global_progs;
        bool global_progs_read;
        size_t includes;     /* config files reached by includes and links */
        bool fanout_said;    /* past INCLUDES_MAX from a config outside the tree */
        size_t walk_steps;   /* directories opened to place a path (WALK_STEPS_MAX) */
        size_t config_bytes; /* config read as a repository's (CONFIG_BYTES_MAX) */
        /* The configs on the include chain being followed (a cycle), and
         * those already checked (file and working tree: not again). */
        struct gitguard_file {
                dev_t dev;
                ino_t ino;
                uint64_t wt;
        } inc_chain[INCLUDE_DEPTH_MAX + 2], inc_seen[256];
        size_t n_chain, n_seen;
        struct {
                dev_t dev;
                ino_t ino;
        } visited[VISITED_MAX];
        size_t n_visited;
};

/* A finding: audited and given to warn (nothing while recording). moved:
 * where it went (NULL: not moved, error the errno when a move failed). */
void gitguard_report(struct guard_run *g, const char *rel, const char *reason, const char *moved,
                     int error);

/* dfd/name when a regular file of at most max bytes: its bytes, NUL
 * terminated. */
int gitguard_read_small(int dfd, const char *name, size_t max, char **ret, size_t *ret_len);
/* The same from an open file (a regular one). */
int gitguard_read_small_fd(int fd, size_t max, char **ret, size_t *ret_len);

/* Move dfd/name aside to name.airlock-quarantine[.N] and report it; at the
 * start, note it instead. What is exactly as it was at the start (a file's
 * bytes, a link's target) is the host's and stays. */
void gitguard_quarantine(struct guard_run *g, int dfd, const char *name, const char *rel,
                         const char *reason);

/* The same, moved into directory todfd (to_rel_dir beneath the tree):
 * what git reads by every name in its directory (a ref) is moved out of
 * it. */
void gitguard_quarantine_into(struct guard_run *g, int dfd, const char *name, const char *rel,
                              int todfd, const char *to_rel_dir, const char *reason);

/* The same, even when it is the host's own, unchanged: what names a path
 * Airlock cannot pin (through /proc), or includes deeper than git reads,
 * fails closed. */
void gitguard_quarantine_force(struct guard_run *g, int dfd, const char *name, const char *rel,
                               const char *reason);

/* Whether a directory entry is one write protection keys on (the first
 * component of a name on its list), whatever its case. */
bool gitguard_protect_match(const char *name);

/* dfd/name (a name gitguard_protect_match took, in directory dir_rel of
 * the tree, at any depth): at the start, note what it is; at the end, move
 * aside what the run made or changed under it. */
void gitguard_protect_entry(struct guard_run *g, int dfd, const char *name, const char *dir_rel);

/* Free what was noted of one tree. */
void gitguard_root_free(struct root_start *rs);

/* Sort what was noted of one tree for lookups. */
void gitguard_known_sort(struct root_start *rs);
void gitguard_pdirs_sort(struct root_start *rs);

/* The next entry of d worth a look: not "." or "..", not what Airlock moved
 * aside before (not read again at each scan), and counted against the
 * scan's bound (gitguard_count_entry). NULL at the end. */
const char *gitguard_next_entry(struct guard_run *g, DIR *d, const char *rel);

/* What the walk does at each directory: "rel/name", or name at the top. */
char *gitguard_join(const char *rel, const char *name);
bool gitguard_quarantined(const char *name);
int gitguard_open_dir(int dfd, const char *name);
DIR *gitguard_dir_of(int fd);
bool gitguard_count_entry(struct guard_run *g, const char *rel);

/* The directory a "gitdir: X" pointer in directory rel names, as a path
 * relative to the root ("." for the root itself), or NULL when it leaves
 * the root or is absolute (gitguard-config.c). */
char *gitguard_pointer_target(const char *rel, const char *target);

/* Sizes (gitguard-size.c). Whether a path inside a git directory (inner,
 * relative to it) lies where git reads only headers or on demand. */
bool gitguard_size_skips(const char *inner);
/* Why a file at inner in a git directory is too large for git to read
 * whole (written into buf), or NULL. */
const char *gitguard_size_reason(const struct stat *st, const char *inner, char *buf, size_t len);
/* Whether a working-tree name is one git reads whole (.gitignore and the
 * like), whatever its case; and why such a file is too large, or NULL. */
bool gitguard_worktree_read_match(const char *name);
const char *gitguard_worktree_size_reason(const struct stat *st, char *buf, size_t len);

/* The last value of [sec] name (no subsection) in a config file's text, or
 * NULL when it has none or cannot be read through (gitguard-config.c). */
char *gitguard_config_value(const char *text, size_t len, const char *sec, const char *name);

/* Hooks (gitguard-hooks.c): each entry of a hooks directory hfd at hrel
 * but git's samples, moved aside for reason when the run made or changed
 * it; and the directory the config of git directory gfd names as
 * core.hooksPath, when it lies in the tree (wt_rel: the working tree a
 * relative one starts from, NULL when not known). */
void gitguard_scan_hook_entries(struct guard_run *g, int hfd, const char *hrel, const char *reason);
/* grel: the git directory's path in the tree; linked: a linked worktree's
 * (its config is the common directory's, ../.., with its own
 * config.worktree over it). The value is the last one git reads, through
 * the configs' includes. */
void gitguard_scan_hooks_path(struct guard_run *g, const char *grel, const char *wt_rel,
                              bool linked);
/* The working tree of the git directory gfd at grel when no pointer told
 * it: a linked worktree's from its gitdir file, another's from its
 * core.worktree, else the git directory itself (as a bare one). "" for the
 * root; NULL when outside the tree. */
char *gitguard_gitdir_worktree(struct guard_run *g, int gfd, const char *grel, bool linked);
/* Each key of a config's text in order, to fn (true stops the walk);
 * -1 at the first text git might read differently (gitguard-config.c). */
typedef bool (*gitguard_key_fn)(const char *sec, const char *sub, const char *name,
                                const char *value, void *userdata);
int gitguard_config_each(const char *text, size_t len, gitguard_key_fn fn, void *userdata);
/* Every include.path and includeIf.*.path of a config file's text
 * (gitguard-config.c); a strv, *ret_n of them. */
char **gitguard_config_includes(const char *text, size_t len, size_t *ret_n);
/* The programs named by a path that a config's keys run (the first word
 * of core.fsmonitor, a filter's clean, a "!" alias, ...); a strv. */
char **gitguard_config_programs(const char *text, size_t len, size_t *ret_n);

/* Where a path a host config names lies (gitguard-path.c): absolute,
 * "~/…", "~user/…", or relative to base_rel (NULL: a relative one is
 * outside), as host git reaches it, through the host's own links outside
 * the tree (another spelling of the workspace is the workspace). IN: at
 * *ret_rel, relative to the tree's root; UNKNOWN: through /proc
 * (/proc/self/cwd is wherever host git runs) or in another read-write tree
 * of the run (the agent's to write, and not this scan's), to be failed
 * closed. */
enum gitguard_where { GITGUARD_OUT, GITGUARD_IN, GITGUARD_UNKNOWN };
enum gitguard_where gitguard_tree_where(struct guard_run *g, const char *value,
                                        const char *base_rel, char **ret_rel);
/* path (beneath dfd by openat2 with resolve, or by the kernel's ordinary
 * walk when resolve is 0), opened for reading only when it is a plain
 * file: a FIFO, socket or device a config names is never opened (as root,
 * a device's driver acts on the open alone). An fd or -errno. */
int gitguard_open_regular(int dfd, const char *path, uint64_t resolve);
/* The same, NULL unless IN. */
char *gitguard_tree_rel(struct guard_run *g, const char *value, const char *base_rel);
/* "~/x" and "~user/x" as git expands them (NULL: it cannot); anything
 * else copied. */
char *gitguard_expand_home(const char *value);
/* An absolute path with "." and ".." taken out; NULL above "/". */
char *gitguard_normalize_abs(const char *abs);
/* The directory at rel in the tree, opened as git would reach it: a
 * symbolic link the run made on the way (git follows it to what the agent
 * chose) is moved aside for why, the host's own followed within the tree.
 * -1 when it cannot be reached so. */
int gitguard_open_in_tree(struct guard_run *g, const char *rel, const char *why);
/* The config file dfd/name (rel): moved aside when it names what runs a
 * program (gitguard.c); else the programs of the tree it runs (relative
 * ones from wt_rel, the working tree, NULL when not known) and the files
 * it includes that lie in the tree, the same way, to git's depth of
 * includes. */
void gitguard_check_config(struct guard_run *g, int dfd, const char *name, const char *rel,
                           const char *wt_rel);

/* Whether what st describes was made or changed by the run (always while
 * the start is noted) (gitguard.c). */
bool gitguard_ctime_in_run(const struct guard_run *g, const struct stat *st);

/* value as an absolute path: "~/x" from $HOME, "~user/x", a relative one
 * from base (NULL: none) (gitguard-path.c). */
char *gitguard_absolute(const char *value, const char *base);

/* The host user's own git configs, every one host git may read as the
 * user's (gitguard-path.c): /etc/gitconfig and $GIT_CONFIG_SYSTEM,
 * $XDG_CONFIG_HOME/git/config (else ~/.config/git/config) and ~/.gitconfig
 * of $HOME, and of the user sudo ran as and the owner of root (NULL: none)
 * when that is not this process's, then $GIT_CONFIG_GLOBAL. Which of them
 * git reads depends on the environment of the git that runs, not this
 * one's: all are read (more checked, never less). */
#define GITGUARD_GLOBALS_MAX 12
struct gitguard_globals {
        char *files[GITGUARD_GLOBALS_MAX];
        size_t n;
};
void gitguard_globals_get(struct gitguard_globals *gl, const char *root);
void gitguard_globals_free(struct gitguard_globals *gl);
/* What the config of the repository the tree lies in makes host git run or
 * read from the tree: its hooksPath directory, programs and includes,
 * checked as a repository's own (gitguard-configfile.c). */
void gitguard_check_enclosing(struct guard_run *g);
/* The same for the user's own configs (~/.gitconfig, $XDG_CONFIG_HOME/git/
 * config, /etc/gitconfig): what they include from the tree (an includeIf
 * for the project's directory) and the programs they name in it by an
 * absolute path. */
void gitguard_check_global(struct guard_run *g);
/* The programs those configs (and what they include outside the tree)
 * name by a relative path: host git runs them from the working tree wt
 * (relative to the tree, or absolute: the enclosing repository's; NULL:
 * not known), where they are files the agent writes. */
void gitguard_check_global_programs(struct guard_run *g, const char *wt);
/* The same for the repository at gitdir (absolute, outside the tree; a
 * linked worktree's reads its commondir's config) whose working tree is
 * wt (absolute): the enclosing one, or the one whose linked worktree the
 * tree is. */
void gitguard_check_outside_repo(struct guard_run *g, const char *gitdir, const char *wt);
/* Each core.hooksPath the user's own configs set (gitguard_globals_get:
 * which one git uses depends on its environment), *ret_n of them; root:
 * the tree (NULL: none). Read once a walk, kept in g (gitguard-hooks.c). */
char **gitguard_global_hooks(struct guard_run *g, const char *root, size_t *ret_n);
/* The core.hooksPath host git reads from the config file main (absolute)
 * and then wt_config (NULL: none) through their includes (NULL: neither
 * sets one) (gitguard-hooks.c). */
char *gitguard_hooks_path_of(struct guard_run *g, const char *main, const char *wt_config);

/* A program host git runs (value: absolute, or relative to wt within the
 * tree): when it is a file of the tree the run made or changed, moved
 * aside for why (gitguard-configfile.c). Returns where it lies (UNKNOWN:
 * the caller fails closed on what names it). */
enum gitguard_where gitguard_check_program(struct guard_run *g, const char *value, const char *wt,
                                           const char *why);
