/* SPDX-License-Identifier: Apache-2.0 */
/* /v1/sandboxes/{id}/files/tar: a directory of the workspace out (GET, a
 * streamed tar) and in (PUT, a tar body, checked whole before anything is
 * written), over files-tar.h. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <string.h>

#include "daemon.h"
#include "files-deny.h"
#include "files-tar.h"
#include "files.h"
#include "http.h"
#include "record.h"
#include "routes.h"
#include "sandbox.h"
#include "util.h"

#define TAR_CHUNK (256u << 10)

static int tar_pull(void *arg, struct evbuffer *out)
{
        struct evbuffer_iovec v;
        if (evbuffer_reserve_space(out, TAR_CHUNK, &v, 1) < 1)
                return -1;
        /* On a read error the client gets a tar without its end blocks,
         * which tar readers report. */
        ssize_t n = files_tar_writer_read(arg, v.iov_base, TAR_CHUNK);
        if (n <= 0)
                return n < 0 ? -1 : 0;
        v.iov_len = (size_t)n;
        return evbuffer_commit_space(out, &v, 1) < 0 ? -1 : 1;
}

static void tar_src_free(void *arg)
{
        files_tar_writer_free(arg);
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
        /* A tar reaches everything beneath rel, both ways. */
        int g = files_deny_guard(d, req, sb, root, rel, true);
        if (g == -2 && put) /* refused by the deny list: recorded as a refusal */
                (void)record_audit(d, a->id, "api.file_refused",
                                   json_pack("{s:s, s:s, s:s, s:s}", "grant", a->grant->name, "op",
                                             "tar", "path", rel, "reason", "path_denied"));
        if (g < 0)
                return;
        if (put) {
                struct evbuffer *in = evhttp_request_get_input_buffer(req);
                size_t len = evbuffer_get_length(in);
                const void *data = len ? (const void *)evbuffer_pullup(in, -1) : (const void *)"";
                json_t *o = NULL;
                /* Its line names what was extracted, so it comes after:
                 * the log's reserve is made sure of first. */
                if (!record_audit_room(d)) {
                        reply_audit_failed(d, req, d->audit_fault);
                        return;
                }
                /* Each entry checked again where it is written: a denied
                 * directory moved in after the check above is not. */
                struct files_deny *deny = NULL;
                if (files_deny_for(d, req, sb, &deny) < 0)
                        return;
                int r = files_tar_extract_deny(root, rel, data, len, deny, &o, &err);
                files_deny_free(deny);
                if (r == -EACCES) {
                        (void)record_audit(d, a->id, "api.file_refused",
                                           json_pack("{s:s, s:s, s:s, s:s}", "grant",
                                                     a->grant->name, "op", "tar", "path", rel,
                                                     "reason", "path_denied"));
                        reply_error_fields(d, req, 403, "path_denied",
                                           json_pack("{s:s}", "field", "path"), "%s", err.msg);
                        return;
                }
                if (r < 0) {
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
        struct files_deny *deny = NULL;
        if (files_deny_for(d, req, sb, &deny) < 0) {
                files_tar_writer_free(w);
                return;
        }
        files_tar_writer_deny(w, deny);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "application/x-tar");
        reply_stream(d, req, tar_pull, tar_src_free, w);
}
