/* SPDX-License-Identifier: Apache-2.0 */
/* A sandbox's state directory: where it lives, creating it, finding it by
 * id or prefix, and opening it under its lock (exclusive for anything that
 * writes, shared for reading) with what diff and accept need loaded. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "paths.h"
#include "review-internal.h"
#include "trusted.h"

void review_done(struct review *rv)
{
        closep(&rv->changes_fd);
        closep(&rv->ws_fd);
        /* Closing the directory drops the flock. */
        closep(&rv->dir_fd);
        json_decref(rv->meta);
        manifest_done(&rv->m);
}

/* Open a state directory and take its lock: exclusive for anything that
 * writes, shared for reading. */
int review_open(const char *state_dir, bool exclusive, struct review *rv, struct al_error *err)
{
        *rv = (struct review){.dir_fd = -1, .changes_fd = -1, .ws_fd = -1};
        if (geteuid() == 0) {
                /* meta.json names the workspace root writes to: taken only
                 * from a directory nobody but root or the user sudo runs
                 * for could have written, on a path only they can change
                 * (trusted.h); its JSON files are held to the same rule
                 * (review_read_json_at). */
                char real[PATH_MAX];
                _cleanup_close_ int t =
                    trusted_open(state_dir, trusted_caller(), true, real, "sandbox state", err);
                if (t < 0)
                        return t;
                rv->dir_fd = openat(t, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        } else
                rv->dir_fd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (rv->dir_fd < 0)
                return al_error_set(err, errno, "opening \"%s\"", state_dir);
        if (flock(rv->dir_fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0) {
                if (errno == EWOULDBLOCK)
                        return al_error_set_message(
                            err, EBUSY, "sandbox state \"%s\" is in use by another airlock",
                            state_dir);
                return al_error_set(err, errno, "locking \"%s\"", state_dir);
        }
        int r = review_read_json_at(rv->dir_fd, META_FILE, &rv->meta);
        if (r == -EPERM)
                return review_foreign_json(err, state_dir, META_FILE);
        if (r < 0)
                return al_error_set(err, r, "reading %s/%s", state_dir, META_FILE);
        json_t *started = json_object_get(rv->meta, "startedNs");
        rv->id = json_string_value(json_object_get(rv->meta, "id"));
        rv->workspace = json_string_value(json_object_get(rv->meta, "workspace"));
        rv->state = json_string_value(json_object_get(rv->meta, "state"));
        json_t *acc = json_object_get(rv->meta, "accepted");
        json_t *dis = json_object_get(rv->meta, "discarded");
        if (!rv->id || !rv->workspace || rv->workspace[0] != '/' || !json_is_integer(started) ||
            json_integer_value(started) < 0 || !rv->state ||
            !(STREQ(rv->state, "pending") || STREQ(rv->state, "accepted") ||
              STREQ(rv->state, "discarded") || STREQ(rv->state, "failed")) ||
            (acc && !json_is_array(acc)) || (dis && !json_is_array(dis)))
                return al_error_set_message(err, EBADMSG, "%s/%s", state_dir, META_FILE);
        rv->started_ns = (uint64_t)json_integer_value(started);
        size_t i;
        json_t *v;
        json_array_foreach(acc, i, v)
        {
                const char *p = json_string_value(v);
                if (!p || !(p[0] == '\0' || review_path_valid(p)))
                        return al_error_set_message(err, EBADMSG, "%s/%s: \"accepted\"", state_dir,
                                                    META_FILE);
        }
        json_array_foreach(dis, i, v)
        {
                const char *p = json_string_value(v);
                if (!p || !(p[0] == '\0' || review_path_valid(p)))
                        return al_error_set_message(err, EBADMSG, "%s/%s: \"discarded\"", state_dir,
                                                    META_FILE);
        }
        return 0;
}

int review_workspace(const char *state_dir, char **ret, struct al_error *err)
{
        _cleanup_(review_done) struct review rv;
        int r = review_open(state_dir, false, &rv, err);
        if (r < 0)
                return r;
        *ret = xstrdup(rv.workspace);
        return 0;
}

char *review_state_root(uid_t uid, const char *home)
{
        return paths_state_root(uid, home);
}

static uint64_t coarse_realtime_ns(void)
{
        struct timespec ts;
        if (clock_gettime(CLOCK_REALTIME_COARSE, &ts) < 0)
                return 0;
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The change time the kernel gives a file changed now: a nameless file's,
 * changed once its time was read (so a kernel that hands out fine-grained
 * times for files being watched does, and raises the floor every later
 * time stays at or above). The coarse clock where no such file can be
 * made. */
static uint64_t file_time_now_ns(void)
{
        _cleanup_close_ int fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0 && fchmod(fd, 0400) == 0 && fstat(fd, &st) == 0)
                return (uint64_t)st.st_ctim.tv_sec * 1000000000u + (uint64_t)st.st_ctim.tv_nsec;
        return coarse_realtime_ns();
}

uint64_t review_start_ns(void)
{
        uint64_t at = file_time_now_ns();
        uint64_t deadline = now_monotonic_us() + 50000;
        while (coarse_realtime_ns() <= at && now_monotonic_us() < deadline) {
                struct timespec nap = {.tv_sec = 0, .tv_nsec = 200000};
                (void)nanosleep(&nap, NULL);
        }
        return at;
}

/* Which directory the workspace is: its inode number and its file handle
 * (what the file system finds it by again, after a reboot too), or its
 * device where the file system gives no handle, as "ino:h:TYPE:HEX" or
 * "ino:d:DEV". The path is looked up again at each diff and accept; this
 * tells whether it still names the directory the sandbox ran on. */
static int workspace_identity(int fd, struct review_ws_id *ret)
{
        struct stat st;
        ret->s[0] = '\0';
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode))
                return -ENOTDIR;
        union {
                struct file_handle fh;
                char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
        } h = {.fh.handle_bytes = MAX_HANDLE_SZ};
        int mount_id;
        if (name_to_handle_at(fd, "", &h.fh, &mount_id, AT_EMPTY_PATH) < 0 ||
            h.fh.handle_bytes > MAX_HANDLE_SZ) {
                snprintf(ret->s, sizeof(ret->s), "%" PRIu64 ":d:%" PRIu64, (uint64_t)st.st_ino,
                         (uint64_t)st.st_dev);
                return 0;
        }
        int o = snprintf(ret->s, sizeof(ret->s), "%" PRIu64 ":h:%d:", (uint64_t)st.st_ino,
                         h.fh.handle_type);
        static const char digits[] = "0123456789abcdef";
        for (unsigned i = 0; i < h.fh.handle_bytes && (size_t)o + 2 < sizeof(ret->s); i++) {
                ret->s[o++] = digits[h.fh.f_handle[i] >> 4];
                ret->s[o++] = digits[h.fh.f_handle[i] & 15];
        }
        ret->s[o] = '\0';
        return 0;
}

int review_ws_pin(const char *workspace, struct review_ws_id *ret)
{
        *ret = (struct review_ws_id){0};
        _cleanup_close_ int fd = open(workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return workspace_identity(fd, ret);
}

/* 0 when fd is the directory `want` names (or meta.json names none, as
 * state written before it was kept does not), -ESTALE when not. */
static int check_workspace(int fd, const char *want)
{
        if (!want)
                return 0;
        struct review_ws_id now;
        if (workspace_identity(fd, &now) < 0 || !STREQ(now.s, want))
                return -ESTALE;
        return 0;
}

int review_create(const char *state_root, const char *id, const char *workspace,
                  uint64_t started_ns, char **ret_dir, struct al_error *err)
{
        return review_create_pinned(state_root, id, workspace, started_ns, NULL, ret_dir, err);
}

int review_create_pinned(const char *state_root, const char *id, const char *workspace,
                         uint64_t started_ns, const struct review_ws_id *pin, char **ret_dir,
                         struct al_error *err)
{
        if (!state_root || state_root[0] != '/')
                return al_error_set_message(err, EINVAL, "state directory \"%s\" is not absolute",
                                            state_root ? state_root : "");
        if (!review_id_valid(id))
                return al_error_set_message(err, EINVAL, "bad sandbox id \"%s\"", id);
        if (!workspace || workspace[0] != '/')
                return al_error_set_message(err, EINVAL, "workspace \"%s\" is not an absolute path",
                                            workspace ? workspace : "");
        if (started_ns > INT64_MAX)
                return al_error_set_message(err, ERANGE, "start time %" PRIu64, started_ns);

        _cleanup_free_ char *sandboxes = xasprintf("%s/sandboxes", state_root);
        int r = mkdir_p(sandboxes, 0700, 0700);
        if (r < 0)
                return al_error_set(err, r, "creating \"%s\"", sandboxes);
        _cleanup_close_ int sfd = open(sandboxes, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (sfd < 0)
                return al_error_set(err, errno, "opening \"%s\"", sandboxes);
        if (mkdirat(sfd, id, 0700) < 0)
                return al_error_set(err, errno, "creating \"%s/%s\"", sandboxes, id);
        _cleanup_close_ int dfd = openat(sfd, id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return al_error_set(err, errno, "opening \"%s/%s\"", sandboxes, id);
        if (mkdirat(dfd, CHANGES_DIR, 0700) < 0)
                return al_error_set(err, errno, "creating \"%s/%s/%s\"", sandboxes, id,
                                    CHANGES_DIR);

        struct manifest empty = {0};
        r = manifest_save(dfd, &empty);
        if (r < 0)
                return al_error_set(err, r, "writing \"%s/%s/%s\"", sandboxes, id, MANIFEST_FILE);
        json_t *meta = json_pack("{s:s, s:s, s:I, s:s}", "id", id, "workspace", workspace,
                                 "startedNs", (json_int_t)started_ns, "state", "pending");
        if (!meta)
                return al_error_set_message(err, EINVAL, "workspace path is not valid UTF-8");
        struct review_ws_id now;
        if (!pin || !pin->s[0])
                pin = review_ws_pin(workspace, &now) >= 0 ? &now : NULL;
        if (pin)
                json_object_set_new(meta, "workspaceIdentity", json_string(pin->s));
        r = review_write_json_at(dfd, META_FILE, meta);
        json_decref(meta);
        if (r < 0)
                return al_error_set(err, r, "writing \"%s/%s/%s\"", sandboxes, id, META_FILE);
        if (ret_dir)
                *ret_dir = xasprintf("%s/%s", sandboxes, id);
        return 0;
}

int review_find(const char *state_root, const char *id, char **ret_dir, struct al_error *err)
{
        if (!review_id_valid(id))
                return al_error_set_message(err, EINVAL, "bad sandbox ID \"%s\"", id);
        _cleanup_free_ char *sandboxes = xasprintf("%s/sandboxes", state_root);
        int fd = open(sandboxes, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                if (errno == ENOENT)
                        return al_error_set_message(err, ENOENT, "no sandbox \"%s\"", id);
                return al_error_set(err, errno, "opening \"%s\"", sandboxes);
        }
        _cleanup_(closedirp) DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return al_error_set(err, errno, "opening \"%s\"", sandboxes);
        }
        struct stat st;
        if (fstatat(dirfd(d), id, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
                *ret_dir = xasprintf("%s/%s", sandboxes, id);
                return 0;
        }
        if (strlen(id) < PREFIX_MIN)
                return al_error_set_message(err, ENOENT, "no sandbox \"%s\"", id);

        _cleanup_free_ char *found = NULL;
        size_t n = strlen(id);
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                if (!review_id_valid(de->d_name) || strncmp(de->d_name, id, n) != 0)
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISDIR(st.st_mode))
                        continue;
                if (found)
                        return al_error_set_message(
                            err, EINVAL,
                            "sandbox ID prefix \"%s\" is ambiguous (\"%s\", "
                            "\"%s\", ...)",
                            id, found, de->d_name);
                found = xstrdup(de->d_name);
        }
        if (errno)
                return al_error_set(err, errno, "reading \"%s\"", sandboxes);
        if (!found)
                return al_error_set_message(err, ENOENT, "no sandbox \"%s\"", id);
        *ret_dir = xasprintf("%s/%s", sandboxes, found);
        return 0;
}

int review_load(const char *state_dir, bool exclusive, struct review *rv, struct al_error *err)
{
        int r = review_open(state_dir, exclusive, rv, err);
        if (r < 0)
                return r;
        if (STREQ(rv->state, "failed")) {
                const char *why = json_string_value(json_object_get(rv->meta, "error"));
                return al_error_set_message(err, ENODATA,
                                            "the changes of sandbox %s were not kept: %s", rv->id,
                                            why ? why : "the capture failed");
        }
        if (!STREQ(rv->state, "pending"))
                return al_error_set_message(err, EALREADY, "sandbox %s was %s already", rv->id,
                                            rv->state);
        r = manifest_load(rv, state_dir, err);
        if (r < 0)
                return r;
        rv->changes_fd =
            openat(rv->dir_fd, CHANGES_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rv->changes_fd < 0)
                return al_error_set(err, errno, "opening %s/%s", state_dir, CHANGES_DIR);
        rv->ws_fd = open(rv->workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (rv->ws_fd < 0)
                return al_error_set(err, errno, "opening the workspace \"%s\"", rv->workspace);
        if (check_workspace(rv->ws_fd,
                            json_string_value(json_object_get(rv->meta, "workspaceIdentity"))) < 0)
                return al_error_set_message(
                    err, ESTALE,
                    "the workspace path \"%s\" no longer names the directory sandbox %s ran on "
                    "(it, or a directory on its path, was moved or replaced, perhaps by a "
                    "symbolic link); nothing was read or changed. Put the directory back at "
                    "that path, or discard the changes",
                    rv->workspace, rv->id);
        return 0;
}
