/* SPDX-License-Identifier: Apache-2.0 */
/* The disk meter walks a tree in a helper process (diskuse.c): a periodic
 * sample only asks for a walk and takes an answer that is there, so the
 * caller's event loop (the network gate's relay loop) never waits for a
 * walk; the last sample waits a bounded time; a helper that hangs (a
 * walk waiting on a file system that never answers, here a stopped
 * process) costs the caller nothing and is killed by disk_meter_free(). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "diskuse.h"
#include "util.h"

static char tmp[64];

static void setup(void)
{
        snprintf(tmp, sizeof(tmp), "/tmp/test-diskuse-helper-XXXXXX");
        cr_assert_not_null(mkdtemp(tmp));
}

static void teardown(void)
{
        _cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", tmp);
        cr_assert_eq(system(cmd), 0);
}

static void fill(const char *name, size_t bytes)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", tmp, name);
        _cleanup_close_ int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        _cleanup_free_ char *buf = xcalloc(1, bytes + 1);
        memset(buf, 'x', bytes);
        cr_assert_geq(write_full(fd, buf, bytes), 0);
        cr_assert_eq(fsync(fd), 0);
}

/* This process's children (its one thread's), at most n. */
static int children(pid_t *ret, int n)
{
        _cleanup_free_ char *p = xasprintf("/proc/self/task/%d/children", (int)syscall(SYS_gettid));
        FILE *f = fopen(p, "re");
        cr_assert_not_null(f, "%s: %s", p, strerror(errno));
        int k = 0, pid;
        while (k < n && fscanf(f, "%d", &pid) == 1)
                ret[k++] = pid;
        fclose(f);
        return k;
}

/* Periodic samples at one instant (no new walk is due) until the one in
 * flight is answered: at most 10 s. */
static bool wait_measured(struct disk_meter *m, uint64_t at, uint64_t *peak, uint64_t *last)
{
        for (int i = 0; i < 1000; i++) {
                disk_meter_sample(m, at, false);
                if (disk_meter_result(m, peak, last))
                        return true;
                usleep(10000);
        }
        return false;
}

TestSuite(diskuse_helper, .init = setup, .fini = teardown, .timeout = 30);

Test(diskuse_helper, a_hung_walk_never_holds_the_caller)
{
        fill("big", 1 << 20);
        struct disk_meter *m = disk_meter_tree(tmp);
        uint64_t now = now_monotonic_us(), peak = 0, last = 0;
        disk_meter_sample(m, now, false);
        pid_t kids[4];
        cr_assert_eq(children(kids, 4), 1, "the walk runs in one helper process");
        cr_assert(wait_measured(m, now, &peak, &last));
        cr_expect_lt(peak, 64 << 10, "the file before the start is not growth");

        /* The helper stops answering, as one waiting on a hung mount. */
        cr_assert_eq(kill(kids[0], SIGSTOP), 0);
        fill("more", 2 << 20);
        uint64_t t0 = now_monotonic_us();
        disk_meter_sample(m, now + 5000000, false); /* asks for a walk */
        disk_meter_sample(m, now + 6000000, false); /* none answered: nothing more */
        cr_expect_lt(now_monotonic_us() - t0, 20000, "a periodic sample waited for the walk");
        /* The last sample waits a bounded time, then keeps what it had. */
        t0 = now_monotonic_us();
        disk_meter_sample(m, now + 7000000, true);
        cr_expect_lt(now_monotonic_us() - t0, 1000000, "the last sample waited for a hung walk");
        cr_assert(disk_meter_result(m, &peak, &last), "the peak sampled before is kept");
        cr_expect_lt(peak, 64 << 10);

        t0 = now_monotonic_us();
        disk_meter_free(m);
        cr_expect_lt(now_monotonic_us() - t0, 2000000);
        cr_expect_eq(waitpid(-1, NULL, WNOHANG), -1, "the helper is reaped");
        cr_expect_eq(errno, ECHILD);
}

Test(diskuse_helper, answers_are_fresh_and_the_last_one_is_taken_now)
{
        fill("before", 128 << 10);
        struct disk_meter *m = disk_meter_tree(tmp);
        uint64_t now = now_monotonic_us(), peak = 0, last = 0;
        fill("big", 2 << 20);
        disk_meter_sample(m, now, false);
        cr_assert(wait_measured(m, now, &peak, &last));
        cr_expect_geq(peak, 2 << 20);
        cr_expect_geq(last, 2 << 20);
        /* Not due: the next walk is a second away at least. */
        _cleanup_free_ char *big = xasprintf("%s/big", tmp);
        cr_assert_eq(unlink(big), 0);
        disk_meter_sample(m, now + 500000, false);
        usleep(100000);
        disk_meter_sample(m, now + 500000, false);
        cr_assert(disk_meter_result(m, &peak, &last));
        cr_expect_geq(last, 2 << 20, "a walk was asked for before it was due");
        /* The last sample walks now, through the helper. */
        disk_meter_sample(m, now + 600000, true);
        cr_assert(disk_meter_result(m, &peak, &last));
        cr_expect_geq(peak, 2 << 20);
        cr_expect_lt(last, 64 << 10);
        disk_meter_free(m);
        cr_expect_eq(waitpid(-1, NULL, WNOHANG), -1);
}

Test(diskuse_helper, a_helper_that_died_leaves_the_tree_unmeasured)
{
        struct disk_meter *m = disk_meter_tree(tmp);
        uint64_t now = now_monotonic_us(), peak, last;
        disk_meter_sample(m, now, false);
        cr_assert(wait_measured(m, now, &peak, &last));
        pid_t kids[4];
        cr_assert_eq(children(kids, 4), 1);
        cr_assert_eq(kill(kids[0], SIGKILL), 0);
        /* Its end is seen at the next ask or answer: not a figure from a
         * walk that never happened. */
        for (int i = 0; i < 100 && disk_meter_result(m, &peak, &last); i++) {
                disk_meter_sample(m, now + 2000000 + (uint64_t)i, false);
                usleep(10000);
        }
        cr_expect_not(disk_meter_result(m, &peak, &last));
        disk_meter_free(m);
        cr_expect_eq(waitpid(-1, NULL, WNOHANG), -1);
}

/* The helper holds nothing of its parent's but its socket and the tree. */
Test(diskuse_helper, the_helper_holds_no_other_descriptor)
{
        int keep = open("/dev/null", O_RDONLY | O_CLOEXEC);
        cr_assert_geq(keep, 0);
        struct disk_meter *m = disk_meter_tree(tmp);
        uint64_t now = now_monotonic_us(), peak, last;
        disk_meter_sample(m, now, false);
        cr_assert(wait_measured(m, now, &peak, &last));
        pid_t kids[4];
        cr_assert_eq(children(kids, 4), 1);
        _cleanup_free_ char *dir = xasprintf("/proc/%d/fd", kids[0]);
        DIR *d = opendir(dir);
        cr_assert_not_null(d);
        int n = 0;
        struct dirent *de;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        cr_expect_eq(n, 2, "the helper holds %d descriptors", n);
        disk_meter_free(m);
        close(keep);
}
