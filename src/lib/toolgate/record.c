/* SPDX-License-Identifier: Apache-2.0 */
/* What the tool gateway records and scrubs: tool.call records of bounded
 * size (args redacted, their digest), the aggregation of refusal floods,
 * and the redaction of what goes back to the sandbox. */
#include <event2/event.h>
#include <stdio.h>
#include <string.h>

#include "policy.h"
#include "secrets.h"
#include "sha256.h"
#include "toolgate-internal.h"
#include "util.h"

/* Records */

/* The arguments as the record keeps them: whole up to a size (spelt as the
 * log may spell them, every non-ASCII character escaped), else only their
 * size. The audit refuses a line over AUDIT_LINE_MAX (1 MiB), and a failed
 * audit stops the sandbox: a request's own arguments must not be able to
 * make its record too big, nor a flood of refusals grow the log a megabyte
 * each. argsDigest pins the arguments either way. */
static void record_args_max(json_t *o, const struct toolgate_record *rec, size_t max)
{
        if (!rec->args) {
                json_object_set_new(o, "args", json_null());
                return;
        }
        char *s = json_dumps(rec->args, JSON_COMPACT | JSON_ENSURE_ASCII);
        bool encoded = s != NULL;
        size_t len = s ? strlen(s) : 0;
        free(s);
        if (encoded && len <= max) {
                json_object_set_new(o, "args", json_deep_copy(rec->args));
                return;
        }
        json_object_set_new(o, "args", json_null());
        json_object_set_new(o, "argsTruncated", json_true());
        json_object_set_new(o, "argsBytes", json_integer((json_int_t)len));
}

static void record_args(json_t *o, const struct toolgate_record *rec)
{
        record_args_max(o, rec,
                        rec->decision && STREQ(rec->decision, "allow")
                            ? TOOLGATE_RECORD_ARGS_MAX
                            : TOOLGATE_RECORD_REFUSED_MAX);
}

json_t *toolgate_record_json(const struct toolgate_record *rec)
{
        /* The sandbox is the audit event's own (as for net.decision). */
        json_t *o = json_object();
        json_object_set_new(o, "callId", rec->call_id ? json_string(rec->call_id) : json_null());
        json_object_set_new(o, "tool", json_string(rec->tool ? rec->tool : ""));
        record_args(o, rec);
        json_object_set_new(o, "argsDigest",
                            rec->args_digest ? json_string(rec->args_digest) : json_null());
        json_object_set_new(o, "decision", json_string(rec->decision ? rec->decision : "deny"));
        json_object_set_new(o, "rule", rec->rule ? json_string(rec->rule) : json_null());
        json_object_set_new(o, "errorCode",
                            rec->error_code ? json_string(rec->error_code) : json_null());
        if (rec->clamps) {
                /* The first clamps, and how many there were. */
                size_t n = json_array_size(rec->clamps);
                json_t *kept = json_array();
                for (size_t i = 0; i < n && i < TOOLGATE_RECORD_CLAMPS_MAX; i++)
                        json_array_append_new(kept, json_deep_copy(json_array_get(rec->clamps, i)));
                json_object_set_new(o, "clamps", kept);
                if (n > TOOLGATE_RECORD_CLAMPS_MAX)
                        json_object_set_new(o, "clampsTotal", json_integer((json_int_t)n));
        }
        json_object_set_new(o, "durationMs", json_integer((json_int_t)rec->duration_ms));
        json_object_set_new(o, "outputBytes", json_integer((json_int_t)rec->output_bytes));
        /* The gateway's number for a call that started: its tool.started
         * and tool.call lines carry the same, so that a sweep finds the
         * end a dying supervisor wrote (opencalls.h). */
        if (rec->seq)
                json_object_set_new(o, "callSeq", json_integer((json_int_t)rec->seq));
        if (rec->exit_status >= 0)
                json_object_set_new(o, "exitStatus", json_integer(rec->exit_status));
        if (rec->count > 0)
                json_object_set_new(o, "count", json_integer((json_int_t)rec->count));
        return o;
}

json_t *toolgate_started_json(const struct toolgate_record *rec)
{
        json_t *o = toolgate_record_json(rec);
        json_object_del(o, "errorCode");
        json_object_del(o, "durationMs");
        json_object_del(o, "outputBytes");
        /* The call's own tool.call line keeps large arguments; this one,
         * pinned by argsDigest, keeps them up to a refusal's size, so that
         * a call does not write them twice. */
        json_object_del(o, "argsTruncated");
        json_object_del(o, "argsBytes");
        record_args_max(o, rec, TOOLGATE_RECORD_REFUSED_MAX);
        return o;
}

struct redactor *toolgate_redactor(const struct toolgate *t)
{
        return t->secrets ? secrets_redactor(t->secrets) : NULL;
}

char *toolgate_scrub_message(const struct toolgate *t, const char *s)
{
        char *out = NULL;
        size_t len = 0;
        if (redactor_apply(toolgate_redactor(t), s, strlen(s), &out, &len) < 0)
                return xstrdup("(message withheld)");
        if (len > TOOLGATE_MESSAGE_MAX) {
                /* Cut on a character boundary. */
                len = TOOLGATE_MESSAGE_MAX;
                while (len > 0 && ((unsigned char)out[len] & 0xC0) == 0x80)
                        len--;
                out[len] = '\0';
        }
        return out;
}

/* Every string in v, keys included, with secret values replaced: what the
 * audit keeps of the arguments, and what the sandbox gets of a tool's
 * parsed output. */
json_t *toolgate_redact_json(const struct redactor *r, const json_t *v)
{
        char *out = NULL;
        size_t len = 0;

        if (json_is_string(v)) {
                if (redactor_apply(r, json_string_value(v), json_string_length(v), &out, &len) < 0)
                        return json_string(REDACTOR_MARK);
                json_t *s = json_stringn(out, len);
                free(out);
                return s ? s : json_string(REDACTOR_MARK);
        }
        if (json_is_array(v)) {
                json_t *a = json_array();
                size_t i;
                json_t *e;
                json_array_foreach(v, i, e) json_array_append_new(a, toolgate_redact_json(r, e));
                return a;
        }
        if (json_is_object(v)) {
                json_t *o = json_object();
                const char *key;
                json_t *e;
                json_object_foreach((json_t *)v, key, e)
                {
                        if (redactor_apply(r, key, strlen(key), &out, &len) < 0)
                                continue;
                        json_object_set_new(o, out, toolgate_redact_json(r, e));
                        free(out);
                }
                return o;
        }
        return json_deep_copy(v);
}

void toolgate_args_digest(const json_t *args, char out[65])
{
        char *s = args ? json_dumps(args, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

        sha256_hex(s ? s : "null", s ? strlen(s) : 4, out);
        free(s);
}

void toolgate_record(struct toolgate *t, struct toolgate_record *rec, const json_t *args)
{
        char digest[65];
        if (!t->recorder)
                return;
        rec->sandbox = t->sandbox;
        json_t *red = args ? toolgate_redact_json(toolgate_redactor(t), args) : NULL;
        rec->args = red;
        if (!rec->args_digest && args) {
                toolgate_args_digest(args, digest);
                rec->args_digest = digest;
        }
        t->recorder(t->ud, rec);
        json_decref(red);
}

/* The call's record, before its tool acts on the host: a call whose
 * record cannot be written (the audit disk full) is never run. */
int toolgate_record_ahead(struct tg_call *c)
{
        struct toolgate *t = c->t;
        if (!t->ahead)
                return 0;
        struct toolgate_record rec = {
            .sandbox = t->sandbox,
            .call_id = c->call_id,
            .tool = c->tool->def->name,
            .args_digest = c->digest,
            .decision = "allow",
            .rule = "tools.allow",
            .clamps = c->clamps,
            .exit_status = -1,
            .seq = c->seq = ++t->last_seq,
        };
        json_t *red = c->args ? toolgate_redact_json(toolgate_redactor(t), c->args) : NULL;
        rec.args = red;
        int r = t->ahead(t->ud, &rec);
        json_decref(red);
        return r;
}

/* Refusals: the first TOOLGATE_REFUSAL_SINGLES of a kind (tool, errorCode,
 * rule) in a window are recorded one by one, the rest counted and recorded
 * as one record when the window ends; past TOOLGATE_REFUSAL_KINDS kinds,
 * all others share one kind (tool "*"). A flood grows neither memory nor
 * the audit log beyond that. */
static void kind_emit(struct toolgate *t, const struct tg_refusal_kind *k)
{
        struct toolgate_record rec = {
            .tool = k->tool,
            .decision = "deny",
            .rule = k->rule,
            .error_code = k->error_code,
            .exit_status = -1,
            .count = k->count,
        };
        toolgate_record(t, &rec, NULL);
}

void toolgate_refusals_flush(struct toolgate *t, bool all)
{
        size_t kept = 0;
        for (size_t i = 0; i < t->n_kinds; i++) {
                struct tg_refusal_kind k = t->kinds[i];
                if (k.count > 0)
                        kind_emit(t, &k);
                if (k.seen && !all) {
                        k.count = 0;
                        k.singles = 0;
                        k.seen = false;
                        t->kinds[kept++] = k;
                }
        }
        t->n_kinds = kept;
}

void toolgate_refusals_tick(evutil_socket_t fd, short what, void *ud)
{
        struct toolgate *t = ud;
        toolgate_refusals_flush(t, false);
        if (t->n_kinds > 0) {
                struct timeval tv = {0, TOOLGATE_REFUSAL_WINDOW_MS * 1000};
                evtimer_add(t->kinds_timer, &tv);
        }
}

/* Whether this refusal is recorded on its own (else it was counted). */
bool toolgate_refusal_counted(struct toolgate *t, const char *tool, const char *code,
                              const char *rule)
{
        char name[TOOLGATE_TOOL_NAME_MAX + 1];
        snprintf(name, sizeof(name), "%s", tool ? tool : "");
        struct tg_refusal_kind *k = NULL;
        for (size_t i = 0; i < t->n_kinds && !k; i++)
                if (STREQ(t->kinds[i].tool, name) && t->kinds[i].error_code == code &&
                    t->kinds[i].rule == rule)
                        k = &t->kinds[i];
        if (!k && t->n_kinds < TOOLGATE_REFUSAL_KINDS) {
                k = &t->kinds[t->n_kinds++];
                *k = (struct tg_refusal_kind){.error_code = code, .rule = rule};
                snprintf(k->tool, sizeof(k->tool), "%s", name);
        }
        if (!k) { /* the shared kind */
                for (size_t i = 0; i < t->n_kinds && !k; i++)
                        if (STREQ(t->kinds[i].tool, "*") && t->kinds[i].error_code == NULL)
                                k = &t->kinds[i];
                if (!k) {
                        k = &t->kinds[t->n_kinds++];
                        *k = (struct tg_refusal_kind){.error_code = NULL, .rule = "aggregate"};
                        snprintf(k->tool, sizeof(k->tool), "*");
                }
        }
        k->seen = true;
        if (!evtimer_pending(t->kinds_timer, NULL)) {
                struct timeval tv = {0, TOOLGATE_REFUSAL_WINDOW_MS * 1000};
                evtimer_add(t->kinds_timer, &tv);
        }
        if (k->singles < TOOLGATE_REFUSAL_SINGLES && k->error_code == code) {
                k->singles++;
                return false;
        }
        k->count++;
        return true;
}
