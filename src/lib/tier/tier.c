/* SPDX-License-Identifier: Apache-2.0 */
/* The isolation tiers: availability and what a spawn needs (tier.h). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "microvm.h"
#include "tier.h"
#include "util.h"

#define RUNSC_PATH           "/usr/bin/runsc"
#define SETPRIV              "/usr/bin/setpriv"
#define TIER_GVISOR_PIDS_MIN 64
/* The sandbox user, the policy's default uid. */
#define TIER_GVISOR_UID 1000

static int refuse(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(char *why, size_t n, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
        return -EOPNOTSUPP;
}

int tier_available(enum policy_tier t, char *why, size_t n)
{
        switch (t) {
        case POLICY_TIER_NAMESPACE:
        case POLICY_TIER_CONTAINER:
                /* Both build the same boundary; the container tier needs
                 * only its image, checked when it is named. */
                return 0;
        case POLICY_TIER_GVISOR:
                if (access(RUNSC_PATH, X_OK) < 0)
                        return refuse(why, n,
                                      "the gvisor tier needs runsc, and %s is missing "
                                      "(install the runsc package)",
                                      RUNSC_PATH);
                if (access(SETPRIV, X_OK) < 0)
                        return refuse(why, n,
                                      "the gvisor tier drops the command's capabilities inside "
                                      "gVisor with %s, which is missing (install util-linux)",
                                      SETPRIV);
                return 0;
        case POLICY_TIER_MICROVM: {
                enum tier_vm_accel accel;
                return tier_microvm_host(&accel, why, n);
        }
        default:
                return refuse(why, n, "%s", "unknown tier");
        }
}

char **tier_gvisor_argv(char *const *argv, const char *cwd)
{
        static char *const head[] = {
            RUNSC_PATH,
            /* Its own user namespace inside Airlock's, no host cgroup setup:
             * Airlock's cgroup already holds the whole tree. */
            "--rootless",
            "--ignore-cgroups",
            /* The network of the namespace runsc runs in: Airlock's, where
             * only the gate's listeners on 127.0.0.1 exist. */
            "--network=host",
            /* The tool gateway's socket at /run/airlock/tool.sock. */
            "--host-uds=open",
            /* Its state in the sandbox's own /tmp. */
            "--root=/tmp/.runsc",
            "do",
            /* Airlock's root is already read-only but for the workspace,
             * /tmp and $HOME: writes reach them as in the namespace tier. */
            "--force-overlay=false",
            "--quiet",
        };
        size_t n = 0;
        while (argv[n])
                n++;
        char **v = xcalloc(ARRAY_SIZE(head) + n + 12, sizeof(char *));
        size_t k = 0;
        for (size_t i = 0; i < ARRAY_SIZE(head); i++)
                v[k++] = head[i];
        static char cwd_flag[] = "--cwd";
        v[k++] = cwd_flag;
        v[k++] = (char *)(cwd ? cwd : "/");
        /* runsc starts the command as root of gVisor's kernel with every
         * capability: drop them all, for good, before the agent runs. */
        static char *const drop[] = {
            SETPRIV,
            "--inh-caps=-all",
            "--ambient-caps=-all",
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
        };
        for (size_t i = 0; i < ARRAY_SIZE(drop); i++)
                v[k++] = drop[i];
        for (size_t i = 0; i < n; i++)
                v[k++] = argv[i];
        return v;
}

struct tier_image *tier_image_free(struct tier_image *t)
{
        if (!t)
                return NULL;
        for (size_t i = 0; i < t->n_entries; i++) {
                free(t->entries[i].name);
                free(t->entries[i].link);
                if (t->entries[i].mnt >= 0)
                        close(t->entries[i].mnt);
        }
        free(t->entries);
        free(t->path);
        free(t);
        return NULL;
}

static const char *const image_skip[] = {
    "proc", "dev", "sys", "tmp", "run", "home", "root", "workspace",
};

static int list_image(struct tier_image *t, bool clone, struct al_error *err)
{
        _cleanup_close_ int root = open(t->path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return al_error_set(err, errno, "opening image %s", t->path);
        struct stat rst;
        t->resolv_file = fstatat(root, "etc/resolv.conf", &rst, AT_SYMLINK_NOFOLLOW) == 0 &&
                         S_ISREG(rst.st_mode);
        int dfd = fcntl(root, F_DUPFD_CLOEXEC, 3);
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!d) {
                int e = errno;
                if (dfd >= 0)
                        close(dfd);
                return al_error_set(err, e, "reading image %s", t->path);
        }
        struct dirent *de;
        int r = 0;
        while (r >= 0 && (de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                bool skip = false;
                for (size_t i = 0; i < ARRAY_SIZE(image_skip); i++)
                        skip = skip || STREQ(de->d_name, image_skip[i]);
                struct stat st;
                if (skip || fstatat(root, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
                        continue;
                if (t->n_entries >= 256) {
                        r = al_error_set(err, 0, "image %s: more than 256 top-level entries",
                                         t->path);
                        break;
                }
                t->entries = xrealloc(t->entries, t->n_entries + 1, sizeof(*t->entries));
                struct tier_entry *e = &t->entries[t->n_entries++];
                *e = (struct tier_entry){.name = xstrdup(de->d_name), .mnt = -1};
                if (S_ISLNK(st.st_mode)) {
                        char buf[PATH_MAX];
                        ssize_t n = readlinkat(root, de->d_name, buf, sizeof(buf) - 1);
                        if (n < 0) {
                                r = al_error_set(err, errno, "reading link /%s of the image",
                                                 de->d_name);
                                break;
                        }
                        buf[n] = '\0';
                        e->link = xstrdup(buf);
                        continue;
                }
                if (!clone)
                        continue;
                e->mnt = open_tree(root, de->d_name,
                                   OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE |
                                       AT_SYMLINK_NOFOLLOW);
                struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID |
                                                      MOUNT_ATTR_NODEV};
                if (e->mnt < 0 || mount_setattr(e->mnt, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr,
                                                sizeof(attr)) < 0)
                        r = al_error_set(err, errno, "cloning /%s of the image", de->d_name);
        }
        closedir(d);
        return r < 0 ? r : 0;
}

int tier_prepare(const struct policy *p, uid_t uid, const char *caller_home,
                 struct tier_image **ret_image, struct al_error *err)
{
        char why[512];

        *ret_image = NULL;
        if (tier_available(p->tier, why, sizeof(why)) < 0)
                return al_error_set_message(err, EOPNOTSUPP, "tier %s: %s",
                                            policy_tier_name(p->tier), why);
        /* runsc's own threads (its kernel, gofer and monitor) count
         * against pids.max: below this it fails to start with an RPC
         * error that names nothing. */
        if (p->tier == POLICY_TIER_GVISOR && p->limits.pids &&
            p->limits.pids < TIER_GVISOR_PIDS_MIN)
                return al_error_set_message(err, EINVAL,
                                            "tier gvisor: limits.pids is %llu, and runsc's own "
                                            "threads need at least %d; raise --pids",
                                            (unsigned long long)p->limits.pids,
                                            TIER_GVISOR_PIDS_MIN);
        /* Inside gVisor the command is gVisor's uid 0, which runsc's own
         * user namespace maps to the sandbox user: another uid there owns
         * nothing (the workspace, $HOME), and runsc cannot map one for
         * itself in Airlock's namespace. Refused, never ignored. */
        if (p->tier == POLICY_TIER_GVISOR && p->uid != TIER_GVISOR_UID)
                return al_error_set_message(err, EINVAL,
                                            "tier gvisor: --uid %u is not supported: the command "
                                            "runs as gVisor's root, which is the sandbox user "
                                            "(uid %d) outside; drop --uid (or \"uid\") or use "
                                            "--tier namespace",
                                            (unsigned)p->uid, TIER_GVISOR_UID);
        if (p->tier == POLICY_TIER_MICROVM)
                return tier_microvm_prepare(p, err);
        if (p->tier != POLICY_TIER_CONTAINER)
                return 0;
        if (!p->image)
                return al_error_set_message(err, EINVAL,
                                            "tier container needs an image: give --image NAME "
                                            "or \"image\" in the policy (airlock image ls)");
        _cleanup_free_ char *dir = image_dir(uid, caller_home);
        struct tier_image *t = xcalloc(1, sizeof(*t));
        int r = image_resolve(dir, p->image, &t->path, NULL, err);
        if (r >= 0)
                r = list_image(t, uid == 0, err);
        if (r < 0) {
                tier_image_free(t);
                return r;
        }
        *ret_image = t;
        return 0;
}
