/* SPDX-License-Identifier: Apache-2.0 */
/* A gated container in a pod's network (podnet.h). */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "podnet.h"
#include "util.h"

int rt_podnet_resolv(const struct rt_globals *g, struct policy *p, const char *root,
                     char **ret_pod_resolv, struct al_error *err)
{
        *ret_pod_resolv = NULL;
        /* What policy_finalize will decide. */
        bool gated = p->net_mode_set ? p->net_mode == POLICY_NET_GATED
                                     : p->n_net_allow > 0 || p->n_routes > 0 || p->net_ask;
        if (!gated)
                return 0;
        int r = mkdir_p(g->root, 0711, 0700);
        if (r < 0 && r != -EEXIST)
                return al_error_set(err, -r, "creating --root %s", g->root);
        /* One file for every container, written whole each time (never
         * appended to), read-only inside. */
        _cleanup_free_ char *path = xasprintf("%s/%s", g->root, RUNTIME_RESOLV);
        _cleanup_free_ char *tmp = xasprintf("%s.%d", path, (int)getpid());
        _cleanup_close_ int fd =
            open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 || write_full(fd, RUNTIME_RESOLV_TEXT, strlen(RUNTIME_RESOLV_TEXT)) < 0 ||
            rename(tmp, path) < 0) {
                r = al_error_set(err, errno, "writing %s", path);
                unlink(tmp);
                return r;
        }
        for (size_t i = 0; i < p->n_mounts; i++) {
                struct policy_mount *m = &p->mounts[i];
                if (!m->source || !STREQ(m->target, "/etc/resolv.conf"))
                        continue;
                *ret_pod_resolv = m->source;
                m->source = xstrdup(path);
                m->readonly = true;
                return 0;
        }
        /* Only over a regular file: a link would be followed inside, and
         * there is nothing to bind over where there is none. */
        _cleanup_free_ char *img = xasprintf("%s/etc/resolv.conf", root);
        struct stat st;
        if (lstat(img, &st) == 0 && S_ISREG(st.st_mode))
                policy_add_mount(p, path, "/etc/resolv.conf", true);
        return 0;
}

int rt_podnet_enter(int netns_fd, const char *pod_resolv, struct al_error *err)
{
        if (pod_resolv) {
                if (unshare(CLONE_NEWNS) < 0)
                        return al_error_set(err, errno, "gates: a mount namespace of their own");
                if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                        return al_error_set(err, errno, "gates: making / private");
                if (mount(pod_resolv, "/etc/resolv.conf", NULL, MS_BIND, NULL) < 0)
                        return al_error_set(err, errno, "gates: the pod's resolver %s", pod_resolv);
        }
        if (netns_fd >= 0 && setns(netns_fd, CLONE_NEWNET) < 0)
                return al_error_set(err, errno, "gates: entering the pod's network namespace");
        return 0;
}
