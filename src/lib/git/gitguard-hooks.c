/* SPDX-License-Identifier: Apache-2.0 */
/* The hooks host git runs: those in a git directory's hooks/, and those in
 * the directory its own config names as core.hooksPath, which is often one
 * of the working tree (`.githooks`, husky's `.husky/_`) and so an ordinary
 * directory the agent writes. What the run put or changed in either is
 * moved aside; the host's own, untouched, stays (gitguard_quarantine). The
 * walk that calls this is gitguard.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "gitguard-internal.h"
#include "util.h"

void gitguard_scan_hook_entries(struct guard_run *g, int hfd, const char *hrel, const char *reason)
{
        DIR *d = gitguard_dir_of(hfd);
        if (!d)
                return;
        const char *n;
        while ((n = gitguard_next_entry(g, d, hrel))) {
                size_t len = strlen(n);
                if (len > 7 && STREQ(n + len - 7, ".sample"))
                        continue;
                _cleanup_free_ char *r = gitguard_join(hrel, n);
                gitguard_quarantine(g, hfd, n, r, reason);
                /* A link kept in place (the host's own, often to a script
                 * of the tree: `../../scripts/pre-commit.sh`) runs what it
                 * leads to, an ordinary file the agent writes. */
                char target[PATH_MAX];
                ssize_t k = readlinkat(hfd, n, target, sizeof(target) - 1);
                if (k <= 0)
                        continue;
                target[k] = '\0';
                if (gitguard_check_program(g, target, hrel,
                                           "the file a hook links to (host git would run the "
                                           "agent's version)") == GITGUARD_UNKNOWN)
                        gitguard_quarantine_force(g, hfd, n, r,
                                                  "a hook linked through /proc (host git would "
                                                  "run what it reaches from wherever it runs)");
        }
        closedir(d);
}

int gitguard_open_in_tree(struct guard_run *g, const char *rel, const char *why)
{
        _cleanup_close_ int dfd = fcntl(g->root_fd, F_DUPFD_CLOEXEC, 3);
        _cleanup_free_ char *done = xstrdup("");
        for (const char *p = STREQ(rel, ".") ? "" : rel; *p && dfd >= 0;) {
                size_t k = strcspn(p, "/");
                _cleanup_free_ char *name = xasprintf("%.*s", (int)k, p);
                _cleanup_free_ char *at = gitguard_join(done, name);
                struct stat st;
                if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -1;
                if (S_ISLNK(st.st_mode)) {
                        gitguard_quarantine(g, dfd, name, at, why);
                        break;
                }
                int next = gitguard_open_dir(dfd, name);
                close(dfd);
                dfd = next;
                free(done);
                done = TAKE_PTR(at);
                p += k + (p[k] == '/');
        }
        return fs_openat2(g->root_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                          RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
}

/* core.hooksPath as git reads it from a config file and the files it
 * includes, in order, to git's depth: the last value, left in *value. */
struct hp_state {
        struct guard_run *g; /* NULL: every file read by its path */
        char **value;
        int budget; /* files read at most (a fan-out of includes) */
        struct {
                dev_t dev;
                ino_t ino;
        } chain[INCLUDE_DEPTH_MAX + 2]; /* a cycle is not followed around */
        size_t n_chain;
        /* What a file read already set, for the same path, depth and
         * chain: a file included three hundred times is read once (a
         * megabyte each time cost the start 1.5 s), and each time sets
         * what it set then, as git would by reading it again. */
        struct hp_memo {
                dev_t dev;
                ino_t ino;
                uint64_t key;
                char *value; /* NULL: it sets none */
        } memo[64];
        size_t n_memo;
};

static uint64_t hp_key_of(const struct hp_state *s, const char *abs, int depth)
{
        uint64_t h = 14695981039346656037ULL ^ (uint64_t)depth;
        for (const char *c = abs; *c; c++)
                h = (h ^ (unsigned char)*c) * 1099511628211ULL;
        for (size_t i = 0; i < s->n_chain; i++)
                h = (h ^ (uint64_t)s->chain[i].ino ^ ((uint64_t)s->chain[i].dev << 32)) *
                    1099511628211ULL;
        return h;
}

struct hp_walk {
        struct hp_state *s;
        const char *dir; /* the directory of the file read */
        int depth;
};

static void hooks_path_in(struct hp_state *s, const char *abs, int depth);

static bool hp_key(const char *sec, const char *sub, const char *name, const char *value,
                   void *userdata)
{
        struct hp_walk *w = userdata;
        if (!sub && strcasecmp(sec, "core") == 0 && strcasecmp(name, "hookspath") == 0) {
                free(*w->s->value);
                *w->s->value = xstrdup(value ? value : "");
        } else if (value && *value && strcasecmp(name, "path") == 0 &&
                   ((strcasecmp(sec, "include") == 0 && !sub) ||
                    (strcasecmp(sec, "includeif") == 0 && sub))) {
                _cleanup_free_ char *a = gitguard_absolute(value, w->dir);
                if (a && w->depth < INCLUDE_DEPTH_MAX)
                        hooks_path_in(w->s, a, w->depth + 1);
        }
        return false;
}

/* The config file at abs, as host git reads it: in the tree beneath its
 * root (a link left there is the host's: those the run made were moved
 * aside before), elsewhere by its path (the host's). */
static void hooks_path_in(struct hp_state *s, const char *abs, int depth)
{
        struct guard_run *g = s->g;
        if (s->budget <= 0 || s->n_chain >= ARRAY_SIZE(s->chain))
                return;
        s->budget--;
        _cleanup_free_ char *rel = NULL;
        enum gitguard_where w = g ? gitguard_tree_where(g, abs, NULL, &rel) : GITGUARD_OUT;
        /* The config naming it was moved aside; unless the scan's walk
         * ran out, when the file is read as host git reads it. */
        if (w == GITGUARD_UNKNOWN && g->walk_steps <= WALK_STEPS_MAX)
                return;
        _cleanup_close_ int fd =
            w == GITGUARD_IN
                ? gitguard_open_regular(g->root_fd, rel,
                                        RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
                : gitguard_open_regular(AT_FDCWD, abs, 0);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return;
        for (size_t i = 0; i < s->n_chain; i++)
                if (s->chain[i].dev == st.st_dev && s->chain[i].ino == st.st_ino)
                        return; /* a cycle: git stops with an error */
        uint64_t key = hp_key_of(s, abs, depth);
        for (size_t i = 0; i < s->n_memo; i++)
                if (s->memo[i].dev == st.st_dev && s->memo[i].ino == st.st_ino &&
                    s->memo[i].key == key) {
                        if (s->memo[i].value) {
                                free(*s->value);
                                *s->value = xstrdup(s->memo[i].value);
                        }
                        return;
                }
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (gitguard_read_small_fd(fd, GITGUARD_CONFIG_MAX, &text, &len) < 0)
                return;
        const char *slash = strrchr(abs, '/');
        _cleanup_free_ char *dir =
            slash && slash != abs ? xasprintf("%.*s", (int)(slash - abs), abs) : xstrdup("/");
        s->chain[s->n_chain].dev = st.st_dev;
        s->chain[s->n_chain].ino = st.st_ino;
        s->n_chain++;
        struct hp_walk walk = {.s = s, .dir = dir, .depth = depth};
        char *before = *s->value;
        *s->value = NULL;
        (void)gitguard_config_each(text, len, hp_key, &walk);
        s->n_chain--;
        if (s->n_memo < ARRAY_SIZE(s->memo))
                s->memo[s->n_memo++] =
                    (struct hp_memo){.dev = st.st_dev,
                                     .ino = st.st_ino,
                                     .key = key,
                                     .value = *s->value ? xstrdup(*s->value) : NULL};
        if (*s->value)
                free(before);
        else
                *s->value = before;
}

/* The last core.hooksPath of the config files (absolute; NULL ones
 * skipped) in order, through their includes; NULL when none sets one. */
static char *hooks_path_files(struct guard_run *g, const char *const *files, size_t n)
{
        char *value = NULL;
        struct hp_state s = {.g = g, .value = &value, .budget = 256};
        for (size_t i = 0; i < n; i++)
                if (files[i])
                        hooks_path_in(&s, files[i], 0);
        for (size_t i = 0; i < s.n_memo; i++)
                free(s.memo[i].value);
        return value;
}

char *gitguard_hooks_path_of(struct guard_run *g, const char *main, const char *wt_config)
{
        const char *const files[] = {main, wt_config};
        return hooks_path_files(g, files, ARRAY_SIZE(files));
}

/* A path of the tree as an absolute one. */
static char *tree_abs(const struct guard_run *g, const char *rel, const char *name)
{
        return *rel && !STREQ(rel, ".") ? xasprintf("%s/%s/%s", g->root->path, rel, name)
                                        : xasprintf("%s/%s", g->root->path, name);
}

/* The host user's own core.hooksPath, which every repository without one
 * of its own uses: a relative one (`.githooks`) names a directory of each
 * working tree. Which of the user's configs wins (the last git reads)
 * depends on the environment host git runs in (GIT_CONFIG_GLOBAL, another
 * HOME): the value each sets, through its includes, is one git may use
 * (*ret_n of them; root: the tree, NULL for none). Read once a walk. */
char **gitguard_global_hooks(struct guard_run *g, const char *root, size_t *ret_n)
{
        if (!g->global_read) {
                g->global_read = true;
                struct gitguard_globals gl;
                gitguard_globals_get(&gl, root);
                for (size_t i = 0; i < gl.n; i++) {
                        _cleanup_free_ char *v =
                            hooks_path_files(NULL, (const char *const *)&gl.files[i], 1);
                        bool have = !v || !*v;
                        for (size_t j = 0; j < g->n_global_hooks && !have; j++)
                                have = STREQ(g->global_hooks[j], v);
                        if (!have)
                                g->global_hooks =
                                    strv_append(g->global_hooks, &g->n_global_hooks, v);
                }
                gitguard_globals_free(&gl);
        }
        *ret_n = g->n_global_hooks;
        return g->global_hooks;
}

/* The hooks directory value names (relative to the working tree wt_rel)
 * for the git directory at grel: what the run made or changed there is
 * moved aside. */
static void scan_hooks_dir(struct guard_run *g, const char *grel, const char *wt_rel,
                           const char *value);

void gitguard_scan_hooks_path(struct guard_run *g, const char *grel, const char *wt_rel,
                              bool linked)
{
        /* A linked worktree's config is its repository's, two levels up,
         * and config.worktree (its own) is read over it. */
        _cleanup_free_ char *common =
            linked ? gitguard_pointer_target(grel, "../..") : xstrdup(grel);
        _cleanup_free_ char *a = common ? tree_abs(g, common, "config") : NULL;
        _cleanup_free_ char *wa = tree_abs(g, grel, "config.worktree");
        _cleanup_free_ char *value = gitguard_hooks_path_of(g, a, wa);
        if (value) {
                scan_hooks_dir(g, grel, wt_rel, value);
                return;
        }
        size_t n = 0;
        char **global = gitguard_global_hooks(g, g->root->path, &n);
        for (size_t i = 0; i < n; i++)
                scan_hooks_dir(g, grel, wt_rel, global[i]);
}

static void scan_hooks_dir(struct guard_run *g, const char *grel, const char *wt_rel,
                           const char *value)
{
        if (!*value)
                return;
        _cleanup_free_ char *rel = NULL;
        enum gitguard_where w = gitguard_tree_where(g, value, wt_rel, &rel);
        if (w == GITGUARD_UNKNOWN) /* the user's own, outside: said, not moved */
                gitguard_report(
                    g, grel,
                    "host git's core.hooksPath is named through /proc (from wherever it runs) or "
                    "in another read-write tree of the sandbox: hooks there were not "
                    "checked",
                    NULL, 0);
        if (w != GITGUARD_IN)
                return;
        /* A symbolic link on the way that the run made: git follows it to
         * hooks the agent chose (in another tree, where this scan does not
         * look for hooks). */
        _cleanup_close_ int hfd = gitguard_open_in_tree(
            g, rel,
            "a symbolic link on the way to core.hooksPath (host git would run the hooks where "
            "it leads)");
        if (hfd < 0)
                return;
        gitguard_scan_hook_entries(g, hfd, rel,
                                   "a hook in the directory core.hooksPath names (host git would "
                                   "run it)");
}

char *gitguard_gitdir_worktree(struct guard_run *g, int gfd, const char *grel, bool linked)
{
        _cleanup_free_ char *text = NULL, *rel = NULL;
        size_t len = 0;
        if (linked) {
                /* gitdir: the path of the worktree's .git file. */
                if (gitguard_read_small(gfd, "gitdir", PATH_MAX, &text, &len) < 0)
                        return NULL;
                text[strcspn(text, "\r\n")] = '\0';
                if (!*text || gitguard_tree_where(g, text, grel, &rel) != GITGUARD_IN ||
                    STREQ(rel, "."))
                        return NULL;
                char *slash = strrchr(rel, '/');
                return slash ? xasprintf("%.*s", (int)(slash - rel), rel) : xstrdup("");
        }
        _cleanup_free_ char *wt = NULL;
        if (gitguard_read_small(gfd, "config", GITGUARD_CONFIG_MAX, &text, &len) == 0)
                wt = gitguard_config_value(text, len, "core", "worktree");
        if (wt && *wt && gitguard_tree_where(g, wt, grel, &rel) == GITGUARD_IN)
                return STREQ(rel, ".") ? xstrdup("") : TAKE_PTR(rel);
        if (wt && *wt)
                return NULL;
        return xstrdup(grel);
}

/* abs as the kernel reaches it (its directory's real path, then its last
 * name): through the host's links (another spelling of the workspace)
 * and with a ".." taken after the link before it. NULL when its directory
 * is not there. */
static char *kernel_spelling(const char *abs)
{
        const char *slash = strrchr(abs, '/');
        const char *base = slash + 1;
        if (!*base || STREQ(base, ".") || STREQ(base, ".."))
                return realpath(abs, NULL);
        _cleanup_free_ char *dir =
            slash == abs ? xstrdup("/") : xasprintf("%.*s", (int)(slash - abs), abs);
        _cleanup_free_ char *real = realpath(dir, NULL);
        return real ? xasprintf("%s/%s", STREQ(real, "/") ? "" : real, base) : NULL;
}

/* abs, normalized, when it lies beneath root (not root itself) and its
 * directory is reached there through no symbolic link (what a mount at
 * the start covers: a link on the way is left to the end-of-run scan).
 * Compared as the kernel spells both when it does: the path as written
 * otherwise. Added as root spells it. */
static void add_beneath(char ***v, size_t *n, int root_fd, const char *root, const char *abs)
{
        _cleanup_free_ char *norm = abs && abs[0] == '/' ? gitguard_normalize_abs(abs) : NULL;
        if (!norm || root_fd < 0)
                return;
        _cleanup_free_ char *real = kernel_spelling(abs), *real_root = realpath(root, NULL);
        abs = norm;
        size_t real_rl = real_root ? strlen(real_root) : 0;
        _cleanup_free_ char *respelt = NULL;
        if (real && real_root && real_rl > 1 && strncmp(real, real_root, real_rl) == 0 &&
            real[real_rl] == '/') {
                size_t rl0 = strlen(root);
                while (rl0 > 1 && root[rl0 - 1] == '/')
                        rl0--;
                respelt = xasprintf("%.*s%s", (int)rl0, root, real + real_rl);
                abs = respelt;
        }
        size_t rl = strlen(root);
        while (rl > 1 && root[rl - 1] == '/')
                rl--;
        if (strncmp(abs, root, rl) != 0 || abs[rl] != '/')
                return;
        _cleanup_free_ char *rel = gitguard_pointer_target("", abs + rl + 1);
        if (!rel || STREQ(rel, "."))
                return;
        const char *slash = strrchr(rel, '/');
        _cleanup_free_ char *dir = slash ? xasprintf("%.*s", (int)(slash - rel), rel) : NULL;
        _cleanup_close_ int dfd = fs_openat2(
            root_fd, dir ? dir : ".", O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
            RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
        if (dfd < 0)
                return;
        _cleanup_free_ char *full = xasprintf("%.*s/%s", (int)rl, root, rel);
        *v = strv_append(*v, n, full);
}

/* The files a config's text (in directory dir) includes beneath root,
 * and, to git's depth, the programs and files those include in turn. */
static void add_includes(char ***v, size_t *n, int rfd, const char *root, const char *text,
                         size_t len, const char *dir, const char *worktree, int depth, int *budget)
{
        size_t k = 0;
        _cleanup_strv_ char **inc = gitguard_config_includes(text, len, &k);
        for (size_t i = 0; i < k; i++) {
                _cleanup_free_ char *a = gitguard_absolute(inc[i], dir);
                if (!a)
                        continue;
                size_t before = *n;
                add_beneath(v, n, rfd, root, a);
                if (*n == before)
                        continue;
                /* Named before: its own targets are in already (a file
                 * included three hundred times cost the start 7 s). */
                bool again = false;
                for (size_t j = 0; j < before && !again; j++)
                        again = STREQ((*v)[j], (*v)[*n - 1]);
                if (again) {
                        free((*v)[--*n]);
                        (*v)[*n] = NULL;
                        continue;
                }
                if (depth + 1 >= INCLUDE_DEPTH_MAX || --*budget <= 0)
                        continue;
                _cleanup_close_ int fd = gitguard_open_regular(AT_FDCWD, (*v)[*n - 1], 0);
                _cleanup_free_ char *t = NULL;
                size_t tl = 0;
                if (fd < 0 || gitguard_read_small_fd(fd, GITGUARD_CONFIG_MAX, &t, &tl) < 0)
                        continue;
                size_t np = 0;
                _cleanup_strv_ char **progs = gitguard_config_programs(t, tl, &np);
                for (size_t j = 0; j < np; j++) {
                        _cleanup_free_ char *pa = gitguard_absolute(progs[j], worktree);
                        add_beneath(v, n, rfd, root, pa);
                }
                const char *slash = strrchr(a, '/');
                _cleanup_free_ char *d = xasprintf("%.*s", (int)(slash - a), a);
                add_includes(v, n, rfd, root, t, tl, d, worktree, depth + 1, budget);
        }
}

char **gitguard_config_targets(const char *root, const char *gitdir, const char *worktree,
                               size_t *ret_n)
{
        char **v = NULL;
        size_t n = 0;
        *ret_n = 0;
        _cleanup_close_ int gfd = open(gitdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_close_ int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (gfd < 0 || rfd < 0)
                return NULL;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (gitguard_read_small(gfd, "config", GITGUARD_CONFIG_MAX, &text, &len) < 0)
                return NULL;
        /* The last value git reads, through includes and config.worktree. */
        _cleanup_free_ char *cfg = xasprintf("%s/config", gitdir);
        _cleanup_free_ char *wcfg = xasprintf("%s/config.worktree", gitdir);
        _cleanup_free_ char *hooks = gitguard_hooks_path_of(NULL, cfg, wcfg);
        if (hooks && *hooks) {
                _cleanup_free_ char *a = gitguard_absolute(hooks, worktree);
                add_beneath(&v, &n, rfd, root, a);
        } else if (!hooks) {
                struct guard_run g = {0};
                size_t k = 0;
                char **global = gitguard_global_hooks(&g, root, &k);
                for (size_t i = 0; i < k; i++) {
                        _cleanup_free_ char *a = gitguard_absolute(global[i], worktree);
                        add_beneath(&v, &n, rfd, root, a);
                }
                strv_free(g.global_hooks);
        }
        size_t k = 0;
        _cleanup_strv_ char **progs = gitguard_config_programs(text, len, &k);
        for (size_t i = 0; i < k; i++) {
                _cleanup_free_ char *a = gitguard_absolute(progs[i], worktree);
                add_beneath(&v, &n, rfd, root, a);
        }
        int budget = 256;
        add_includes(&v, &n, rfd, root, text, len, gitdir, worktree, 0, &budget);
        /* What the links in hooks/ lead to. */
        _cleanup_close_ int hfd =
            openat(gfd, "hooks", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        DIR *d = hfd >= 0 ? gitguard_dir_of(hfd) : NULL;
        struct dirent *de;
        _cleanup_free_ char *hdir = xasprintf("%s/hooks", gitdir);
        for (size_t seen = 0; d && (de = readdir(d)) && seen < 1024; seen++) {
                char target[PATH_MAX];
                ssize_t tk = readlinkat(hfd, de->d_name, target, sizeof(target) - 1);
                if (tk <= 0)
                        continue;
                target[tk] = '\0';
                _cleanup_free_ char *a = gitguard_absolute(target, hdir);
                add_beneath(&v, &n, rfd, root, a);
        }
        if (d)
                closedir(d);
        *ret_n = n;
        return v;
}

char *gitguard_enclosing_gitdir(const char *root, char **ret_worktree)
{
        *ret_worktree = NULL;
        if (root[0] != '/')
                return NULL;
        _cleanup_free_ char *dir = xstrdup(root);
        for (int level = 0; level < 128; level++) {
                char *slash = strrchr(dir, '/');
                if (!slash)
                        return NULL;
                if (slash == dir)
                        slash[1] = '\0'; /* "/" itself, last */
                else
                        *slash = '\0';
                _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                struct stat st;
                if (fd >= 0 && fstatat(fd, ".git", &st, AT_SYMLINK_NOFOLLOW) == 0) {
                        const char *sep = STREQ(dir, "/") ? "" : "/";
                        if (S_ISDIR(st.st_mode)) {
                                *ret_worktree = xstrdup(dir);
                                return xasprintf("%s%s.git", dir, sep);
                        }
                        _cleanup_free_ char *text = NULL;
                        size_t len;
                        if (!S_ISREG(st.st_mode) ||
                            gitguard_read_small(fd, ".git", 4096, &text, &len) < 0 ||
                            strncmp(text, "gitdir:", 7) != 0)
                                return NULL;
                        char *t = text + 7;
                        t += strspn(t, " \t");
                        t[strcspn(t, "\r\n")] = '\0';
                        *ret_worktree = xstrdup(dir);
                        return t[0] == '/' ? xstrdup(t) : xasprintf("%s%s%s", dir, sep, t);
                }
                if (STREQ(dir, "/"))
                        return NULL;
        }
        return NULL;
}
