/* SPDX-License-Identifier: Apache-2.0 */
/* The private copy of the agent's .git that export, push and count read,
 * and the repository libgit2 opens from it (objects capped, the host
 * user's config). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <git2/sys/odb_backend.h>
#include <git2/sys/repository.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gitops-internal.h"

/* What the agent wrote is read once, into a private copy the host owns,
 * before libgit2 touches any of it: every file through openat() with
 * O_NOFOLLOW|O_NONBLOCK from directory fds opened the same way, regular
 * files only. A symbolic link, FIFO, socket or device anywhere in what is
 * read is refused, so neither a link into a host repository the sandbox
 * never saw nor a FIFO that would block forever gets past this point, and a
 * still-running sandbox that swaps a component cannot redirect a read: each
 * open is relative to a directory already verified. */

#define COPY_FILES_MAX (256 * 1024)
#define COPY_DEPTH_MAX 32
/* Past this a file whose blocks hold less than an eighth of it is sparse. */
#define SPARSE_MIN (1024 * 1024)

struct copy_ctx {
        const char *ws;
        size_t files;
        uint64_t bytes;
        struct al_error *err;
};

static int refuse_type(struct copy_ctx *c, const char *rel, mode_t mode)
{
        const char *what = S_ISLNK(mode)                    ? "a symbolic link"
                           : S_ISFIFO(mode)                 ? "a FIFO"
                           : S_ISSOCK(mode)                 ? "a socket"
                           : S_ISCHR(mode) || S_ISBLK(mode) ? "a device"
                           : S_ISDIR(mode)                  ? "a directory"
                                                            : "not a plain file";
        return al_error_set_message(
            c->err, EPERM, "%s/.git/%s is %s; refusing to read the repository", c->ws, rel, what);
}

static int copy_file(struct copy_ctx *c, int sdir, int ddir, const char *name, const char *rel)
{
        if (gitops_past_deadline())
                return gitops_fail_deadline(c->err);
        if (++c->files > COPY_FILES_MAX)
                return al_error_set_message(c->err, E2BIG,
                                            "%s/.git holds more than %d files; refusing to read it",
                                            c->ws, COPY_FILES_MAX);
        struct stat st;
        if (fstatat(sdir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return al_error_set(c->err, errno, "%s/.git/%s", c->ws, rel);
        /* Checked before the open so that no device is ever opened. */
        if (!S_ISREG(st.st_mode))
                return refuse_type(c, rel, st.st_mode);
        _cleanup_close_ int fd =
            openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return errno == ELOOP ? refuse_type(c, rel, S_IFLNK)
                                      : al_error_set(c->err, errno, "%s/.git/%s", c->ws, rel);
        if (fstat(fd, &st) < 0)
                return al_error_set(c->err, errno, "%s/.git/%s", c->ws, rel);
        if (!S_ISREG(st.st_mode))
                return refuse_type(c, rel, st.st_mode);
        /* Git never writes a sparse file: one costs the agent no disk, and
         * the host all of its size once copied out (into $TMPDIR, often
         * memory). Refused, and so is a file the limit cannot take, before
         * a byte of it is copied. */
        if (st.st_size > SPARSE_MIN && (uint64_t)st.st_blocks * 512 * 8 < (uint64_t)st.st_size)
                return al_error_set_message(
                    c->err, EFBIG,
                    "%s/.git/%s is a sparse file (%lld bytes, %lld on disk), which git never "
                    "writes; refusing to read the repository",
                    c->ws, rel, (long long)st.st_size, (long long)st.st_blocks * 512);
        if (c->bytes + (uint64_t)st.st_size > GITOPS_COPY_MAX)
                return al_error_set_message(
                    c->err, EFBIG,
                    "%s/.git holds more than %llu MiB of objects and refs; refusing to read it",
                    c->ws, (unsigned long long)(GITOPS_COPY_MAX >> 20));
        _cleanup_close_ int out =
            openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return al_error_set(c->err, errno, "copying %s/.git/%s", c->ws, rel);
        char buf[64 * 1024];
        for (;;) {
                ssize_t n = read(fd, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return al_error_set(c->err, errno, "reading %s/.git/%s", c->ws, rel);
                if (n == 0)
                        break;
                c->bytes += (uint64_t)n;
                if (c->bytes > GITOPS_COPY_MAX)
                        return al_error_set_message(
                            c->err, EFBIG,
                            "%s/.git holds more than %llu MiB of objects and refs; refusing to "
                            "read it",
                            c->ws, (unsigned long long)(GITOPS_COPY_MAX >> 20));
                int r = write_full(out, buf, (size_t)n);
                if (r < 0)
                        return al_error_set(c->err, r, "copying %s/.git/%s", c->ws, rel);
        }
        return 0;
}

/* Which entries of a directory are read. */
enum copy_kind {
        COPY_REFS,    /* everything, recursively */
        COPY_OBJECTS, /* XX/ loose object directories and pack/ */
        COPY_LOOSE,   /* 38 hex digits */
        COPY_PACK,    /* pack-*.pack and pack-*.idx */
};

static bool all_hex(const char *s, size_t n)
{
        return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

static bool ends_with(const char *s, const char *suffix)
{
        size_t n = strlen(s), m = strlen(suffix);
        return n >= m && STREQ(s + n - m, suffix);
}

static int copy_dir(struct copy_ctx *c, int sparent, int dparent, const char *name, const char *rel,
                    enum copy_kind kind, int depth);

static int copy_entries(struct copy_ctx *c, int sdir, int ddir, const char *rel,
                        enum copy_kind kind, int depth)
{
        int dup = fcntl(sdir, F_DUPFD_CLOEXEC, 3);
        if (dup < 0)
                return al_error_set(c->err, errno, "%s/.git/%s", c->ws, rel);
        DIR *d = fdopendir(dup);
        if (!d) {
                int e = errno;
                close(dup);
                return al_error_set(c->err, e, "%s/.git/%s", c->ws, rel);
        }
        int r = 0;
        struct dirent *de;
        while (r >= 0 && (errno = 0, de = readdir(d))) {
                const char *n = de->d_name;
                if (STREQ(n, ".") || STREQ(n, ".."))
                        continue;
                _cleanup_free_ char *sub = xasprintf("%s/%s", rel, n);
                switch (kind) {
                case COPY_REFS: {
                        struct stat st;
                        if (fstatat(sdir, n, &st, AT_SYMLINK_NOFOLLOW) < 0)
                                r = al_error_set(c->err, errno, "%s/.git/%s", c->ws, sub);
                        else if (S_ISDIR(st.st_mode))
                                r = copy_dir(c, sdir, ddir, n, sub, COPY_REFS, depth + 1);
                        else
                                r = copy_file(c, sdir, ddir, n, sub);
                        break;
                }
                case COPY_OBJECTS:
                        if (all_hex(n, 2))
                                r = copy_dir(c, sdir, ddir, n, sub, COPY_LOOSE, depth + 1);
                        else if (STREQ(n, "pack"))
                                r = copy_dir(c, sdir, ddir, n, sub, COPY_PACK, depth + 1);
                        break;
                case COPY_LOOSE:
                        if (all_hex(n, GITOPS_OID_HEX - 2))
                                r = copy_file(c, sdir, ddir, n, sub);
                        break;
                case COPY_PACK:
                        if (strncmp(n, "pack-", 5) == 0 &&
                            (ends_with(n, ".pack") || ends_with(n, ".idx")))
                                r = copy_file(c, sdir, ddir, n, sub);
                        break;
                }
        }
        if (r >= 0 && errno)
                r = al_error_set(c->err, errno, "reading %s/.git/%s", c->ws, rel);
        closedir(d);
        return r;
}

static int copy_dir(struct copy_ctx *c, int sparent, int dparent, const char *name, const char *rel,
                    enum copy_kind kind, int depth)
{
        if (depth > COPY_DEPTH_MAX)
                return al_error_set_message(c->err, E2BIG,
                                            "%s/.git/%s is nested too deep; refusing to read it",
                                            c->ws, rel);
        struct stat st;
        if (fstatat(sparent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return al_error_set(c->err, errno, "%s/.git/%s", c->ws, rel);
        if (!S_ISDIR(st.st_mode))
                return refuse_type(c, rel, st.st_mode);
        _cleanup_close_ int sdir =
            openat(sparent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sdir < 0)
                return errno == ELOOP || errno == ENOTDIR
                           ? refuse_type(c, rel, S_IFLNK)
                           : al_error_set(c->err, errno, "%s/.git/%s", c->ws, rel);
        if (mkdirat(dparent, name, 0700) < 0)
                return al_error_set(c->err, errno, "copying %s/.git/%s", c->ws, rel);
        _cleanup_close_ int ddir =
            openat(dparent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (ddir < 0)
                return al_error_set(c->err, errno, "copying %s/.git/%s", c->ws, rel);
        return copy_entries(c, sdir, ddir, rel, kind, depth);
}

static int expect_absent(int dfd, const char *name, const char *ws, struct al_error *err)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return al_error_set_message(
                    err, EPERM,
                    "%s/.git/%s exists: the repository reads objects or refs from "
                    "elsewhere; refusing to use it",
                    ws, name);
        if (errno != ENOENT && errno != ENOTDIR)
                return al_error_set(err, errno, "%s/.git/%s", ws, name);
        return 0;
}

/* Copy HEAD, packed-refs, refs/ and the objects of <workspace>/.git into a
 * fresh private directory; *ret_dir gets its path (the caller removes it). */
static int copy_gitdir(const char *workspace, char **ret_dir, struct al_error *err)
{
        _cleanup_close_ int wfd = open(workspace, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (wfd < 0)
                return al_error_set(err, errno, "workspace \"%s\"", workspace);
        struct stat st;
        if (fstatat(wfd, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0)
                return al_error_set(err, errno, "%s/.git", workspace);
        if (!S_ISDIR(st.st_mode))
                return al_error_set_message(
                    err, EPERM, "%s/.git is not a directory; refusing to use it", workspace);
        _cleanup_close_ int gfd =
            openat(wfd, ".git", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (gfd < 0)
                return al_error_set(err, errno, "%s/.git", workspace);
        int r;
        if ((r = expect_absent(gfd, "commondir", workspace, err)) < 0 ||
            (r = expect_absent(gfd, "objects/info/alternates", workspace, err)) < 0 ||
            (r = expect_absent(gfd, "objects/info/http-alternates", workspace, err)) < 0)
                return r;

        const char *tmp = secure_getenv("TMPDIR");
        _cleanup_free_ char *dir = xasprintf("%s/airlock-git-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir))
                return al_error_set(err, errno, "creating a directory in %s",
                                    tmp && *tmp ? tmp : "/tmp");
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct copy_ctx c = {.ws = workspace, .err = err};
        if (dfd < 0)
                r = al_error_set(err, errno, "%s", dir);
        else if ((r = copy_file(&c, gfd, dfd, "HEAD", "HEAD")) >= 0 &&
                 (r = copy_dir(&c, gfd, dfd, "refs", "refs", COPY_REFS, 1)) >= 0 &&
                 (r = copy_dir(&c, gfd, dfd, "objects", "objects", COPY_OBJECTS, 1)) >= 0) {
                if (fstatat(gfd, "packed-refs", &st, AT_SYMLINK_NOFOLLOW) == 0)
                        r = copy_file(&c, gfd, dfd, "packed-refs", "packed-refs");
                else if (errno != ENOENT)
                        r = al_error_set(err, errno, "%s/.git/packed-refs", workspace);
        }
        if (r < 0) {
                gitops_rm_rf(dir);
                return r;
        }
        *ret_dir = TAKE_PTR(dir);
        return 0;
}

void agent_repo_close(struct agent_repo *a)
{
        if (a->repo)
                git_repository_free(a->repo);
        if (a->copy) {
                gitops_rm_rf(a->copy);
                free(a->copy);
        }
        memset(a, 0, sizeof(*a));
}

int gitops_open_workspace(const char *workspace, struct agent_repo *a, struct al_error *err)
{
        int r = copy_gitdir(workspace, &a->copy, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *objects = xasprintf("%s/objects", a->copy);
        if (git_repository_open_ext(&a->repo, a->copy,
                                    GIT_REPOSITORY_OPEN_NO_SEARCH | GIT_REPOSITORY_OPEN_BARE,
                                    NULL) < 0)
                return gitops_fail_git(err, EIO, workspace);
        _cleanup_(config_freep) git_config *cfg = NULL;
        if (git_config_open_default(&cfg) < 0 || git_repository_set_config(a->repo, cfg) < 0)
                return gitops_fail_git(err, EIO, "the host's git config");
        _cleanup_(odb_freep) git_odb *odb = NULL;
        git_odb_backend *pack = NULL, *loose = NULL;
        if (git_odb_new(&odb) < 0)
                return gitops_fail_git(err, EIO, workspace);
        r = gitops_capped_backends(objects, &a->budget, &pack, &loose, err);
        if (r < 0)
                return r;
        if (git_odb_add_backend(odb, pack, 2) < 0) {
                pack->free(pack);
                loose->free(loose);
                return gitops_fail_git(err, EIO, workspace);
        }
        if (git_odb_add_backend(odb, loose, 1) < 0) {
                loose->free(loose);
                return gitops_fail_git(err, EIO, workspace);
        }
        if (git_repository_set_odb(a->repo, odb) < 0)
                return gitops_fail_git(err, EIO, workspace);
        return 0;
}
