/* SPDX-License-Identifier: Apache-2.0 */
/* The config files host git reads in a repository the walk found
 * (gitguard.c): .git/config and config.worktree, moved aside when they
 * name what runs a program (gitguard-config.c judges the text); and, for
 * one kept in place (the host's own), what it points at in the tree: the
 * programs it runs from the working tree and the files it includes. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gitguard-internal.h"
#include "util.h"

static void check_config_at(struct guard_run *g, int dfd, const char *name, const char *rel,
                            const char *inc_dir, const char *wt, int depth);
static void check_outside_config(struct guard_run *g, const char *abs, const char *wt, int depth);

#define UNKNOWN_REASON                                                                             \
        "names a path through /proc (host git would reach it from wherever it runs) or in "        \
        "another read-write tree of the sandbox: maybe the agent's files, which Airlock cannot "   \
        "pin"
#define DEEP_REASON                                                                                \
        "includes or links nested deeper than git reads (10): git stops there with an error, and " \
        "Airlock does not follow them further"

#define CYCLE_REASON                                                                               \
        "includes that form a cycle: git stops there with an error, and Airlock does not follow "  \
        "them around"

#define FANOUT_REASON                                                                              \
        "a config whose includes reach more files than the scan reads (4096): Airlock did not "    \
        "check the rest"

/* The bound reached from a config of the host's outside the tree, which
 * is not moved: said once. */
static void fanout_outside(struct guard_run *g)
{
        if (g->fanout_said)
                return;
        g->fanout_said = true;
        gitguard_report(g, "",
                        "a host git config outside the workspace includes more files than the "
                        "scan reads (4096): files it includes in the workspace past this point "
                        "were not checked (not moved, it is outside the workspace)",
                        NULL, 0);
}

/* A working tree's path as a key (FNV-1a; NULL: none). */
static uint64_t wt_key(const char *wt)
{
        uint64_t h = 14695981039346656037ULL;
        for (const char *c = wt ? wt : "\x01"; *c; c++)
                h = (h ^ (unsigned char)*c) * 1099511628211ULL;
        return h;
}

/* The directory and the last name of rel: dir "." at the top. */
static char *dir_of(const char *rel, const char **ret_base)
{
        const char *ts = strrchr(rel, '/');
        *ret_base = ts ? ts + 1 : rel;
        return ts ? xasprintf("%.*s", (int)(ts - rel), rel) : xstrdup(".");
}

/* The config file at target in the tree, reached from the one at
 * dfd/name (rel) by an include or a link: checked as a config itself, to
 * git's depth; a link the run made on the way to it is moved aside. A
 * directory is no config git reads: left alone. */
static void check_reached(struct guard_run *g, int dfd, const char *name, const char *rel,
                          const char *target, const char *inc_dir, const char *wt, int depth)
{
        if (STREQ(target, "."))
                return;
        if (++g->includes > INCLUDES_MAX) {
                /* Past the bound, the config naming what is not read
                 * fails closed (one of the host's outside the tree: said). */
                if (dfd >= 0)
                        gitguard_quarantine_force(g, dfd, name, rel, FANOUT_REASON);
                else
                        fanout_outside(g);
                return;
        }
        const char *base = NULL;
        _cleanup_free_ char *dir = dir_of(target, &base);
        _cleanup_close_ int pfd = gitguard_open_in_tree(
            g, dir,
            "a symbolic link on the way to a file a git config includes (host git would read "
            "config where it leads)");
        struct stat st;
        if (pfd < 0 || fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
                return;
        const char *why = depth >= INCLUDE_DEPTH_MAX ? DEEP_REASON : NULL;
        for (size_t i = 0; i < g->n_chain && !why; i++)
                if (g->inc_chain[i].dev == st.st_dev && g->inc_chain[i].ino == st.st_ino)
                        why = CYCLE_REASON;
        if (why) {
                if (dfd >= 0)
                        gitguard_quarantine_force(g, dfd, name, rel, why);
                return;
        }
        /* Checked already for this working tree: not again (a file
         * included from many places, or many times). */
        /* ... and for the directory its relative includes are read from:
         * the same file by its own path and through a link includes two
         * different files. */
        struct gitguard_file f = {.dev = st.st_dev,
                                  .ino = st.st_ino,
                                  .wt = wt_key(wt) ^
                                        (wt_key(inc_dir ? inc_dir : dir) * 0x9E3779B97F4A7C15ULL)};
        for (size_t i = 0; i < g->n_seen; i++)
                if (g->inc_seen[i].dev == f.dev && g->inc_seen[i].ino == f.ino &&
                    g->inc_seen[i].wt == f.wt)
                        return;
        if (g->n_seen < ARRAY_SIZE(g->inc_seen))
                g->inc_seen[g->n_seen++] = f;
        g->inc_chain[g->n_chain++] = f;
        check_config_at(g, pfd, base, target, inc_dir ? inc_dir : dir, wt, depth + 1);
        g->n_chain--;
}

/* Every file a config includes (relative to its own directory, absolute,
 * or "~/"): one that lies in the tree, an ordinary file there (a shared
 * `../.gitconfig`) that the agent could write, is read by git as config.
 * One named through /proc, which Airlock cannot pin, moves the including
 * config aside. */
static void check_includes(struct guard_run *g, int dfd, const char *name, const char *text,
                           size_t len, const char *rel, const char *inc_dir, const char *wt,
                           int depth)
{
        size_t n = 0;
        _cleanup_strv_ char **inc = gitguard_config_includes(text, len, &n);
        const char *base = inc_dir;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *target = NULL;
                enum gitguard_where w = gitguard_tree_where(g, inc[i], base, &target);
                if (w == GITGUARD_UNKNOWN) {
                        gitguard_quarantine_force(g, dfd, name, rel,
                                                  "a config whose include " UNKNOWN_REASON);
                        return;
                }
                if (w == GITGUARD_IN) {
                        check_reached(g, dfd, name, rel, target, NULL, wt, depth);
                        continue;
                }
                /* The host's own, outside: what it includes from the tree in
                 * turn. */
                _cleanup_free_ char *dir = gitguard_join(g->root->path, base);
                _cleanup_free_ char *abs = gitguard_absolute(inc[i], dir);
                if (abs)
                        check_outside_config(g, abs, wt, depth + 1);
        }
}

/* The host's own link kept as a config (`.gitconfig-shared ->
 * conf/team.cfg`): git reads what it leads to, which may be an ordinary
 * file of the tree. Not followed out of the tree (what is there is the
 * host's). */
static void check_link(struct guard_run *g, int dfd, const char *name, const char *rel,
                       const char *inc_dir, const char *wt, int depth)
{
        char target[PATH_MAX];
        ssize_t k = readlinkat(dfd, name, target, sizeof(target) - 1);
        if (k <= 0)
                return;
        target[k] = '\0';
        const char *slash = strrchr(rel, '/');
        _cleanup_free_ char *base = xasprintf("%.*s", slash ? (int)(slash - rel) : 0, rel);
        _cleanup_free_ char *to = NULL;
        enum gitguard_where w = gitguard_tree_where(g, target, base, &to);
        if (w == GITGUARD_UNKNOWN)
                gitguard_quarantine_force(g, dfd, name, rel, "a config link that " UNKNOWN_REASON);
        else if (w == GITGUARD_IN)
                /* git reads what it includes from the directory of the
                 * path it opened (the link's), not the target's. */
                check_reached(g, dfd, name, rel, to, inc_dir, wt, depth);
}

/* One program a config runs (value, relative to wt within the tree, or
 * absolute): a file of the tree (a core.fsmonitor of `tools/fsmonitor.sh`,
 * a filter's `./scripts/clean.sh`) is an ordinary one the agent writes,
 * which host git runs. What the run made or changed there is moved
 * aside. */
enum gitguard_where gitguard_check_program(struct guard_run *g, const char *value, const char *wt,
                                           const char *why)
{
        _cleanup_free_ char *target = NULL;
        enum gitguard_where w = gitguard_tree_where(g, value, wt, &target);
        if (w != GITGUARD_IN || STREQ(target, "."))
                return w;
        const char *base = NULL;
        _cleanup_free_ char *dir = dir_of(target, &base);
        _cleanup_close_ int pfd = gitguard_open_in_tree(
            g, dir,
            "a symbolic link on the way to a program a git config runs (host git would run "
            "what it leads to)");
        struct stat st;
        if (pfd < 0 || fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode) ||
            !gitguard_ctime_in_run(g, &st))
                return w;
        gitguard_quarantine(g, pfd, base, target, why);
        return w;
}

#define PROGRAM_REASON                                                                             \
        "a program the repository's own git config runs (host git would run the agent's "          \
        "version)"

/* The programs a config kept in place runs and the hooks directory it
 * names; false when one is named through /proc and the config was moved
 * aside for it. */
static bool check_programs(struct guard_run *g, int dfd, const char *name, const char *rel,
                           const char *text, size_t len, const char *wt)
{
        size_t n = 0;
        _cleanup_strv_ char **progs = gitguard_config_programs(text, len, &n);
        for (size_t i = 0; i < n; i++)
                if (gitguard_check_program(g, progs[i], wt, PROGRAM_REASON) == GITGUARD_UNKNOWN) {
                        gitguard_quarantine_force(g, dfd, name, rel,
                                                  "a config whose program " UNKNOWN_REASON);
                        return false;
                }
        _cleanup_free_ char *hooks = gitguard_config_value(text, len, "core", "hookspath");
        _cleanup_free_ char *hrel = NULL;
        if (hooks && *hooks && gitguard_tree_where(g, hooks, wt, &hrel) == GITGUARD_UNKNOWN) {
                gitguard_quarantine_force(g, dfd, name, rel,
                                          "a config whose core.hooksPath " UNKNOWN_REASON);
                return false;
        }
        return true;
}

/* inc_dir: the directory git resolves the file's relative includes from
 * (that of the path it opened it by, through the host's links). */
static void check_config_at(struct guard_run *g, int dfd, const char *name, const char *rel,
                            const char *inc_dir, const char *wt, int depth)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return;
        if (S_ISLNK(st.st_mode)) {
                gitguard_quarantine(g, dfd, name, rel,
                                    "a config that is a symbolic link (git follows it)");
                if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
                        check_link(g, dfd, name, rel, inc_dir, wt, depth);
                return;
        }
        if (!S_ISREG(st.st_mode)) {
                gitguard_quarantine(g, dfd, name, rel, "a config that is not a plain file");
                return;
        }
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        /* What the run wrote is read up to the scan's bound; past it,
         * moved aside unread (the host's own, unchanged, is read). */
        if (g->started && gitguard_ctime_in_run(g, &st)) {
                g->config_bytes +=
                    st.st_size > GITGUARD_CONFIG_MAX ? GITGUARD_CONFIG_MAX + 1 : (size_t)st.st_size;
                if (g->config_bytes > CONFIG_BYTES_MAX) {
                        gitguard_quarantine(g, dfd, name, rel,
                                            "a config past the 16 MiB of config the run wrote "
                                            "that one scan reads (not read)");
                        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                return;
                }
        }
        int r = gitguard_read_small(dfd, name, GITGUARD_CONFIG_MAX, &text, &len);
        char reason[256];
        if (r == -EFBIG)
                snprintf(reason, sizeof(reason), "a config larger than %d bytes",
                         GITGUARD_CONFIG_MAX);
        else if (r < 0)
                snprintf(reason, sizeof(reason), "a config Airlock cannot read (%s)", strerror(-r));
        else if (!gitguard_config_check(text, len, reason, sizeof(reason))) {
                check_includes(g, dfd, name, text, len, rel, inc_dir, wt, depth);
                return;
        }
        gitguard_quarantine(g, dfd, name, rel, reason);
        /* The host's own, kept: what it runs and includes git uses still. */
        if (r == 0 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            check_programs(g, dfd, name, rel, text, len, wt))
                check_includes(g, dfd, name, text, len, rel, inc_dir, wt, depth);
}

void gitguard_check_config(struct guard_run *g, int dfd, const char *name, const char *rel,
                           const char *wt_rel)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return;
        g->n_chain = 0;
        g->inc_chain[g->n_chain++] =
            (struct gitguard_file){.dev = st.st_dev, .ino = st.st_ino, .wt = wt_key(wt_rel)};
        const char *slash = strrchr(rel, '/');
        _cleanup_free_ char *dir = xasprintf("%.*s", slash ? (int)(slash - rel) : 0, rel);
        check_config_at(g, dfd, name, rel, dir, wt_rel, 0);
        g->n_chain = 0;
}

/* The programs and includes of one config file outside the tree (abs),
 * as absolute paths into the tree. */
static void check_outside_config(struct guard_run *g, const char *abs, const char *wt, int depth)
{
        if (depth >= INCLUDE_DEPTH_MAX)
                return;
        if (++g->includes > INCLUDES_MAX) {
                fanout_outside(g);
                return;
        }
        _cleanup_close_ int fd = gitguard_open_regular(AT_FDCWD, abs, 0);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (fd < 0 || gitguard_read_small_fd(fd, GITGUARD_CONFIG_MAX, &text, &len) < 0)
                return;
        const char *slash = strrchr(abs, '/');
        _cleanup_free_ char *dir = xasprintf("%.*s", slash ? (int)(slash - abs) : 0, abs);
        size_t n = 0;
        _cleanup_strv_ char **progs = gitguard_config_programs(text, len, &n);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *a = gitguard_absolute(progs[i], wt);
                if (a)
                        gitguard_check_program(g, a, NULL, PROGRAM_REASON);
        }
        _cleanup_strv_ char **inc = gitguard_config_includes(text, len, &n);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *a = gitguard_absolute(inc[i], dir);
                _cleanup_free_ char *target = NULL;
                enum gitguard_where w = a ? gitguard_tree_where(g, a, NULL, &target) : GITGUARD_OUT;
                if (w == GITGUARD_IN)
                        check_reached(g, -1, NULL, NULL, target, NULL, wt, depth);
                else if (w == GITGUARD_OUT && a) /* the host's, and what it includes */
                        check_outside_config(g, a, wt, depth + 1);
                else if (w == GITGUARD_UNKNOWN)
                        gitguard_report(g, "",
                                        "a host git config outside the workspace includes a file "
                                        "through /proc or in another read-write tree of the "
                                        "sandbox (host git may read the agent's config from it): "
                                        "not moved, it is outside the workspace",
                                        NULL, 0);
        }
}

/* The hooks directory value names from the working tree wt (absolute) of
 * a repository outside the tree, when it lies in the tree. */
static void scan_outside_hooks(struct guard_run *g, const char *value, const char *wt)
{
        _cleanup_free_ char *habs = *value ? gitguard_absolute(value, wt) : NULL;
        _cleanup_free_ char *hrel = habs ? gitguard_tree_rel(g, habs, NULL) : NULL;
        if (!hrel || STREQ(hrel, "."))
                return;
        _cleanup_close_ int hfd = gitguard_open_in_tree(
            g, hrel,
            "a symbolic link on the way to core.hooksPath (host git would run the hooks where it "
            "leads)");
        if (hfd >= 0)
                gitguard_scan_hook_entries(g, hfd, hrel,
                                           "a hook in the directory core.hooksPath names (host "
                                           "git would run it)");
}

void gitguard_check_outside_repo(struct guard_run *g, const char *gitdir, const char *wt)
{
        _cleanup_close_ int gfd = open(gitdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (gfd < 0)
                return;
        /* A linked worktree's git directory: its repository's config (the
         * commondir) with its own config.worktree over it. */
        _cleanup_free_ char *ctext = NULL, *common = NULL;
        size_t clen = 0;
        if (gitguard_read_small(gfd, "commondir", PATH_MAX, &ctext, &clen) == 0) {
                ctext[strcspn(ctext, "\r\n")] = '\0';
                common = *ctext ? gitguard_absolute(ctext, gitdir) : NULL;
        }
        _cleanup_free_ char *main_cfg = xasprintf("%s/config", common ? common : gitdir);
        _cleanup_free_ char *wt_cfg = xasprintf("%s/config.worktree", gitdir);
        /* Its hooks directory, when in the tree: its own, else the user's
         * (a relative one from its working tree, which may hold the tree). */
        _cleanup_free_ char *hooks = gitguard_hooks_path_of(g, main_cfg, wt_cfg);
        size_t n = 0;
        char **global = hooks ? NULL : gitguard_global_hooks(g, g->root->path, &n);
        for (size_t i = 0; i < (hooks ? 1 : n); i++)
                scan_outside_hooks(g, hooks ? hooks : global[i], wt);
        check_outside_config(g, main_cfg, wt, 0);
        check_outside_config(g, wt_cfg, wt, 0);
        /* The user's own relative programs, run from that working tree. */
        gitguard_check_global_programs(g, wt);
}

void gitguard_check_global(struct guard_run *g)
{
        struct gitguard_globals gl;
        gitguard_globals_get(&gl, g->root->path);
        for (size_t i = 0; i < gl.n; i++) {
                _cleanup_free_ char *rel = NULL;
                /* One in the tree (a home given as the workspace) is the
                 * walk's. */
                if (gitguard_tree_where(g, gl.files[i], NULL, &rel) == GITGUARD_OUT)
                        check_outside_config(g, gl.files[i], NULL, 0);
        }
        gitguard_globals_free(&gl);
}

void gitguard_check_enclosing(struct guard_run *g)
{
        _cleanup_free_ char *wt = NULL;
        _cleanup_free_ char *gitdir = gitguard_enclosing_gitdir(g->root->path, &wt);
        if (gitdir)
                gitguard_check_outside_repo(g, gitdir, wt);
}

/* The programs a config outside the tree (abs) and what it includes
 * outside name by a relative path, added to *v. */
static void collect_relative(struct guard_run *g, const char *abs, int depth, char ***v, size_t *n,
                             int *budget)
{
        if (depth >= INCLUDE_DEPTH_MAX || --*budget < 0)
                return;
        _cleanup_close_ int fd = gitguard_open_regular(AT_FDCWD, abs, 0);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (fd < 0 || gitguard_read_small_fd(fd, GITGUARD_CONFIG_MAX, &text, &len) < 0)
                return;
        size_t k = 0;
        _cleanup_strv_ char **progs = gitguard_config_programs(text, len, &k);
        for (size_t i = 0; i < k; i++)
                if (progs[i][0] != '/' && progs[i][0] != '~')
                        *v = strv_append(*v, n, progs[i]);
        const char *slash = strrchr(abs, '/');
        _cleanup_free_ char *dir = xasprintf("%.*s", slash ? (int)(slash - abs) : 0, abs);
        _cleanup_strv_ char **inc = gitguard_config_includes(text, len, &k);
        for (size_t i = 0; i < k; i++) {
                _cleanup_free_ char *a = gitguard_absolute(inc[i], dir);
                _cleanup_free_ char *rel = NULL;
                if (a && gitguard_tree_where(g, a, NULL, &rel) == GITGUARD_OUT)
                        collect_relative(g, a, depth + 1, v, n, budget);
        }
}

void gitguard_check_global_programs(struct guard_run *g, const char *wt)
{
        if (!wt)
                return;
        if (!g->global_progs_read) {
                g->global_progs_read = true;
                struct gitguard_globals gl;
                gitguard_globals_get(&gl, g->root->path);
                int budget = 64;
                for (size_t i = 0; i < gl.n; i++) {
                        _cleanup_free_ char *rel = NULL;
                        if (gitguard_tree_where(g, gl.files[i], NULL, &rel) == GITGUARD_OUT)
                                collect_relative(g, gl.files[i], 0, &g->global_progs,
                                                 &g->n_global_progs, &budget);
                }
                gitguard_globals_free(&gl);
        }
        for (size_t i = 0; i < g->n_global_progs; i++) {
                _cleanup_free_ char *a =
                    wt[0] == '/' ? gitguard_absolute(g->global_progs[i], wt) : NULL;
                gitguard_check_program(g, a ? a : g->global_progs[i], a ? NULL : wt,
                                       "a program your own git config names by a relative path "
                                       "(host git runs it from the working tree: the agent's "
                                       "version)");
        }
}
