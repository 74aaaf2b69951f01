/* SPDX-License-Identifier: Apache-2.0 */
/* One sandbox's pending asks and remembered decisions (approvals.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "approvals.h"
#include "util.h"

struct pending {
        bool used;
        uint64_t n; /* the number in the id */
        enum approval_kind kind;
        char *host, *protocol, *tool, *digest;
        uint16_t port;
        uint64_t created_rt, deadline; /* realtime ms; monotonic ms */
        approval_done_fn done;
        void *ud;
};

struct memory {
        enum approval_kind kind;
        char *key; /* host:port, or the tool's name */
        bool allow;
};

struct approvals {
        char *sandbox;
        uint64_t timeout_ms;
        approvals_record_fn record;
        void *ud;
        approvals_check_fn check;
        void *check_ud;
        uint64_t (*mono)(void);
        uint64_t (*real)(void);
        uint64_t next_n;
        struct pending p[APPROVALS_PENDING_MAX];
        struct memory mem[APPROVALS_REMEMBERED_MAX];
        size_t n_mem;
};

static uint64_t mono_ms(void)
{
        return now_monotonic_us() / 1000;
}

static uint64_t real_ms(void)
{
        return now_realtime_us() / 1000;
}

struct approvals *approvals_new(const char *sandbox, uint64_t timeout_ms,
                                approvals_record_fn record, void *ud)
{
        struct approvals *a = xcalloc(1, sizeof(*a));
        a->sandbox = xstrdup(sandbox);
        a->timeout_ms = timeout_ms;
        a->record = record;
        a->ud = ud;
        a->mono = mono_ms;
        a->real = real_ms;
        a->next_n = 1;
        return a;
}

void approvals_set_clock(struct approvals *a, uint64_t (*monotonic_ms)(void),
                         uint64_t (*realtime_ms)(void))
{
        a->mono = monotonic_ms ? monotonic_ms : mono_ms;
        a->real = realtime_ms ? realtime_ms : real_ms;
}

void approvals_set_check(struct approvals *a, approvals_check_fn check, void *ud)
{
        a->check = check;
        a->check_ud = ud;
}

static void pending_clear(struct pending *p)
{
        free(p->host);
        free(p->protocol);
        free(p->tool);
        free(p->digest);
        memset(p, 0, sizeof(*p));
}

static void iso_ms(uint64_t ms, char buf[40])
{
        time_t s = (time_t)(ms / 1000);
        struct tm tm;
        gmtime_r(&s, &tm);
        size_t n = strftime(buf, 40, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, 40 - n, ".%03uZ", (unsigned)(ms % 1000));
}

static void format_id(const struct approvals *a, uint64_t n, char buf[APPROVALS_ID_MAX])
{
        snprintf(buf, APPROVALS_ID_MAX, "%s-%llu", a->sandbox, (unsigned long long)n);
}

static json_t *pending_json(const struct approvals *a, const struct pending *p)
{
        char id[APPROVALS_ID_MAX], created[40], expires[40];
        format_id(a, p->n, id);
        iso_ms(p->created_rt, created);
        iso_ms(p->created_rt + a->timeout_ms, expires);
        json_t *o = json_pack("{s:s, s:s, s:s}", "id", id, "sandbox", a->sandbox, "kind",
                              p->kind == APPROVAL_NETWORK ? "network" : "tool");
        if (p->kind == APPROVAL_NETWORK) {
                json_object_set_new(o, "host", json_string(p->host));
                json_object_set_new(o, "port", json_integer(p->port));
                json_object_set_new(o, "protocol", json_string(p->protocol));
        } else {
                json_object_set_new(o, "tool", json_string(p->tool));
                json_object_set_new(o, "argsDigest", json_string(p->digest));
        }
        json_object_set_new(o, "created", json_string(created));
        json_object_set_new(o, "expires", json_string(expires));
        return o;
}

static int record(struct approvals *a, const char *kind, json_t *fields)
{
        /* The audit line says whose it is itself. */
        json_object_del(fields, "sandbox");
        if (a->record)
                return a->record(a->ud, kind, fields);
        json_decref(fields);
        return 0;
}

static char *memory_key(enum approval_kind kind, const char *host, uint16_t port, const char *tool)
{
        char buf[512];
        if (kind == APPROVAL_NETWORK)
                snprintf(buf, sizeof(buf), "%s:%u", host ? host : "", port);
        else
                snprintf(buf, sizeof(buf), "%s", tool ? tool : "");
        return xstrdup(buf);
}

static int lookup(const struct approvals *a, enum approval_kind kind, const char *key)
{
        for (size_t i = a->n_mem; i-- > 0;)
                if (a->mem[i].kind == kind && STREQ(a->mem[i].key, key))
                        return a->mem[i].allow ? 1 : 0;
        return -ENOENT;
}

int approvals_remembered(const struct approvals *a, const struct approval_request *req)
{
        _cleanup_free_ char *key = memory_key(req->kind, req->host, req->port, req->tool);
        return lookup(a, req->kind, key);
}

static void remember(struct approvals *a, enum approval_kind kind, char *key, bool allow)
{
        for (size_t i = 0; i < a->n_mem; i++)
                if (a->mem[i].kind == kind && STREQ(a->mem[i].key, key)) {
                        a->mem[i].allow = allow;
                        free(key);
                        return;
                }
        if (a->n_mem == APPROVALS_REMEMBERED_MAX) {
                free(a->mem[0].key);
                memmove(&a->mem[0], &a->mem[1], (a->n_mem - 1) * sizeof(a->mem[0]));
                a->n_mem--;
        }
        a->mem[a->n_mem++] = (struct memory){.kind = kind, .key = key, .allow = allow};
}

unsigned approvals_pending(const struct approvals *a)
{
        unsigned n = 0;
        for (size_t i = 0; i < APPROVALS_PENDING_MAX; i++)
                n += a->p[i].used;
        return n;
}

int approvals_ask(struct approvals *a, const struct approval_request *req, approval_done_fn done,
                  void *ud, uint64_t *ret_id)
{
        struct pending *p = NULL;
        for (size_t i = 0; i < APPROVALS_PENDING_MAX && !p; i++)
                if (!a->p[i].used)
                        p = &a->p[i];
        if (!p)
                return -EBUSY;
        p->used = true;
        p->n = a->next_n++;
        p->kind = req->kind;
        if (req->kind == APPROVAL_NETWORK) {
                p->host = xstrdup(req->host ? req->host : "");
                p->port = req->port;
                p->protocol = xstrdup(req->protocol ? req->protocol : "");
        } else {
                p->tool = xstrdup(req->tool ? req->tool : "");
                p->digest = xstrdup(req->args_digest ? req->args_digest : "");
        }
        p->created_rt = a->real();
        p->deadline = a->mono() + a->timeout_ms;
        p->done = done;
        p->ud = ud;
        *ret_id = p->n;
        char id[APPROVALS_ID_MAX];
        format_id(a, p->n, id);
        json_t *f = json_pack("{s:s, s:o}", "id", id, "request", pending_json(a, p));
        json_object_del(json_object_get(f, "request"), "sandbox");
        record(a, "approval.requested", f);
        return 0;
}

static struct pending *find_n(struct approvals *a, uint64_t n)
{
        for (size_t i = 0; i < APPROVALS_PENDING_MAX; i++)
                if (a->p[i].used && a->p[i].n == n)
                        return &a->p[i];
        return NULL;
}

/* Take the ask out of the table (so that its callback may ask or cancel
 * again), record its end, then call it. An allow that cannot be recorded
 * lets nothing through: the ask ends denied ("audit_failed") and -EIO.
 * `refused_rule` non-NULL: an operator's allow the rules in force now
 * refuse (`reason`), said in the record and the answer. */
static int finish(struct approvals *a, struct pending *p, const char *decision, const char *by,
                  bool allow, const char *reason, const char *refused_rule, json_t **ret)
{
        json_t *o = pending_json(a, p);
        approval_done_fn done = p->done;
        void *ud = p->ud;
        char id[APPROVALS_ID_MAX];
        format_id(a, p->n, id);
        pending_clear(p);
        json_t *f = json_pack("{s:s, s:s, s:s}", "id", id, "decision", decision, "by", by);
        json_t *req = json_deep_copy(o);
        json_object_del(req, "sandbox");
        json_object_set_new(f, "request", req);
        json_object_set_new(o, "decision", json_string(decision));
        json_object_set_new(o, "decidedBy", json_string(by));
        if (!allow)
                json_object_set_new(f, "reason", json_string(reason));
        if (refused_rule) {
                json_t *why = json_pack("{s:s, s:s}", "reason", reason, "rule", refused_rule);
                json_object_set(f, "refused", why);
                json_object_set_new(o, "refused", why);
        }
        int r = record(a, "approval.decided", f);
        if (r < 0) {
                allow = false;
                reason = "audit_failed";
                json_decref(o);
                o = NULL;
        }
        if (ret)
                *ret = o;
        else
                json_decref(o);
        if (done)
                done(ud, allow, reason);
        return r < 0 ? -EIO : 0;
}

void approvals_cancel(struct approvals *a, uint64_t id)
{
        struct pending *p = find_n(a, id);
        if (!p)
                return;
        p->done = NULL;
        finish(a, p, "deny", "canceled", false, "client_closed", NULL, NULL);
}

int approvals_decision_parse(const char *s, enum approval_decision *ret)
{
        static const struct {
                const char *name;
                enum approval_decision d;
        } names[] = {
            {"allow-once", APPROVAL_ALLOW_ONCE},
            {"allow-sandbox", APPROVAL_ALLOW_SANDBOX},
            {"deny", APPROVAL_DENY},
            {"deny-sandbox", APPROVAL_DENY_SANDBOX},
        };
        for (size_t i = 0; s && i < ARRAY_SIZE(names); i++)
                if (STREQ(s, names[i].name)) {
                        *ret = names[i].d;
                        return 0;
                }
        return -EINVAL;
}

const char *approvals_decision_name(enum approval_decision d)
{
        switch (d) {
        case APPROVAL_ALLOW_ONCE:
                return "allow-once";
        case APPROVAL_ALLOW_SANDBOX:
                return "allow-sandbox";
        case APPROVAL_DENY:
                return "deny";
        case APPROVAL_DENY_SANDBOX:
                return "deny-sandbox";
        case APPROVAL_TIMEOUT:
                return "timeout";
        }
        return "deny";
}

/* "<sandbox>-<n>" of this sandbox: n, else 0. */
static uint64_t parse_id(const struct approvals *a, const char *id)
{
        size_t sl = strlen(a->sandbox);
        if (!id || strncmp(id, a->sandbox, sl) != 0 || id[sl] != '-')
                return 0;
        uint64_t n;
        if (safe_atou64(id + sl + 1, &n) < 0)
                return 0;
        return n;
}

int approvals_decide(struct approvals *a, const char *id, enum approval_decision d, const char *by,
                     json_t **ret)
{
        if (d == APPROVAL_TIMEOUT)
                return -EINVAL;
        uint64_t n = parse_id(a, id);
        struct pending *p = n ? find_n(a, n) : NULL;
        if (!p)
                return -ENOENT;
        bool allow = d == APPROVAL_ALLOW_ONCE || d == APPROVAL_ALLOW_SANDBOX;
        bool sticky = d == APPROVAL_ALLOW_SANDBOX || d == APPROVAL_DENY_SANDBOX;
        enum approval_kind kind = p->kind;
        const char *name = approvals_decision_name(d);
        /* An allow meets the rules in force now, not those of when it was
         * asked: what they refuse now stays refused, and nothing is
         * remembered. */
        struct approval_request now = {.kind = p->kind,
                                       .host = p->host,
                                       .port = p->port,
                                       .protocol = p->protocol,
                                       .tool = p->tool,
                                       .args_digest = p->digest};
        char rule[512] = "";
        const char *refused =
            allow && a->check ? a->check(a->check_ud, &now, rule, sizeof(rule)) : NULL;
        if (refused)
                return finish(a, p, name, by, false, refused, rule, ret);
        char *key = memory_key(kind, p->host, p->port, p->tool);
        int r = finish(a, p, name, by, allow, "ask_denied", NULL, ret);
        if (r < 0 || !sticky) {
                free(key);
                return r;
        }
        remember(a, kind, xstrdup(key), allow);
        /* What the memory now covers waits no longer. */
        for (size_t i = 0; i < APPROVALS_PENDING_MAX; i++) {
                struct pending *q = &a->p[i];
                if (!q->used || q->kind != kind)
                        continue;
                _cleanup_free_ char *k = memory_key(q->kind, q->host, q->port, q->tool);
                if (STREQ(k, key))
                        finish(a, q, name, by, allow, "ask_denied", NULL, NULL);
        }
        free(key);
        return 0;
}

unsigned approvals_expire(struct approvals *a)
{
        unsigned n = 0;
        uint64_t now = a->mono();
        for (size_t i = 0; i < APPROVALS_PENDING_MAX; i++)
                if (a->p[i].used && a->p[i].deadline <= now) {
                        finish(a, &a->p[i], "timeout", "timeout", false, "ask_timeout", NULL, NULL);
                        n++;
                }
        return n;
}

uint64_t approvals_next_deadline(const struct approvals *a)
{
        uint64_t d = 0;
        for (size_t i = 0; i < APPROVALS_PENDING_MAX; i++)
                if (a->p[i].used && (!d || a->p[i].deadline < d))
                        d = a->p[i].deadline;
        return d;
}

json_t *approvals_list(const struct approvals *a)
{
        json_t *l = json_array();
        uint64_t last = 0;
        /* Oldest first: by number. */
        for (;;) {
                const struct pending *best = NULL;
                for (size_t i = 0; i < APPROVALS_PENDING_MAX; i++)
                        if (a->p[i].used && a->p[i].n > last && (!best || a->p[i].n < best->n))
                                best = &a->p[i];
                if (!best)
                        break;
                json_array_append_new(l, pending_json(a, best));
                last = best->n;
        }
        return l;
}

struct approvals *approvals_free(struct approvals *a)
{
        if (!a)
                return NULL;
        for (size_t i = 0; i < APPROVALS_PENDING_MAX; i++)
                if (a->p[i].used)
                        finish(a, &a->p[i], "deny", "shutdown", false, "ask_shutdown", NULL, NULL);
        for (size_t i = 0; i < a->n_mem; i++)
                free(a->mem[i].key);
        free(a->sandbox);
        free(a);
        return NULL;
}
