/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files-deny.h"
#include "files-watch.h"
#include "fs.h"
#include "util.h"

#define WATCH_MASK                                                                                 \
        (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF |        \
         IN_MOVE_SELF | IN_ONLYDIR)
#define WATCH_DEPTH_MAX 64

struct watched {
        int wd;
        char *path; /* beneath the workspace; "." for the workspace itself */
        dev_t dev;  /* the directory watched */
        ino_t ino;
};

/* A name a denied file was renamed to (files_deny_named knows the names the
 * deny set was made with): its later events are left out too. */
#define HIDDEN_MAX 64
struct hidden {
        dev_t dev;
        ino_t ino;
        char *name;
};

/* What the watches of this process hold, in all and per owner. */
struct owner_use {
        char *key;
        size_t dirs;
};
static struct owner_use *owners;
static size_t n_owners;
static size_t total_dirs;

static size_t total_limit(void)
{
        static size_t limit;
        if (limit)
                return limit;
        limit = FILES_WATCH_TOTAL_MAX;
        _cleanup_free_ char *s = NULL;
        uint64_t v;
        if (read_file_at(AT_FDCWD, "/proc/sys/fs/inotify/max_user_watches", 64, &s, NULL) >= 0) {
                s[strcspn(s, "\n")] = '\0';
                if (safe_atou64(s, &v) >= 0 && v / 4 < limit)
                        limit = v / 4 ? (size_t)(v / 4) : 1;
        }
        return limit;
}

static struct owner_use *owner_get(const char *key)
{
        for (size_t i = 0; i < n_owners; i++)
                if (STREQ(owners[i].key, key))
                        return &owners[i];
        owners = xrealloc(owners, n_owners + 1, sizeof(*owners));
        owners[n_owners] = (struct owner_use){.key = xstrdup(key)};
        return &owners[n_owners++];
}

static void owner_refund(const char *key, size_t n)
{
        total_dirs -= n < total_dirs ? n : total_dirs;
        for (size_t i = 0; i < n_owners; i++)
                if (STREQ(owners[i].key, key)) {
                        owners[i].dirs -= n < owners[i].dirs ? n : owners[i].dirs;
                        if (owners[i].dirs == 0) {
                                free(owners[i].key);
                                owners[i] = owners[--n_owners];
                        }
                        return;
                }
}

struct files_watch {
        char *owner;
        struct files_deny *deny; /* directories never entered, or NULL */
        int ifd;
        int root;
        bool recursive;
        bool overflowed; /* the directory limit was hit: said once */
        bool gone;       /* the watched directory itself was removed or moved */
        int root_wd;
        struct watched *dirs;
        size_t n_dirs;
        struct hidden hidden[HIDDEN_MAX];
        size_t n_hidden;
        uint32_t denied_cookie; /* a denied file's rename: its MOVED_TO is left out */
};

static char *join(const char *dir, const char *name)
{
        return STREQ(dir, ".") ? xstrdup(name) : xasprintf("%s/%s", dir, name);
}

static struct watched *find_wd(struct files_watch *w, int wd)
{
        for (size_t i = 0; i < w->n_dirs; i++)
                if (w->dirs[i].wd == wd)
                        return &w->dirs[i];
        return NULL;
}

/* Watch the directory `fd` (owned here) as `path`, and its subdirectories
 * when recursive. inotify takes a path: the fd's /proc/self/fd link names
 * exactly the directory opened, whatever is renamed or swapped meanwhile. */
static int add_dir(struct files_watch *w, int fd, const char *path, unsigned depth)
{
        /* A denied directory moved into the tree after the request was
         * checked: what was opened is never watched. */
        struct stat st;
        if (fstat(fd, &st) < 0 || (w->deny && files_deny_has(w->deny, &st))) {
                close(fd);
                return 0;
        }
        struct owner_use *o = owner_get(w->owner);
        if (w->n_dirs >= FILES_WATCH_DIRS_MAX || total_dirs >= total_limit() ||
            o->dirs >= FILES_WATCH_OWNER_MAX) {
                if (o->dirs == 0)
                        owner_refund(w->owner, 0);
                close(fd);
                return -ENOSPC;
        }
        char proc[64];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        int wd = inotify_add_watch(w->ifd, proc, WATCH_MASK);
        if (wd < 0) {
                int e = errno;
                if (o->dirs == 0)
                        owner_refund(w->owner, 0);
                close(fd);
                return -e;
        }
        if (!find_wd(w, wd)) {
                w->dirs = xrealloc(w->dirs, w->n_dirs + 1, sizeof(*w->dirs));
                w->dirs[w->n_dirs++] = (struct watched){
                    .wd = wd, .path = xstrdup(path), .dev = st.st_dev, .ino = st.st_ino};
                o->dirs++;
                total_dirs++;
        }
        if (!w->recursive || depth >= WATCH_DEPTH_MAX) {
                close(fd);
                return 0;
        }
        DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return 0;
        }
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, "..") || de->d_type != DT_DIR)
                        continue;
                int sub = fs_openat2(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                                     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                if (sub < 0)
                        continue; /* gone, or a link: never followed */
                _cleanup_free_ char *p = join(path, de->d_name);
                r = add_dir(w, sub, p, depth + 1);
        }
        closedir(d);
        return r == -ENOSPC ? r : 0;
}

int files_watch_new(int root, const char *rel, bool recursive, const char *owner,
                    struct files_watch **ret, struct al_error *err)
{
        return files_watch_new_deny(root, rel, recursive, owner, NULL, ret, err);
}

int files_watch_new_deny(int root, const char *rel, bool recursive, const char *owner,
                         struct files_deny *deny, struct files_watch **ret, struct al_error *err)
{
        int fd = fs_openat2(root, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                            RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        int r = 0;
        if (fd == -EXDEV)
                r = al_error_set_message(err, EXDEV, "%s: leads out of the workspace", rel);
        else if (fd == -ELOOP)
                r = al_error_set_message(err, ELOOP, "%s: a symbolic link is in the way", rel);
        else if (fd < 0)
                r = al_error_set(err, -fd, "%s", rel);
        else /* What was opened, wherever the path led by then. */
                r = files_deny_check_fd(deny, root, fd, rel, err);
        if (r < 0) {
                if (fd >= 0)
                        close(fd);
                files_deny_free(deny);
                return r;
        }
        struct files_watch *w = xcalloc(1, sizeof(*w));
        w->deny = deny;
        w->owner = xstrdup(owner ? owner : "");
        w->root = -1;
        w->recursive = recursive;
        w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->ifd < 0) {
                int e = errno;
                close(fd);
                files_watch_free(w);
                return al_error_set(err, e, "inotify");
        }
        w->root = fcntl(root, F_DUPFD_CLOEXEC, 3);
        r = add_dir(w, fd, rel, 0);
        w->root_wd = w->n_dirs > 0 ? w->dirs[0].wd : -1;
        if (r == -ENOSPC && w->n_dirs == 0) {
                files_watch_free(w);
                return al_error_set_message(
                    err, ENOSPC,
                    "the daemon's directory watches are spent (%zu at most in all, %d per "
                    "grant); end a watch first",
                    total_limit(), FILES_WATCH_OWNER_MAX);
        }
        if (r == -ENOSPC)
                w->overflowed = true;
        else if (r < 0) {
                files_watch_free(w);
                return al_error_set(err, -r, "watching %s", rel);
        }
        *ret = w;
        return 0;
}

int files_watch_fd(const struct files_watch *w)
{
        return w->ifd;
}

static void emit(json_t *out, const char *type, const char *path, bool dir)
{
        json_t *p = json_string(path);
        if (!p)
                return; /* not UTF-8: left out */
        json_array_append_new(out,
                              json_pack("{s:s, s:o, s:b}", "type", type, "path", p, "dir", dir));
}

/* A directory renamed within the tree: its watches' paths follow. */
static void rename_paths(struct files_watch *w, const char *from, const char *to)
{
        size_t n = strlen(from);
        for (size_t i = 0; i < w->n_dirs; i++) {
                const char *p = w->dirs[i].path;
                if (strncmp(p, from, n) != 0 || (p[n] != '\0' && p[n] != '/'))
                        continue;
                char *np = xasprintf("%s%s", to, p + n);
                free(w->dirs[i].path);
                w->dirs[i].path = np;
        }
}

/* A directory moved out of the tree: its watches go, or their events
 * would carry paths it no longer has. */
static void drop_prefix(struct files_watch *w, const char *prefix)
{
        size_t n = strlen(prefix);
        for (size_t i = 0; i < w->n_dirs;) {
                const char *p = w->dirs[i].path;
                if (strncmp(p, prefix, n) == 0 && (p[n] == '\0' || p[n] == '/')) {
                        inotify_rm_watch(w->ifd, w->dirs[i].wd);
                        free(w->dirs[i].path);
                        w->dirs[i] = w->dirs[--w->n_dirs];
                        owner_refund(w->owner, 1);
                } else
                        i++;
        }
}

static void drop_wd(struct files_watch *w, int wd)
{
        for (size_t i = 0; i < w->n_dirs; i++)
                if (w->dirs[i].wd == wd) {
                        free(w->dirs[i].path);
                        w->dirs[i] = w->dirs[--w->n_dirs];
                        owner_refund(w->owner, 1);
                        return;
                }
}

/* Whether an event on name in wd is about a denied file: the host's
 * writes to a file the sandbox may not see are not the watch's to tell
 * (not even when). Left out. */
static bool denied(struct files_watch *w, const struct watched *wd, const char *name)
{
        if (!w->deny)
                return false;
        for (size_t i = 0; i < w->n_hidden; i++)
                if (w->hidden[i].dev == wd->dev && w->hidden[i].ino == wd->ino &&
                    STREQ(w->hidden[i].name, name))
                        return true;
        struct stat dst = {.st_dev = wd->dev, .st_ino = wd->ino}, st;
        _cleanup_close_ int dfd =
            fs_openat2(w->root, wd->path, O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
                       RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (dfd >= 0 && (fstat(dfd, &st) < 0 || st.st_dev != wd->dev || st.st_ino != wd->ino)) {
                close(dfd); /* not the directory watched any more: names only */
                dfd = -1;
        }
        return files_deny_named(w->deny, dfd, &dst, name);
}

static void hide(struct files_watch *w, const struct watched *wd, const char *name)
{
        struct hidden *h = &w->hidden[w->n_hidden < HIDDEN_MAX ? w->n_hidden++ : HIDDEN_MAX - 1];
        free(h->name);
        *h = (struct hidden){.dev = wd->dev, .ino = wd->ino, .name = xstrdup(name)};
}

int files_watch_read(struct files_watch *w, json_t *out)
{
        /* Large enough for a batch, aligned for the records. */
        char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
        if (w->overflowed) {
                json_array_append_new(out, json_pack("{s:s, s:s}", "type", "overflow", "reason",
                                                     "more directories than a watch takes"));
                w->overflowed = false;
        }
        ssize_t n = read(w->ifd, buf, sizeof(buf));
        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        /* A rename is a MOVED_FROM and a MOVED_TO with one cookie; the
         * kernel queues them next to each other, one after the other: a
         * read between the two ends on the MOVED_FROM. Then what follows
         * is read too, after waiting at most a millisecond for it, before
         * the MOVED_FROM counts as a move out of the tree (a delete). */
        uint32_t cookie = 0;
        char *moved_from = NULL;
        bool moved_dir = false;
        bool read_on = false;
more:
        for (char *p = buf; p < buf + n;) {
                struct inotify_event *ev = (struct inotify_event *)p;
                p += sizeof(*ev) + ev->len;
                if (ev->mask & IN_Q_OVERFLOW) {
                        json_array_append_new(out, json_pack("{s:s, s:s}", "type", "overflow",
                                                             "reason", "the kernel's queue"));
                        continue;
                }
                struct watched *wd = find_wd(w, ev->wd);
                if (ev->mask & IN_IGNORED) {
                        drop_wd(w, ev->wd);
                        continue;
                }
                if (ev->wd == w->root_wd && (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF))) {
                        /* Nothing after this is under the path asked for. */
                        w->gone = true;
                        break;
                }
                if (!wd || ev->len == 0 || (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)))
                        continue;
                if ((ev->mask & IN_MOVED_TO) && w->denied_cookie &&
                    ev->cookie == w->denied_cookie) {
                        hide(w, wd, ev->name); /* a denied file, renamed */
                        w->denied_cookie = 0;
                        continue;
                }
                if (denied(w, wd, ev->name)) {
                        if (ev->mask & IN_MOVED_FROM)
                                w->denied_cookie = ev->cookie;
                        continue;
                }
                bool dir = ev->mask & IN_ISDIR;
                _cleanup_free_ char *path = join(wd->path, ev->name);
                if (moved_from && !((ev->mask & IN_MOVED_TO) && ev->cookie == cookie)) {
                        emit(out, "delete", moved_from, moved_dir); /* moved out */
                        if (moved_dir)
                                drop_prefix(w, moved_from);
                        free(moved_from);
                        moved_from = NULL;
                }
                if (ev->mask & IN_MOVED_FROM) {
                        moved_from = TAKE_PTR(path);
                        cookie = ev->cookie;
                        moved_dir = dir;
                } else if (ev->mask & IN_MOVED_TO) {
                        if (moved_from) {
                                json_t *f = json_string(moved_from), *t = json_string(path);
                                if (f && t)
                                        json_array_append_new(
                                            out, json_pack("{s:s, s:o, s:o, s:b}", "type", "rename",
                                                           "from", f, "path", t, "dir", dir));
                                else {
                                        json_decref(f);
                                        json_decref(t);
                                }
                                if (dir)
                                        rename_paths(w, moved_from, path);
                                free(moved_from);
                                moved_from = NULL;
                        } else
                                emit(out, "create", path, dir); /* moved in */
                } else if (ev->mask & IN_CREATE) {
                        emit(out, "create", path, dir);
                        if (dir && w->recursive) {
                                int fd = fs_openat2(
                                    w->root, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                                    RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
                                if (fd >= 0 && add_dir(w, fd, path, 0) == -ENOSPC)
                                        w->overflowed = true;
                        }
                } else if (ev->mask & IN_MODIFY) {
                        /* Coalesced: one "modify" for a run of writes. */
                        json_t *last = json_array_get(out, json_array_size(out) - 1);
                        const char *lt = json_string_value(json_object_get(last, "type"));
                        const char *lp = json_string_value(json_object_get(last, "path"));
                        if (!(lt && lp && STREQ(lt, "modify") && STREQ(lp, path)))
                                emit(out, "modify", path, dir);
                } else if (ev->mask & IN_DELETE)
                        emit(out, "delete", path, dir);
        }
        if (moved_from && !w->gone && !read_on) {
                read_on = true;
                struct pollfd pf = {.fd = w->ifd, .events = POLLIN};
                if (poll(&pf, 1, 1) == 1 && (n = read(w->ifd, buf, sizeof(buf))) > 0)
                        goto more;
        }
        if (moved_from) {
                emit(out, "delete", moved_from, moved_dir);
                if (moved_dir)
                        drop_prefix(w, moved_from);
                free(moved_from);
        }
        return w->gone || w->n_dirs == 0 ? -ENOENT : 1;
}

struct files_watch *files_watch_free(struct files_watch *w)
{
        if (!w)
                return NULL;
        if (w->ifd >= 0)
                close(w->ifd);
        if (w->root >= 0)
                close(w->root);
        for (size_t i = 0; i < w->n_dirs; i++)
                free(w->dirs[i].path);
        for (size_t i = 0; i < w->n_hidden; i++)
                free(w->hidden[i].name);
        if (w->owner)
                owner_refund(w->owner, w->n_dirs);
        free(w->owner);
        free(w->dirs);
        files_deny_free(w->deny);
        free(w);
        return NULL;
}
