/* SPDX-License-Identifier: Apache-2.0 */
/* /v1/sandboxes/{id}/files: read, write, delete and list a workspace's
 * files, over files.h. */
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

#include "sandbox.h"
#include "daemon.h"
#include "files-deny.h"
#include "files.h"
#include "fs.h"
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

/* A file's bytes, streamed: one chunk of STREAM_CHUNK at a time, the next
 * read when the last has left for the client, so that a file of any size
 * takes no more of the daemon's memory than that. */
#define STREAM_CHUNK (256u << 10)

struct file_src {
        int fd;
        /* What is left of the size announced at open: a file the sandbox
         * keeps growing (or extends sparsely, at no cost to it) is sent up
         * to that size, not copied to the host without end. */
        uint64_t left;
};

static int file_pull(void *arg, struct evbuffer *out)
{
        struct file_src *f = arg;
        if (!f->left)
                return 0;
        int want = f->left < STREAM_CHUNK ? (int)f->left : (int)STREAM_CHUNK;
        int n = evbuffer_read(out, f->fd, want);
        if (n > 0 && (uint64_t)evbuffer_get_length(out) > f->left)
                return -1; /* never past the announced size */
        if (n > 0)
                f->left -= evbuffer_get_length(out);
        return n;
}

static void file_src_free(void *arg)
{
        struct file_src *f = arg;
        close(f->fd);
        free(f);
}

static void stream_file(struct daemon *d, struct evhttp_request *req, int fd, uint64_t size)
{
        struct file_src *f = xcalloc(1, sizeof(*f));
        f->fd = fd;
        f->left = size;
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        char len[32];
        snprintf(len, sizeof(len), "%" PRIu64, size);
        evhttp_add_header(h, "Content-Type", "application/octet-stream");
        evhttp_add_header(h, "X-Airlock-Size", len);
        reply_stream(d, req, file_pull, file_src_free, f);
}

/* A sandbox's deny set takes a walk of its workspace to build (the
 * repositories whose metadata is protected), so it is kept a while: the
 * sandbox's own masks were fixed when it started. It is used again only
 * while each entry is the file it held (files_deny_fresh). */
#define DENY_CACHE_N  16
#define DENY_CACHE_US (30 * 1000000ULL)
static struct {
        char id[17];
        struct files_deny *fd;
        uint64_t at;
} deny_cache[DENY_CACHE_N];

/* The set for sb, borrowed (NULL: nothing to check); -1 when a reply was
 * sent. */
static int deny_get(struct daemon *d, struct evhttp_request *req, const struct sandbox *sb,
                    const struct files_deny **ret)
{
        *ret = NULL;
        if (sb->workspace_owned || !sb->policy)
                return 0;
        uint64_t now = now_monotonic_us();
        size_t slot = DENY_CACHE_N;
        for (size_t i = 0; i < DENY_CACHE_N && slot == DENY_CACHE_N; i++)
                if (deny_cache[i].fd && STREQ(deny_cache[i].id, sb->id)) {
                        if (now - deny_cache[i].at < DENY_CACHE_US &&
                            files_deny_fresh(deny_cache[i].fd)) {
                                *ret = deny_cache[i].fd;
                                return 0;
                        }
                        slot = i; /* stale: made again */
                }
        for (size_t i = 0; i < DENY_CACHE_N && slot == DENY_CACHE_N; i++)
                if (!deny_cache[i].fd)
                        slot = i;
        if (slot == DENY_CACHE_N) {
                slot = 0; /* the oldest goes */
                for (size_t i = 1; i < DENY_CACHE_N; i++)
                        if (deny_cache[i].at < deny_cache[slot].at)
                                slot = i;
        }
        struct al_error err = {0};
        struct files_deny *fd = NULL;
        if (files_deny_new(sb->policy, d->home, d->secrets_path, &fd, &err) < 0) {
                reply_error(d, req, 500, "internal", "the sandbox's deny list: %s", err.msg);
                return -1;
        }
        files_deny_free(deny_cache[slot].fd);
        snprintf(deny_cache[slot].id, sizeof(deny_cache[slot].id), "%s", sb->id);
        deny_cache[slot].fd = fd;
        deny_cache[slot].at = now;
        *ret = fd;
        return 0;
}

static int deny_refused(struct daemon *d, struct evhttp_request *req, int r, struct al_error *err)
{
        if (r == -EACCES) {
                reply_error_fields(d, req, 403, "path_denied", json_pack("{s:s}", "field", "path"),
                                   "%s", err->msg);
                return -2; /* refused by the deny list: the caller's audit says so */
        }
        if (r < 0) {
                reply_errno(d, req, err);
                return -1;
        }
        return 0;
}

int files_deny_guard(struct daemon *d, struct evhttp_request *req, const struct sandbox *sb,
                     int root, const char *rel, bool tree)
{
        const struct files_deny *fd = NULL;
        if (deny_get(d, req, sb, &fd) < 0)
                return -1;
        struct al_error err = {0};
        return deny_refused(d, req, files_deny_check(fd, root, rel, tree, &err), &err);
}

int files_deny_for(struct daemon *d, struct evhttp_request *req, const struct sandbox *sb,
                   struct files_deny **ret)
{
        *ret = NULL;
        if (sb->workspace_owned || !sb->policy)
                return 0;
        struct al_error err = {0};
        if (files_deny_new(sb->policy, d->home, d->secrets_path, ret, &err) < 0) {
                reply_error(d, req, 500, "internal", "the sandbox's deny list: %s", err.msg);
                return -1;
        }
        return 0;
}

int files_deny_guard_fd(struct daemon *d, struct evhttp_request *req, const struct sandbox *sb,
                        int root, int opened, const char *rel)
{
        const struct files_deny *fd = NULL;
        if (deny_get(d, req, sb, &fd) < 0)
                return -1;
        struct al_error err = {0};
        return deny_refused(d, req, files_deny_check_fd(fd, root, opened, rel, &err), &err);
}

static int checked_parent(struct daemon *d, struct evhttp_request *req, const struct sandbox *sb,
                          int root, const char *rel, bool create, bool tree, int *ret_pfd,
                          const char **ret_name)
{
        const char *slash = strrchr(rel, '/');
        _cleanup_free_ char *dir = slash ? xasprintf("%.*s", (int)(slash - rel), rel) : NULL;
        *ret_name = slash ? slash + 1 : rel;
        *ret_pfd = -1;
        if (sb->workspace_owned || !sb->policy)
                return 0;
        if (create && dir) {
                struct al_error ignored = {0};
                (void)files_mkdir(root, dir, true, &ignored);
        }
        int pfd = fs_openat2(root, dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                             RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
        if (pfd < 0)
                return 0;
        int r = files_deny_guard_fd(d, req, sb, root, pfd, rel);
        if (r >= 0)
                r = files_deny_guard(d, req, sb, pfd, *ret_name, tree);
        if (r < 0) {
                close(pfd);
                return r;
        }
        *ret_pfd = pfd;
        return 0;
}

/* A change the deny list refused (r == -2, the 403 sent) is written to the
 * audit log as a refusal, never as the change it would have been. */
static int audit_refused(struct daemon *d, const char *id, const struct grant *g, int r,
                         const char *op, const char *rel)
{
        if (r == -2 && !STREQ(op, "read"))
                (void)record_audit(d, id, "api.file_refused",
                                   json_pack("{s:s, s:s, s:s, s:s}", "grant", g->name, "op", op,
                                             "path", rel, "reason", "path_denied"));
        return r;
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
        /* A recursive list, or the removal of a whole tree, must not
         * reach into a denied entry beneath it either. */
        bool tree = (list && query_get(q, "depth") && !STREQ(query_get(q, "depth"), "1")) ||
                    (cmd == EVHTTP_REQ_DELETE && !list);
        if (audit_refused(d, id, g, files_deny_guard(d, req, sb, root, rel, tree),
                          !write                  ? "read"
                          : cmd == EVHTTP_REQ_PUT ? "write"
                                                  : "delete",
                          rel) < 0)
                return;

        if (list) {
                json_t *o = NULL;
                const char *depth_s = query_get(q, "depth");
                uint64_t depth = 1;
                if (depth_s && (safe_atou64(depth_s, &depth) < 0 || depth < 1 ||
                                depth > FILES_LIST_DEPTH_MAX)) {
                        reply_bad_field(d, req, "depth", "must be a number from 1 to 32");
                        return;
                }
                /* Each entry is checked as the walk reaches it: a denied
                 * directory moved in after the check above is left out. */
                const struct files_deny *deny = NULL;
                if (deny_get(d, req, sb, &deny) < 0)
                        return;
                int r = files_list_deny(root, rel, depth_s ? (unsigned)depth : 0, FILES_LIST_MAX,
                                        deny, &o, &err);
                if (r == -EACCES)
                        (void)deny_refused(d, req, r, &err);
                else if (r < 0)
                        reply_errno(d, req, &err);
                else
                        reply_json(d, req, 200, o);
                return;
        }
        if (cmd == EVHTTP_REQ_GET) {
                int fd = -1;
                uint64_t size = 0;
                if (files_open_read(root, rel, &fd, &size, &err) < 0) {
                        reply_errno(d, req, &err);
                        return;
                }
                /* What was opened, wherever the path led by then. */
                if (files_deny_guard_fd(d, req, sb, root, fd, rel) < 0) {
                        close(fd);
                        return;
                }
                stream_file(d, req, fd, size);
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
                bool append = false;
                if (query_bool(q, "append", false, &append) < 0) {
                        reply_bad_field(d, req, "append", "must be true or false");
                        return;
                }
                /* The deny check from the directory it opens, then the
                 * line: a change that cannot be recorded is not made (it
                 * may name a write that then fails), and a refusal is
                 * recorded as one. */
                _cleanup_close_ int pfd = -1;
                const char *name;
                if (audit_refused(d, id, g,
                                  checked_parent(d, req, sb, root, rel, false, false, &pfd, &name),
                                  "write", rel) < 0)
                        return;
                if (record_audit(d, id, "api.file_written",
                                 json_pack("{s:s, s:s, s:I}", "grant", g->name, "path", rel,
                                           "bytes", (json_int_t)len)) < 0) {
                        reply_audit_failed(d, req, d->audit_fault);
                        return;
                }
                /* Parents made now, and what they lead to checked again. */
                if (pfd < 0 && parents && !append &&
                    audit_refused(d, id, g,
                                  checked_parent(d, req, sb, root, rel, true, false, &pfd, &name),
                                  "write", rel) < 0)
                        return;
                int at = pfd >= 0 ? pfd : root;
                const char *what = pfd >= 0 ? name : rel;
                if (append ? files_append(at, what, data, len, &err) < 0
                           : files_write(at, what, data, len, parents, &err) < 0) {
                        reply_errno(d, req, &err);
                        return;
                }
                reply_json(d, req, 200,
                           json_pack("{s:s, s:I}", "path", rel, "size", (json_int_t)len));
                return;
        }
        if (cmd == EVHTTP_REQ_DELETE) {
                _cleanup_close_ int pfd = -1;
                const char *name;
                if (audit_refused(d, id, g,
                                  checked_parent(d, req, sb, root, rel, false, true, &pfd, &name),
                                  "delete", rel) < 0)
                        return;
                if (record_audit(d, id, "api.file_deleted",
                                 json_pack("{s:s, s:s}", "grant", g->name, "path", rel)) < 0) {
                        reply_audit_failed(d, req, d->audit_fault);
                        return;
                }
                if (files_delete(pfd >= 0 ? pfd : root, pfd >= 0 ? name : rel, recursive, &err) <
                    0) {
                        reply_errno(d, req, &err);
                        return;
                }
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

/* The workspace of a running, non-review sandbox, for the operations
 * below; -1 with the reply sent. */
static int open_workspace(struct daemon *d, struct evhttp_request *req, struct grant *g,
                          const char *id, const char *op, const char *rel, bool tree,
                          const char *rel2, int *ret_root)
{
        bool write = !STREQ(op, "read");
        if (write && !require(d, req, g, g->allow_exec, "allowExec"))
                return -1;
        struct sandbox *sb = find_running(d, req, id);
        if (!sb)
                return -1;
        if (sb->policy && sb->policy->workspace_mode == POLICY_WORKSPACE_OVERLAY) {
                reply_error(d, req, 409, "review_workspace",
                            "the workspace of sandbox %s is copy-on-write: the files endpoints "
                            "would bypass review; use exec inside it, and GET .../diff for its "
                            "changes",
                            id);
                return -1;
        }
        struct al_error err = {0};
        if (files_open_root(sb->workspace, ret_root, &err) < 0) {
                reply_error(d, req, 500, "internal", "%s", err.msg);
                return -1;
        }
        sandbox_touch(sb);
        int r = files_deny_guard(d, req, sb, *ret_root, rel, tree);
        if (r >= 0 && rel2)
                r = files_deny_guard(d, req, sb, *ret_root, rel2, false);
        if (audit_refused(d, id, g, r, op, rel) < 0) {
                close(*ret_root);
                *ret_root = -1;
                return -1;
        }
        return 0;
}

/* The client's path in `key`, cleaned; NULL with the reply sent. */
static char *clean_query_path(struct daemon *d, struct evhttp_request *req, const char *path,
                              const char *field, bool allow_root)
{
        if (!path) {
                reply_bad_field(d, req, field, "is required");
                return NULL;
        }
        struct al_error err = {0};
        char *rel = NULL;
        if (files_clean_path(path, allow_root, &rel, &err) < 0) {
                const char *code;
                int status = errno_status(err.code, &code);
                reply_error_fields(d, req, status, code, json_pack("{s:s}", "field", field), "%s",
                                   err.msg);
                return NULL;
        }
        return rel;
}

void route_files_mkdir(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        _cleanup_free_ char *rel =
            clean_query_path(d, req, query_get(a->query, "path"), "path", false);
        if (!rel)
                return;
        bool parents = false;
        if (query_bool(a->query, "parents", false, &parents) < 0) {
                reply_bad_field(d, req, "parents", "must be true or false");
                return;
        }
        _cleanup_close_ int root = -1;
        if (open_workspace(d, req, a->grant, a->id, "mkdir", rel, false, NULL, &root) < 0)
                return;
        /* On a host workspace, from the directory that was checked (its
         * missing parents made first, then checked): a rename by the agent
         * meanwhile cannot lead the new directory into a denied one. */
        struct sandbox *sb = find_running(d, req, a->id);
        if (!sb)
                return;
        _cleanup_close_ int pfd = -1;
        const char *name;
        if (audit_refused(d, a->id, a->grant,
                          checked_parent(d, req, sb, root, rel, false, false, &pfd, &name), "mkdir",
                          rel) < 0)
                return;
        struct al_error err = {0};
        if (record_audit(d, a->id, "api.dir_created",
                         json_pack("{s:s, s:s}", "grant", a->grant->name, "path", rel)) < 0) {
                reply_audit_failed(d, req, d->audit_fault);
                return;
        }
        if (pfd < 0 && parents && !sb->workspace_owned && sb->policy &&
            audit_refused(d, a->id, a->grant,
                          checked_parent(d, req, sb, root, rel, true, false, &pfd, &name), "mkdir",
                          rel) < 0)
                return;
        if (files_mkdir(pfd >= 0 ? pfd : root, pfd >= 0 ? name : rel, parents, &err) < 0) {
                reply_errno(d, req, &err);
                return;
        }
        reply_json(d, req, 200, json_pack("{s:s}", "path", rel));
}

void route_files_rename(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        json_t *body = read_json_body(d, req, false);
        if (!body)
                return;
        static const char *const keys[] = {"from", "to", "overwrite", NULL};
        json_t *jover = json_object_get(body, "overwrite");
        _cleanup_free_ char *from = NULL, *to = NULL;
        /* Before the first goto: a jump past it would leave the cleanup an
         * unset descriptor to close. */
        _cleanup_close_ int root = -1, fpfd = -1, tpfd = -1;
        if (reject_unknown(d, req, body, keys))
                goto out;
        if (jover && !json_is_boolean(jover)) {
                reply_bad_field(d, req, "overwrite", "must be true or false");
                goto out;
        }
        from = clean_query_path(d, req, json_string_value(json_object_get(body, "from")), "from",
                                false);
        if (!from)
                goto out;
        to = clean_query_path(d, req, json_string_value(json_object_get(body, "to")), "to", false);
        if (!to)
                goto out;
        /* What moves takes everything beneath it along. */
        if (open_workspace(d, req, a->grant, a->id, "rename", from, true, to, &root) < 0)
                goto out;
        /* On a host workspace, from the directories that were checked: a
         * rename by the agent meanwhile cannot bring a denied entry under
         * either name. */
        struct sandbox *sb = find_running(d, req, a->id);
        const char *fname, *tname;
        if (!sb)
                goto out;
        int c = checked_parent(d, req, sb, root, from, false, true, &fpfd, &fname);
        if (c >= 0)
                c = checked_parent(d, req, sb, root, to, false, false, &tpfd, &tname);
        if (audit_refused(d, a->id, a->grant, c, "rename", from) < 0)
                goto out;
        struct al_error err = {0};
        if (record_audit(d, a->id, "api.file_renamed",
                         json_pack("{s:s, s:s, s:s}", "grant", a->grant->name, "from", from, "to",
                                   to)) < 0) {
                reply_audit_failed(d, req, d->audit_fault);
                goto out;
        }
        int r = fpfd >= 0 && tpfd >= 0
                    ? (renameat2(fpfd, fname, tpfd, tname,
                                 json_is_true(jover) ? 0 : RENAME_NOREPLACE) < 0
                           ? al_error_set(&err, errno, "renaming %s to %s", from, to)
                           : 0)
                    : files_rename(root, from, to, json_is_true(jover), &err);
        if (r < 0) {
                reply_errno(d, req, &err);
                goto out;
        }
        reply_json(d, req, 200, json_pack("{s:s, s:s}", "from", from, "to", to));
out:
        json_decref(body);
}

static void stat_or_exists(struct daemon *d, struct evhttp_request *req, const struct route_args *a,
                           bool exists)
{
        _cleanup_free_ char *rel =
            clean_query_path(d, req, query_get(a->query, "path"), "path", true);
        if (!rel)
                return;
        _cleanup_close_ int root = -1;
        if (open_workspace(d, req, a->grant, a->id, "read", rel, false, NULL, &root) < 0)
                return;
        struct al_error err = {0};
        json_t *o = NULL;
        int r = files_stat(root, rel, &o, &err);
        if (exists && (r >= 0 || r == -ENOENT || r == -ENOTDIR)) {
                json_decref(o);
                reply_json(d, req, 200, json_pack("{s:s, s:b}", "path", rel, "exists", r >= 0));
                return;
        }
        if (r < 0)
                reply_errno(d, req, &err);
        else
                reply_json(d, req, 200, o);
}

void route_files_stat(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        stat_or_exists(d, req, a, false);
}

void route_files_exists(struct daemon *d, struct evhttp_request *req, const struct route_args *a)
{
        stat_or_exists(d, req, a, true);
}
