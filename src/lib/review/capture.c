/* SPDX-License-Identifier: Apache-2.0 */
/* Capture: the overlay's upper layer copied into changes/ and described in
 * the manifest, nothing in it trusted, under the caps: depth, entry count
 * (review.h) and what the copy may cost the host in bytes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "review-internal.h"

struct capture {
        int ws_fd;      /* -1 when the workspace is gone: everything is new */
        int changes_fd; /* changes/, where hard links are made */
        struct manifest m;
        struct review_summary sum;
        size_t count;
        uint64_t max_bytes; /* what the copy may cost the host */
        uint64_t charged;
        struct linktab links;
        char path[PATH_MAX];
        struct al_error *err;
};

/* What keeping an entry costs the host, charged before it is written: a
 * file its apparent size, so that a sparse file counts as what it becomes
 * wherever it is copied without holes, in whole blocks; a directory or a
 * symlink one block. */
#define CHARGE_BLOCK 4096u

static int capture_charge(struct capture *c, uint64_t size)
{
        uint64_t cost = size > UINT64_MAX - CHARGE_BLOCK
                            ? UINT64_MAX
                            : (size + CHARGE_BLOCK - 1) / CHARGE_BLOCK * CHARGE_BLOCK;
        if (cost < CHARGE_BLOCK)
                cost = CHARGE_BLOCK;
        if (cost > c->max_bytes || c->charged > c->max_bytes - cost)
                return al_error_set_message(
                    c->err, EDQUOT,
                    "keeping \"%s\" (%" PRIu64 " bytes, a sparse file at its full size) would "
                    "take the changes past limits.disk (%" PRIu64 " bytes); nothing was kept and "
                    "the workspace is unchanged. To keep such changes, raise limits.disk",
                    c->path, size, c->max_bytes);
        c->charged += cost;
        return 0;
}

static bool has_xattr(int fd, const char *name, const char *want)
{
        char buf[8];
        ssize_t n = fgetxattr(fd, name, buf, sizeof(buf));
        if (n < 0)
                return false;
        return !want || ((size_t)n == strlen(want) && memcmp(buf, want, (size_t)n) == 0);
}

static bool has_overlay_xattr(int fd, const char *what, const char *want)
{
        char name[64];
        snprintf(name, sizeof(name), "user.overlay.%s", what);
        if (has_xattr(fd, name, want))
                return true;
        snprintf(name, sizeof(name), "trusted.overlay.%s", what);
        return has_xattr(fd, name, want);
}

static void capture_skip(struct capture *c, size_t plen, const char *name, const char *reason)
{
        /* The name may not be printable: keep it escaped. */
        char buf[PATH_MAX * 4 + 1];
        size_t o = 0;
        memcpy(buf, c->path, plen);
        o = plen;
        if (plen)
                buf[o++] = '/';
        for (const unsigned char *s = (const unsigned char *)name; *s && o + 5 < sizeof(buf); s++) {
                if (*s < 0x20 || *s >= 0x7f || *s == '\\')
                        o += (size_t)snprintf(buf + o, sizeof(buf) - o, "\\x%02x", *s);
                else
                        buf[o++] = (char)*s;
        }
        buf[o] = '\0';
        if (!c->m.skipped)
                c->m.skipped = json_array();
        json_array_append_new(c->m.skipped, json_pack("{s:s, s:s}", "path", buf, "reason", reason));
        c->sum.skipped++;
}

static const char *special_kind(mode_t mode)
{
        if (S_ISFIFO(mode))
                return "named pipe";
        if (S_ISSOCK(mode))
                return "socket";
        if (S_ISCHR(mode))
                return "character device";
        if (S_ISBLK(mode))
                return "block device";
        return "unknown file type";
}

/* Open a file or directory of the upper layer for reading. The agent may
 * have taken away its owner's read permission, which stops an unprivileged
 * capture; the upper layer is about to go, so give it back there. */
static int open_upper(int dfd, const char *name, int flags, const struct stat *st)
{
        flags |= O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
        int fd = openat(dfd, name, flags);
        if (fd >= 0 || errno != EACCES || st->st_uid != geteuid())
                return fd;
        mode_t need = S_ISDIR(st->st_mode) ? S_IRUSR | S_IXUSR : S_IRUSR;
        if (fchmodat(dfd, name, (st->st_mode & 07777) | need, AT_SYMLINK_NOFOLLOW) < 0)
                return -1;
        return openat(dfd, name, flags);
}

static int capture_file(struct capture *c, int dfd, int out_fd, const char *name,
                        const struct stat *st, enum hstate ps)
{
        _cleanup_close_ int in = open_upper(dfd, name, O_NONBLOCK | O_NOCTTY, st);
        if (in < 0)
                return al_error_set(c->err, errno, "opening \"%s\" in the upper layer", c->path);
        struct stat st2;
        if (fstat(in, &st2) < 0)
                return al_error_set(c->err, errno, "reading \"%s\"", c->path);
        if (!S_ISREG(st2.st_mode) || st2.st_ino != st->st_ino || st2.st_dev != st->st_dev)
                return al_error_set_message(c->err, EAGAIN, "\"%s\" changed while being captured",
                                            c->path);
        if (has_overlay_xattr(in, "metacopy", NULL))
                return al_error_set_message(
                    c->err, EOPNOTSUPP,
                    "\"%s\" is a metadata-only copy-up, which review does not "
                    "support",
                    c->path);
        mode_t mode = st->st_mode & 0777;

        bool exists = false;
        if (ps != H_NONE) {
                struct host h;
                int r = review_host_stat(c->ws_fd, c->path, &h);
                exists = r >= 0 && h.mode != 0;
                if (ps == H_MERGE && exists && S_ISREG(h.mode) &&
                    (h.mode & 07777) == (st->st_mode & 07777)) {
                        _cleanup_close_ int hfd = review_open_beneath(
                            c->ws_fd, c->path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
                        bool same = false;
                        struct stat hst;
                        if (hfd >= 0 && fstat(hfd, &hst) == 0 && S_ISREG(hst.st_mode) &&
                            review_files_equal(in, hfd, &same) >= 0 && same)
                                return 0;
                }
        }

        /* A file with several names is copied once; its other names become
         * hard links to that copy, as they were in the upper layer. */
        struct link_slot *slot = NULL;
        if (st2.st_nlink > 1) {
                slot = link_find(&c->links, st2.st_dev, st2.st_ino);
                if (slot->path && linkat(c->changes_fd, slot->path, out_fd, name, 0) == 0) {
                        manifest_add(&c->m, c->path, T_FILE, st->st_mode);
                        if (exists)
                                c->sum.modified++;
                        else
                                c->sum.added++;
                        return 0;
                }
                if (slot->path && errno != EMLINK)
                        return al_error_set(c->err, errno, "linking \"%s\" in changes/", c->path);
        }
        int r = capture_charge(c, (uint64_t)st2.st_size);
        if (r < 0)
                return r;
        _cleanup_close_ int out =
            openat(out_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return al_error_set(c->err, errno, "creating \"%s\" in changes/", c->path);
        r = review_copy_data(in, out, (uint64_t)st2.st_size, &c->sum.bytes);
        if (r < 0)
                return al_error_set(c->err, r, "copying \"%s\"", c->path);
        if (fchmod(out, mode | 0600) < 0)
                return al_error_set(c->err, errno, "setting the mode of \"%s\"", c->path);
        if (slot)
                link_set(
                    &c->links, slot,
                    &(struct link_slot){.dev = st2.st_dev, .ino = st2.st_ino, .path = c->path});
        manifest_add(&c->m, c->path, T_FILE, st->st_mode);
        if (exists)
                c->sum.modified++;
        else
                c->sum.added++;
        return 0;
}

static int capture_symlink(struct capture *c, int dfd, int out_fd, const char *name, enum hstate ps)
{
        char target[PATH_MAX];
        ssize_t n = readlinkat(dfd, name, target, sizeof(target));
        if (n < 0)
                return al_error_set(c->err, errno, "reading the symlink \"%s\"", c->path);
        if (n >= (ssize_t)sizeof(target))
                return al_error_set_message(c->err, ENAMETOOLONG, "reading the symlink \"%s\"",
                                            c->path);
        target[n] = '\0';

        bool exists = false;
        if (ps != H_NONE) {
                struct host h;
                char old[PATH_MAX];
                exists = review_host_stat(c->ws_fd, c->path, &h) >= 0 && h.mode != 0;
                if (ps == H_MERGE && exists && S_ISLNK(h.mode) &&
                    review_read_link(c->ws_fd, c->path, old) >= 0 && STREQ(old, target))
                        return 0;
        }
        int r = capture_charge(c, (uint64_t)n);
        if (r < 0)
                return r;
        if (symlinkat(target, out_fd, name) < 0)
                return al_error_set(c->err, errno, "creating \"%s\" in changes/", c->path);
        manifest_add(&c->m, c->path, T_SYMLINK, 0777);
        if (exists)
                c->sum.modified++;
        else
                c->sum.added++;
        return 0;
}

/* Walk one upper directory (fd owned here) into out_fd. ps says whether the
 * workspace has this directory too: only where its entries show through
 * (H_MERGE) may an entry identical to the workspace's be left out. */
static int capture_dir(struct capture *c, int fd, int out_fd, size_t plen, unsigned depth,
                       enum hstate ps)
{
        _cleanup_(closedirp) DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return al_error_set(c->err, errno, "reading \"%s\" in the upper layer",
                                    plen ? c->path : ".");
        }
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                const char *name = de->d_name;
                if (STREQ(name, ".") || STREQ(name, ".."))
                        continue;
                if (++c->count > REVIEW_MAX_ENTRIES)
                        return al_error_set_message(c->err, E2BIG,
                                                    "the upper layer holds more than %d entries",
                                                    REVIEW_MAX_ENTRIES);
                c->path[plen] = '\0';
                if (!review_name_valid(name)) {
                        capture_skip(c, plen, name, "name not allowed");
                        continue;
                }
                size_t nlen = strlen(name);
                if (plen + 1 + nlen >= sizeof(c->path))
                        return al_error_set_message(c->err, ENAMETOOLONG, "a path beneath \"%s\"",
                                                    c->path);
                size_t len = plen;
                if (plen)
                        c->path[len++] = '/';
                memcpy(c->path + len, name, nlen + 1);
                len += nlen;

                struct stat st;
                if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return al_error_set(c->err, errno, "inspecting \"%s\"", c->path);

                int r = 0;
                if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
                        strarr_add(&c->m.deleted, c->path);
                        c->sum.deleted++;
                } else if (S_ISDIR(st.st_mode)) {
                        if (depth + 1 > REVIEW_MAX_DEPTH)
                                return al_error_set_message(
                                    c->err, ELOOP, "the upper layer is deeper than %d levels",
                                    REVIEW_MAX_DEPTH);
                        int sub = open_upper(dirfd(d), name, O_DIRECTORY, &st);
                        if (sub < 0)
                                return al_error_set(c->err, errno, "opening \"%s\"", c->path);
                        struct stat st2;
                        if (fstat(sub, &st2) < 0 || st2.st_ino != st.st_ino) {
                                close(sub);
                                return al_error_set_message(
                                    c->err, EAGAIN, "\"%s\" changed while being captured", c->path);
                        }
                        if (has_overlay_xattr(sub, "redirect", NULL)) {
                                close(sub);
                                return al_error_set_message(
                                    c->err, EOPNOTSUPP,
                                    "\"%s\" is a redirected (renamed) directory, "
                                    "which review does not support",
                                    c->path);
                        }
                        bool opaque = has_overlay_xattr(sub, "opaque", "y");
                        enum hstate child = H_NONE;
                        struct host h;
                        if (ps != H_NONE && review_host_stat(c->ws_fd, c->path, &h) >= 0 &&
                            S_ISDIR(h.mode))
                                child = ps == H_REPLACE || opaque ? H_REPLACE : H_MERGE;
                        if ((r = capture_charge(c, 0)) < 0) {
                                close(sub);
                                return r;
                        }
                        if (mkdirat(out_fd, name, 0700) < 0) {
                                close(sub);
                                return al_error_set(c->err, errno, "creating \"%s\" in changes/",
                                                    c->path);
                        }
                        int out_sub =
                            openat(out_fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (out_sub < 0) {
                                close(sub);
                                return al_error_set(c->err, errno, "opening \"%s\" in changes/",
                                                    c->path);
                        }
                        manifest_add(&c->m, c->path, T_DIR, st.st_mode);
                        if (opaque)
                                strarr_add(&c->m.opaque, c->path);
                        r = capture_dir(c, sub, out_sub, len, depth + 1, child);
                        close(out_sub);
                } else if (S_ISREG(st.st_mode))
                        r = capture_file(c, dirfd(d), out_fd, name, &st, ps);
                else if (S_ISLNK(st.st_mode))
                        r = capture_symlink(c, dirfd(d), out_fd, name, ps);
                else
                        capture_skip(c, plen, name, special_kind(st.st_mode));
                if (r < 0)
                        return r;
        }
        if (errno)
                return al_error_set(c->err, errno, "reading \"%s\" in the upper layer",
                                    plen ? c->path : ".");
        return 0;
}

/* A DIR on fd's directory that leaves fd itself open. */
static int opendir_at(int fd, DIR **ret)
{
        int dup_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dup_fd < 0)
                return -errno;
        DIR *d = fdopendir(dup_fd);
        if (!d) {
                close(dup_fd);
                return -errno;
        }
        *ret = d;
        return 0;
}

static int clear_dir(int fd)
{
        _cleanup_(closedirp) DIR *d = NULL;
        int r = opendir_at(fd, &d);
        if (r < 0)
                return r;
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                r = review_remove_tree_at(fd, de->d_name, 0);
                if (r < 0)
                        return r;
        }
        return -errno;
}

static int dir_is_empty(int fd, bool *ret)
{
        _cleanup_(closedirp) DIR *d = NULL;
        int r = opendir_at(fd, &d);
        if (r < 0)
                return r;
        struct dirent *de;
        *ret = true;
        while ((errno = 0, de = readdir(d)))
                if (!STREQ(de->d_name, ".") && !STREQ(de->d_name, "..")) {
                        *ret = false;
                        break;
                }
        return -errno;
}

/* A capture that failed keeps nothing; meta.json says why, so that diff
 * and accept name the cause instead of showing no change. */
static void mark_failed(struct review *rv, const char *why)
{
        json_object_set_new(rv->meta, "state", json_string("failed"));
        json_object_set_new(rv->meta, "error", json_string(why));
        review_write_json_at(rv->dir_fd, META_FILE, rv->meta);
}

#define CAPTURE_LOCK_WAIT_MS 10000
#define CAPTURE_LOCK_STEP_MS 20

static int capture(int upper_fd, const char *state_dir, bool replace, uint64_t max_bytes,
                   struct review_summary *ret, struct al_error *err)
{
        _cleanup_(review_done) struct review rv;
        /* A reader holds the state's lock while its diff runs (any grant
         * may diff): the copy waits for it, a bounded time, instead of
         * failing. */
        int r;
        for (unsigned waited_ms = 0;; waited_ms += CAPTURE_LOCK_STEP_MS) {
                r = review_open(state_dir, true, &rv, err);
                if (r != -EBUSY || waited_ms >= CAPTURE_LOCK_WAIT_MS)
                        break;
                review_done(&rv);
                usleep(CAPTURE_LOCK_STEP_MS * 1000);
        }
        if (r < 0)
                return r;
        /* A snapshot of a running sandbox that failed may be taken again. */
        if (!STREQ(rv.state, "pending") && !(replace && STREQ(rv.state, "failed")))
                return al_error_set_message(err, EALREADY, "sandbox %s is %s", rv.id, rv.state);
        rv.changes_fd =
            openat(rv.dir_fd, CHANGES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rv.changes_fd < 0)
                return al_error_set(err, errno, "opening %s/%s", state_dir, CHANGES_DIR);
        bool empty = false;
        r = dir_is_empty(rv.changes_fd, &empty);
        if (r < 0)
                return al_error_set(err, r, "reading %s/%s", state_dir, CHANGES_DIR);
        if (!empty && !replace)
                return al_error_set_message(err, EEXIST,
                                            "sandbox %s already holds captured changes", rv.id);
        if (!empty) {
                r = clear_dir(rv.changes_fd);
                if (r < 0)
                        return al_error_set(err, r, "clearing %s/%s", state_dir, CHANGES_DIR);
        }

        /* A fresh open file description: the caller's offset stays put. */
        int root = openat(upper_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root < 0)
                return al_error_set(err, errno, "opening the upper layer");

        struct capture c = {
            .err = err,
            .changes_fd = rv.changes_fd,
            .max_bytes = max_bytes ? max_bytes : REVIEW_DEFAULT_MAX_BYTES,
        };
        c.ws_fd = open(rv.workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
        r = capture_dir(&c, root, rv.changes_fd, 0, 0, c.ws_fd >= 0 ? H_MERGE : H_NONE);
        closep(&c.ws_fd);
        linktab_done(&c.links);
        if (r >= 0) {
                manifest_sort(&c.m);
                r = manifest_save(rv.dir_fd, &c.m);
                if (r < 0)
                        al_error_set(err, r, "writing %s/%s", state_dir, MANIFEST_FILE);
        }
        if (r < 0) {
                clear_dir(rv.changes_fd);
                manifest_done(&c.m);
                struct manifest none = {0};
                manifest_save(rv.dir_fd, &none);
                mark_failed(&rv, err->msg);
                al_error_wrap(err, "capturing the changes of sandbox %s", rv.id);
                return r;
        }
        manifest_done(&c.m);
        if (STREQ(rv.state, "failed")) {
                json_object_set_new(rv.meta, "state", json_string("pending"));
                json_object_del(rv.meta, "error");
                r = review_write_json_at(rv.dir_fd, META_FILE, rv.meta);
                if (r < 0)
                        return al_error_set(err, r, "writing %s/%s", state_dir, META_FILE);
        }
        if (ret)
                *ret = c.sum;
        return 0;
}

int review_capture(int upper_fd, const char *state_dir, uint64_t max_bytes,
                   struct review_summary *ret, struct al_error *err)
{
        return capture(upper_fd, state_dir, false, max_bytes, ret, err);
}

int review_recapture(int upper_fd, const char *state_dir, uint64_t max_bytes,
                     struct review_summary *ret, struct al_error *err)
{
        return capture(upper_fd, state_dir, true, max_bytes, ret, err);
}
