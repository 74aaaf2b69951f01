/* SPDX-License-Identifier: Apache-2.0 */
/* A host path root acts on, walked from / one component at a time and
 * refused when another user could change what it names (trusted.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trusted.h"
#include "util.h"

#define MAX_LINKS 40

uid_t trusted_caller(void)
{
        if (getuid() != 0)
                return getuid();
        const char *s = getenv("SUDO_UID");
        if (!s || !*s)
                return 0;
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || *end || v >= (unsigned long)(uid_t)-1)
                return 0;
        return (uid_t)v;
}

static bool trusted_uid(uid_t uid, uid_t caller)
{
        return uid == 0 || uid == caller;
}

bool trusted_stat_foreign(const struct stat *st, uid_t caller)
{
        return !trusted_uid(st->st_uid, caller) || (st->st_mode & (S_IWGRP | S_IWOTH));
}

static const char *uid_name(uid_t uid, char buf[static 64])
{
        struct passwd *pw = getpwuid(uid);
        snprintf(buf, 64, "%s", pw ? pw->pw_name : "no name");
        return buf;
}

/* Why the directory `dir` (at dpath), where `entry` was found, lets another
 * user change what the path names; NULL when it does not. */
static const char *why_unsafe(const struct stat *dir, const struct stat *entry, uid_t caller,
                              char buf[static 160])
{
        char n[64];
        if (!trusted_uid(dir->st_uid, caller)) {
                snprintf(buf, 160, "is owned by uid %u (%s)", (unsigned)dir->st_uid,
                         uid_name(dir->st_uid, n));
                return buf;
        }
        if (!(dir->st_mode & (S_IWGRP | S_IWOTH)))
                return NULL;
        if (!(dir->st_mode & S_ISVTX))
                return (dir->st_mode & S_IWOTH) ? "is world-writable" : "is group-writable";
        if (entry && !trusted_uid(entry->st_uid, caller)) {
                snprintf(buf, 160,
                         "is a shared directory (sticky) and the entry in it is owned by uid %u "
                         "(%s)",
                         (unsigned)entry->st_uid, uid_name(entry->st_uid, n));
                return buf;
        }
        return NULL;
}

static int refuse(struct al_error *err, const char *what, const char *path, const char *comp,
                  const char *why)
{
        return al_error_set_message(
            err, EPERM,
            "%s %s: %s %s, so another user could swap what the path names before Airlock, "
            "running as root, uses it; give a path whose directories only root (or the user "
            "sudo runs for) can change, or run Airlock as the user who owns it",
            what, path, comp, why);
}

/* Append "/name" to the text path p (PATH_MAX), or go up one for "..". */
static int path_step(char *p, const char *name)
{
        if (STREQ(name, "..")) {
                char *s = strrchr(p, '/');
                if (s == p)
                        p[1] = '\0';
                else if (s)
                        *s = '\0';
                return 0;
        }
        size_t n = strlen(p);
        int w = snprintf(p + n, PATH_MAX - n, "%s%s", n > 1 ? "/" : "", name);
        return w < 0 || (size_t)w >= PATH_MAX - n ? -ENAMETOOLONG : 0;
}

int trusted_open(const char *path, uid_t caller, bool whole, char *real, const char *what,
                 struct al_error *err)
{
        if (!path || !*path)
                return al_error_set_message(err, EINVAL, "%s: no path", what);
        /* What is left to walk, links spliced in ahead of it. */
        _cleanup_free_ char *rest = NULL;
        if (path[0] != '/') {
                char cwd[PATH_MAX];
                if (!getcwd(cwd, sizeof(cwd)))
                        return al_error_set(err, errno, "%s %s: the current directory", what,
                                            path);
                rest = xasprintf("%s/%s", cwd, path);
        } else
                rest = xstrdup(path);
        _cleanup_close_ int cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (cur < 0)
                return al_error_set(err, errno, "%s %s: opening /", what, path);
        snprintf(real, PATH_MAX, "/");
        unsigned links = 0;
        char *s = rest;
        char why[160];
        for (;;) {
                while (*s == '/')
                        s++;
                if (!*s)
                        break;
                char *e = strchrnul(s, '/');
                bool last = !*e;
                *e = '\0';
                char name[NAME_MAX + 1];
                if (strlen(s) > NAME_MAX)
                        return al_error_set(err, ENAMETOOLONG, "%s %s", what, path);
                snprintf(name, sizeof(name), "%s", s);
                s = last ? e : e + 1;
                if (STREQ(name, "."))
                        continue;
                struct stat dst, est;
                if (fstat(cur, &dst) < 0)
                        return al_error_set(err, errno, "%s %s: %s", what, path, real);
                int fd = openat(cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return al_error_set(err, errno, "%s %s", what, path);
                if (fstat(fd, &est) < 0) {
                        int e2 = errno;
                        close(fd);
                        return al_error_set(err, e2, "%s %s", what, path);
                }
                /* ".." names the directory above one already walked, which
                 * nobody else could move (its own directory was checked). */
                const char *unsafe = STREQ(name, "..") ? NULL : why_unsafe(&dst, &est, caller, why);
                if (unsafe) {
                        close(fd);
                        return refuse(err, what, path, real, unsafe);
                }
                if (S_ISLNK(est.st_mode)) {
                        char target[PATH_MAX];
                        ssize_t n = readlinkat(fd, "", target, sizeof(target) - 1);
                        close(fd);
                        if (n < 0)
                                return al_error_set(err, errno, "%s %s", what, path);
                        target[n] = '\0';
                        if (++links > MAX_LINKS)
                                return al_error_set(err, ELOOP, "%s %s", what, path);
                        char *next = xasprintf("%s/%s", target, s);
                        free(rest);
                        rest = next;
                        s = rest;
                        if (target[0] == '/') {
                                int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
                                if (root < 0)
                                        return al_error_set(err, errno, "%s %s", what, path);
                                close(cur);
                                cur = root;
                                snprintf(real, PATH_MAX, "/");
                        }
                        continue;
                }
                if (!last && !S_ISDIR(est.st_mode)) {
                        close(fd);
                        return al_error_set(err, ENOTDIR, "%s %s", what, path);
                }
                int r = path_step(real, name);
                close(cur);
                cur = fd;
                if (r < 0)
                        return al_error_set(err, -r, "%s %s", what, path);
        }
        if (whole) {
                struct stat st;
                if (fstat(cur, &st) < 0)
                        return al_error_set(err, errno, "%s %s", what, path);
                if (trusted_stat_foreign(&st, caller)) {
                        char n[64];
                        if (!trusted_uid(st.st_uid, caller))
                                snprintf(why, sizeof(why), "is owned by uid %u (%s)",
                                         (unsigned)st.st_uid, uid_name(st.st_uid, n));
                        else
                                snprintf(why, sizeof(why), "is writable by other users");
                        return refuse(err, what, path, real, why);
                }
        }
        return TAKE_FD(cur);
}
