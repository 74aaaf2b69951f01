/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/sandboxes/{id}/audit: a sandbox's lines of the audit log, its
 * rotated files included, read by `airlock audit show --json --sandbox ID`
 * in a job. Any grant may ask, and the log is up to nine files of 64 MiB
 * by default: read on the daemon's loop, it held every other request (the
 * kill switch included) for as long. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <string.h>

#include "daemon.h"
#include "http.h"
#include "jobs.h"
#include "routes.h"
#include "util.h"

#define AUDIT_OUT_MAX   (16u << 20) /* bytes of audit lines in one answer */
#define AUDIT_READS_MAX 4           /* reads at once, every grant's */

static unsigned audit_reads;

struct audit_read {
        struct daemon *d;
        struct evhttp_request *req;
};

static void audit_done(const struct job_result *res, void *userdata)
{
        struct audit_read *c = userdata;
        struct daemon *d = c->d;
        audit_reads--;
        if (res->exit_code < 0 || res->timed_out) {
                reply_error(d, c->req, 500, "internal", "reading the audit log: %.200s",
                            res->err && *res->err ? res->err : "airlock audit show did not finish");
                free(c);
                return;
        }
        struct evkeyvalq *h = evhttp_request_get_output_headers(c->req);
        evhttp_add_header(h, "Content-Type", "application/x-ndjson");
        struct evbuffer *body = evbuffer_new();
        if (!body) {
                evhttp_send_error(c->req, 500, NULL);
                free(c);
                return;
        }
        size_t len = evbuffer_get_length(res->out), keep = len;
        if (res->out_truncated) {
                /* Whole lines only: the one cut off goes. */
                const char *p = len ? (const char *)evbuffer_pullup(res->out, -1) : NULL;
                const char *nl = p ? memrchr(p, '\n', len) : NULL;
                keep = nl ? (size_t)(nl - p) + 1 : 0;
                evhttp_add_header(h, "X-Airlock-Truncated", "1");
        }
        evbuffer_remove_buffer(res->out, body, keep);
        count_reply(d, 200);
        evhttp_send_reply(c->req, 200, NULL, body);
        evbuffer_free(body);
        free(c);
}

void route_audit(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        struct store_sandbox *r = find_recorded(d, req, a->id);
        if (!r)
                return;
        store_sandbox_free(r);
        if (!d->audit_path) {
                struct evbuffer *empty = evbuffer_new();
                evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                                  "application/x-ndjson");
                count_reply(d, 200);
                evhttp_send_reply(req, 200, NULL, empty);
                if (empty)
                        evbuffer_free(empty);
                return;
        }
        if (audit_reads >= AUDIT_READS_MAX) {
                evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "1");
                reply_error(d, req, 429, "busy",
                            "%d reads of the audit log are under way; ask again in a moment",
                            AUDIT_READS_MAX);
                return;
        }
        struct audit_read *c = xcalloc(1, sizeof(*c));
        *c = (struct audit_read){.d = d, .req = req};
        char *argv[] = {d->airlock_bin,   (char *)"audit",        (char *)"show",
                        (char *)"--json", (char *)"--sandbox",    (char *)a->id,
                        (char *)d->audit_path, NULL};
        struct al_error err = {0};
        if (job_start(d, argv, AUDIT_OUT_MAX, audit_done, c, &err) < 0) {
                reply_error(d, req, 500, "internal", "%s", err.msg);
                free(c);
                return;
        }
        audit_reads++;
}
