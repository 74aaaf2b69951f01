/* SPDX-License-Identifier: Apache-2.0 */
/* The loader of the libraries airlock loads on first use (lazylib.h). */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>

#include "lazylib.h"

struct fs_view {
        bool known;
        dev_t root_dev, ns_dev;
        ino_t root_ino, ns_ino;
};

static struct fs_view at_start;

static struct fs_view fs_view_now(void)
{
        struct stat r, n;
        if (stat("/", &r) < 0 || stat("/proc/self/ns/mnt", &n) < 0)
                return (struct fs_view){.known = false};
        return (struct fs_view){.known = true,
                                .root_dev = r.st_dev,
                                .root_ino = r.st_ino,
                                .ns_dev = n.st_dev,
                                .ns_ino = n.st_ino};
}

__attribute__((constructor)) static void note_fs_view(void)
{
        at_start = fs_view_now();
}

void *lazylib_open(const char *soname, char *msg, size_t size)
{
        struct fs_view now = fs_view_now();
        if (!at_start.known || !now.known || now.root_dev != at_start.root_dev ||
            now.root_ino != at_start.root_ino || now.ns_dev != at_start.ns_dev ||
            now.ns_ino != at_start.ns_ino) {
                snprintf(msg, size,
                         "loading %s: refused: this process no longer sees the file system it "
                         "started on (its root or mount namespace changed)",
                         soname);
                return NULL;
        }
        void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
                const char *e = dlerror();
                snprintf(msg, size, "loading %s: %s", soname, e ? e : "failed");
        }
        return h;
}
