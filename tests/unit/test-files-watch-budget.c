/* SPDX-License-Identifier: Apache-2.0 */
/* The files API's watches hold the kernel's inotify watches, counted per
 * user: the daemon's are root's, shared with the host's services. One
 * grant must not take them all (daemon/files-watch.c). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files-watch.h"
#include "fs.h"
#include "util.h"

static int make_tree(char *dir, size_t n)
{
        char tmpl[] = "/tmp/airlock-watch-XXXXXX";
        cr_assert_not_null(mkdtemp(tmpl));
        snprintf(dir, 64, "%s", tmpl);
        int root = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        cr_assert(root >= 0);
        for (size_t i = 0; i < n; i++) {
                char name[32];
                snprintf(name, sizeof(name), "d%zu", i);
                cr_assert_eq(mkdirat(root, name, 0755), 0);
        }
        return root;
}

Test(files_watch_budget, one_owner_cannot_take_every_watch)
{
        char dir[64];
        /* More directories than one watch takes. */
        int root = make_tree(dir, FILES_WATCH_DIRS_MAX + 8);
        struct files_watch *w[16] = {0};
        size_t n = 0;
        struct al_error err = {0};
        size_t limit = FILES_WATCH_OWNER_MAX / FILES_WATCH_DIRS_MAX;
        for (; n < limit; n++)
                cr_assert_eq(files_watch_new(root, ".", true, "grant-a", &w[n], &err), 0, "%s",
                             err.msg);
        /* The owner's share is spent: a further watch is refused with why. */
        struct files_watch *extra = NULL;
        int r = files_watch_new(root, ".", true, "grant-a", &extra, &err);
        cr_expect_eq(r, -ENOSPC, "owner a holds %zu watches of %d directories and got one more", n,
                     FILES_WATCH_DIRS_MAX);
        cr_expect(strstr(err.msg, "watches are spent"), "%s", err.msg);
        files_watch_free(extra);
        /* Another owner still can. */
        struct files_watch *b = NULL;
        cr_expect_eq(files_watch_new(root, ".", true, "grant-b", &b, &err), 0, "%s", err.msg);
        files_watch_free(b);
        /* Freed watches give their share back. */
        files_watch_free(w[0]);
        w[0] = NULL;
        cr_expect_eq(files_watch_new(root, ".", true, "grant-a", &w[0], &err), 0, "%s", err.msg);
        for (size_t i = 0; i < n; i++)
                files_watch_free(w[i]);
        close(root);
        fs_remove_tree(AT_FDCWD, dir, 4);
}
