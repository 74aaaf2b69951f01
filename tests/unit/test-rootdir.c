/* SPDX-License-Identifier: Apache-2.0 */
/* The root-from-a-directory engine's listing (rootdir.h), shared by the
 * container tier's image and airlock-runtime's bundle root. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rootdir.h"
#include "util.h"

static char dir[] = "/tmp/rootdir-XXXXXX";

static void mk(const char *rel, mode_t mode)
{
        _cleanup_free_ char *p = xasprintf("%s/%s", dir, rel);
        if (S_ISDIR(mode))
                cr_assert_eq(mkdir(p, 0755), 0, "%s", p);
        else if (S_ISFIFO(mode))
                cr_assert_eq(mkfifo(p, 0644), 0, "%s", p);
        else
                close(open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
}

static void setup(void)
{
        memcpy(dir, "/tmp/rootdir-XXXXXX", sizeof(dir));
        cr_assert_not_null(mkdtemp(dir));
        const char *dirs[] = {"usr", "etc",  "proc", "dev",       "sys",       "tmp",
                              "run", "root", "home", "workspace", "lost+found"};
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
                mk(dirs[i], S_IFDIR);
        mk("etc/resolv.conf", S_IFREG);
        mk("file", S_IFREG);
        mk("fifo", S_IFIFO);
        _cleanup_free_ char *l = xasprintf("%s/bin", dir);
        cr_assert_eq(symlink("usr/bin", l), 0);
}

static void teardown(void)
{
        _cleanup_free_ char *cmd = xasprintf("rm -rf %s", dir);
        (void)system(cmd);
}

TestSuite(rootdir, .init = setup, .fini = teardown);

static const struct rootdir_entry *find(const struct rootdir *rd, const char *name)
{
        for (size_t i = 0; i < rd->n_entries; i++)
                if (STREQ(rd->entries[i].name, name))
                        return &rd->entries[i];
        return NULL;
}

Test(rootdir, bundle)
{
        struct rootdir *rd = NULL;
        struct al_error e = {0};
        cr_assert_eq(rootdir_list(dir, ROOTDIR_BUNDLE, false, &rd, &e), 0, "%s", e.msg);
        cr_assert_eq(rd->kind, ROOTDIR_BUNDLE);
        cr_assert_not(rd->readonly);
        cr_assert(rd->resolv_file);
        /* usr, etc, home, file, bin: what Airlock makes fresh is left out,
         * and so is what is neither a directory, a file nor a link. */
        cr_assert_eq(rd->n_entries, 5);
        cr_assert_not_null(find(rd, "home"));
        cr_assert_null(find(rd, "lost+found"));
        cr_assert_null(find(rd, "fifo"));
        cr_assert_null(find(rd, "proc"));
        const struct rootdir_entry *l = find(rd, "bin");
        cr_assert_not_null(l);
        cr_assert_str_eq(l->link, "usr/bin");
        cr_assert_eq(l->mnt, -1);
        /* A root caller gets detached clones. */
        if (geteuid() == 0)
                cr_assert_geq(find(rd, "usr")->mnt, 0);
        rootdir_free(rd);
}

Test(rootdir, image)
{
        struct rootdir *rd = NULL;
        struct al_error e = {0};
        cr_assert_eq(rootdir_list(dir, ROOTDIR_IMAGE, false, &rd, &e), 0, "%s", e.msg);
        cr_assert(rd->readonly, "an image is read-only whatever is asked");
        cr_assert_null(find(rd, "home"));
        cr_assert_not_null(find(rd, "lost+found"));
        cr_assert_not_null(find(rd, "etc"));
        rootdir_free(rd);
}

Test(rootdir, not_a_directory)
{
        struct rootdir *rd = NULL;
        struct al_error e = {0};
        _cleanup_free_ char *f = xasprintf("%s/file", dir);
        cr_assert_lt(rootdir_list(f, ROOTDIR_BUNDLE, false, &rd, &e), 0);
        cr_assert_null(rd);
        cr_assert(strstr(e.msg, f), "%s", e.msg);
}
