/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "connect-notify.h"
#include "gitguard.h"
#include "core.h"
#include "env.h"
#include "mounts.h"
#include "netgate/netgate.h"
#include "toolgate.h"
#include "util.h"

/* A change of a running sandbox's capabilities made real (caps.h,
 * docs/internals/caps.md). In order, so that nothing is half-applied:
 *   1. the whole change is checked and applied to a copy of the model;
 *   2. each mount it adds is checked and cloned on the host side;
 *   3. one audit event per entry is written (a log that cannot be
 *      written refuses the change, and the sandbox is stopped by the
 *      core's fault rule);
 *   4. the network gate gets the new rules and budgets, mounts are taken
 *      out and moved in; a mount that fails takes back what this change
 *      did and is recorded as capability.failed;
 *   5. the copy becomes the model: the tool gateway and later commands'
 *      env read it from then on. */

struct sv_live_mount {
        char *target;
        struct mounts_live m;
};

#define CAPS_BY_MAX 128

static json_t *refuse(const char *code, const char *msg)
{
        return json_pack("{s:b, s:s, s:s}", "ok", 0, "error", code, "message", msg);
}

static json_t *answer(const struct caps *caps)
{
        return json_pack("{s:b, s:o}", "ok", 1, "capabilities", caps_json(caps));
}

void sv_core_caps_free(struct sv_core *c)
{
        for (size_t i = 0; i < c->n_live_mounts; i++) {
                mounts_live_clear(&c->live_mounts[i].m);
                free(c->live_mounts[i].target);
        }
        free(c->live_mounts);
        c->live_mounts = NULL;
        c->n_live_mounts = 0;
        c->caps = caps_free(c->caps);
}

static ssize_t live_find(const struct sv_core *c, const char *target)
{
        for (size_t i = 0; i < c->n_live_mounts; i++)
                if (STREQ(c->live_mounts[i].target, target))
                        return (ssize_t)i;
        return -1;
}

static bool printable(const char *s)
{
        for (; *s; s++)
                if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
                        return false;
        return true;
}

/* What one entry did, for the audit log and GET /v1/events. An
 * environment variable is named with its value's length, not its value:
 * the line is read by grants other than the one that set it. */
static json_t *entry_event(const struct caps_entry *e, const char *by)
{
        json_t *entry = json_deep_copy(e->json);
        json_t *env = e->kind == CAPS_ENV ? json_object_get(entry, "env") : NULL;
        json_t *value = json_object_get(env, "value");
        if (json_is_string(value)) {
                json_object_set_new(env, "valueBytes",
                                    json_integer((json_int_t)json_string_length(value)));
                json_object_del(env, "value");
        }
        return json_pack("{s:s, s:s, s:o}", "by", by, "capability", caps_kind_name(e->kind),
                         "entry", entry);
}

static void set_gate(struct sv_core *c, const struct caps *caps)
{
        struct al_error err = {0};
        if (c->gate && netgate_set_rules(c->gate, caps->allow, caps->n_allow, caps->deny,
                                         caps->n_deny, &caps->budget, &err) == 0)
                (void)sv_connect_notify_recheck(c->connect_notify, c->sp.pid);
}

json_t *sv_core_caps_request(struct sv_core *c, const json_t *req, const char *by)
{
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)req, k, v)
        {
                if (!STREQ(k, "op") && !STREQ(k, "grant") && !STREQ(k, "revoke") &&
                    !STREQ(k, "by")) {
                        char msg[160];
                        snprintf(msg, sizeof(msg), "unknown field \"%.64s\" (grant, revoke, by)",
                                 k);
                        return refuse("bad_request", msg);
                }
        }
        const json_t *byj = json_object_get(req, "by");
        if (byj) {
                const char *b = json_string_value(byj);
                if (!b || !*b || strlen(b) > CAPS_BY_MAX || !printable(b))
                        return refuse("bad_request",
                                      "\"by\" must be 1 to 128 printable ASCII characters");
                by = b;
        }
        if (!c->caps)
                return refuse("internal", "the sandbox has no capabilities model");

        char why[768] = "";
        struct caps_change ch = {0};
        if (caps_parse_change(json_object_get(req, "grant"), json_object_get(req, "revoke"), &ch,
                              why, sizeof(why)) < 0)
                return refuse("bad_request", why);
        if (ch.n == 0) {
                caps_change_clear(&ch);
                return answer(c->caps);
        }

        json_t *ret = NULL;
        struct caps *next = caps_dup(c->caps);
        struct mounts_live prep[CAPS_ENTRIES_MAX];
        bool attached[CAPS_ENTRIES_MAX] = {false};
        bool net = false;
        for (size_t i = 0; i < ch.n; i++)
                prep[i] = (struct mounts_live){.tree_fd = -1};
        if (caps_apply(next, &ch, why, sizeof(why)) < 0) {
                ret = refuse("refused", why);
                goto out;
        }

        /* 2: every mount added is checked and cloned before anything is
         * recorded or changed. */
        for (size_t i = 0; i < ch.n; i++) {
                const struct caps_entry *e = &ch.e[i];
                net = net || e->kind == CAPS_NET_ALLOW || e->kind == CAPS_NET_DENY ||
                      e->kind == CAPS_NET_BUDGET;
                if (e->kind != CAPS_MOUNT)
                        continue;
                if (!e->grant) {
                        if (live_find(c, e->a) < 0) {
                                snprintf(why, sizeof(why), "revoke mount \"%s\": not mounted",
                                         e->a);
                                ret = refuse("refused", why);
                                goto out;
                        }
                        continue;
                }
                struct al_error err = {0};
                struct mounts_live_request q = {
                    .policy = c->policy,
                    .caller_home = c->caller_home,
                    .home = env_home_for_uid(c->policy->uid),
                    .pid1 = c->sp.pid,
                    .host_uid = c->sp.host_uid,
                    .host_gid = c->sp.host_uid,
                    .source = e->b,
                    .target = e->a,
                    .readonly = e->readonly,
                };
                if (c->sp.pidfd < 0) {
                        ret = refuse("refused", "the sandbox has no pid 1 to mount into");
                        goto out;
                }
                if (mounts_live_prepare(&q, &prep[i], &err) < 0) {
                        ret = refuse("refused", err.msg);
                        goto out;
                }
                /* Noted before the sandbox can write it. */
                if (!e->readonly)
                        c->live_gitguard = gitguard_add_root(c->live_gitguard, c->policy, e->b);
        }

        /* 3: recorded before it takes effect. */
        for (size_t i = 0; i < ch.n; i++)
                if (sv_core_record_ahead(
                        c, ch.e[i].grant ? "capability.granted" : "capability.revoked",
                        entry_event(&ch.e[i], by)) < 0) {
                        ret = refuse("audit_failed", c->audit_last);
                        goto out;
                }

        /* 4: the effects. Mounts added first, the only effect likely to
         * fail: one that fails takes back the others, and nothing else
         * has changed yet. */
        for (size_t i = 0; i < ch.n; i++) {
                const struct caps_entry *e = &ch.e[i];
                if (e->kind != CAPS_MOUNT || !e->grant)
                        continue;
                struct al_error err = {0};
                if (mounts_live_attach(c->sp.pidfd, &prep[i], e->a, &err) >= 0) {
                        attached[i] = true;
                        continue;
                }
                for (size_t j = 0; j < i; j++)
                        if (attached[j]) {
                                struct al_error e2 = {0};
                                mounts_live_detach(c->sp.pidfd, &prep[j], ch.e[j].a, &e2);
                                attached[j] = false;
                        }
                sv_core_record(c, "capability.failed",
                               json_pack("{s:s, s:s, s:O, s:s}", "by", by, "capability", "mount",
                                         "entry", e->json, "message", err.msg));
                ret = refuse("internal", err.msg);
                goto out;
        }
        /* Mounts taken out. One the kernel will not detach stays, in the
         * model too, and is reported; the rest of the change stands. */
        char failed[512] = "";
        for (size_t i = 0; i < ch.n; i++) {
                const struct caps_entry *e = &ch.e[i];
                ssize_t at = e->kind == CAPS_MOUNT && !e->grant ? live_find(c, e->a) : -1;
                if (at < 0)
                        continue;
                struct al_error err = {0};
                if (mounts_live_detach(c->sp.pidfd, &c->live_mounts[at].m, e->a, &err) >= 0) {
                        free(c->live_mounts[at].target);
                        c->live_mounts[at] = c->live_mounts[--c->n_live_mounts];
                        continue;
                }
                for (size_t j = 0; j < c->caps->n_mounts; j++)
                        if (STREQ(c->caps->mounts[j].target, e->a) &&
                            next->n_mounts < CAPS_MOUNTS_MAX)
                                next->mounts[next->n_mounts++] = (struct caps_mount){
                                    .source = xstrdup(c->caps->mounts[j].source),
                                    .target = xstrdup(e->a),
                                    .readonly = c->caps->mounts[j].readonly};
                sv_core_record(c, "capability.failed",
                               json_pack("{s:s, s:s, s:O, s:s}", "by", by, "capability", "mount",
                                         "entry", e->json, "message", err.msg));
                snprintf(failed, sizeof(failed), "%.400s; the rest of the change was applied",
                         err.msg);
        }
        if (net)
                set_gate(c, next);
        for (size_t i = 0; i < ch.n; i++)
                if (attached[i]) {
                        if (!c->live_mounts)
                                c->live_mounts = xcalloc(CAPS_MOUNTS_MAX, sizeof(*c->live_mounts));
                        struct sv_live_mount *lm = &c->live_mounts[c->n_live_mounts++];
                        lm->target = xstrdup(ch.e[i].a);
                        lm->m = prep[i];
                        prep[i] = (struct mounts_live){.tree_fd = -1};
                }
        sv_core_commit(c);
        caps_free(c->caps);
        c->caps = TAKE_PTR(next);
        /* A tool revoked: its calls running now stop (the waiting ones are
         * checked when they would start). */
        if (c->tools)
                toolgate_recheck(c->tools);
        ret = failed[0] ? refuse("internal", failed) : answer(c->caps);
out:
        for (size_t i = 0; i < ch.n; i++)
                mounts_live_clear(&prep[i]);
        caps_free(next);
        caps_change_clear(&ch);
        return ret;
}
