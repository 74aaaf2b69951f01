/* SPDX-License-Identifier: Apache-2.0 */
/* A recursive list and a watch are checked against the sandbox's deny list
 * when the request arrives; a directory holding a denied entry that the
 * agent moves into the tree afterwards must still show none of its names,
 * sizes or modes (daemon/files.c, daemon/files-watch.c walk by identity). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files-deny.h"
#include "files-tar.h"
#include "files-watch.h"
#include "files.h"
#include "fs.h"
#include "policy.h"
#include "util.h"

static char ws[64];
static int root = -1;

static void at(char *p, size_t n, const char *rel)
{
        snprintf(p, n, "%s/%s", ws, rel);
}

static void put(const char *rel, const char *text)
{
        char p[256];
        at(p, sizeof(p), rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert(fd >= 0, "%s", p);
        cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        close(fd);
}

static void dir(const char *rel)
{
        char p[256];
        at(p, sizeof(p), rel);
        cr_assert_eq(mkdir(p, 0755), 0, "%s", p);
}

static struct files_deny *deny_set(void)
{
        struct policy *pol = policy_new();
        struct al_error e = {0};
        char json[512];
        snprintf(json, sizeof(json),
                 "{\"workspace\": {\"path\": \"%s\"}, \"filesystem\": {\"denyRead\": "
                 "[\"%s/p/private\"]}}",
                 ws, ws);
        cr_assert_eq(policy_load_string(pol, json, "policy.json", &e), 0, "%s", e.msg);
        cr_assert_eq(policy_finalize(pol, "/", "/root", &e), 0, "%s", e.msg);
        struct files_deny *d = NULL;
        cr_assert_eq(files_deny_new(pol, "/root", NULL, &d, &e), 0, "%s", e.msg);
        policy_free(pol);
        return d;
}

/* t/ holds nothing denied when the request is checked; then p/, holding
 * the denied p/private, is moved in as t/moved. */
static void setup(void)
{
        snprintf(ws, sizeof(ws), "/tmp/airlock-fdwalk-XXXXXX");
        cr_assert_not_null(mkdtemp(ws));
        dir("p");
        dir("p/private");
        put("p/private/PRIVATE-NAME", "PRIVATE-KEY\n");
        dir("t");
        put("t/open.txt", "fine\n");
        root = open(ws, O_PATH | O_DIRECTORY | O_CLOEXEC);
        cr_assert(root >= 0);
}

static void move_in(void)
{
        char a[256], b[256];
        at(a, sizeof(a), "p");
        at(b, sizeof(b), "t/moved");
        cr_assert_eq(rename(a, b), 0);
}

static void teardown(void)
{
        close(root);
        fs_remove_tree(AT_FDCWD, ws, 16);
}

static char *list(const char *rel, unsigned depth, struct files_deny *d, int *ret)
{
        struct al_error e = {0};
        json_t *o = NULL;
        *ret = files_list_deny(root, rel, depth, 1000, d, &o, &e);
        char *s = o ? json_dumps(o, 0) : xstrdup("");
        json_decref(o);
        return s;
}

Test(files_deny_walkers, list_leaves_out_what_moves_in, .init = setup, .fini = teardown)
{
        struct files_deny *d = deny_set();
        move_in();
        int r;
        _cleanup_free_ char *plain = list("t", 8, NULL, &r);
        cr_assert_eq(r, 0);
        cr_assert(strstr(plain, "PRIVATE-NAME"), "the test's tree is wrong: %s", plain);
        _cleanup_free_ char *tree = list("t", 8, d, &r);
        cr_expect_eq(r, 0);
        cr_expect_null(strstr(tree, "private"), "a denied entry was listed: %s", tree);
        cr_expect(strstr(tree, "open.txt"), "%s", tree);
        _cleanup_free_ char *flat = list("t/moved", 0, d, &r);
        cr_expect_eq(r, 0);
        cr_expect_null(strstr(flat, "private"), "a denied entry was listed: %s", flat);
        /* The denied directory itself, or one beneath it, by any path. */
        _cleanup_free_ char *inside = list("t/moved/private", 0, d, &r);
        cr_expect_eq(r, -EACCES, "%s", inside);
        _cleanup_free_ char *inside2 = list("t/moved/private", 2, d, &r);
        cr_expect_eq(r, -EACCES, "%s", inside2);
        files_deny_free(d);
}

static char *events(struct files_watch *w)
{
        json_t *out = json_array();
        struct pollfd p = {.fd = files_watch_fd(w), .events = POLLIN};
        while (poll(&p, 1, 300) > 0)
                if (files_watch_read(w, out) <= 0)
                        break;
        char *s = json_dumps(out, 0);
        json_decref(out);
        return s;
}

Test(files_deny_walkers, watch_never_enters_what_moves_in, .init = setup, .fini = teardown)
{
        struct files_deny *d1 = deny_set(), *d2 = deny_set();
        move_in();
        struct al_error e = {0};
        struct files_watch *plain = NULL, *checked = NULL;
        cr_assert_eq(files_watch_new(root, "t", true, "a", &plain, &e), 0, "%s", e.msg);
        cr_assert_eq(files_watch_new_deny(root, "t", true, "b", d1, &checked, &e), 0, "%s", e.msg);
        put("t/moved/private/PRIVATE-NAME", "changed\n");
        put("t/moved/private/NEW-NAME", "new\n");
        put("t/open.txt", "changed\n");
        _cleanup_free_ char *p = events(plain);
        cr_assert(strstr(p, "NEW-NAME"), "the test's tree is wrong: %s", p);
        _cleanup_free_ char *c = events(checked);
        cr_expect_null(strstr(c, "NAME"), "a denied directory was watched: %s", c);
        cr_expect(strstr(c, "open.txt"), "%s", c);
        files_watch_free(plain);
        files_watch_free(checked);
        /* Watching the denied directory by its new path is refused. */
        struct files_watch *in = NULL;
        cr_expect_eq(files_watch_new_deny(root, "t/moved/private", false, "c", d2, &in, &e),
                     -EACCES);
        files_watch_free(in);
}

/* A tar of moved/private/PRIVATE-NAME, as a client would upload it. */
static char *tar_bytes(size_t *ret_len)
{
        dir("src");
        dir("src/moved");
        dir("src/moved/private");
        put("src/moved/private/PRIVATE-NAME", "OVERWRITTEN\n");
        put("src/moved/plain.txt", "plain\n");
        struct files_tar_writer *w = NULL;
        struct al_error e = {0};
        cr_assert_eq(files_tar_writer_new(root, "src", &w, &e), 0, "%s", e.msg);
        size_t cap = 1 << 20, len = 0;
        char *buf = xcalloc(cap, 1);
        for (;;) {
                ssize_t n = files_tar_writer_read(w, buf + len, 512 * 16);
                cr_assert_geq(n, 0);
                if (n == 0)
                        break;
                len += (size_t)n;
                cr_assert_lt(len + 512 * 16, cap);
        }
        files_tar_writer_free(w);
        *ret_len = len;
        return buf;
}

Test(files_deny_walkers, tar_upload_never_writes_into_what_moves_in, .init = setup,
     .fini = teardown)
{
        size_t len;
        _cleanup_free_ char *tar = tar_bytes(&len);
        struct files_deny *d = deny_set();
        move_in();
        struct al_error e = {0};
        json_t *o = NULL;
        int r = files_tar_extract_deny(root, "t", tar, len, d, &o, &e);
        json_decref(o);
        cr_expect_eq(r, -EACCES, "%d %s", r, e.msg);
        char p[256];
        at(p, sizeof(p), "t/moved/private/PRIVATE-NAME");
        char got[64] = {0};
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        cr_assert(fd >= 0);
        cr_assert_gt(read(fd, got, sizeof(got) - 1), 0);
        close(fd);
        cr_expect_str_eq(got, "PRIVATE-KEY\n", "a denied file was overwritten");
        /* Without the set, the same tar would have: the test can fail. */
        r = files_tar_extract_deny(root, "t", tar, len, NULL, &o, &e);
        json_decref(o);
        cr_expect_eq(r, 0, "%s", e.msg);
        files_deny_free(d);
}
