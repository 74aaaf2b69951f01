/* SPDX-License-Identifier: Apache-2.0 */
/* The sandbox's deny list applied to the files API (daemon/files-deny.c):
 * by identity, so that links and renames by the agent do not lead around
 * it, and in a tar as each entry is reached (a denied directory moved into
 * the tree after the request was checked is still left out). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files-deny.h"
#include "files-tar.h"
#include "fs.h"
#include "policy.h"
#include "util.h"

static char ws[64];
static int root = -1;
static struct files_deny *deny;

static void put(const char *rel, const char *text)
{
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", ws, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert(fd >= 0, "%s", p);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

static void dir(const char *rel)
{
        char p[256];
        snprintf(p, sizeof(p), "%s/%s", ws, rel);
        cr_assert_eq(mkdir(p, 0755), 0, "%s", p);
}

/* files_deny_new, made again until the set is fresh: its default entries
 * lie under every home of the machine, where other tests running at the
 * same time make and remove files. At most 50 tries: a set that is never
 * fresh fails. */
static struct files_deny *fresh_set(const struct policy *pol, const char *secrets)
{
        for (int i = 0; i < 50; i++) {
                struct files_deny *d = NULL;
                struct al_error e = {0};
                cr_assert_eq(files_deny_new(pol, "/root", secrets, &d, &e), 0, "%s", e.msg);
                if (files_deny_fresh(d))
                        return d;
                files_deny_free(d);
                usleep(20000);
        }
        cr_assert_fail("a set just made is never fresh");
        return NULL;
}

static void setup(void)
{
        snprintf(ws, sizeof(ws), "/tmp/airlock-fdeny-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        dir("p");
        dir("p/private");
        put("p/private/key", "PRIVATE-KEY\n");
        dir("t");
        put("t/open.txt", "fine\n");
        put("secret.env", "TOKEN=SECRET-VALUE\n");
        struct policy *pol = policy_new();
        struct al_error e = {0};
        char json[512];
        snprintf(json, sizeof(json),
                 "{\"workspace\": {\"path\": \"%s\"}, \"filesystem\": {\"denyRead\": "
                 "[\"%s/p/private\"]}}",
                 ws, ws);
        cr_assert_eq(policy_load_string(pol, json, "policy.json", &e), 0, "%s", e.msg);
        cr_assert_eq(policy_finalize(pol, "/", "/root", &e), 0, "%s", e.msg);
        char sec[128];
        snprintf(sec, sizeof(sec), "%s/secret.env", ws);
        deny = fresh_set(pol, sec);
        policy_free(pol);
        root = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
        cr_assert(root >= 0);
}

static void teardown(void)
{
        deny = files_deny_free(deny);
        close(root);
        fs_remove_tree(AT_FDCWD, ws, 16);
}

static int check(const char *rel, bool tree)
{
        struct al_error e = {0};
        return files_deny_check(deny, root, rel, tree, &e);
}

Test(files_deny, paths, .init = setup, .fini = teardown)
{
        cr_expect_eq(check("t/open.txt", false), 0);
        cr_expect_eq(check("t", true), 0);
        cr_expect_eq(check("t/new-file", false), 0);
        cr_expect_eq(check("secret.env", false), -EACCES);
        cr_expect_eq(check("p/private", false), -EACCES);
        cr_expect_eq(check("p/private/key", false), -EACCES);
        cr_expect_eq(check("p/private/new/deeper", false), -EACCES);
        cr_expect_eq(check("p", false), 0);
        cr_expect_eq(check("p", true), -EACCES);
        cr_expect_eq(check(".", true), -EACCES);
        /* A link the agent made leads to the entry, not around it; and a
         * hard link is the entry. */
        char p[256];
        snprintf(p, sizeof(p), "%s/t/l", ws);
        cr_assert_eq(symlink("../p/private/key", p), 0);
        cr_expect_eq(check("t/l", false), -EACCES);
        snprintf(p, sizeof(p), "%s/t/h", ws);
        char s[256];
        snprintf(s, sizeof(s), "%s/secret.env", ws);
        cr_assert_eq(link(s, p), 0);
        cr_expect_eq(check("t/h", false), -EACCES);
        /* A rename does not take an entry out of the set. */
        char a[256], b[256];
        snprintf(a, sizeof(a), "%s/p", ws);
        snprintf(b, sizeof(b), "%s/t/moved", ws);
        cr_assert_eq(rename(a, b), 0);
        cr_expect_eq(check("t/moved/private/key", false), -EACCES);
        cr_expect_eq(check("t", true), -EACCES);
}

static char *tar_of(const char *rel, struct files_deny *d)
{
        struct files_tar_writer *w = NULL;
        struct al_error e = {0};
        cr_assert_eq(files_tar_writer_new(root, rel, &w, &e), 0, "%s", e.msg);
        if (d)
                files_tar_writer_deny(w, d);
        size_t cap = 1 << 20, len = 0;
        char *buf = xcalloc(cap + 1, 1);
        for (;;) {
                ssize_t n = files_tar_writer_read(w, buf + len, 512 * 16);
                cr_assert_geq(n, 0);
                if (n == 0)
                        break;
                len += (size_t)n;
                cr_assert_lt(len + 512 * 16, cap);
        }
        files_tar_writer_free(w);
        for (size_t i = 0; i < len; i++)
                if (!buf[i])
                        buf[i] = ' ';
        return buf;
}

/* The tar of t/ was checked when t held nothing denied; then a directory
 * holding a denied entry is moved in before the walk reaches it. */
Test(files_deny, tar_leaves_out_what_moves_in, .init = setup, .fini = teardown)
{
        char a[256], b[256];
        snprintf(a, sizeof(a), "%s/p", ws);
        snprintf(b, sizeof(b), "%s/t/moved", ws);
        cr_assert_eq(rename(a, b), 0);
        _cleanup_free_ char *plain = tar_of("t", NULL);
        cr_assert(strstr(plain, "PRIVATE-KEY"), "the test's tree is wrong");
        _cleanup_free_ char *checked = tar_of("t", TAKE_PTR(deny));
        cr_expect_null(strstr(checked, "PRIVATE-KEY"), "a denied file went into the tar");
        cr_expect(strstr(checked, "fine"));
}

/* A set kept a while (the files API keeps one per sandbox) is only as good
 * as the identities it holds: a denied file replaced by a rename, or a
 * denied path that appears, makes it stale. */
Test(files_deny, a_replaced_or_new_entry_makes_the_set_stale, .init = setup, .fini = teardown)
{
        /* setup's set was fresh when made (fresh_set). */
        put("secret.env.new", "TOKEN=ROTATED\n");
        char from[128], to[128];
        snprintf(from, sizeof(from), "%s/secret.env.new", ws);
        snprintf(to, sizeof(to), "%s/secret.env", ws);
        cr_assert_eq(rename(from, to), 0);
        cr_assert(!files_deny_fresh(deny), "the secrets file was replaced: a new inode");
        deny = files_deny_free(deny);

        /* A denyRead entry that is not there when the set is made. */
        char json[512], gone[128];
        snprintf(gone, sizeof(gone), "%s/later", ws);
        snprintf(json, sizeof(json),
                 "{\"workspace\": {\"path\": \"%s\"}, \"filesystem\": {\"denyRead\": [\"%s\"]}}",
                 ws, gone);
        struct policy *pol = policy_new();
        struct al_error e = {0};
        cr_assert_eq(policy_load_string(pol, json, "policy.json", &e), 0, "%s", e.msg);
        cr_assert_eq(policy_finalize(pol, "/", "/root", &e), 0, "%s", e.msg);
        deny = fresh_set(pol, NULL);
        policy_free(pol);
        put("later", "MADE LATER\n");
        cr_assert(!files_deny_fresh(deny), "a denied path appeared");
}
