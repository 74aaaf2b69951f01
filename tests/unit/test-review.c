/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <inttypes.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "review.h"
#include "util.h"

static char top[64];
static char ws[128], upper[128], state_root[128], outside[128];

static int chmod_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        if (flag == FTW_D)
                chmod(p, 0700);
        return 0;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

static void setup(void)
{
        /* /var/tmp rather than /tmp: it is a disk file system, which takes
         * user extended attributes where a tmpfs may not. */
        snprintf(top, sizeof(top), "/var/tmp/airlock-test-review-XXXXXX");
        cr_assert_not_null(mkdtemp(top));
        snprintf(ws, sizeof(ws), "%s/ws", top);
        snprintf(upper, sizeof(upper), "%s/upper", top);
        snprintf(state_root, sizeof(state_root), "%s/state", top);
        snprintf(outside, sizeof(outside), "%s/outside", top);
        cr_assert_eq(mkdir(ws, 0755), 0);
        cr_assert_eq(mkdir(upper, 0755), 0);
        cr_assert_eq(mkdir(outside, 0755), 0);
}

static void teardown(void)
{
        nftw(top, chmod_entry, 16, FTW_PHYS);
        nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(review, .init = setup, .fini = teardown);

static char *at(const char *base, const char *rel)
{
        static char bufs[8][PATH_MAX];
        static int next;
        char *b = bufs[next++ % 8];
        snprintf(b, PATH_MAX, "%s/%s", base, rel);
        return b;
}

static void put(const char *base, const char *rel, const char *content, mode_t mode)
{
        char *p = at(base, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        cr_assert_geq(fd, 0, "creating %s: %s", p, strerror(errno));
        cr_assert_eq(write_full(fd, content, strlen(content)), 0);
        cr_assert_eq(fchmod(fd, mode), 0);
        close(fd);
}

static void put_bin(const char *base, const char *rel, const char *tail)
{
        char *p = at(base, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write_full(fd, "\x89PNG\0\0\0\x0d", 8), 0);
        cr_assert_eq(write_full(fd, tail, strlen(tail)), 0);
        close(fd);
}

static void dir(const char *base, const char *rel, mode_t mode)
{
        char *p = at(base, rel);
        cr_assert_eq(mkdir(p, mode), 0, "mkdir %s: %s", p, strerror(errno));
        cr_assert_eq(chmod(p, mode), 0);
}

static void link_(const char *base, const char *rel, const char *target)
{
        cr_assert_eq(symlink(target, at(base, rel)), 0);
}

static char *slurp(const char *base, const char *rel)
{
        char *buf = NULL;
        int r = read_file_at(AT_FDCWD, at(base, rel), 1 << 20, &buf, NULL);
        return r < 0 ? NULL : buf;
}

static bool exists(const char *base, const char *rel)
{
        struct stat st;
        return lstat(at(base, rel), &st) == 0;
}

static mode_t mode_of(const char *base, const char *rel)
{
        struct stat st;
        cr_assert_eq(lstat(at(base, rel), &st), 0, "%s/%s", base, rel);
        return st.st_mode;
}

static void expect_content(const char *base, const char *rel, const char *want)
{
        char *got = slurp(base, rel);
        cr_assert_not_null(got, "%s/%s is missing", base, rel);
        cr_assert_str_eq(got, want, "%s/%s", base, rel);
        free(got);
}

static void expect_link(const char *base, const char *rel, const char *want)
{
        char buf[PATH_MAX];
        ssize_t n = readlink(at(base, rel), buf, sizeof(buf) - 1);
        cr_assert_geq(n, 0, "%s/%s is not a symlink", base, rel);
        buf[n] = '\0';
        cr_assert_str_eq(buf, want);
}

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Change a workspace file after the sandbox's start, making sure its ctime
 * shows it whatever the file system's timestamp granularity. */
static void host_edit(const char *rel, const char *content, uint64_t started)
{
        for (int i = 0; i < 2000; i++) {
                put(ws, rel, content, 0644);
                struct statx stx;
                cr_assert_eq(statx(AT_FDCWD, at(ws, rel), AT_SYMLINK_NOFOLLOW, STATX_CTIME, &stx),
                             0);
                if ((uint64_t)stx.stx_ctime.tv_sec * 1000000000ULL + stx.stx_ctime.tv_nsec >
                    started)
                        return;
                usleep(1000);
        }
        cr_assert_fail("the ctime of %s does not move", rel);
}

static bool user_xattrs(void)
{
        if (setxattr(upper, "user.airlock-test", "y", 1, 0) < 0)
                return false;
        removexattr(upper, "user.airlock-test");
        return true;
}

static void whiteout(const char *rel)
{
        cr_assert_eq(mknod(at(upper, rel), S_IFCHR | 0000, makedev(0, 0)), 0, "mknod %s: %s", rel,
                     strerror(errno));
}

static void opaque(const char *rel)
{
        cr_assert_eq(setxattr(at(upper, rel), "user.overlay.opaque", "y", 1, 0), 0);
}

static uint64_t started;
static char *sdir;

/* Create the sandbox's state and capture the upper layer into it. */
static struct review_summary capture(const char *id)
{
        struct al_error err = {0};
        struct review_summary sum;
        free(sdir);
        sdir = NULL;
        cr_assert_eq(review_create(state_root, id, ws, started, &sdir, &err), 0, "%s", err.msg);
        int fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        int r = review_capture(fd, sdir, 0, &sum, &err);
        close(fd);
        cr_assert_eq(r, 0, "review_capture: %s", err.msg);
        return sum;
}

static char *diff(void)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        struct al_error err = {0};
        int r = review_diff(sdir, f, &err);
        fclose(f);
        cr_assert_eq(r, 0, "review_diff: %s", err.msg);
        return buf;
}

static int accept_(const char *const *paths, size_t n, struct review_report *rep,
                   struct al_error *err)
{
        struct review_report dummy;
        return review_accept(sdir, (char *const *)paths, n, rep ? rep : &dummy, err);
}

static const char *meta_state(void)
{
        static char state[32];
        char *buf = NULL;
        cr_assert_eq(read_file_at(AT_FDCWD, at(sdir, "meta.json"), 1 << 20, &buf, NULL), 0);
        json_t *j = json_loads(buf, 0, NULL);
        free(buf);
        cr_assert_not_null(j);
        snprintf(state, sizeof(state), "%s", json_string_value(json_object_get(j, "state")));
        json_decref(j);
        return state;
}

#define MAIN_OLD "int main(void)\n{\n        return 0;\n}\n"
#define MAIN_NEW "int main(void)\n{\n        return 42;\n}\n"

/* A workspace, and an upper layer as overlayfs would leave it after an
 * agent edited, added, re-moded and relinked files. */
static void fixture(void)
{
        put(ws, "README.md", "hello\n", 0644);
        dir(ws, "src", 0755);
        put(ws, "src/main.c", MAIN_OLD, 0644);
        put(ws, "src/util.c", "util\n", 0644);
        put(ws, "script.sh", "#!/bin/sh\necho hi\n", 0644);
        put_bin(ws, "logo.bin", "old");
        link_(ws, "link", "README.md");

        dir(upper, "src", 0755);
        put(upper, "src/main.c", MAIN_NEW, 0644);
        put(upper, "src/new.c", "/* new */\n", 0644);
        put(upper, "script.sh", "#!/bin/sh\necho hi\n", 0755);
        put_bin(upper, "logo.bin", "new");
        link_(upper, "link", "src/main.c");
        link_(upper, "newlink", "README.md");
        put(upper, "README.md", "hello\n", 0644); /* copied up, unchanged */
        cr_assert_eq(mkfifo(at(upper, "fifo"), 0644), 0);

        started = now_ns();
}

Test(review, state_root)
{
        char *s = review_state_root(0, "/root");
        cr_assert_str_eq(s, "/var/lib/airlock");
        free(s);
        s = review_state_root(1000, "/home/u/");
        cr_assert_str_eq(s, "/home/u/.local/state/airlock");
        free(s);
        cr_assert_null(review_state_root(1000, NULL));
        cr_assert_null(review_state_root(1000, "relative"));
}

Test(review, create_layout)
{
        struct al_error err = {0};
        char *d = NULL;
        cr_assert_eq(review_create(state_root, "abcd1234", ws, 123, &d, &err), 0, "%s", err.msg);
        cr_assert_str_eq(d, at(state_root, "sandboxes/abcd1234"));
        cr_assert_eq(mode_of(state_root, "") & 0777, 0700);
        cr_assert_eq(mode_of(state_root, "sandboxes") & 0777, 0700);
        cr_assert_eq(mode_of(d, "") & 0777, 0700);
        cr_assert(S_ISDIR(mode_of(d, "changes")));
        char *meta = slurp(d, "meta.json");
        cr_assert(strstr(meta, "\"startedNs\": 123"), "%s", meta);
        cr_assert(strstr(meta, "\"state\": \"pending\""), "%s", meta);
        free(meta);
        cr_assert(exists(d, "manifest.json"));
        cr_assert_eq(review_create(state_root, "abcd1234", ws, 123, NULL, &err), -EEXIST);
        cr_assert_eq(review_create(state_root, "../x", ws, 123, NULL, &err), -EINVAL);
        cr_assert_eq(review_create(state_root, "ok", "relative", 123, NULL, &err), -EINVAL);
        free(d);
}

Test(review, find)
{
        struct al_error err = {0};
        char *d = NULL;
        const char *ids[] = {"abcd1234", "abcd5678", "ffff0000"};
        for (size_t i = 0; i < ARRAY_SIZE(ids); i++)
                cr_assert_eq(review_create(state_root, ids[i], ws, 1, NULL, &err), 0);
        cr_assert_eq(review_find(state_root, "ffff", &d, &err), 0, "%s", err.msg);
        cr_assert_str_eq(d, at(state_root, "sandboxes/ffff0000"));
        free(d);
        cr_assert_eq(review_find(state_root, "abcd5678", &d, &err), 0);
        free(d);
        cr_assert_eq(review_find(state_root, "abcd", &d, &err), -EINVAL);
        cr_assert(strstr(err.msg, "ambiguous"), "%s", err.msg);
        cr_assert_eq(review_find(state_root, "fff", &d, &err), -ENOENT);
        cr_assert_eq(review_find(state_root, "zzzz", &d, &err), -ENOENT);
        cr_assert(strstr(err.msg, "no sandbox \"zzzz\""), "%s", err.msg);
        cr_assert_eq(review_find(state_root, "../../etc", &d, &err), -EINVAL);
        cr_assert_eq(review_find("/nonexistent-airlock", "abcd", &d, &err), -ENOENT);
}

Test(review, capture_and_diff)
{
        fixture();
        struct review_summary sum = capture("sb1");
        cr_assert_eq(sum.added, 2, "added %lu", (unsigned long)sum.added); /* new.c, newlink */
        cr_assert_eq(sum.modified, 4, "modified %lu", (unsigned long)sum.modified);
        cr_assert_eq(sum.deleted, 0);
        cr_assert_eq(sum.skipped, 1);
        cr_assert(!exists(sdir, "changes/README.md"), "an identical copy-up is kept");
        cr_assert(S_ISLNK(mode_of(sdir, "changes/link")));

        char *d = diff();
        cr_assert(strstr(d, "diff --git a/src/main.c b/src/main.c\n"
                            "--- a/src/main.c\n"
                            "+++ b/src/main.c\n"
                            "@@ -1,4 +1,4 @@\n"
                            " int main(void)\n"
                            " {\n"
                            "-        return 0;\n"
                            "+        return 42;\n"),
                  "%s", d);
        cr_assert(strstr(d, "diff --git a/src/new.c b/src/new.c\n"
                            "new file mode 100644\n"
                            "--- /dev/null\n"
                            "+++ b/src/new.c\n"
                            "@@ -0,0 +1 @@\n"
                            "+/* new */\n"),
                  "%s", d);
        cr_assert(strstr(d, "diff --git a/script.sh b/script.sh\n"
                            "old mode 100644\n"
                            "new mode 100755\n"
                            "diff --git"),
                  "%s", d);
        cr_assert(strstr(d, "diff --git a/logo.bin b/logo.bin\n"
                            "Binary files a/logo.bin and b/logo.bin differ\n"),
                  "%s", d);
        cr_assert(strstr(d, "diff --git a/link b/link\n"
                            "--- a/link\n"
                            "+++ b/link\n"
                            "@@ -1 +1 @@\n"
                            "-README.md\n"
                            "\\ No newline at end of file\n"
                            "+src/main.c\n"
                            "\\ No newline at end of file\n"),
                  "%s", d);
        cr_assert(strstr(d, "diff --git a/newlink b/newlink\nnew file mode 120000\n"), "%s", d);
        cr_assert(strstr(d, "Not captured: fifo (named pipe)\n"), "%s", d);
        cr_assert_null(strstr(d, "README.md b/README.md"), "%s", d);
        cr_assert_null(strstr(d, "util.c"), "%s", d);
        /* Sorted like git: link, logo.bin, newlink, script.sh, src/... */
        cr_assert_lt(strstr(d, "a/link "), strstr(d, "a/logo.bin "));
        cr_assert_lt(strstr(d, "a/script.sh "), strstr(d, "a/src/main.c "));
        free(d);

        /* Nothing reached the workspace. */
        expect_content(ws, "src/main.c", MAIN_OLD);
        cr_assert(!exists(ws, "src/new.c"));
        cr_assert_eq(mode_of(ws, "script.sh") & 0777, 0644);
        expect_link(ws, "link", "README.md");
        cr_assert_str_eq(meta_state(), "pending");
}

Test(review, accept_all)
{
        fixture();
        capture("sb1");
        struct al_error err = {0};
        struct review_report rep;
        cr_assert_eq(accept_(NULL, 0, &rep, &err), 0, "%s", err.msg);
        cr_assert(rep.complete);
        cr_assert_eq(rep.remaining, 0);
        cr_assert_eq(rep.written, 6, "written %lu", (unsigned long)rep.written);

        expect_content(ws, "src/main.c", MAIN_NEW);
        expect_content(ws, "src/new.c", "/* new */\n");
        expect_content(ws, "src/util.c", "util\n");
        expect_content(ws, "README.md", "hello\n");
        cr_assert_eq(mode_of(ws, "script.sh") & 07777, 0755);
        cr_assert_eq(mode_of(ws, "src/new.c") & 07777, 0644);
        expect_link(ws, "link", "src/main.c");
        expect_link(ws, "newlink", "README.md");
        cr_assert(!exists(ws, "fifo"));
        cr_assert_str_eq(meta_state(), "accepted");

        /* No temporary file is left behind. */
        DIR *dd = opendir(ws);
        struct dirent *de;
        while ((de = readdir(dd)))
                cr_assert_neq(strncmp(de->d_name, ".airlock-", 9), 0, "%s", de->d_name);
        closedir(dd);

        cr_assert_eq(accept_(NULL, 0, NULL, &err), -EALREADY);
        char *buf = NULL;
        size_t len;
        FILE *f = open_memstream(&buf, &len);
        cr_assert_eq(review_diff(sdir, f, &err), -EALREADY);
        fclose(f);
        free(buf);
        cr_assert_eq(review_discard(sdir, NULL, 0, NULL, &err), -EALREADY);
}

Test(review, accept_subset)
{
        fixture();
        capture("sb1");
        struct al_error err = {0};
        struct review_report rep;
        const char *paths[] = {"src/"};
        cr_assert_eq(accept_(paths, 1, &rep, &err), 0, "%s", err.msg);
        cr_assert(!rep.complete);
        cr_assert_eq(rep.written, 2);
        cr_assert_eq(rep.remaining, 4, "remaining %lu", (unsigned long)rep.remaining);
        expect_content(ws, "src/main.c", MAIN_NEW);
        expect_content(ws, "src/new.c", "/* new */\n");
        cr_assert_eq(mode_of(ws, "script.sh") & 0777, 0644);
        expect_link(ws, "link", "README.md");
        cr_assert_str_eq(meta_state(), "pending");

        char *d = diff();
        cr_assert_null(strstr(d, "a/src/"), "%s", d);
        cr_assert(strstr(d, "a/script.sh"), "%s", d);
        free(d);

        /* The host edits an accepted file: it is not applied again, so this
         * is no conflict and the edit stays. */
        host_edit("src/main.c", "host edit\n", started);
        const char *two[] = {"script.sh", "./link"};
        cr_assert_eq(accept_(two, 2, &rep, &err), 0, "%s", err.msg);
        cr_assert_eq(rep.written, 2);
        cr_assert_eq(mode_of(ws, "script.sh") & 0777, 0755);
        expect_link(ws, "link", "src/main.c");

        cr_assert_eq(accept_(NULL, 0, &rep, &err), 0, "%s", err.msg);
        cr_assert(rep.complete);
        expect_content(ws, "src/main.c", "host edit\n");
        expect_link(ws, "newlink", "README.md");
        cr_assert_str_eq(meta_state(), "accepted");
}

Test(review, accept_path_forms)
{
        fixture();
        capture("sb1");
        struct al_error err = {0};
        const char *unknown[] = {"nope.txt", "src/util.c"};
        cr_assert_eq(accept_(unknown, 2, NULL, &err), -ENOENT);
        cr_assert(strstr(err.msg, "\"nope.txt\""), "%s", err.msg);
        cr_assert(strstr(err.msg, "\"src/util.c\""), "%s", err.msg);
        const char *dotdot[] = {"src/../../etc/passwd"};
        cr_assert_eq(accept_(dotdot, 1, NULL, &err), -EINVAL);
        const char *abs_out[] = {"/etc/passwd"};
        cr_assert_eq(accept_(abs_out, 1, NULL, &err), -EINVAL);
        cr_assert(strstr(err.msg, "outside the workspace"), "%s", err.msg);
        expect_content(ws, "src/main.c", MAIN_OLD);

        const char *abs_in[] = {at(ws, "src/main.c")};
        struct review_report rep;
        cr_assert_eq(accept_(abs_in, 1, &rep, &err), 0, "%s", err.msg);
        cr_assert_eq(rep.written, 1);
        expect_content(ws, "src/main.c", MAIN_NEW);
        cr_assert(!exists(ws, "src/new.c"));
        cr_assert_eq(accept_(abs_in, 1, NULL, &err), -ENOENT, "accepted twice");
}

Test(review, conflict_refused)
{
        fixture();
        capture("sb1");
        host_edit("src/main.c", "edited on the host\n", started);
        struct al_error err = {0};
        cr_assert_eq(accept_(NULL, 0, NULL, &err), -EBUSY);
        cr_assert_str_eq(err.msg, "accept: src/main.c changed on the host since the sandbox "
                                  "started");
        /* Nothing at all was applied. */
        cr_assert(!exists(ws, "src/new.c"));
        cr_assert_eq(mode_of(ws, "script.sh") & 0777, 0644);
        expect_link(ws, "link", "README.md");
        expect_content(ws, "src/main.c", "edited on the host\n");
        cr_assert_str_eq(meta_state(), "pending");

        /* What does not touch the changed file can still be taken. */
        const char *other[] = {"script.sh"};
        cr_assert_eq(accept_(other, 1, NULL, &err), 0, "%s", err.msg);
        const char *same[] = {"src/main.c"};
        cr_assert_eq(accept_(same, 1, NULL, &err), -EBUSY);

        /* A file the host created where the sandbox created one too. */
        host_edit("src/new.c", "mine\n", started);
        const char *created[] = {"src/new.c"};
        cr_assert_eq(accept_(created, 1, NULL, &err), -EBUSY);
        cr_assert(strstr(err.msg, "src/new.c changed on the host"), "%s", err.msg);
}

Test(review, conflict_already_same)
{
        fixture();
        capture("sb1");
        /* The host made the very same change: nothing to refuse. */
        host_edit("src/main.c", MAIN_NEW, started);
        struct al_error err = {0};
        cr_assert_eq(accept_(NULL, 0, NULL, &err), 0, "%s", err.msg);
        expect_content(ws, "src/main.c", MAIN_NEW);
}

Test(review, opaque_and_type_changes)
{
        if (!user_xattrs())
                cr_skip_test("%s takes no user extended attributes", upper);
        dir(ws, "build", 0755);
        put(ws, "build/old.o", "old object\n", 0644);
        put(ws, "build/keep.o", "same\n", 0644);
        dir(ws, "build/sub", 0755);
        put(ws, "build/sub/x.o", "x\n", 0644);
        put(ws, "t1", "was a file\n", 0644);
        dir(ws, "t2", 0755);
        put(ws, "t2/inner", "inner\n", 0644);
        started = now_ns();

        /* rm -rf build; mkdir build; echo new > build/new.o; echo same > build/keep.o */
        dir(upper, "build", 0755);
        opaque("build");
        put(upper, "build/new.o", "new\n", 0644);
        put(upper, "build/keep.o", "same\n", 0644);
        /* rm t1; mkdir t1 (opaque over a whiteout); rm -r t2; echo > t2 */
        dir(upper, "t1", 0700);
        opaque("t1");
        put(upper, "t1/inside", "inside\n", 0644);
        put(upper, "t2", "now a file\n", 0600);

        struct review_summary sum = capture("sb1");
        cr_assert_eq(sum.added, 2, "added %lu", (unsigned long)sum.added);
        cr_assert_eq(sum.modified, 2, "modified %lu", (unsigned long)sum.modified);
        char *man = slurp(sdir, "manifest.json");
        cr_assert(strstr(man, "\"opaque\": [\n  \"build\",\n  \"t1\"\n ]"), "%s", man);
        free(man);

        char *d = diff();
        cr_assert(strstr(d, "diff --git a/build/old.o b/build/old.o\n"
                            "deleted file mode 100644\n"
                            "--- a/build/old.o\n"
                            "+++ /dev/null\n"),
                  "%s", d);
        cr_assert(strstr(d, "diff --git a/build/sub/x.o b/build/sub/x.o\ndeleted file mode"), "%s",
                  d);
        cr_assert(strstr(d, "diff --git a/t1 b/t1\ndeleted file mode 100644\n"), "%s", d);
        cr_assert(strstr(d, "diff --git a/t1/inside b/t1/inside\nnew file mode 100644\n"), "%s", d);
        cr_assert(strstr(d, "diff --git a/t2/inner b/t2/inner\ndeleted file mode 100644\n"), "%s",
                  d);
        cr_assert(strstr(d, "diff --git a/t2 b/t2\nnew file mode 100600\n"), "%s", d);
        cr_assert_null(strstr(d, "keep.o"), "%s", d);
        free(d);

        /* A file beneath the opaque directory alone. */
        struct al_error err = {0};
        const char *one[] = {"build/sub/x.o"};
        cr_assert_eq(accept_(one, 1, NULL, &err), 0, "%s", err.msg);
        cr_assert(!exists(ws, "build/sub/x.o"));
        cr_assert(exists(ws, "build/old.o"));

        cr_assert_eq(accept_(NULL, 0, NULL, &err), 0, "%s", err.msg);
        cr_assert(!exists(ws, "build/old.o"));
        cr_assert(!exists(ws, "build/sub"));
        expect_content(ws, "build/new.o", "new\n");
        expect_content(ws, "build/keep.o", "same\n");
        cr_assert(S_ISDIR(mode_of(ws, "t1")));
        cr_assert_eq(mode_of(ws, "t1") & 0777, 0700);
        expect_content(ws, "t1/inside", "inside\n");
        cr_assert(S_ISREG(mode_of(ws, "t2")));
        cr_assert_eq(mode_of(ws, "t2") & 0777, 0600);
        expect_content(ws, "t2", "now a file\n");
}

Test(review, whiteouts_and_rename)
{
        if (geteuid() != 0)
                cr_skip_test("whiteouts are character devices 0:0; mknod needs root");
        put(ws, "old.txt", "to be renamed\n", 0644);
        dir(ws, "gone", 0755);
        put(ws, "gone/a.txt", "a\n", 0644);
        dir(ws, "gone/b", 0755);
        put(ws, "gone/b/c.txt", "c\n", 0644);
        put(ws, "kept.txt", "kept\n", 0644);
        started = now_ns();

        whiteout("old.txt");
        put(upper, "new.txt", "to be renamed\n", 0644);
        whiteout("gone");
        whiteout("never-there");

        struct review_summary sum = capture("sb1");
        cr_assert_eq(sum.deleted, 3);
        cr_assert_eq(sum.added, 1);
        cr_assert_eq(sum.skipped, 0);

        char *d = diff();
        cr_assert(strstr(d, "diff --git a/old.txt b/old.txt\n"
                            "deleted file mode 100644\n"
                            "--- a/old.txt\n"
                            "+++ /dev/null\n"
                            "@@ -1 +0,0 @@\n"
                            "-to be renamed\n"),
                  "%s", d);
        cr_assert(strstr(d, "diff --git a/new.txt b/new.txt\nnew file mode 100644\n"), "%s", d);
        cr_assert(strstr(d, "diff --git a/gone/a.txt b/gone/a.txt\ndeleted file"), "%s", d);
        cr_assert(strstr(d, "diff --git a/gone/b/c.txt b/gone/b/c.txt\ndeleted file"), "%s", d);
        cr_assert_null(strstr(d, "never-there"), "%s", d);
        free(d);

        struct al_error err = {0};
        const char *part[] = {"gone/b"};
        cr_assert_eq(accept_(part, 1, NULL, &err), 0, "%s", err.msg);
        cr_assert(!exists(ws, "gone/b"));
        cr_assert(exists(ws, "gone/a.txt"));
        cr_assert(exists(ws, "old.txt"));

        cr_assert_eq(accept_(NULL, 0, NULL, &err), 0, "%s", err.msg);
        cr_assert(!exists(ws, "old.txt"));
        cr_assert(!exists(ws, "gone"));
        expect_content(ws, "new.txt", "to be renamed\n");
        expect_content(ws, "kept.txt", "kept\n");
}

Test(review, deleted_file_changed_on_host)
{
        if (geteuid() != 0)
                cr_skip_test("whiteouts are character devices 0:0; mknod needs root");
        put(ws, "doomed.txt", "x\n", 0644);
        put(ws, "other.txt", "o\n", 0644);
        started = now_ns();
        whiteout("doomed.txt");
        put(upper, "other.txt", "changed\n", 0644);
        capture("sb1");
        host_edit("doomed.txt", "the user worked on it\n", started);
        struct al_error err = {0};
        cr_assert_eq(accept_(NULL, 0, NULL, &err), -EBUSY);
        cr_assert(strstr(err.msg, "doomed.txt changed on the host"), "%s", err.msg);
        expect_content(ws, "doomed.txt", "the user worked on it\n");
        expect_content(ws, "other.txt", "o\n");
}

Test(review, hostile_symlinks)
{
        /* The host has a symlink out of the workspace where the upper layer
         * has a directory: accepting must replace the link, never write
         * through it. */
        link_(ws, "dir", outside);
        dir(ws, "esc", 0755);
        put(ws, "esc/keep.txt", "keep\n", 0644);
        started = now_ns();

        dir(upper, "dir", 0755);
        put(upper, "dir/file", "payload\n", 0644);
        /* A directory replaced by a symlink out of the workspace. */
        link_(upper, "esc", outside);
        /* A symlink to / must be captured as a symlink, not followed. */
        link_(upper, "root", "/");
        put(upper, "bad\nname", "x\n", 0644);
        put(upper, "bad\x1b[2Jname", "x\n", 0644);
        put(upper, "invoice\xe2\x80\xaetxt.sh", "x\n", 0644); /* shows as "invoicehs.txt" */
        put(upper, "bad\xffutf8", "x\n", 0644);
        put(upper, "caf\xc3\xa9", "fine\n", 0644);

        struct review_summary sum = capture("sb1");
        cr_assert_eq(sum.skipped, 3);
        cr_assert(exists(sdir, "changes/caf\xc3\xa9"));
        cr_assert(S_ISLNK(mode_of(sdir, "changes/root")));
        cr_assert(S_ISLNK(mode_of(sdir, "changes/esc")));
        char *d = diff();
        cr_assert(strstr(d, "Not captured: bad\\x0aname (name not allowed)\n"), "%s", d);
        cr_assert(strstr(d, "Not captured: bad\\x1b[2Jname (name not allowed)\n"), "%s", d);
        /* A bidirectional override is kept, flagged, and quoted. */
        cr_assert(strstr(d, "airlock: hidden characters in the name \"invoice\\u202etxt.sh\" "
                            "(U+202E); accept takes it only when it is named\n"
                            "diff --git \"a/invoice\\342\\200\\256txt.sh\" "
                            "\"b/invoice\\342\\200\\256txt.sh\"\n"),
                  "%s", d);
        cr_assert(strstr(d, "Not captured: bad\\xffutf8 (name not allowed)\n"), "%s", d);
        cr_assert(strstr(d, "diff --git a/dir b/dir\ndeleted file mode 120000\n"), "%s", d);
        cr_assert(strstr(d, "diff --git a/dir/file b/dir/file\nnew file mode 100644\n"), "%s", d);
        free(d);

        struct al_error err = {0};
        const char *req[] = {"dir/file"};
        cr_assert_eq(accept_(req, 1, NULL, &err), 0, "%s", err.msg);
        cr_assert(!exists(outside, "file"), "written through a host symlink");
        cr_assert(S_ISDIR(mode_of(ws, "dir")));
        expect_content(ws, "dir/file", "payload\n");

        cr_assert_eq(accept_(NULL, 0, NULL, &err), 0, "%s", err.msg);
        expect_link(ws, "esc", outside);
        expect_link(ws, "root", "/");
        DIR *dd = opendir(outside);
        struct dirent *de;
        while ((de = readdir(dd)))
                cr_assert(STREQ(de->d_name, ".") || STREQ(de->d_name, ".."), "%s appeared outside",
                          de->d_name);
        closedir(dd);
}

Test(review, host_turns_dir_into_symlink)
{
        dir(ws, "sub", 0755);
        put(ws, "sub/a.txt", "a\n", 0644);
        started = now_ns();
        dir(upper, "sub", 0755);
        put(upper, "sub/a.txt", "changed\n", 0644);
        capture("sb1");

        /* After the sandbox, "sub" on the host becomes a link out. */
        for (int i = 0; i < 2000; i++) {
                char real[PATH_MAX];
                snprintf(real, sizeof(real), "%s", at(ws, "sub.real"));
                if (exists(ws, "sub") && !S_ISLNK(mode_of(ws, "sub")))
                        cr_assert_eq(rename(at(ws, "sub"), real), 0);
                else
                        unlink(at(ws, "sub"));
                link_(ws, "sub", outside);
                struct statx stx;
                statx(AT_FDCWD, at(ws, "sub"), AT_SYMLINK_NOFOLLOW, STATX_CTIME, &stx);
                if ((uint64_t)stx.stx_ctime.tv_sec * 1000000000ULL + stx.stx_ctime.tv_nsec >
                    started)
                        break;
                usleep(1000);
        }
        struct al_error err = {0};
        cr_assert_eq(accept_(NULL, 0, NULL, &err), -EBUSY, "%s", err.msg);
        cr_assert(strstr(err.msg, "accept: sub changed on the host"), "%s", err.msg);
        cr_assert(!exists(outside, "a.txt"));
        expect_content(ws, "sub.real/a.txt", "a\n");
}

Test(review, discard)
{
        fixture();
        capture("sb1");
        struct al_error err = {0};
        cr_assert_eq(review_discard(sdir, NULL, 0, NULL, &err), 0, "%s", err.msg);
        cr_assert(!exists(sdir, "changes"));
        cr_assert(exists(sdir, "meta.json"));
        cr_assert_str_eq(meta_state(), "discarded");
        cr_assert_eq(accept_(NULL, 0, NULL, &err), -EALREADY);
        cr_assert(strstr(err.msg, "discarded"), "%s", err.msg);
        cr_assert_eq(review_discard(sdir, NULL, 0, NULL, &err), 0, "discarding twice: %s", err.msg);
        expect_content(ws, "src/main.c", MAIN_OLD);
        cr_assert(!exists(ws, "src/new.c"));
}

Test(review, discard_some_paths)
{
        fixture();
        capture("sb1");
        struct al_error err = {0};
        size_t remaining = 0;
        char *const some[] = {"src/new.c", "logo.bin"};
        cr_assert_eq(review_discard(sdir, some, 2, &remaining, &err), 0, "%s", err.msg);
        cr_assert_gt(remaining, 0);
        cr_assert_str_eq(meta_state(), "pending");
        char *d = diff();
        cr_assert(!strstr(d, "src/new.c") && !strstr(d, "logo.bin"), "%s", d);
        cr_assert(strstr(d, "src/main.c"), "%s", d);
        free(d);
        /* Naming no pending change refuses the whole, as accept does. */
        char *const none[] = {"src/new.c", "nothing-here"};
        cr_assert_eq(review_discard(sdir, none, 2, &remaining, &err), -ENOENT);
        cr_assert(strstr(err.msg, "nothing-here"), "%s", err.msg);
        char *const out[] = {"../etc/passwd"};
        cr_assert_eq(review_discard(sdir, out, 1, &remaining, &err), -EINVAL);
        /* Accepting the rest leaves the discarded paths as the host had them. */
        cr_assert_eq(accept_(NULL, 0, NULL, &err), 0, "%s", err.msg);
        expect_content(ws, "src/main.c", MAIN_NEW);
        cr_assert(!exists(ws, "src/new.c"));
        cr_assert(exists(ws, "logo.bin"));
        cr_assert_str_eq(meta_state(), "accepted");
}

Test(review, discard_every_path_is_the_whole)
{
        fixture();
        capture("sb1");
        struct al_error err = {0};
        size_t remaining = 7;
        char *const all[] = {"src", "script.sh", "logo.bin", "link", "newlink"};
        cr_assert_eq(review_discard(sdir, all, 5, &remaining, &err), 0, "%s", err.msg);
        cr_assert_eq(remaining, 0);
        cr_assert_str_eq(meta_state(), "discarded");
        cr_assert(!exists(sdir, "changes"));
}

Test(review, sparse_file_stays_sparse)
{
        int fd = open(at(upper, "big.img"), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        cr_assert_eq(ftruncate(fd, 1LL << 30), 0);
        cr_assert_eq(pwrite(fd, "end", 3, (1LL << 30) - 3), 3);
        close(fd);
        started = now_ns();
        struct review_summary sum = capture("sb1");
        cr_assert_lt(sum.bytes, 1 << 20, "bytes %lu", (unsigned long)sum.bytes);
        struct stat st;
        cr_assert_eq(stat(at(sdir, "changes/big.img"), &st), 0);
        cr_assert_eq(st.st_size, 1LL << 30);
        cr_assert_lt(st.st_blocks, 4096);

        struct al_error err = {0};
        cr_assert_eq(accept_(NULL, 0, NULL, &err), 0, "%s", err.msg);
        cr_assert_eq(stat(at(ws, "big.img"), &st), 0);
        cr_assert_eq(st.st_size, 1LL << 30);
        cr_assert_lt(st.st_blocks, 4096);
}

Test(review, capture_bounds)
{
        char rel[PATH_MAX] = "";
        size_t len = 0;
        for (int i = 0; i < REVIEW_MAX_DEPTH + 2; i++) {
                len += (size_t)snprintf(rel + len, sizeof(rel) - len, "%sd", len ? "/" : "");
                dir(upper, rel, 0755);
        }
        started = now_ns();
        struct al_error err = {0};
        char *d = NULL;
        cr_assert_eq(review_create(state_root, "deep", ws, started, &d, &err), 0);
        int fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct review_summary sum;
        cr_assert_eq(review_capture(fd, d, 0, &sum, &err), -ELOOP);
        cr_assert(strstr(err.msg, "deeper than 256"), "%s", err.msg);
        close(fd);
        /* A failed capture leaves nothing half-copied. */
        DIR *dd = opendir(at(d, "changes"));
        struct dirent *de;
        int n = 0;
        while ((de = readdir(dd)))
                n++;
        closedir(dd);
        cr_assert_eq(n, 2);
        free(d);
}

Test(review, capture_twice_refused)
{
        fixture();
        capture("sb1");
        int fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct al_error err = {0};
        struct review_summary sum;
        cr_assert_eq(review_capture(fd, sdir, 0, &sum, &err), -EEXIST);
        close(fd);
}

Test(review, unreadable_upper_entries)
{
        /* chmod 000 in the sandbox must not stop an unprivileged capture. */
        dir(upper, "locked", 0755);
        put(upper, "locked/inner", "inner\n", 0644);
        put(upper, "secret", "s\n", 0644);
        cr_assert_eq(chmod(at(upper, "secret"), 0), 0);
        cr_assert_eq(chmod(at(upper, "locked"), 0), 0);
        started = now_ns();
        struct review_summary sum = capture("sb1");
        cr_assert_eq(sum.added, 2);
        char *man = slurp(sdir, "manifest.json");
        cr_assert(strstr(man, "\"mode\": 0,\n   \"path\": \"locked\""), "%s", man);
        cr_assert(strstr(man, "\"mode\": 0,\n   \"path\": \"secret\""), "%s", man);
        free(man);

        struct al_error err = {0};
        cr_assert_eq(accept_(NULL, 0, NULL, &err), 0, "%s", err.msg);
        cr_assert_eq(mode_of(ws, "secret") & 07777, 0);
        cr_assert_eq(mode_of(ws, "locked") & 07777, 0);
        cr_assert_eq(chmod(at(ws, "locked"), 0700), 0);
        expect_content(ws, "locked/inner", "inner\n");
}

Test(review, owner_kept_when_root)
{
        if (geteuid() != 0)
                cr_skip_test("only root writes files for another user");
        fixture();
        cr_assert_eq(chown(ws, 1234, 1234), 0);
        cr_assert_eq(chown(at(ws, "src"), 1234, 1234), 0);
        cr_assert_eq(chown(at(ws, "src/main.c"), 4321, 4321), 0);
        capture("sb1");
        struct al_error err = {0};
        cr_assert_eq(accept_(NULL, 0, NULL, &err), 0, "%s", err.msg);
        struct stat st;
        cr_assert_eq(stat(at(ws, "src/new.c"), &st), 0);
        cr_assert_eq(st.st_uid, 1234);
        cr_assert_eq(stat(at(ws, "src/main.c"), &st), 0);
        cr_assert_eq(st.st_uid, 4321);
        cr_assert_eq(lstat(at(ws, "newlink"), &st), 0);
        cr_assert_eq(st.st_uid, 1234);
}

/* ---- the host's edge: disk, names, modes ---- */

static int capture_max(const char *id, uint64_t max, struct review_summary *sum,
                       struct al_error *err)
{
        free(sdir);
        sdir = NULL;
        cr_assert_eq(review_create(state_root, id, ws, started, &sdir, err), 0, "%s", err->msg);
        int fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        int r = review_capture(fd, sdir, max, sum, err);
        close(fd);
        return r;
}

static void put_size(const char *base, const char *rel, off_t size, bool sparse)
{
        int fd = open(at(base, rel), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        if (sparse)
                cr_assert_eq(ftruncate(fd, size), 0);
        else {
                static char buf[65536];
                memset(buf, 'x', sizeof(buf));
                for (off_t o = 0; o < size; o += (off_t)sizeof(buf))
                        cr_assert_gt(write(fd, buf, sizeof(buf)), 0);
        }
        close(fd);
}

static ino_t ino_of(const char *base, const char *rel)
{
        struct stat st;
        cr_assert_eq(lstat(at(base, rel), &st), 0, "%s", rel);
        return st.st_ino;
}

Test(review, hard_links_captured_once)
{
        started = now_ns();
        put_size(upper, "big", 256 << 10, false);
        for (int i = 0; i < 20; i++) {
                char name[16];
                snprintf(name, sizeof(name), "l%d", i);
                cr_assert_eq(link(at(upper, "big"), at(upper, name)), 0);
        }
        /* 21 names of 256 KiB fit in 300 KiB: they are one file. */
        struct review_summary sum;
        struct al_error err = {0};
        cr_assert_eq(capture_max("sb1", 300 << 10, &sum, &err), 0, "%s", err.msg);
        cr_assert_eq(sum.added, 21);
        cr_assert_eq(sum.bytes, 256 << 10);
        cr_assert_eq(ino_of(sdir, "changes/l7"), ino_of(sdir, "changes/big"));

        struct review_report rep;
        cr_assert_eq(accept_(NULL, 0, &rep, &err), 0, "%s", err.msg);
        cr_assert_eq(rep.written, 21);
        cr_assert_eq(rep.bytes, 256 << 10);
        cr_assert_eq(ino_of(ws, "l19"), ino_of(ws, "big"));
}

Test(review, capture_past_the_limit_keeps_nothing)
{
        started = now_ns();
        put(upper, "small.txt", "small\n", 0644);
        put_size(upper, "big", 512 << 10, false);
        struct review_summary sum;
        struct al_error err = {0};
        cr_assert_eq(capture_max("sb1", 256 << 10, &sum, &err), -EDQUOT);
        cr_assert(strstr(err.msg, "limits.disk"), "%s", err.msg);
        cr_assert(!exists(sdir, "changes/small.txt") && !exists(sdir, "changes/big"));
        cr_assert_str_eq(meta_state(), "failed");

        FILE *f = fopen("/dev/null", "w");
        struct al_error e2 = {0};
        cr_assert_eq(review_diff(sdir, f, &e2), -ENODATA);
        fclose(f);
        cr_assert(strstr(e2.msg, "not kept") && strstr(e2.msg, "limits.disk"), "%s", e2.msg);
        cr_assert_eq(accept_(NULL, 0, NULL, &e2), -ENODATA);
        cr_assert(!exists(ws, "small.txt"));
        cr_assert_eq(review_discard(sdir, NULL, 0, NULL, &e2), 0, "%s", e2.msg);
        cr_assert_str_eq(meta_state(), "discarded");
}

Test(review, recapture_after_a_failure)
{
        started = now_ns();
        put_size(upper, "big", 512 << 10, false);
        struct review_summary sum;
        struct al_error err = {0};
        cr_assert_eq(capture_max("sb1", 256 << 10, &sum, &err), -EDQUOT);
        cr_assert_eq(unlink(at(upper, "big")), 0);
        put(upper, "ok.txt", "ok\n", 0644);
        int fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_eq(review_recapture(fd, sdir, 256 << 10, &sum, &err), 0, "%s", err.msg);
        close(fd);
        cr_assert_str_eq(meta_state(), "pending");
        cr_assert_eq(accept_(NULL, 0, NULL, &err), 0, "%s", err.msg);
        expect_content(ws, "ok.txt", "ok\n");
}

Test(review, sparse_file_counts_at_its_size)
{
        started = now_ns();
        put_size(upper, "huge", (off_t)1 << 30, true);
        struct review_summary sum;
        struct al_error err = {0};
        cr_assert_eq(capture_max("sb1", 16 << 20, &sum, &err), -EDQUOT);
        cr_assert(strstr(err.msg, "\"huge\""), "%s", err.msg);

        /* Under the limit it is kept, and kept sparse. */
        cr_assert_eq(truncate(at(upper, "huge"), 8 << 20), 0);
        cr_assert_eq(capture_max("sb2", 16 << 20, &sum, &err), 0, "%s", err.msg);
        struct stat st;
        cr_assert_eq(stat(at(sdir, "changes/huge"), &st), 0);
        cr_assert_eq(st.st_size, 8 << 20);
        cr_assert_lt(st.st_blocks, 1024);
}

Test(review, hidden_names_flagged_and_taken_only_when_named)
{
        started = now_ns();
        put(upper, "plain.txt", "plain\n", 0644);
        put(upper, "a.txt\xe2\x80\x8b", "zwsp\n", 0644); /* U+200B */
        dir(upper, "d\xe2\x81\xa6", 0755);               /* U+2066 */
        put(upper, "d\xe2\x81\xa6/f", "f\n", 0644);
        put(upper, "tag\xf3\xa0\x81\x81", "tag\n", 0644); /* U+E0041 */
        put(upper, "c1\xc2\x9bname", "x\n", 0644);        /* U+009B, CSI */
        struct review_summary sum = capture("sb1");
        cr_assert_eq(sum.skipped, 1);
        char *d = diff();
        cr_assert(strstr(d, "Not captured: c1\\xc2\\x9bname (name not allowed)\n"), "%s", d);
        cr_assert(strstr(d, "airlock: hidden characters in the name \"a.txt\\u200b\" (U+200B); "
                            "accept takes it only when it is named\n"
                            "diff --git \"a/a.txt\\342\\200\\213\" \"b/a.txt\\342\\200\\213\"\n"),
                  "%s", d);
        cr_assert(strstr(d, "new directory \"d\\342\\201\\246\"/ (mode 040755)\n"), "%s", d);
        cr_assert(strstr(d, "\"tag\\U000e0041\" (U+E0041)"), "%s", d);
        cr_assert(!strstr(d, "a.txt\xe2\x80\x8b"), "%s", d);
        free(d);

        struct review_report rep;
        struct al_error err = {0};
        cr_assert_eq(accept_(NULL, 0, &rep, &err), 0, "%s", err.msg);
        expect_content(ws, "plain.txt", "plain\n");
        cr_assert(!exists(ws, "a.txt\xe2\x80\x8b") && !exists(ws, "d\xe2\x81\xa6"));
        cr_assert_eq(rep.held, 3, "%" PRIu64, rep.held); /* d shows through d/f */
        cr_assert(!rep.complete);
        const char *all[] = {"."};
        cr_assert_eq(accept_(all, 1, &rep, &err), 0, "%s", err.msg);
        cr_assert(!exists(ws, "a.txt\xe2\x80\x8b"));

        const char *named[] = {"a.txt\xe2\x80\x8b", "d\xe2\x81\xa6"};
        cr_assert_eq(accept_(named, 2, &rep, &err), 0, "%s", err.msg);
        expect_content(ws, "a.txt\xe2\x80\x8b", "zwsp\n");
        expect_content(ws, "d\xe2\x81\xa6/f", "f\n");
        cr_assert(!exists(ws, "tag\xf3\xa0\x81\x81"));
        cr_assert_eq(rep.held, 1);
        const char *tag[] = {"tag\xf3\xa0\x81\x81"};
        cr_assert_eq(accept_(tag, 1, &rep, &err), 0, "%s", err.msg);
        cr_assert(rep.complete);
        cr_assert_str_eq(meta_state(), "accepted");
}

Test(review, setid_bits_shown_never_applied)
{
        put(ws, "tool.sh", "#!/bin/sh\n", 0644);
        started = now_ns();
        put(upper, "tool.sh", "#!/bin/sh\n", 0644);
        cr_assert_eq(chmod(at(upper, "tool.sh"), 02755), 0);
        put(upper, "suid",
            "\x7f"
            "ELF",
            0644);
        cr_assert_eq(chmod(at(upper, "suid"), 04755), 0);
        dir(upper, "open", 0755);
        cr_assert_eq(chmod(at(upper, "open"), 01777), 0);
        dir(upper, "empty", 0700);
        capture("sb1");
        char *d = diff();
        cr_assert(strstr(d,
                         "airlock: suid: the sandbox set the setuid bit (mode 4755); accept does "
                         "not apply it\ndiff --git a/suid b/suid\nnew file mode 100755\n"),
                  "%s", d);
        cr_assert(strstr(d, "airlock: tool.sh: the sandbox set the setgid bit (mode 2755)"), "%s",
                  d);
        cr_assert(strstr(d, "diff --git a/tool.sh b/tool.sh\nold mode 100644\nnew mode 100755\n"),
                  "%s", d);
        cr_assert(strstr(d, "airlock: open: the sandbox set the sticky bit (mode 1777)"), "%s", d);
        cr_assert(strstr(d, "new directory open/ (mode 040777, writable by everyone)\n"), "%s", d);
        cr_assert(strstr(d, "new directory empty/ (mode 040700)\n"), "%s", d);
        free(d);
        /* Nothing set-id lands in the state directory either. */
        cr_assert_eq(mode_of(sdir, "changes/suid") & 07000, 0);

        struct al_error err = {0};
        cr_assert_eq(accept_(NULL, 0, NULL, &err), 0, "%s", err.msg);
        cr_assert_eq(mode_of(ws, "suid") & 07777, 0755);
        cr_assert_eq(mode_of(ws, "tool.sh") & 07777, 0755);
        cr_assert_eq(mode_of(ws, "open") & 07777, 0777);
        cr_assert_eq(mode_of(ws, "empty") & 07777, 0700);
}

Test(review, held_name_still_checked_for_conflicts)
{
        dir(ws, "src", 0755);
        put(ws, "src/a\xe2\x80\x8b", "host\n", 0644);
        started = now_ns();
        dir(upper, "src", 0755);
        put(upper, "src/a\xe2\x80\x8b", "agent\n", 0644);
        put(upper, "src/plain", "plain\n", 0644);
        capture("sb1");
        struct review_report rep;
        struct al_error err = {0};
        cr_assert_eq(accept_(NULL, 0, &rep, &err), 0, "%s", err.msg);
        cr_assert_eq(rep.held, 1);
        expect_content(ws, "src/plain", "plain\n");
        host_edit("src/a\xe2\x80\x8b", "edited on the host\n", started);
        const char *req[] = {"src/a\xe2\x80\x8b"};
        cr_assert_eq(accept_(req, 1, &rep, &err), -EBUSY, "%s", err.msg);
        expect_content(ws, "src/a\xe2\x80\x8b", "edited on the host\n");
}
