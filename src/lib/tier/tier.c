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
                        return tier_refuse(why, n,
                                           "the gvisor tier needs runsc, and %s is missing "
                                           "(install the runsc package)",
                                           RUNSC_PATH);
                if (access(SETPRIV, X_OK) < 0)
                        return tier_refuse(
                            why, n,
                            "the gvisor tier drops the command's capabilities inside "
                            "gVisor with %s, which is missing (install util-linux)",
                            SETPRIV);
                return 0;
        case POLICY_TIER_MICROVM: {
                enum tier_vm_accel accel;
                return tier_microvm_host(&accel, why, n);
        }
        default:
                return tier_refuse(why, n, "%s", "unknown tier");
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

int tier_prepare(const struct policy *p, uid_t uid, const char *caller_home,
                 struct rootdir **ret_image, struct al_error *err)
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
        /* The same for the group: the command is gVisor's gid 0 whatever
         * the policy names. */
        if (p->tier == POLICY_TIER_GVISOR && p->gid != TIER_GVISOR_UID)
                return al_error_set_message(err, EINVAL,
                                            "tier gvisor: \"gid\" %u is not supported: the "
                                            "command runs as gVisor's root group, which is the "
                                            "sandbox user's (gid %d) outside; drop \"gid\" or "
                                            "use --tier namespace",
                                            (unsigned)p->gid, TIER_GVISOR_UID);
        if (p->tier == POLICY_TIER_MICROVM)
                return tier_microvm_prepare(p, err);
        if (p->tier != POLICY_TIER_CONTAINER)
                return 0;
        if (!p->image)
                return al_error_set_message(err, EINVAL,
                                            "tier container needs an image: give --image NAME "
                                            "or \"image\" in the policy (airlock image ls)");
        _cleanup_free_ char *dir = image_dir(uid, caller_home);
        _cleanup_free_ char *path = NULL;
        int r = image_resolve(dir, p->image, &path, NULL, err);
        if (r < 0)
                return r;
        return rootdir_list(path, ROOTDIR_IMAGE, true, ret_image, err);
}
