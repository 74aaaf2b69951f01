/* SPDX-License-Identifier: Apache-2.0 */
/* The config files host git reads in a repository the walk found
 * (gitguard.c): .git/config and config.worktree, moved aside when they
 * name what runs a program (gitguard-config.c judges the text); and, for
 * one kept in place (the host's own), what it points at in the tree: the
 * programs it runs from the working tree and the files it includes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gitguard-internal.h"
#include "util.h"

/* Git follows includes ten deep. */
#define INCLUDE_DEPTH_MAX 10

static void check_config_at(struct guard_run *g, int dfd, const char *name, const char *rel,
                            const char *wt, int depth);

/* One file a config includes (value, relative to base within the tree,
 * or absolute): when it lies in the tree, an ordinary file there (a shared
 * `../.gitconfig`) that the agent could write, and git reads it as config.
 * Checked as a config itself; a link the run made on the way to it is
 * moved aside. */
static void check_include(struct guard_run *g, const char *value, const char *base, const char *wt,
                          int depth)
{
        if (depth >= INCLUDE_DEPTH_MAX)
                return;
        _cleanup_free_ char *target = gitguard_tree_rel(g, value, base);
        if (!target || STREQ(target, "."))
                return;
        const char *ts = strrchr(target, '/');
        _cleanup_free_ char *dir =
            ts ? xasprintf("%.*s", (int)(ts - target), target) : xstrdup(".");
        _cleanup_close_ int pfd = gitguard_open_in_tree(
            g, dir,
            "a symbolic link on the way to a file a git config includes (host git would read "
            "config where it leads)");
        /* A directory is no config git reads: left alone. */
        struct stat st;
        const char *name = ts ? ts + 1 : target;
        if (pfd >= 0 && fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode))
                check_config_at(g, pfd, name, target, wt, depth + 1);
}

static void check_includes(struct guard_run *g, const char *text, size_t len, const char *rel,
                           const char *wt, int depth)
{
        size_t n = 0;
        _cleanup_strv_ char **inc = gitguard_config_includes(text, len, &n);
        const char *slash = strrchr(rel, '/');
        _cleanup_free_ char *base = xasprintf("%.*s", slash ? (int)(slash - rel) : 0, rel);
        for (size_t i = 0; i < n; i++)
                check_include(g, inc[i], base, wt, depth);
}

/* One program a config runs (value, relative to wt within the tree, or
 * absolute): a file of the tree (a core.fsmonitor of `tools/fsmonitor.sh`,
 * a filter's `./scripts/clean.sh`) is an ordinary one the agent writes,
 * which host git runs. What the run made or changed there is moved
 * aside. */
void gitguard_check_program(struct guard_run *g, const char *value, const char *wt, const char *why)
{
        _cleanup_free_ char *target = gitguard_tree_rel(g, value, wt);
        if (!target || STREQ(target, "."))
                return;
        const char *ts = strrchr(target, '/');
        _cleanup_free_ char *dir =
            ts ? xasprintf("%.*s", (int)(ts - target), target) : xstrdup(".");
        const char *base = ts ? ts + 1 : target;
        _cleanup_close_ int pfd = gitguard_open_in_tree(
            g, dir,
            "a symbolic link on the way to a program a git config runs (host git would run "
            "what it leads to)");
        struct stat st;
        if (pfd < 0 || fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode) ||
            !gitguard_ctime_in_run(g, &st))
                return;
        gitguard_quarantine(g, pfd, base, target, why);
}

#define PROGRAM_REASON                                                                             \
        "a program the repository's own git config runs (host git would run the agent's "          \
        "version)"

static void check_programs(struct guard_run *g, const char *text, size_t len, const char *wt)
{
        size_t n = 0;
        _cleanup_strv_ char **progs = gitguard_config_programs(text, len, &n);
        for (size_t i = 0; i < n; i++)
                gitguard_check_program(g, progs[i], wt, PROGRAM_REASON);
}

static void check_config_at(struct guard_run *g, int dfd, const char *name, const char *rel,
                            const char *wt, int depth)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return;
        if (S_ISLNK(st.st_mode)) {
                gitguard_quarantine(g, dfd, name, rel,
                                    "a config that is a symbolic link (git follows it)");
                return;
        }
        if (!S_ISREG(st.st_mode)) {
                gitguard_quarantine(g, dfd, name, rel, "a config that is not a plain file");
                return;
        }
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int r = gitguard_read_small(dfd, name, GITGUARD_CONFIG_MAX, &text, &len);
        char reason[256];
        if (r == -EFBIG)
                snprintf(reason, sizeof(reason), "a config larger than %d bytes",
                         GITGUARD_CONFIG_MAX);
        else if (r < 0)
                snprintf(reason, sizeof(reason), "a config Airlock cannot read (%s)", strerror(-r));
        else if (!gitguard_config_check(text, len, reason, sizeof(reason))) {
                check_includes(g, text, len, rel, wt, depth);
                return;
        }
        gitguard_quarantine(g, dfd, name, rel, reason);
        /* The host's own, kept: what it runs and includes git uses still. */
        if (r == 0 && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                check_programs(g, text, len, wt);
                check_includes(g, text, len, rel, wt, depth);
        }
}

void gitguard_check_config(struct guard_run *g, int dfd, const char *name, const char *rel,
                           const char *wt_rel)
{
        check_config_at(g, dfd, name, rel, wt_rel, 0);
}

void gitguard_check_enclosing(struct guard_run *g)
{
        _cleanup_free_ char *wt = NULL;
        _cleanup_free_ char *gitdir = gitguard_enclosing_gitdir(g->root->path, &wt);
        if (!gitdir)
                return;
        _cleanup_close_ int gfd = open(gitdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (gfd < 0 || gitguard_read_small(gfd, "config", GITGUARD_CONFIG_MAX, &text, &len) < 0)
                return;
        /* Its hooks directory, when in the tree. */
        _cleanup_free_ char *hooks = gitguard_config_value(text, len, "core", "hookspath");
        _cleanup_free_ char *habs = hooks && *hooks ? gitguard_absolute(hooks, wt) : NULL;
        _cleanup_free_ char *hrel = habs ? gitguard_tree_rel(g, habs, NULL) : NULL;
        if (hrel && !STREQ(hrel, ".")) {
                _cleanup_close_ int hfd = gitguard_open_in_tree(
                    g, hrel,
                    "a symbolic link on the way to core.hooksPath (host git would run the "
                    "hooks where it leads)");
                if (hfd >= 0)
                        gitguard_scan_hook_entries(g, hfd, hrel,
                                                   "a hook in the directory core.hooksPath names "
                                                   "(host git would run it)");
        }
        /* Its programs and includes, as absolute paths into the tree. */
        size_t n = 0;
        _cleanup_strv_ char **progs = gitguard_config_programs(text, len, &n);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *a = gitguard_absolute(progs[i], wt);
                if (a)
                        gitguard_check_program(g, a, NULL, PROGRAM_REASON);
        }
        _cleanup_strv_ char **inc = gitguard_config_includes(text, len, &n);
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *a = gitguard_absolute(inc[i], gitdir);
                if (a)
                        check_include(g, a, NULL, NULL, 0);
        }
}
