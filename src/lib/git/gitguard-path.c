/* SPDX-License-Identifier: Apache-2.0 */
/* Where a path named by a host git config lies, as host git would reach
 * it: in the tree being scanned (as a path relative to its root), outside
 * it (the host's own: the agent writes only in the tree), or where Airlock
 * cannot tell (through /proc: /proc/self/cwd is wherever host git runs).
 * Spelled as git spells it: "~/" and "~user/", relative to a directory of
 * the tree, absolute, and through the host's own symbolic links outside
 * the tree, so that another path to the workspace is the workspace. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "fs.h"
#include "gitguard-internal.h"
#include "util.h"

char *gitguard_expand_home(const char *value)
{
        if (value[0] != '~')
                return xstrdup(value);
        size_t k = strcspn(value + 1, "/");
        const char *rest = value + 1 + k;
        if (k == 0) {
                const char *home = getenv("HOME");
                return home && home[0] == '/' ? xasprintf("%s%s", home, rest) : NULL;
        }
        if (k >= 256)
                return NULL;
        char user[256];
        memcpy(user, value + 1, k);
        user[k] = '\0';
        struct passwd pw, *res = NULL;
        char buf[4096];
        if (getpwnam_r(user, &pw, buf, sizeof(buf), &res) != 0 || !res || !pw.pw_dir ||
            pw.pw_dir[0] != '/')
                return NULL;
        return xasprintf("%s%s", pw.pw_dir, rest);
}

char *gitguard_absolute(const char *value, const char *base)
{
        if (value[0] == '/' || value[0] == '~')
                return gitguard_expand_home(value);
        return base ? xasprintf("%s/%s", base, value) : NULL;
}

/* An absolute path with "." and ".." taken out ("/a/.git/../b" is
 * "/a/b"); NULL when it climbs above "/". */
char *gitguard_normalize_abs(const char *abs)
{
        _cleanup_free_ char *rel = gitguard_pointer_target("", abs + 1);
        if (!rel)
                return NULL;
        return STREQ(rel, ".") ? xstrdup("/") : xasprintf("/%s", rel);
}

/* abs beneath root, lexically: its path relative to root, or NULL. */
static char *beneath(const char *root, const char *abs)
{
        size_t rl = strlen(root);
        while (rl > 1 && root[rl - 1] == '/')
                rl--;
        if (rl == 1)
                rl = 0; /* the root is "/" */
        if (strncmp(abs, root, rl) != 0 || (abs[rl] != '/' && abs[rl] != '\0'))
                return NULL;
        const char *rest = abs + rl;
        rest += strspn(rest, "/");
        return gitguard_pointer_target("", *rest ? rest : ".");
}

/* Whether abs (normalized) lies in another tree of the run than g's. */
static bool in_other_root(const struct guard_run *g, const char *abs)
{
        for (size_t i = 0; i < g->n_roots; i++) {
                if (&g->roots[i] == g->root || !g->roots[i].path)
                        continue;
                _cleanup_free_ char *rel = beneath(g->roots[i].path, abs);
                if (rel)
                        return true;
        }
        return false;
}

/* The path of what fd is open on, as the kernel names it. */
static bool fd_path(int fd, char out[PATH_MAX])
{
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(proc, out, PATH_MAX - 1);
        if (n <= 0 || out[0] != '/')
                return false;
        out[n] = '\0';
        return true;
}

/* Whether path has a ".." component: the kernel resolves a link before
 * the ".." after it (`link/../x` is beside the link's target, not x), so
 * such a path is walked, not read as text. */
static bool has_dotdot(const char *path)
{
        for (const char *c = path; *c;) {
                size_t k = strcspn(c, "/");
                if (k == 2 && c[0] == '.' && c[1] == '.')
                        return true;
                c += k;
                c += strspn(c, "/");
        }
        return false;
}

/* The kernel's walk of abs, one directory at a time, following the
 * host's links outside the tree: once a step lands in the tree (the root
 * or beneath it) and no ".." is left to take, the rest is the tree's, and
 * the caller goes on without following the agent's links. Before a ".."
 * the walk goes on in the tree too, through whatever links are there now:
 * host git takes the ".." from where they lead. A step into /proc is where
 * Airlock cannot tell. A path that never lands in the tree is outside
 * it. */
static enum gitguard_where walk_in(struct guard_run *g, const char *abs, char **ret_rel)
{
        struct stat rst;
        if (fstat(g->root_fd, &rst) < 0)
                return GITGUARD_OUT;
        _cleanup_close_ int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        const char *p = abs;
        for (int steps = 0; fd >= 0 && steps < PATH_MAX; steps++) {
                p += strspn(p, "/");
                if (!*p)
                        break;
                size_t k = strcspn(p, "/");
                if (k > NAME_MAX)
                        return GITGUARD_OUT;
                if (k == 1 && p[0] == '.') { /* no step: not a syscall */
                        p += k;
                        continue;
                }
                if (++g->walk_steps > WALK_STEPS_MAX) {
                        if (g->walk_steps == WALK_STEPS_MAX + 1)
                                gitguard_report(g, "",
                                                "the paths git configs name cost more than the "
                                                "scan opens to place them (32768 directories): "
                                                "configs naming paths past this point fail closed",
                                                NULL, 0);
                        g->walk_steps = WALK_STEPS_MAX + 2;
                        return GITGUARD_UNKNOWN;
                }
                char name[NAME_MAX + 1];
                memcpy(name, p, k);
                name[k] = '\0';
                int next = openat(fd, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (next < 0)
                        return GITGUARD_OUT; /* a file, or nothing: not in the tree */
                close(fd);
                fd = next;
                p += k;
                struct statfs sfs;
                if (fstatfs(fd, &sfs) == 0 && sfs.f_type == PROC_SUPER_MAGIC)
                        return GITGUARD_UNKNOWN;
                struct stat st;
                _cleanup_free_ char *at = NULL;
                char real[PATH_MAX];
                bool named = false;
                if (fstat(fd, &st) == 0 && st.st_dev == rst.st_dev && st.st_ino == rst.st_ino)
                        at = xstrdup(".");
                else if ((named = fd_path(fd, real)))
                        at = beneath(g->root->path, real);
                if (!at && named && in_other_root(g, real))
                        return GITGUARD_UNKNOWN;
                if (!at)
                        continue;
                const char *rest = p + strspn(p, "/");
                if (has_dotdot(rest))
                        continue;
                _cleanup_free_ char *joined =
                    *rest ? gitguard_join(STREQ(at, ".") ? "" : at, rest) : xstrdup(at);
                *ret_rel = gitguard_pointer_target("", joined);
                return *ret_rel ? GITGUARD_IN : GITGUARD_OUT;
        }
        return GITGUARD_OUT;
}

enum gitguard_where gitguard_tree_where(struct guard_run *g, const char *value,
                                        const char *base_rel, char **ret_rel)
{
        *ret_rel = NULL;
        /* git's own installation prefix: the host's. */
        if (strncmp(value, "%(prefix)/", 10) == 0)
                return GITGUARD_OUT;
        _cleanup_free_ char *home = NULL, *from_root = NULL;
        if (value[0] == '~') {
                home = gitguard_expand_home(value);
                if (!home)
                        return GITGUARD_OUT; /* git cannot expand it either */
                value = home;
        }
        /* With a "..", the kernel's walk, not the text, tells where. */
        bool walked = has_dotdot(value);
        if (value[0] != '/') {
                if (!base_rel)
                        return GITGUARD_OUT;
                *ret_rel = walked ? NULL : gitguard_pointer_target(base_rel, value);
                if (*ret_rel)
                        return GITGUARD_IN;
                /* It climbs above the root, and may come back in. */
                from_root = xasprintf("%s/%s/%s", g->root->path, base_rel, value);
                value = from_root;
        }
        if (walked)
                return walk_in(g, value, ret_rel);
        _cleanup_free_ char *norm = gitguard_normalize_abs(value);
        if (norm && (*ret_rel = beneath(g->root->path, norm)))
                return GITGUARD_IN;
        if (norm && in_other_root(g, norm))
                return GITGUARD_UNKNOWN;
        return walk_in(g, value, ret_rel);
}

char *gitguard_tree_rel(struct guard_run *g, const char *value, const char *base_rel)
{
        char *rel = NULL;
        if (gitguard_tree_where(g, value, base_rel, &rel) != GITGUARD_IN) {
                free(rel);
                return NULL;
        }
        return rel;
}

int gitguard_open_regular(int dfd, const char *path, uint64_t resolve)
{
        /* O_PATH: no driver's open, no FIFO's; then the same inode again,
         * for reading, once it is known to be a plain file. */
        _cleanup_close_ int pfd = -1;
        if (resolve)
                pfd = fs_openat2(dfd, path, O_PATH | O_CLOEXEC, 0, resolve);
        else if ((pfd = openat(dfd, path, O_PATH | O_CLOEXEC)) < 0)
                pfd = -errno;
        if (pfd < 0)
                return pfd;
        struct stat st, again;
        if (fstat(pfd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EPERM;
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pfd);
        int fd = open(proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &again) < 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino) {
                close(fd);
                return -ESTALE;
        }
        return fd;
}

/* file (taken) as one of gl's, once. */
static void globals_add(struct gitguard_globals *gl, char *file)
{
        bool have = !file || gl->n == ARRAY_SIZE(gl->files);
        for (size_t i = 0; i < gl->n && !have; i++)
                have = STREQ(gl->files[i], file);
        if (have)
                free(file);
        else
                gl->files[gl->n++] = file;
}

/* The XDG config (xdg: $XDG_CONFIG_HOME, NULL: none) and ~/.gitconfig of
 * home. */
static void globals_add_home(struct gitguard_globals *gl, const char *home, const char *xdg)
{
        bool has_home = home && home[0] == '/';
        globals_add(gl, xdg && xdg[0] == '/' ? xasprintf("%s/git/config", xdg)
                        : has_home           ? xasprintf("%s/.config/git/config", home)
                                             : NULL);
        globals_add(gl, has_home ? xasprintf("%s/.gitconfig", home) : NULL);
}

/* The same of the user uid, when another than this process's. */
static void globals_add_user(struct gitguard_globals *gl, uid_t uid)
{
        if (uid == getuid() || uid == geteuid())
                return;
        struct passwd pw, *res = NULL;
        char buf[4096];
        if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res)
                globals_add_home(gl, pw.pw_dir, NULL);
}

static void globals_add_env(struct gitguard_globals *gl, const char *name)
{
        const char *v = getenv(name);
        globals_add(gl, v && v[0] == '/' ? xstrdup(v) : NULL);
}

void gitguard_globals_get(struct gitguard_globals *gl, const char *root)
{
        *gl = (struct gitguard_globals){0};
        globals_add(gl, xstrdup("/etc/gitconfig"));
        globals_add_env(gl, "GIT_CONFIG_SYSTEM");
        globals_add_home(gl, getenv("HOME"), getenv("XDG_CONFIG_HOME"));
        const char *sudo_uid = getenv("SUDO_UID");
        int u = -1;
        if (sudo_uid && safe_atoi(sudo_uid, &u) == 0 && u >= 0)
                globals_add_user(gl, (uid_t)u);
        struct stat st;
        if (root && stat(root, &st) == 0)
                globals_add_user(gl, st.st_uid);
        globals_add_env(gl, "GIT_CONFIG_GLOBAL");
}

void gitguard_globals_free(struct gitguard_globals *gl)
{
        for (size_t i = 0; i < gl->n; i++)
                free(gl->files[i]);
        *gl = (struct gitguard_globals){0};
}
