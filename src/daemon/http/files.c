/* SPDX-License-Identifier: Apache-2.0 */
/* /v1/sandboxes/{id}/files: read, write, delete and list a workspace's
 * files, over files.h. */
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "sandbox.h"
#include "daemon.h"
#include "files.h"
#include "grants.h"
#include "http.h"
#include "record.h"
#include "routes.h"
#include "util.h"

static int errno_status(int e, const char **code)
{
        switch (e) {
        case ENOENT:
                *code = "not_found";
                return 404;
        case EXDEV:
        case ELOOP:
                *code = "path_refused";
                return 403;
        case EACCES:
        case EPERM:
                *code = "permission_denied";
                return 403;
        case EFBIG:
                *code = "too_large";
                return 413;
        case ENOTEMPTY:
        case EEXIST:
                *code = "conflict";
                return 409;
        case EISDIR:
        case ENOTDIR:
        case EINVAL:
        case ENAMETOOLONG:
                *code = "bad_request";
                return 400;
        default:
                *code = "internal";
                return 500;
        }
}

static void reply_errno(struct daemon *d, struct evhttp_request *req, const struct al_error *err)
{
        const char *code;
        int status = errno_status(err->code, &code);
        reply_error_fields(d, req, status, code, json_pack("{s:s}", "field", "path"), "%s",
                           err->msg);
}

static void free_reference(const void *data, size_t len, void *extra)
{
        free((void *)data);
}

static void handle_files(struct daemon *d, struct evhttp_request *req, struct grant *g,
                         const char *id, const struct query *q, bool list)
{
        enum evhttp_cmd_type cmd = evhttp_request_get_command(req);
        bool write = !list && (cmd == EVHTTP_REQ_PUT || cmd == EVHTTP_REQ_DELETE);
        if (write && !require(d, req, g, g->allow_exec, "allowExec"))
                return;
        struct al_error err = {0};
        const char *path = query_get(q, "path");
        if (!path && list)
                path = ".";
        if (!path) {
                reply_bad_field(d, req, "path", "is required");
                return;
        }
        _cleanup_free_ char *rel = NULL;
        if (files_clean_path(path, list || cmd == EVHTTP_REQ_GET, &rel, &err) < 0) {
                reply_errno(d, req, &err);
                return;
        }
        bool parents = true, recursive = false;
        if (query_bool(q, "parents", true, &parents) < 0 ||
            query_bool(q, "recursive", false, &recursive) < 0) {
                reply_bad_field(d, req, query_get(q, "parents") ? "parents" : "recursive",
                                "must be true or false");
                return;
        }
        struct sandbox *sb = find_running(d, req, id);
        if (!sb)
                return;
        if (sb->policy && sb->policy->workspace_mode == POLICY_WORKSPACE_OVERLAY) {
                /* These endpoints work on the host's directory: they would
                 * neither see the agent's changes nor go through review. */
                reply_error(d, req, 409, "review_workspace",
                            "the workspace of sandbox %s is copy-on-write: the files endpoints "
                            "would bypass review; use exec (cat, tee) inside it, and GET "
                            ".../diff for its changes",
                            id);
                return;
        }
        _cleanup_close_ int root = -1;
        if (files_open_root(sb->workspace, &root, &err) < 0) {
                reply_error(d, req, 500, "internal", "%s", err.msg);
                return;
        }
        sandbox_touch(sb);

        if (list) {
                json_t *o = NULL;
                if (files_list(root, rel, FILES_LIST_MAX, &o, &err) < 0)
                        reply_errno(d, req, &err);
                else
                        reply_json(d, req, 200, o);
                return;
        }
        if (cmd == EVHTTP_REQ_GET) {
                char *data = NULL;
                size_t len = 0;
                if (files_read(root, rel, FILES_MAX_SIZE, &data, &len, &err) < 0) {
                        reply_errno(d, req, &err);
                        return;
                }
                struct evbuffer *buf = evbuffer_new();
                evbuffer_add_reference(buf, data, len, free_reference, NULL);
                reply_body(d, req, 200, "application/octet-stream", buf);
                evbuffer_free(buf);
                return;
        }
        if (cmd == EVHTTP_REQ_PUT) {
                struct evbuffer *in = evhttp_request_get_input_buffer(req);
                size_t len = evbuffer_get_length(in);
                if (len > FILES_MAX_SIZE) {
                        reply_error(d, req, 413, "too_large", "a file may have at most %u bytes",
                                    FILES_MAX_SIZE);
                        return;
                }
                const void *data = len ? (const void *)evbuffer_pullup(in, -1) : (const void *)"";
                if (files_write(root, rel, data, len, parents, &err) < 0) {
                        reply_errno(d, req, &err);
                        return;
                }
                record_audit(d, id, "api.file_written",
                             json_pack("{s:s, s:s, s:I}", "grant", g->name, "path", rel, "bytes",
                                       (json_int_t)len));
                reply_json(d, req, 200,
                           json_pack("{s:s, s:I}", "path", rel, "size", (json_int_t)len));
                return;
        }
        if (cmd == EVHTTP_REQ_DELETE) {
                if (files_delete(root, rel, recursive, &err) < 0) {
                        reply_errno(d, req, &err);
                        return;
                }
                record_audit(d, id, "api.file_deleted",
                             json_pack("{s:s, s:s}", "grant", g->name, "path", rel));
                reply_json(d, req, 200, json_pack("{s:s}", "deleted", rel));
                return;
        }
        reply_error(d, req, 405, "method_not_allowed", "use GET, PUT or DELETE");
}

void route_files(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_files(d, req, a->grant, a->id, a->query, false);
}

void route_files_list(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        handle_files(d, req, a->grant, a->id, a->query, true);
}
