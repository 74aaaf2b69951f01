/* SPDX-License-Identifier: Apache-2.0 */
/* Root accepting into another user's workspace gives what it creates that
 * user's ownership. It did so by name (fchownat in the parent), after the
 * entry was made: the workspace's owner, who can rename in their own
 * directories, could put a hard link to a file of root's at that name in
 * between, and root gave them that file. The owner is now set on the
 * entry root made, through its descriptor, or not at all.
 *
 * The owner's move is simulated at the exact moment (a link-time wrap of
 * the call before the ownership is set), as root: the point is what the
 * accept does with the name it finds, whatever put it there. */
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

#define OWNER 65534

static char top[64], ws[128], upper[128], state_root[128], victim[128];

/* Which call the simulated owner races: its name swapped for a hard link
 * of the victim right after the accept made it. */
static enum { RACE_NONE, RACE_FILE, RACE_DIR, RACE_LINK, RACE_DIR_MODE } race;

int __real_fchmod(int fd, mode_t mode);
int __real_mkdirat(int dirfd, const char *name, mode_t mode);
int __real_symlinkat(const char *target, int dirfd, const char *name);
int __wrap_fchmod(int fd, mode_t mode);
int __wrap_mkdirat(int dirfd, const char *name, mode_t mode);
int __wrap_symlinkat(const char *target, int dirfd, const char *name);

static void put_victim_at(int dirfd, const char *name, bool dir)
{
        cr_assert_eq(unlinkat(dirfd, name, dir ? AT_REMOVEDIR : 0), 0, "%s", name);
        cr_assert_eq(linkat(AT_FDCWD, victim, dirfd, name, 0), 0, "%s", name);
}

int __wrap_fchmod(int fd, mode_t mode)
{
        char proc[64], path[PATH_MAX];
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(proc, path, sizeof(path) - 1);
        if (race == RACE_DIR_MODE && n > 0) {
                /* Before the last pass sets directory modes: the new
                 * directory's name given to a directory of root's. */
                path[n] = '\0';
                const char *base = strrchr(path, '/') + 1;
                if (strncmp(base, ".airlock-", 9) == 0) {
                        race = RACE_NONE;
                        char a[PATH_MAX], b[PATH_MAX], c[PATH_MAX];
                        snprintf(a, sizeof(a), "%s/newdir", ws);
                        snprintf(b, sizeof(b), "%s/newdir.aside", ws);
                        snprintf(c, sizeof(c), "%s/rootdir", ws);
                        cr_assert_eq(rename(a, b), 0);
                        cr_assert_eq(rename(c, a), 0);
                }
        }
        if (race == RACE_FILE && n > 0) {
                path[n] = '\0';
                const char *base = strrchr(path, '/') + 1;
                if (strncmp(base, ".airlock-", 9) == 0) {
                        race = RACE_NONE;
                        cr_assert_eq(unlink(path), 0);
                        cr_assert_eq(link(victim, path), 0);
                }
        }
        return __real_fchmod(fd, mode);
}

int __wrap_mkdirat(int dirfd, const char *name, mode_t mode)
{
        int r = __real_mkdirat(dirfd, name, mode);
        if (r == 0 && race == RACE_DIR && STREQ(name, "newdir")) {
                race = RACE_NONE;
                put_victim_at(dirfd, name, true);
        }
        return r;
}

int __wrap_symlinkat(const char *target, int dirfd, const char *name)
{
        int r = __real_symlinkat(target, dirfd, name);
        if (r == 0 && race == RACE_LINK && strncmp(name, ".airlock-", 9) == 0) {
                race = RACE_NONE;
                put_victim_at(dirfd, name, false);
        }
        return r;
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

static void setup(void)
{
        if (geteuid() != 0)
                cr_skip_test("root accepts for another user only as root");
        snprintf(top, sizeof(top), "/var/tmp/airlock-test-revatk3-XXXXXX");
        cr_assert_not_null(mkdtemp(top));
        snprintf(ws, sizeof(ws), "%s/ws", top);
        snprintf(upper, sizeof(upper), "%s/upper", top);
        snprintf(state_root, sizeof(state_root), "%s/state", top);
        snprintf(victim, sizeof(victim), "%s/victim", top);
        cr_assert_eq(mkdir(ws, 0755), 0);
        cr_assert_eq(chown(ws, OWNER, OWNER), 0);
        cr_assert_eq(mkdir(upper, 0755), 0);
        int fd = open(victim, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        close(fd);
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/newfile", upper);
        fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0);
        cr_assert_eq(write_full(fd, "agent\n", 6), 0);
        close(fd);
        snprintf(p, sizeof(p), "%s/newdir", upper);
        cr_assert_eq(mkdir(p, 0755), 0);
        snprintf(p, sizeof(p), "%s/newlink", upper);
        cr_assert_eq(symlink("newfile", p), 0);
}

static void teardown(void)
{
        race = RACE_NONE;
        if (top[0])
                nftw(top, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(review_attacks3, .init = setup, .fini = teardown, .timeout = 30);

static void accept_racing(int which)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct al_error err = {0};
        char *dir = NULL;
        cr_assert_eq(review_create(state_root, "abcd1234", ws,
                                   (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec,
                                   &dir, &err),
                     0, "%s", err.msg);
        int fd = open(upper, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        struct review_summary sum;
        cr_assert_eq(review_capture(fd, dir, 0, &sum, &err), 0, "%s", err.msg);
        close(fd);
        race = which;
        struct review_report rep;
        (void)review_accept(dir, NULL, 0, &rep, &err);
        cr_assert_eq(race, RACE_NONE, "the race did not run");
        struct stat st;
        cr_assert_eq(stat(victim, &st), 0);
        cr_expect_eq(st.st_uid, 0, "root's file was given to uid %u", (unsigned)st.st_uid);
        free(dir);
}

Test(review_attacks3, a_new_file_swapped_for_a_hard_link_is_not_given_away)
{
        accept_racing(RACE_FILE);
}

Test(review_attacks3, a_new_directory_swapped_for_a_hard_link_is_not_given_away)
{
        accept_racing(RACE_DIR);
}

Test(review_attacks3, a_new_symlink_swapped_for_a_hard_link_is_not_given_away)
{
        accept_racing(RACE_LINK);
}

/* A new directory's name given to a directory of root's before its mode
 * is set: root's directory keeps its mode. */
Test(review_attacks3, a_new_directory_swapped_before_its_mode_keeps_roots_mode)
{
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/rootdir", ws);
        cr_assert_eq(mkdir(p, 0700), 0);
        snprintf(p, sizeof(p), "%s/newdir", upper);
        cr_assert_eq(chmod(p, 0777), 0);
        accept_racing(RACE_DIR_MODE);
        snprintf(p, sizeof(p), "%s/newdir", ws);
        struct stat st;
        cr_assert_eq(stat(p, &st), 0);
        cr_expect_eq(st.st_uid, 0);
        cr_expect_eq(st.st_mode & 07777, 0700, "root's directory was made %04o",
                     (unsigned)st.st_mode & 07777);
}

/* Without a race, what root makes still gets the workspace owner's. */
Test(review_attacks3, new_entries_get_the_workspace_owner)
{
        accept_racing(RACE_NONE);
        char p[PATH_MAX];
        static const char *const names[] = {"newfile", "newdir", "newlink"};
        for (size_t i = 0; i < 3; i++) {
                struct stat st;
                snprintf(p, sizeof(p), "%s/%s", ws, names[i]);
                cr_assert_eq(lstat(p, &st), 0, "%s", p);
                cr_expect_eq(st.st_uid, OWNER, "%s: uid %u", names[i], (unsigned)st.st_uid);
        }
}
