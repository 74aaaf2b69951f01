/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "env.h"
#include "policy.h"
#include "policyflags.h"
#include "util.h"

static int parse_mount_arg(struct policy *p, const char *arg, bool readonly, const char *cwd,
                           char *msg, size_t msglen)
{
        _cleanup_free_ char *src = xstrdup(arg);
        char *colon = strchr(src, ':');
        const char *dst = NULL;
        if (colon) {
                *colon = '\0';
                dst = colon + 1;
        }
        if (!*src || (dst && !*dst)) {
                snprintf(msg, msglen, "--%s \"%s\": expected SRC[:DST]", readonly ? "ro" : "rw",
                         arg);
                return -EINVAL;
        }
        _cleanup_free_ char *abs = src[0] == '/' ? xstrdup(src) : xasprintf("%s/%s", cwd, src);
        policy_add_mount(p, abs, dst ? dst : abs, readonly);
        return 0;
}

/* NAME:/PATH[:ro] */
static int parse_volume_arg(struct policy *p, const char *arg, char *msg, size_t msglen)
{
        _cleanup_free_ char *name = xstrdup(arg);
        char *target = strchr(name, ':');
        bool readonly = false;
        if (target) {
                *target++ = '\0';
                char *mode = strrchr(target, ':');
                if (mode && (STREQ(mode, ":ro") || STREQ(mode, ":rw"))) {
                        readonly = STREQ(mode, ":ro");
                        *mode = '\0';
                }
        }
        if (!*name || !target || target[0] != '/') {
                snprintf(msg, msglen, "--volume \"%s\": expected NAME:/PATH[:ro]", arg);
                return -EINVAL;
        }
        policy_add_volume(p, name, target, readonly);
        return 0;
}

static void push(char ***v, size_t *n, const char *s)
{
        *v = strv_append(*v, n, s);
}

int policyflags_apply(struct policy *p, struct policyflags *pf, int c, const char *arg,
                      const char *cwd, char *msg, size_t msglen, struct al_error *err)
{
        switch (c) {
        case PF_OPT_RO:
        case PF_OPT_RW:
                return parse_mount_arg(p, arg, c == PF_OPT_RO, cwd, msg, msglen);
        case PF_OPT_HOME:
                pf->home_volume = arg;
                return 0;
        case PF_OPT_VOLUME:
                return parse_volume_arg(p, arg, msg, msglen);
        case PF_OPT_DENY_READ:
                policy_add_deny_read(p, arg);
                return 0;
        case PF_OPT_READ:
                if (STREQ(arg, "system"))
                        p->read = POLICY_READ_SYSTEM;
                else if (STREQ(arg, "host"))
                        p->read = POLICY_READ_HOST;
                else {
                        snprintf(msg, msglen, "--read \"%s\": expected system or host", arg);
                        return -EINVAL;
                }
                return 0;
        case PF_OPT_MEMORY:
                return policy_set_limit(p, "memory", arg, err);
        case PF_OPT_PIDS:
                return policy_set_limit(p, "pids", arg, err);
        case PF_OPT_CPUS:
                return policy_set_limit(p, "cpus", arg, err);
        case PF_OPT_IO_READ_BPS:
                return policy_set_limit(p, "io.readBps", arg, err);
        case PF_OPT_IO_WRITE_BPS:
                return policy_set_limit(p, "io.writeBps", arg, err);
        case PF_OPT_IO_READ_IOPS:
                return policy_set_limit(p, "io.readIops", arg, err);
        case PF_OPT_IO_WRITE_IOPS:
                return policy_set_limit(p, "io.writeIops", arg, err);
        case PF_OPT_CLASS:
                return policy_set_class(p, arg, err);
        case PF_OPT_ENV: {
                _cleanup_free_ char *kv = xstrdup(arg);
                char *eq = strchr(kv, '=');
                if (!eq || eq == kv) {
                        snprintf(msg, msglen, "--env \"%s\": expected KEY=VALUE", arg);
                        return -EINVAL;
                }
                *eq = '\0';
                policy_add_env(p, kv, eq + 1);
                return 0;
        }
        case PF_OPT_UID: {
                int uid;
                if (safe_atoi(arg, &uid) < 0 || uid < 0 || uid > 65534) {
                        snprintf(msg, msglen, "--uid \"%s\": expected a number from 0 to 65534",
                                 arg);
                        return -EINVAL;
                }
                p->uid = p->gid = (uint32_t)uid;
                return 0;
        }
        case PF_OPT_USERS: {
                int n;
                if (safe_atoi(arg, &n) < 0 || n < 2 || n > 65536) {
                        snprintf(msg, msglen,
                                 "--users \"%s\": expected a number from 2 to 65536 (uids 0 "
                                 "to N-1 inside)",
                                 arg);
                        return -EINVAL;
                }
                p->users = (uint32_t)n;
                return 0;
        }
        case PF_OPT_NET:
                if (STREQ(arg, "none"))
                        p->net_mode = POLICY_NET_NONE;
                else if (STREQ(arg, "gated"))
                        p->net_mode = POLICY_NET_GATED;
                else {
                        snprintf(msg, msglen, "--net \"%s\": expected none or gated", arg);
                        return -EINVAL;
                }
                p->net_mode_set = true;
                return 0;
        case PF_OPT_ALLOW:
                push(&p->net_allow, &p->n_net_allow, arg);
                return 0;
        case PF_OPT_DENY:
                push(&p->net_deny, &p->n_net_deny, arg);
                return 0;
        case PF_OPT_TOOL:
                push(&p->tools_allow, &p->n_tools_allow, arg);
                return 0;
        case PF_OPT_TOOLS:
                return policy_tools_load_file(p, arg, err);
        case PF_OPT_ALLOW_PRIVATE:
                push(&p->net_allow_private, &p->n_net_allow_private, arg);
                return 0;
        case PF_OPT_HOST: {
                _cleanup_free_ char *kv = xstrdup(arg);
                char *eq = strchr(kv, '=');
                if (!eq || eq == kv || !eq[1]) {
                        snprintf(msg, msglen, "--host \"%s\": expected NAME=IP", arg);
                        return -EINVAL;
                }
                *eq = '\0';
                p->net_hosts = xrealloc(p->net_hosts, p->n_net_hosts + 1, sizeof(*p->net_hosts));
                p->net_hosts[p->n_net_hosts].key = xstrdup(kv);
                p->net_hosts[p->n_net_hosts].value = xstrdup(eq + 1);
                p->n_net_hosts++;
                return 0;
        }
        case PF_OPT_ALLOW_BROAD:
                p->allow_broad = true;
                return 0;
        default:
                snprintf(msg, msglen, "not a policy flag");
                return -EINVAL;
        }
}

void policyflags_finish(struct policy *p, const struct policyflags *pf)
{
        /* --uid decides where $HOME is. */
        if (pf->home_volume)
                policy_add_volume(p, pf->home_volume, env_home_for_uid(p->uid), false);
}
