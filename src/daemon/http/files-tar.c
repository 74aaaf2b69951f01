/* SPDX-License-Identifier: Apache-2.0 */
/* /v1/sandboxes/{id}/files/tar: a directory of the workspace out (GET, a
 * streamed tar) and in (PUT, a tar body, checked whole before anything is
 * written), over files-tar.h. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <string.h>

#include "daemon.h"
#include "files-tar.h"
#include "files.h"
#include "http.h"
#include "record.h"
#include "routes.h"
#include "sandbox.h"
#include "util.h"

#define TAR_CHUNK (256u << 10)

struct tar_stream {
        struct evhttp_request *req;
        struct evhttp_connection *conn;
        struct files_tar_writer *w;
        char *buf;
};

static void tar_stream_free(struct tar_stream *s)
{
        if (s->conn)
                evhttp_connection_set_closecb(s->conn, NULL, NULL);
        files_tar_writer_free(s->w);
        free(s->buf);
        free(s);
}

static void tar_stream_closed(struct evhttp_connection *conn, void *arg)
{
        struct tar_stream *s = arg;
        s->conn = NULL;
        tar_stream_free(s);
}

static void tar_stream_next(struct evhttp_connection *conn, void *arg)
{
        struct tar_stream *s = arg;
        ssize_t n = files_tar_writer_read(s->w, s->buf, TAR_CHUNK);
        if (n <= 0) {
                /* The end; on a read error the client gets a tar without its
                 * end blocks, which tar readers report. */
                struct evhttp_request *req = s->req;
                tar_stream_free(s);
                evhttp_send_reply_end(req);
                return;
        }
        struct evbuffer *buf = evbuffer_new();
        evbuffer_add(buf, s->buf, (size_t)n);
        evhttp_send_reply_chunk_with_cb(s->req, buf, tar_stream_next, s);
        evbuffer_free(buf);
}

static int tar_status(int e, const char **code)
{
        switch (e) {
        case ENOENT:
                *code = "not_found";
                return 404;
        case EXDEV:
        case ELOOP:
                *code = "path_refused";
                return 403;
        case EPERM:
        case E2BIG:
                *code = "tar_refused";
                return 422;
        case EACCES:
                *code = "permission_denied";
                return 403;
        case EEXIST:
        case ENOTEMPTY:
        case EISDIR:
        case ENOTDIR:
                *code = "conflict";
                return 409;
        case EINVAL:
                *code = "bad_request";
                return 400;
        default:
                *code = "internal";
                return 500;
        }
}

void route_files_tar(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
        bool put = cmd == EVHTTP_REQ_PUT;
        if (put && !require(d, req, a->grant, a->grant->allow_exec, "allowExec"))
                return;
        const char *path = query_get(a->query, "path");
        struct al_error err = {0};
        _cleanup_free_ char *rel = NULL;
        const char *code;
        if (files_clean_path(path ? path : ".", true, &rel, &err) < 0) {
                int status = tar_status(err.code, &code);
                reply_error_fields(d, req, status, code, json_pack("{s:s}", "field", "path"), "%s",
                                   err.msg);
                return;
        }
        struct sandbox *sb = find_running(d, req, a->id);
        if (!sb)
                return;
        if (sb->policy && sb->policy->workspace_mode == POLICY_WORKSPACE_OVERLAY) {
                reply_error(d, req, 409, "review_workspace",
                            "the workspace of sandbox %s is copy-on-write: the files endpoints "
                            "would bypass review; use exec inside it",
                            a->id);
                return;
        }
        _cleanup_close_ int root = -1;
        if (files_open_root(sb->workspace, &root, &err) < 0) {
                reply_error(d, req, 500, "internal", "%s", err.msg);
                return;
        }
        sandbox_touch(sb);
        if (put) {
                struct evbuffer *in = evhttp_request_get_input_buffer(req);
                size_t len = evbuffer_get_length(in);
                const void *data = len ? evbuffer_pullup(in, -1) : "";
                json_t *o = NULL;
                if (files_tar_extract(root, rel, data, len, &o, &err) < 0) {
                        int status = tar_status(err.code, &code);
                        reply_error(d, req, status, code, "%s", err.msg);
                        return;
                }
                record_audit(d, a->id, "api.tar_extracted",
                             json_pack("{s:s, s:s, s:O, s:O}", "grant", a->grant->name, "path", rel,
                                       "files", json_object_get(o, "files"), "bytes",
                                       json_object_get(o, "bytes")));
                reply_json(d, req, 200, o);
                return;
        }
        struct files_tar_writer *w = NULL;
        if (files_tar_writer_new(root, rel, &w, &err) < 0) {
                int status = tar_status(err.code, &code);
                reply_error_fields(d, req, status, code, json_pack("{s:s}", "field", "path"), "%s",
                                   err.msg);
                return;
        }
        struct tar_stream *s = xcalloc(1, sizeof(*s));
        s->req = req;
        s->w = w;
        s->buf = xcalloc(1, TAR_CHUNK);
        s->conn = evhttp_request_get_connection(req);
        if (s->conn)
                evhttp_connection_set_closecb(s->conn, tar_stream_closed, s);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "application/x-tar");
        count_reply(d, 200);
        evhttp_send_reply_start(req, 200, NULL);
        tar_stream_next(s->conn, s);
}
