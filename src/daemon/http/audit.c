/* SPDX-License-Identifier: Apache-2.0 */
/* GET /v1/sandboxes/{id}/audit: a sandbox's lines of the audit log, its
 * rotated files included. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <string.h>

#include "audit.h"
#include "daemon.h"
#include "http.h"
#include "routes.h"
#include "util.h"

#define AUDIT_OUT_MAX (16u << 20) /* bytes of audit lines in one answer */

/* GET /v1/sandboxes/{id}/audit */

struct audit_scan {
        const char *id;
        struct evbuffer *out;
        bool truncated;
};

static int audit_line(const char *line, size_t len, uint64_t lineno, bool complete, void *userdata)
{
        struct audit_scan *s = userdata;
        if (!complete)
                return 0;
        /* Cheap test first; the parse decides. */
        if (!memmem(line, len, s->id, strlen(s->id)))
                return 0;
        json_error_t jerr;
        json_t *o = json_loadb(line, len, 0, &jerr);
        const char *sb = json_string_value(json_object_get(o, "sandbox"));
        if (sb && STREQ(sb, s->id)) {
                if (evbuffer_get_length(s->out) + len + 1 > AUDIT_OUT_MAX) {
                        s->truncated = true;
                        json_decref(o);
                        return -E2BIG;
                }
                evbuffer_add(s->out, line, len);
                evbuffer_add(s->out, "\n", 1);
        }
        json_decref(o);
        return 0;
}

static void handle_audit(struct daemon *d, struct evhttp_request *req, const char *id)
{
        struct store_sandbox *r = find_recorded(d, req, id);
        if (!r)
                return;
        store_sandbox_free(r);
        struct evbuffer *out = evbuffer_new();
        struct audit_scan s = {.id = id, .out = out};
        if (d->audit_path) {
                char **paths = NULL;
                size_t n = 0;
                if (audit_rotated_paths(d->audit_path, &paths, &n) >= 0) {
                        for (size_t i = 0; i < n && !s.truncated; i++) {
                                struct al_error e = {0};
                                (void)audit_foreach_line(paths[i], audit_line, &s, &e);
                        }
                        strv_free(paths);
                }
        }
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Content-Type", "application/x-ndjson");
        if (s.truncated)
                evhttp_add_header(h, "X-Airlock-Truncated", "1");
        count_reply(d, 200);
        evhttp_send_reply(req, 200, NULL, out);
        evbuffer_free(out);
}

void route_audit(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_audit(d, req, a->id);
}
