/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>

#include "files.h"
#include "util.h"

static char dir[64];
static char ws[128];
static char outside[128];
static int root = -1;

static int rm_entry(const char *p, const struct stat *s, int flag, struct FTW *ftw)
{
        return remove(p);
}

static void put(const char *rel, const char *content)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", ws, rel);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert_geq(fd, 0, "%s", p);
        cr_assert_eq(write_full(fd, content, strlen(content)), 0);
        close(fd);
}

static void link_at(const char *target, const char *rel)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", ws, rel);
        cr_assert_eq(symlink(target, p), 0, "%s", p);
}

static void setup(void)
{
        snprintf(dir, sizeof(dir), "/tmp/airlock-test-files-XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
        snprintf(ws, sizeof(ws), "%s/ws", dir);
        snprintf(outside, sizeof(outside), "%s/outside", dir);
        cr_assert_eq(mkdir(ws, 0755), 0);
        cr_assert_eq(mkdir(outside, 0755), 0);
        _cleanup_free_ char *secret = xasprintf("%s/secret", outside);
        int fd = open(secret, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        cr_assert_eq(write_full(fd, "s", 1), 0);
        close(fd);
        struct al_error err = {0};
        cr_assert_eq(files_open_root(ws, &root, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
        if (root >= 0)
                close(root);
        root = -1;
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(files, .init = setup, .fini = teardown);

static char *clean(const char *p, bool allow_root, int *ret)
{
        struct al_error err = {0};
        char *out = NULL;
        *ret = files_clean_path(p, allow_root, &out, &err);
        return out;
}

Test(files, clean_path)
{
        int r;
        struct {
                const char *in, *out;
        } ok[] = {
                {"a", "a"},
                {"a/b/c", "a/b/c"},
                {"./a//b/./", "a/b"},
                {"/workspace/a", "a"},
                {"/workspace", "."},
                {"/workspace/", "."},
                {".", "."},
                {"a/.hidden", "a/.hidden"},
                {"a..b", "a..b"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(ok); i++) {
                _cleanup_free_ char *o = clean(ok[i].in, true, &r);
                cr_assert_eq(r, 0, "%s", ok[i].in);
                cr_assert_str_eq(o, ok[i].out, "%s", ok[i].in);
        }
        const char *bad[] = {"", "..", "../a", "a/../b", "a/..", "/etc/passwd", "/workspacex",
                             "/", "a/\xff"};
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                _cleanup_free_ char *o = clean(bad[i], true, &r);
                cr_assert_lt(r, 0, "%s", bad[i]);
                cr_assert_null(o);
        }
        _cleanup_free_ char *o = clean("/workspace", false, &r);
        cr_assert_lt(r, 0, "the workspace itself, where a file is meant");
}

Test(files, read_regular_and_bounded)
{
        put("f", "hello");
        struct al_error err = {0};
        char *data = NULL;
        size_t len = 0;
        cr_assert_eq(files_read(root, "f", 1024, &data, &len, &err), 0, "%s", err.msg);
        cr_assert_eq(len, 5);
        cr_assert_str_eq(data, "hello");
        free(data);
        cr_assert_eq(files_read(root, "f", 5, &data, &len, &err), 0, "exactly max is fine");
        free(data);
        cr_assert_eq(files_read(root, "f", 4, &data, &len, &err), -EFBIG);
        cr_assert_eq(files_read(root, "missing", 4, &data, &len, &err), -ENOENT);
        _cleanup_free_ char *fifo = xasprintf("%s/fifo", ws);
        cr_assert_eq(mkfifo(fifo, 0644), 0);
        cr_assert_eq(files_read(root, "fifo", 4, &data, &len, &err), -EINVAL, "no hang on a FIFO");
        cr_assert_eq(files_read(root, ".", 4, &data, &len, &err), -EISDIR);
}

Test(files, read_refuses_links_out)
{
        put("in", "inside");
        link_at(outside, "dirlink");
        _cleanup_free_ char *abs = xasprintf("%s/secret", outside);
        link_at(abs, "abslink");
        link_at("../outside/secret", "rellink");
        link_at("in", "innerlink");
        link_at("/proc/self/root/etc/passwd", "magic");
        struct al_error err = {0};
        char *data = NULL;
        size_t len;
        cr_assert_eq(files_read(root, "dirlink/secret", 64, &data, &len, &err), -EXDEV);
        cr_assert(strstr(err.msg, "leads out of the workspace"), "%s", err.msg);
        cr_assert_eq(files_read(root, "abslink", 64, &data, &len, &err), -EXDEV);
        cr_assert_eq(files_read(root, "rellink", 64, &data, &len, &err), -EXDEV);
        cr_assert_lt(files_read(root, "magic", 64, &data, &len, &err), 0);
        cr_assert_eq(files_read(root, "innerlink", 64, &data, &len, &err), 0);
        cr_assert_str_eq(data, "inside");
        free(data);
}

Test(files, write_creates_replaces_and_keeps_mode)
{
        struct al_error err = {0};
        cr_assert_eq(files_write(root, "a/b/c.txt", "xyz", 3, true, &err), 0, "%s", err.msg);
        char *data = NULL;
        size_t len;
        cr_assert_eq(files_read(root, "a/b/c.txt", 64, &data, &len, &err), 0);
        cr_assert_str_eq(data, "xyz");
        free(data);
        _cleanup_free_ char *p = xasprintf("%s/a/b/c.txt", ws);
        cr_assert_eq(chmod(p, 0751), 0);
        cr_assert_eq(files_write(root, "a/b/c.txt", "1", 1, false, &err), 0);
        struct stat s;
        cr_assert_eq(stat(p, &s), 0);
        cr_assert_eq(s.st_mode & 0777, 0751);
        cr_assert_eq(s.st_size, 1);
        cr_assert_eq(files_write(root, "no/such/dir", "1", 1, false, &err), -ENOENT);
        cr_assert_eq(files_write(root, "a", "1", 1, false, &err), -EISDIR);
        /* No temporary file is left behind. */
        _cleanup_free_ char *d = xasprintf("%s/a/b", ws);
        DIR *dd = opendir(d);
        int n = 0;
        struct dirent *de;
        while ((de = readdir(dd)))
                n += de->d_name[0] != '.';
        closedir(dd);
        cr_assert_eq(n, 1);
}

Test(files, write_follows_no_link)
{
        put("in", "inside");
        link_at(outside, "dirlink");
        link_at("in", "innerlink");
        _cleanup_free_ char *sub = xasprintf("%s/sub", ws);
        cr_assert_eq(mkdir(sub, 0755), 0);
        link_at("../in", "sub/up");
        struct al_error err = {0};
        cr_assert_eq(files_write(root, "dirlink/secret", "x", 1, false, &err), -ELOOP);
        cr_assert_eq(files_write(root, "dirlink/new", "x", 1, true, &err), -ELOOP);
        cr_assert_eq(files_write(root, "innerlink", "x", 1, false, &err), -ELOOP);
        cr_assert_eq(files_write(root, "sub/up", "x", 1, false, &err), -ELOOP);
        _cleanup_free_ char *secret = xasprintf("%s/secret", outside);
        char *data = NULL;
        size_t len;
        cr_assert_eq(read_file_at(AT_FDCWD, secret, 64, &data, &len), 0);
        cr_assert_str_eq(data, "s");
        free(data);
        _cleanup_free_ char *leaked = xasprintf("%s/new", outside);
        cr_assert_neq(access(leaked, F_OK), 0);
}

Test(files, delete_and_list)
{
        struct al_error err = {0};
        put("f", "1");
        link_at(outside, "dirlink");
        cr_assert_eq(files_write(root, "t/u/v", "1", 1, true, &err), 0);
        json_t *l = NULL;
        cr_assert_eq(files_list(root, ".", 100, &l, &err), 0);
        json_t *e = json_object_get(l, "entries");
        cr_assert_eq(json_array_size(e), 3);
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(e, 0), "name")), "dirlink");
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(e, 0), "type")), "symlink");
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(e, 2), "type")), "dir");
        json_decref(l);
        cr_assert_eq(files_list(root, ".", 2, &l, &err), 0);
        cr_assert(json_is_true(json_object_get(l, "truncated")));
        json_decref(l);
        cr_assert_eq(files_list(root, "dirlink", 100, &l, &err), -EXDEV);

        cr_assert_eq(files_delete(root, "t", false, &err), -ENOTEMPTY);
        cr_assert_eq(files_delete(root, "t", true, &err), 0);
        cr_assert_eq(files_delete(root, "dirlink", false, &err), 0, "the link, not its target");
        _cleanup_free_ char *secret = xasprintf("%s/secret", outside);
        cr_assert_eq(access(secret, F_OK), 0);
        cr_assert_eq(files_delete(root, "missing", false, &err), -ENOENT);
        cr_assert_eq(files_delete(root, ".", true, &err), -EINVAL);
}

Test(files, remove_tree_does_not_follow_links)
{
        struct al_error err = {0};
        cr_assert_eq(files_write(root, "t/a/b/c", "1", 1, true, &err), 0);
        _cleanup_free_ char *l = xasprintf("%s/t/a/out", ws);
        cr_assert_eq(symlink(outside, l), 0);
        _cleanup_close_ int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert_eq(files_remove_tree(d, "ws"), 0);
        cr_assert_neq(access(ws, F_OK), 0);
        _cleanup_free_ char *secret = xasprintf("%s/secret", outside);
        cr_assert_eq(access(secret, F_OK), 0);
}
