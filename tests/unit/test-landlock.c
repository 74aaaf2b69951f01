/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "landlock.h"
#include "util.h"

/* Two scratch directories: `inside` is made writable, `outside` is not. The
 * restriction happens in a forked child, which reports the first failed
 * check through a pipe; the test process itself stays unrestricted so that
 * it can clean up. */
static char inside[] = "/tmp/airlock-landlock-in-XXXXXX";
static char outside[] = "/tmp/airlock-landlock-out-XXXXXX";
static int report_fd = -1;

static void setup(void)
{
        if (landlock_abi() == 0)
                cr_skip_test("Landlock is not available in this kernel");
        cr_assert_not_null(mkdtemp(inside));
        cr_assert_not_null(mkdtemp(outside));
}

static void teardown(void)
{
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", inside, outside);
        (void)!system(cmd);
}

TestSuite(landlock, .init = setup, .fini = teardown);

static char *at(const char *dir, const char *name)
{
        return xasprintf("%s/%s", dir, name);
}

static int create_file(const char *path, const char *content)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        return write_full(fd, content, strlen(content));
}

static void put(const char *dir, const char *name, const char *content)
{
        _cleanup_free_ char *p = at(dir, name);
        cr_assert_eq(create_file(p, content), 0, "writing %s", p);
}

__attribute__((format(printf, 1, 2), noreturn)) static void fail(const char *fmt, ...)
{
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (n > 0)
                (void)!write(report_fd, msg, strlen(msg));
        _exit(1);
}

/* A call that must succeed. */
#define MUST(call)                                                                                 \
        do {                                                                                       \
                if ((call) < 0)                                                                    \
                        fail("%s: %s", #call, strerror(errno));                                    \
        } while (0)

/* A call that must fail with one of the given errnos (b may equal a). */
#define MUST_FAIL(call, a, b)                                                                      \
        do {                                                                                       \
                errno = 0;                                                                         \
                if ((call) >= 0)                                                                   \
                        fail("%s succeeded", #call);                                               \
                if (errno != (a) && errno != (b))                                                  \
                        fail("%s: %s, want %s", #call, strerror(errno), strerror(a));              \
        } while (0)

typedef void (*check_fn)(void);

static void run_restricted(const char *const *paths, size_t n, check_fn check)
{
        int p[2];
        cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                close(p[0]);
                report_fd = p[1];
                struct al_error err = {0};
                if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                        fail("no_new_privs: %s", strerror(errno));
                if (landlock_restrict_writes(paths, n, true, &err) < 0)
                        fail("restricting: %s", err.msg);
                check();
                _exit(0);
        }
        close(p[1]);
        char msg[512] = "";
        ssize_t len = read(p[0], msg, sizeof(msg) - 1);
        close(p[0]);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        cr_assert(WIFEXITED(st), "child killed by signal %d", WTERMSIG(st));
        cr_assert_eq(WEXITSTATUS(st), 0, "%s", len > 0 ? msg : "(no message)");
}

static int open_write(const char *dir, const char *name, int flags)
{
        _cleanup_free_ char *p = at(dir, name);
        return open(p, O_WRONLY | O_CLOEXEC | flags, 0644);
}

static void check_writes(void)
{
        _cleanup_free_ char *in_file = at(inside, "new");
        _cleanup_free_ char *in_dir = at(inside, "dir");
        _cleanup_free_ char *in_moved = at(inside, "dir/moved");
        _cleanup_free_ char *in_link = at(inside, "link");
        _cleanup_free_ char *out_file = at(outside, "new");
        _cleanup_free_ char *out_existing = at(outside, "existing");
        _cleanup_free_ char *out_dir = at(outside, "dir");
        _cleanup_free_ char *out_link = at(outside, "link");
        _cleanup_free_ char *out_renamed = at(outside, "renamed");
        _cleanup_free_ char *out_fifo = at(outside, "fifo");

        /* Inside: create, write, mkdir, rename across directories, remove. */
        MUST(create_file(in_file, "data"));
        MUST(mkdir(in_dir, 0755));
        MUST(rename(in_file, in_moved));
        MUST(symlink("moved", in_link));
        MUST(unlink(in_link));

        /* Outside: nothing that changes the file system. */
        MUST_FAIL(open_write(outside, "new", O_CREAT), EACCES, EACCES);
        MUST_FAIL(open_write(outside, "existing", 0), EACCES, EACCES);
        MUST_FAIL(open_write(outside, "existing", O_APPEND), EACCES, EACCES);
        MUST_FAIL(mkdir(out_dir, 0755), EACCES, EACCES);
        MUST_FAIL(unlink(out_existing), EACCES, EACCES);
        MUST_FAIL(symlink("/etc/passwd", out_link), EACCES, EACCES);
        MUST_FAIL(mkfifo(out_fifo, 0644), EACCES, EACCES);
        MUST_FAIL(rename(out_existing, out_renamed), EACCES, EXDEV);
        /* Moving a file out of the writable tree would let a later,
         * unrestricted reader find it somewhere it never allowed. */
        MUST_FAIL(rename(in_moved, out_file), EACCES, EXDEV);
        MUST_FAIL(link(in_moved, out_file), EACCES, EXDEV);
        if (landlock_abi() >= 3)
                MUST_FAIL(truncate(out_existing, 0), EACCES, EACCES);

        /* Reads stay open everywhere. */
        char *content = NULL;
        MUST(read_file_at(AT_FDCWD, out_existing, 64, &content, NULL));
        if (strcmp(content, "host") != 0)
                fail("read back \"%s\"", content);
        free(content);
}

Test(landlock, writes_only_beneath_allowed_paths)
{
        put(outside, "existing", "host");
        const char *paths[] = {inside};
        run_restricted(paths, ARRAY_SIZE(paths), check_writes);
}

static void check_devices(void)
{
        /* What a shell does for `cmd >/dev/null`: O_TRUNC needs the truncate
         * right from ABI 3 on. */
        int fd = open("/dev/null", O_WRONLY | O_TRUNC | O_CLOEXEC);
        if (fd < 0)
                fail("open /dev/null: %s", strerror(errno));
        if (write(fd, "x", 1) != 1)
                fail("write /dev/null: %s", strerror(errno));
        close(fd);
        fd = open("/dev/zero", O_RDWR | O_CLOEXEC);
        if (fd < 0)
                fail("open /dev/zero: %s", strerror(errno));
        close(fd);
        fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                fail("open /dev/full: %s", strerror(errno));
        close(fd);
}

Test(landlock, device_files_stay_writable)
{
        const char *paths[] = {inside};
        run_restricted(paths, ARRAY_SIZE(paths), check_devices);
}

static void check_single_file(void)
{
        MUST(open_write(outside, "allowed", O_TRUNC));
        MUST_FAIL(open_write(outside, "existing", 0), EACCES, EACCES);
        MUST_FAIL(open_write(outside, "new", O_CREAT), EACCES, EACCES);
}

/* A file in the list gets the rights a file can carry; a missing path is
 * skipped rather than failing the whole restriction. */
Test(landlock, single_file_and_missing_path)
{
        put(outside, "existing", "host");
        put(outside, "allowed", "host");
        _cleanup_free_ char *allowed = at(outside, "allowed");
        const char *paths[] = {inside, allowed, "/nonexistent-airlock-test/dir"};
        run_restricted(paths, ARRAY_SIZE(paths), check_single_file);
}

static void check_nothing_writable(void)
{
        MUST_FAIL(open_write(inside, "new", O_CREAT), EACCES, EACCES);
        MUST_FAIL(open_write(outside, "new", O_CREAT), EACCES, EACCES);
}

Test(landlock, empty_list_allows_no_writes)
{
        run_restricted(NULL, 0, check_nothing_writable);
}

static void check_child_inherits(void)
{
        pid_t pid = fork();
        if (pid < 0)
                fail("fork: %s", strerror(errno));
        if (pid == 0) {
                execl("/bin/sh", "sh", "-c", "exec 2>/dev/null; echo x > \"$0\"/new", outside,
                      (char *)NULL);
                _exit(127);
        }
        int st;
        if (waitpid(pid, &st, 0) < 0)
                fail("waitpid: %s", strerror(errno));
        if (!WIFEXITED(st) || WEXITSTATUS(st) == 0)
                fail("a child process wrote outside (status %d)", st);
}

Test(landlock, exec_children_inherit)
{
        const char *paths[] = {inside};
        run_restricted(paths, ARRAY_SIZE(paths), check_child_inherits);
}
