/* SPDX-License-Identifier: Apache-2.0 */
/* The workspace an accept writes to is found again by its path, which
 * meta.json keeps from the end of the run. Whoever can rename in the
 * workspace's parent (its owner, when root or airlockd accepts for them)
 * could put a symlink there in the meantime, to /etc or another user's
 * directory, and the accept wrote the agent's files there and removed what
 * the agent deleted, with root's rights. The accept (and the diff) must act
 * on the directory the sandbox ran on, or on nothing. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "review.h"
#include "util.h"

static char top[64], ws[128], upper[128], state_root[128], victim[128], real[128], via[128];

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

static void put(const char *dir, const char *name, const char *content)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0, "%s", p);
        cr_assert_eq(write_full(fd, content, strlen(content)), 0);
        close(fd);
}

static bool exists(const char *dir, const char *name)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", dir, name);
        struct stat st;
        return lstat(p, &st) == 0;
}

static void setup(void)
{
        snprintf(top, sizeof(top), "/var/tmp/airlock-test-revatk-XXXXXX");
        cr_assert_not_null(mkdtemp(top));
        snprintf(ws, sizeof(ws), "%s/ws", top);
        snprintf(upper, sizeof(upper), "%s/upper", top);
        snprintf(state_root, sizeof(state_root), "%s/state", top);
        snprintf(victim, sizeof(victim), "%s/victim", top);
        cr_assert_eq(mkdir(ws, 0755), 0);
        cr_assert_eq(mkdir(upper, 0755), 0);
        cr_assert_eq(mkdir(victim, 0755), 0);
        put(ws, "keep.txt", "mine\n");
        put(victim, "keep.txt", "the victim's\n");
        /* The agent adds a file and deletes keep.txt (a whiteout). */
        put(upper, "planted.sh", "echo owned\n");
        char wh[PATH_MAX];
        snprintf(wh, sizeof(wh), "%s/keep.txt", upper);
        if (mknod(wh, S_IFCHR | 0000, 0) < 0)
                cr_skip_test("no whiteouts here (mknod: %s)", strerror(errno));
}

static void teardown(void)
{
        nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(review_attacks2, .init = setup, .fini = teardown, .timeout = 30);

static uint64_t now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static char *capture(const char *workspace)
{
        struct al_error err = {0};
        char *dir = NULL;
        cr_assert_eq(review_create(state_root, "abcd1234", workspace, now_ns(), &dir, &err), 0,
                     "%s", err.msg);
        int fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        struct review_summary sum;
        cr_assert_eq(review_capture(fd, dir, 0, &sum, &err), 0, "%s", err.msg);
        close(fd);
        return dir;
}

Test(review_attacks2, a_workspace_swapped_for_a_symlink_is_not_written)
{
        char *dir = capture(ws);
        char old[160];
        snprintf(old, sizeof(old), "%s.old", ws);
        cr_assert_eq(rename(ws, old), 0);
        cr_assert_eq(symlink(victim, ws), 0);

        struct al_error err = {0};
        struct review_report rep;
        int r = review_accept(dir, NULL, 0, &rep, &err);
        cr_expect_lt(r, 0, "the accept went ahead on the swapped workspace");
        cr_expect(!exists(victim, "planted.sh"), "the agent's file landed in the symlink's target");
        cr_expect(exists(victim, "keep.txt"), "the accept removed the symlink target's file");
        cr_expect(!exists(old, "planted.sh"));
        free(dir);
}

Test(review_attacks2, a_workspace_swapped_for_another_directory_is_not_written)
{
        char *dir = capture(ws);
        char old[160];
        snprintf(old, sizeof(old), "%s.old", ws);
        cr_assert_eq(rename(ws, old), 0);
        cr_assert_eq(rename(victim, ws), 0);

        struct al_error err = {0};
        struct review_report rep;
        int r = review_accept(dir, NULL, 0, &rep, &err);
        cr_expect_lt(r, 0, "the accept went ahead on another directory");
        cr_expect(!exists(ws, "planted.sh"));
        cr_expect(exists(ws, "keep.txt"));
        free(dir);
}

/* A path with a symlink in it that was there at the end of the run is the
 * same directory: accepted. */
Test(review_attacks2, a_symlinked_path_that_did_not_change_is_accepted)
{
        snprintf(real, sizeof(real), "%s/real", top);
        snprintf(via, sizeof(via), "%s/via", top);
        cr_assert_eq(mkdir(real, 0755), 0);
        char inner[160];
        snprintf(inner, sizeof(inner), "%s/ws", real);
        cr_assert_eq(rename(ws, inner), 0);
        cr_assert_eq(symlink(real, via), 0);
        char path[160];
        snprintf(path, sizeof(path), "%s/ws", via);
        char *dir = capture(path);
        struct al_error err = {0};
        struct review_report rep;
        cr_assert_eq(review_accept(dir, NULL, 0, &rep, &err), 0, "%s", err.msg);
        cr_expect(exists(inner, "planted.sh"));
        cr_expect(!exists(inner, "keep.txt"));
        free(dir);
}

/* The swap made while the sandbox runs: the identity taken at the start is
 * what the state keeps, so the end's capture and every later accept see
 * that the path moved. */
Test(review_attacks2, a_workspace_swapped_during_the_run_is_not_written)
{
        struct review_ws_id pin;
        cr_assert_eq(review_ws_pin(ws, &pin), 0);
        cr_assert_neq(pin.s[0], '\0');
        char old[160];
        snprintf(old, sizeof(old), "%s.old", ws);
        cr_assert_eq(rename(ws, old), 0);
        cr_assert_eq(symlink(victim, ws), 0);

        struct al_error err = {0};
        char *dir = NULL;
        cr_assert_eq(review_create_pinned(state_root, "abcd1234", ws, now_ns(), &pin, &dir, &err),
                     0, "%s", err.msg);
        int fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        struct review_summary sum;
        cr_assert_eq(review_capture(fd, dir, 0, &sum, &err), 0, "%s", err.msg);
        close(fd);
        struct review_report rep;
        cr_expect_eq(review_accept(dir, NULL, 0, &rep, &err), -ESTALE, "%s", err.msg);
        cr_expect(!exists(victim, "planted.sh"));
        cr_expect(exists(victim, "keep.txt"));
        free(dir);
}
