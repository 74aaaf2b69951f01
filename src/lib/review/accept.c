/* SPDX-License-Identifier: Apache-2.0 */
/* Accept (all of the changes, or those beneath named paths) and discard. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "review-internal.h"

/* A path as the user typed it, made relative to the workspace: "./a//b/"
 * → "a/b", "<workspace>/a" → "a", "." → "" (everything). */
static int normalize_request(const char *workspace, const char *in, char out[static PATH_MAX])
{
        size_t wl = strlen(workspace);
        while (wl > 1 && workspace[wl - 1] == '/')
                wl--;
        if (in[0] == '/') {
                if (strncmp(in, workspace, wl) != 0 || (in[wl] != '/' && in[wl] != '\0'))
                        return -EXDEV;
                in += wl;
        }
        size_t o = 0;
        for (const char *s = in; *s;) {
                while (*s == '/')
                        s++;
                if (!*s)
                        break;
                const char *e = strchrnul(s, '/');
                size_t n = (size_t)(e - s);
                if (n == 1 && s[0] == '.') {
                        s = e;
                        continue;
                }
                if (n == 2 && s[0] == '.' && s[1] == '.')
                        return -EINVAL;
                if (o + n + 2 > PATH_MAX)
                        return -ENAMETOOLONG;
                if (o)
                        out[o++] = '/';
                memcpy(out + o, s, n);
                o += n;
                s = e;
        }
        out[o] = '\0';
        return o == 0 || review_path_valid(out) ? 0 : -EINVAL;
}

static struct item *plan_find(struct plan *p, const char *path)
{
        size_t lo =
            sorted_first_at_or_after(p->v, p->n, sizeof(*p->v), offsetof(struct item, path), path);
        return lo < p->n && STREQ(p->v[lo].path, path) ? &p->v[lo] : NULL;
}

/* The directories an item needs: the items at each ancestor that make it a
 * directory (or clear a file out of the way). */
static void select_ancestors(struct plan *p, const char *path)
{
        char dir[PATH_MAX];
        snprintf(dir, sizeof(dir), "%s", path);
        for (;;) {
                char *slash = strrchr(dir, '/');
                if (!slash)
                        return;
                *slash = '\0';
                for (struct item *it = plan_find(p, dir);
                     it && it < p->v + p->n && STREQ(it->path, dir); it++)
                        if (it->op == OP_DIR || (it->op == OP_REMOVE && !S_ISDIR(it->host.mode)))
                                it->selected = true;
        }
}

/* Whether a diff shows the item: a directory that is created or removed
 * shows through what it holds, unless it is empty. */
static bool item_visible(struct plan *p, size_t i)
{
        const struct item *it = &p->v[i];
        bool dir_op = (it->op == OP_REMOVE && S_ISDIR(it->host.mode)) ||
                      (it->op == OP_DIR && !S_ISDIR(it->host.mode));
        if (!dir_op)
                return true;
        char child[PATH_MAX];
        if (snprintf(child, sizeof(child), "%s/", it->path) >= (int)sizeof(child))
                return true;
        size_t lo = i + 1, hi = p->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(p->v[mid].path, child) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return !(lo < p->n && review_is_beneath(p->v[lo].path, it->path));
}

static int same_as_proposed(struct review *rv, const struct item *it, bool *ret)
{
        *ret = false;
        if (it->op == OP_SYMLINK) {
                char a[PATH_MAX], b[PATH_MAX];
                if (!S_ISLNK(it->host.mode))
                        return 0;
                int r = review_read_link(rv->ws_fd, it->path, a);
                if (r >= 0)
                        r = review_read_link(rv->changes_fd, it->path, b);
                if (r < 0)
                        return r;
                *ret = STREQ(a, b);
                return 0;
        }
        if (!S_ISREG(it->host.mode) || (it->host.mode & 0777) != (it->mode & 0777))
                return 0;
        _cleanup_close_ int a =
            review_open_beneath(rv->ws_fd, it->path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        _cleanup_close_ int b =
            review_open_beneath(rv->changes_fd, it->path, O_RDONLY | O_NONBLOCK);
        if (a < 0)
                return a;
        if (b < 0)
                return b;
        return review_files_equal(a, b, ret);
}

struct applier {
        struct review *rv;
        struct review_report rep;
        struct al_error *err;
        bool root;
        struct linktab links; /* files of changes/ with several names */
        /* As root: the directories this accept made, by plan item (from
         * items), which the last pass gives their modes only if they are
         * still there. */
        const struct item *items;
        struct made_dir {
                bool made;
                dev_t dev;
                ino_t ino;
        } *made;
};

static void applier_done(struct applier *a)
{
        linktab_done(&a->links);
        free(a->made);
}

/* Running as root on someone's workspace, give the entry this accept made
 * (fd, opened on it) the owner of what it replaces, or of its directory.
 * Through the descriptor, never by name: the name is in a directory the
 * workspace's owner can rename in, and a hard link of a file of root's put
 * there in between would be given to them. */
static void inherit_owner(struct applier *a, int parent, int fd, const struct host *old)
{
        if (!a->root || fd < 0)
                return;
        uid_t uid;
        gid_t gid;
        struct stat st;
        if (old && old->mode) {
                uid = old->uid;
                gid = old->gid;
        } else if (fstat(parent, &st) == 0) {
                uid = st.st_uid;
                gid = st.st_gid;
        } else
                return;
        if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0) {
                /* Best effort: the content is what matters. */
        }
}

/* What this accept just made at name in parent, opened without following
 * it, when it is still that: a directory of ours with nothing in it, or,
 * with target, a symlink of ours holding target. -1 otherwise (the owner
 * then stays root's). */
static int open_made(int parent, const char *name, const char *target)
{
        int fd = openat(parent, name,
                        target ? O_PATH | O_NOFOLLOW | O_CLOEXEC
                               : O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -1;
        struct stat st;
        bool made = fstat(fd, &st) == 0 && st.st_uid == geteuid();
        if (made && target) {
                char now[PATH_MAX];
                ssize_t n = S_ISLNK(st.st_mode) ? readlinkat(fd, "", now, sizeof(now) - 1) : -1;
                made = n >= 0 && (size_t)n == strlen(target) && memcmp(now, target, (size_t)n) == 0;
        } else if (made) {
                char buf[256];
                long n = S_ISDIR(st.st_mode) ? syscall(SYS_getdents64, fd, buf, sizeof(buf)) : -1;
                /* "." and ".." only: 24 bytes each at most. */
                made = n >= 0 && n <= 48 && st.st_nlink == 2;
        }
        if (!made) {
                close(fd);
                return -1;
        }
        return fd;
}

static int open_parent(struct applier *a, const char *path, char dir[static PATH_MAX],
                       const char **ret_name)
{
        *ret_name = review_split_path(path, dir);
        int fd = review_open_beneath(a->rv->ws_fd, dir, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return al_error_set(a->err, fd, "opening \"%s\" in the workspace",
                                    dir[0] ? dir : ".");
        return fd;
}

static int apply_remove(struct applier *a, const struct item *it)
{
        char dir[PATH_MAX];
        const char *name = review_split_path(it->path, dir);
        _cleanup_close_ int parent = review_open_beneath(a->rv->ws_fd, dir, O_PATH | O_DIRECTORY);
        if (parent == -ENOENT)
                return 0;
        if (parent < 0)
                return al_error_set(a->err, parent, "opening \"%s\" in the workspace",
                                    dir[0] ? dir : ".");
        struct stat st;
        if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0
                                       : al_error_set(a->err, errno, "inspecting \"%s\"", it->path);
        if (unlinkat(parent, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0) {
                if (errno == ENOTEMPTY || errno == EEXIST)
                        return al_error_set_message(
                            a->err, EBUSY, "\"%s\" changed on the host while accepting", it->path);
                return al_error_set(a->err, errno, "removing \"%s\"", it->path);
        }
        if (!S_ISDIR(st.st_mode))
                a->rep.removed++;
        return 0;
}

static int apply_dir(struct applier *a, const struct item *it)
{
        char dir[PATH_MAX];
        const char *name;
        _cleanup_close_ int parent = open_parent(a, it->path, dir, &name);
        if (parent < 0)
                return parent;
        struct stat st;
        if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (S_ISDIR(st.st_mode))
                        return 0; /* the mode is set in the last pass */
                return al_error_set_message(a->err, EBUSY,
                                            "\"%s\" changed on the host while accepting", it->path);
        }
        if (errno != ENOENT)
                return al_error_set(a->err, errno, "inspecting \"%s\"", it->path);
        /* Owner-writable until its contents are in place. */
        if (mkdirat(parent, name, 0700) < 0)
                return al_error_set(a->err, errno, "creating the directory \"%s\"", it->path);
        if (a->root) {
                _cleanup_close_ int made = open_made(parent, name, NULL);
                inherit_owner(a, parent, made, NULL);
                struct stat mst;
                if (made >= 0 && fstat(made, &mst) == 0)
                        a->made[it - a->items] =
                            (struct made_dir){.made = true, .dev = mst.st_dev, .ino = mst.st_ino};
        }
        a->rep.dirs++;
        return 0;
}

static int make_temp(int parent, char name[static 32], int *ret_fd)
{
        char hex[17];
        for (int tries = 0; tries < 16; tries++) {
                int r = random_hex(hex, 16);
                if (r < 0)
                        return r;
                snprintf(name, 32, ".airlock-%s", hex);
                if (!ret_fd)
                        return 0;
                int fd = openat(parent, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                0600);
                if (fd >= 0) {
                        *ret_fd = fd;
                        return 0;
                }
                if (errno != EEXIST)
                        return -errno;
        }
        return -EEXIST;
}

/* Make name in parent a hard link of the file this accept wrote first for
 * slot's inode. 0 when done, 1 when that file is not there as it was
 * written (the caller copies instead), or an error. */
static int apply_link(struct applier *a, const struct item *it, int parent, const char *name,
                      const struct link_slot *slot)
{
        _cleanup_close_ int first = review_open_beneath(a->rv->ws_fd, slot->path, O_PATH);
        struct stat st;
        if (first < 0 || fstat(first, &st) < 0 || !S_ISREG(st.st_mode) ||
            st.st_dev != slot->to_dev || st.st_ino != slot->to_ino)
                return 1;
        char proc[64], tmp[32];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", first);
        for (int tries = 0;; tries++) {
                int r = make_temp(parent, tmp, NULL);
                if (r < 0)
                        return al_error_set(a->err, r, "creating a link");
                if (linkat(AT_FDCWD, proc, parent, tmp, AT_SYMLINK_FOLLOW) == 0)
                        break;
                if (errno != EEXIST || tries >= 16)
                        return 1;
        }
        if (renameat(parent, tmp, parent, name) < 0) {
                int e = errno;
                unlinkat(parent, tmp, 0);
                if (e == EISDIR || e == ENOTEMPTY || e == EEXIST)
                        return al_error_set_message(
                            a->err, EBUSY, "\"%s\" changed on the host while accepting", it->path);
                return al_error_set(a->err, e, "writing \"%s\"", it->path);
        }
        a->rep.written++;
        return 0;
}

static int apply_file(struct applier *a, const struct item *it)
{
        char dir[PATH_MAX], tmp[32];
        const char *name;
        _cleanup_close_ int parent = open_parent(a, it->path, dir, &name);
        if (parent < 0)
                return parent;
        _cleanup_close_ int src =
            review_open_beneath(a->rv->changes_fd, it->path, O_RDONLY | O_NONBLOCK);
        if (src < 0)
                return al_error_set(a->err, src, "opening \"%s\" in changes/", it->path);
        struct stat st;
        if (fstat(src, &st) < 0 || !S_ISREG(st.st_mode))
                return al_error_set_message(a->err, EBADMSG, "\"%s\" in changes/ is not a file",
                                            it->path);

        /* Names the capture kept as hard links of one file become links of
         * one file in the workspace too, not a copy each. */
        struct link_slot *slot =
            st.st_nlink > 1 ? link_find(&a->links, st.st_dev, st.st_ino) : NULL;
        if (slot && slot->path) {
                int r = apply_link(a, it, parent, name, slot);
                if (r <= 0)
                        return r;
        }

        _cleanup_close_ int fd = -1;
        int r = make_temp(parent, tmp, &fd);
        if (r < 0)
                return al_error_set(a->err, r, "creating a file in \"%s\"", dir[0] ? dir : ".");
        uint64_t bytes = 0;
        r = review_copy_data(src, fd, UINT64_MAX, &bytes);
        struct stat wst;
        if (r >= 0 && slot && fstat(fd, &wst) == 0)
                link_set(&a->links, slot,
                         &(struct link_slot){.dev = st.st_dev,
                                             .ino = st.st_ino,
                                             .to_dev = wst.st_dev,
                                             .to_ino = wst.st_ino,
                                             .path = it->path});
        /* Permission bits only: never a set-id or sticky bit. */
        if (r >= 0 && fchmod(fd, it->mode & 0777) < 0)
                r = -errno;
        if (r >= 0) {
                inherit_owner(a, parent, fd, &it->host);
                r = close(TAKE_FD(fd)) < 0 ? -errno : 0;
        }
        if (r >= 0 && renameat(parent, tmp, parent, name) < 0)
                r = errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST ? -EBUSY : -errno;
        if (r < 0) {
                unlinkat(parent, tmp, 0);
                if (r == -EBUSY)
                        return al_error_set(a->err, r, "\"%s\" changed on the host while accepting",
                                            it->path);
                return al_error_set(a->err, r, "writing \"%s\"", it->path);
        }
        a->rep.written++;
        a->rep.bytes += bytes;
        return 0;
}

static int apply_symlink(struct applier *a, const struct item *it)
{
        char dir[PATH_MAX], tmp[32], target[PATH_MAX];
        const char *name;
        _cleanup_close_ int parent = open_parent(a, it->path, dir, &name);
        if (parent < 0)
                return parent;
        int r = review_read_link(a->rv->changes_fd, it->path, target);
        if (r < 0)
                return al_error_set(a->err, r, "reading \"%s\" in changes/", it->path);
        for (int tries = 0;; tries++) {
                r = make_temp(parent, tmp, NULL);
                if (r < 0)
                        return al_error_set(a->err, r, "creating a symlink");
                if (symlinkat(target, parent, tmp) == 0)
                        break;
                if (errno != EEXIST || tries >= 16)
                        return al_error_set(a->err, errno, "creating the symlink \"%s\"", it->path);
        }
        if (a->root) {
                _cleanup_close_ int made = open_made(parent, tmp, target);
                inherit_owner(a, parent, made, &it->host);
        }
        if (renameat(parent, tmp, parent, name) < 0) {
                r = errno;
                unlinkat(parent, tmp, 0);
                if (r == EISDIR || r == ENOTEMPTY || r == EEXIST)
                        return al_error_set_message(
                            a->err, EBUSY, "\"%s\" changed on the host while accepting", it->path);
                return al_error_set(a->err, r, "writing the symlink \"%s\"", it->path);
        }
        a->rep.written++;
        return 0;
}

static bool dir_is_planned(const struct applier *a, const struct item *it, const struct stat *st)
{
        if (S_ISDIR(it->host.mode))
                return st->st_dev == it->host.dev && st->st_ino == it->host.ino;
        const struct made_dir *m = &a->made[it - a->items];
        return m->made && m->dev == st->st_dev && m->ino == st->st_ino;
}

static int apply_dir_mode(struct applier *a, const struct item *it)
{
        _cleanup_close_ int fd =
            review_open_beneath(a->rv->ws_fd, it->path, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return al_error_set(a->err, fd, "opening \"%s\" in the workspace", it->path);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(a->err, errno, "inspecting \"%s\"", it->path);
        if ((st.st_mode & 0777) == (it->mode & 0777))
                return 0;
        /* As root, only the directory the plan saw or the one this accept
         * made: the workspace's owner can rename in it, and a
         * directory of root's put at that name must keep its mode. */
        if (a->root && !dir_is_planned(a, it, &st))
                return al_error_set_message(
                    a->err, EBUSY, "\"%s\" changed on the host while accepting", it->path);
        /* The directory's own set-id bits stay; the agent's never apply. */
        if (fchmod(fd, (st.st_mode & 07000) | (it->mode & 0777)) < 0)
                return al_error_set(a->err, errno, "setting the mode of \"%s\"", it->path);
        if (S_ISDIR(it->host.mode))
                a->rep.dirs++;
        return 0;
}

static void record_paths(json_t *meta, const char *key, const struct strarr *paths)
{
        json_t *acc = json_object_get(meta, key);
        if (!acc) {
                acc = json_array();
                json_object_set_new(meta, key, acc);
        }
        for (size_t i = 0; i < paths->n; i++) {
                size_t k;
                json_t *v;
                bool dup = false;
                json_array_foreach(acc, k, v) dup = dup || STREQ(json_string_value(v), paths->v[i]);
                if (!dup)
                        json_array_append_new(acc, json_string(paths->v[i]));
        }
}

/* Select the pending changes `paths` name (all of them when n is 0), with
 * their ancestors, into p; the normalized requests go into req. A path
 * outside the workspace, malformed, or naming no pending change fails the
 * whole request, each named. */
static int select_requests(struct review *rv, struct plan *p, char *const *paths, size_t n,
                           const char *verb, struct strarr *req, struct al_error *err)
{
        for (size_t i = 0; i < n; i++) {
                char norm[PATH_MAX];
                int r = normalize_request(rv->workspace, paths[i], norm);
                if (r == -EXDEV)
                        return al_error_set_message(err, EINVAL,
                                                    "%s: \"%s\" is outside the workspace %s", verb,
                                                    paths[i], rv->workspace);
                if (r < 0)
                        return al_error_set_message(err, EINVAL, "%s: bad path \"%s\"", verb,
                                                    paths[i]);
                strarr_add(req, norm);
        }
        char unknown[AL_ERROR_MAX] = "";
        size_t n_unknown = 0;
        if (n == 0)
                strarr_add(req, "");
        for (size_t k = 0; k < req->n; k++) {
                bool any = false;
                for (size_t i = 0; i < p->n; i++)
                        if (plan_request_takes(req->v[k], p->v[i].path))
                                any = p->v[i].selected = true;
                        else if (n > 0 && review_is_beneath(p->v[i].path, req->v[k]))
                                any = true; /* held back: reported, not "no change" */
                if (!any && n > 0) {
                        size_t ul = strlen(unknown);
                        snprintf(unknown + ul, sizeof(unknown) - ul, "%s\"%s\"",
                                 n_unknown ? ", " : "", paths[k]);
                        n_unknown++;
                }
        }
        if (n_unknown)
                return al_error_set_message(err, ENOENT, "%s: no pending change at %s", verb,
                                            unknown);
        for (size_t i = 0; i < p->n; i++)
                if (p->v[i].selected)
                        select_ancestors(p, p->v[i].path);
        return 0;
}

int review_accept(const char *state_dir, char *const *paths, size_t n, struct review_report *ret,
                  struct al_error *err)
{
        _cleanup_(review_done) struct review rv;
        _cleanup_(plan_done) struct plan p = {0};
        _cleanup_(strarr_done) struct strarr req = {0};
        int r = review_load(state_dir, true, &rv, err);
        if (r < 0)
                return r;
        r = plan_build(&rv, &p, err);
        if (r < 0)
                return r;

        r = select_requests(&rv, &p, paths, n, "accept", &req, err);
        if (r < 0)
                return r;
        size_t selected = 0;

        /* Nothing is applied unless every workspace entry it replaces or
         * removes is as it was when the sandbox started. */
        for (size_t i = 0; i < p.n; i++) {
                struct item *it = &p.v[i];
                if (!it->selected)
                        continue;
                selected++;
                if (it->op == OP_DIR || !it->host.mode || S_ISDIR(it->host.mode) ||
                    it->host.ctime_ns <= rv.started_ns)
                        continue;
                if (it->op != OP_REMOVE) {
                        bool same;
                        r = same_as_proposed(&rv, it, &same);
                        if (r < 0)
                                return al_error_set(err, r, "accept: reading \"%s\"", it->path);
                        if (same) {
                                it->noop = true;
                                continue;
                        }
                }
                return al_error_set_message(
                    err, EBUSY, "accept: %s changed on the host since the sandbox started",
                    it->path);
        }

        _cleanup_(applier_done) struct applier a = {.rv = &rv, .err = err, .root = geteuid() == 0};
        if (a.root) {
                a.items = p.v;
                a.made = xcalloc(p.n + 1, sizeof(*a.made));
        }
        /* Removals first, deepest first; then directories before what goes
         * in them; directory modes last so that a read-only one can be
         * filled. */
        for (size_t i = p.n; i-- > 0;)
                if (p.v[i].selected && p.v[i].op == OP_REMOVE &&
                    (r = apply_remove(&a, &p.v[i])) < 0)
                        return review_xdev_explain(al_error_wrap(err, "accept"), err);
        for (size_t i = 0; i < p.n; i++) {
                const struct item *it = &p.v[i];
                if (!it->selected || it->noop || it->op == OP_REMOVE)
                        continue;
                if (it->op == OP_DIR)
                        r = apply_dir(&a, it);
                else if (it->op == OP_FILE)
                        r = apply_file(&a, it);
                else
                        r = apply_symlink(&a, it);
                if (r < 0)
                        return review_xdev_explain(al_error_wrap(err, "accept"), err);
        }
        for (size_t i = p.n; i-- > 0;)
                if (p.v[i].selected && p.v[i].op == OP_DIR && (r = apply_dir_mode(&a, &p.v[i])) < 0)
                        return review_xdev_explain(al_error_wrap(err, "accept"), err);
        _cleanup_close_ int sync_fd = review_open_beneath(rv.ws_fd, "", O_RDONLY | O_DIRECTORY);
        if (sync_fd < 0 || syncfs(sync_fd) < 0)
                return al_error_set(err, sync_fd < 0 ? -sync_fd : errno,
                                    "accept: syncing the workspace");

        for (size_t i = 0; i < p.n; i++)
                if (!p.v[i].selected && item_visible(&p, i)) {
                        a.rep.remaining++;
                        if (review_hidden_end(p.v[i].path))
                                a.rep.held++;
                }
        a.rep.complete = selected == p.n;
        if (a.rep.complete)
                json_object_set_new(rv.meta, "state", json_string("accepted"));
        else
                record_paths(rv.meta, "accepted", &req);
        r = review_write_json_at(rv.dir_fd, META_FILE, rv.meta);
        if (r < 0)
                return al_error_set(err, r, "accept: writing %s/%s", state_dir, META_FILE);
        if (ret)
                *ret = a.rep;
        return 0;
}

int review_discard(const char *state_dir, char *const *paths, size_t n, size_t *ret_remaining,
                   struct al_error *err)
{
        _cleanup_(review_done) struct review rv;
        if (ret_remaining)
                *ret_remaining = 0;
        if (n > 0) {
                /* Some paths: the host keeps its own there; the rest stays
                 * pending, and when nothing does, the whole is discarded. */
                _cleanup_(plan_done) struct plan p = {0};
                _cleanup_(strarr_done) struct strarr req = {0};
                int r = review_load(state_dir, true, &rv, err);
                if (r < 0)
                        return r;
                r = plan_build(&rv, &p, err);
                if (r < 0)
                        return r;
                r = select_requests(&rv, &p, paths, n, "discard", &req, err);
                if (r < 0)
                        return r;
                size_t remaining = 0;
                for (size_t i = 0; i < p.n; i++)
                        if (!p.v[i].selected && item_visible(&p, i))
                                remaining++;
                if (remaining > 0) {
                        record_paths(rv.meta, "discarded", &req);
                        r = review_write_json_at(rv.dir_fd, META_FILE, rv.meta);
                        if (r < 0)
                                return al_error_set(err, r, "discard: writing %s/%s", state_dir,
                                                    META_FILE);
                        if (ret_remaining)
                                *ret_remaining = remaining;
                        return 0;
                }
                review_done(&rv);
        }
        int r = review_open(state_dir, true, &rv, err);
        if (r < 0)
                return r;
        if (STREQ(rv.state, "accepted"))
                return al_error_set_message(err, EALREADY,
                                            "discard: sandbox %s was accepted already", rv.id);
        json_object_set_new(rv.meta, "state", json_string("discarded"));
        r = review_write_json_at(rv.dir_fd, META_FILE, rv.meta);
        if (r < 0)
                return al_error_set(err, r, "discard: writing %s/%s", state_dir, META_FILE);
        r = review_remove_tree_at(rv.dir_fd, CHANGES_DIR, 0);
        if (r < 0)
                return al_error_set(err, r, "discard: removing %s/%s", state_dir, CHANGES_DIR);
        return 0;
}
