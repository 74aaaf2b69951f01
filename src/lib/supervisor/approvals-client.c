/* SPDX-License-Identifier: Apache-2.0 */
/* One request, one answer line, to a supervisor's control socket
 * (approvals-client.h). */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "approvals-client.h"
#include "control-proto.h"
#include "stop.h"
#include "util.h"

#define ANSWER_MAX (1u << 20) /* 16 approvals are far below it */

static int call(const char *run_dir, const char *id, json_t *req, uint64_t timeout_ms, json_t **ret)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s/control.sock", run_dir, id);
        if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return errno == ECONNREFUSED ? -ENOENT : -errno;
        char *s = json_dumps(req, JSON_COMPACT);
        if (!s)
                return -ENOMEM;
        _cleanup_free_ char *line = xasprintf("%s\n", s);
        free(s);
        int r = write_full(fd, line, strlen(line));
        if (r < 0)
                return r;
        _cleanup_free_ char *buf = xcalloc(1, ANSWER_MAX + 1);
        size_t len = 0;
        uint64_t deadline = now_monotonic_us() / 1000 + timeout_ms;
        while (len < ANSWER_MAX && !memchr(buf, '\n', len)) {
                uint64_t now = now_monotonic_us() / 1000;
                if (now >= deadline)
                        return -ETIMEDOUT;
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int k = poll(&p, 1, (int)(deadline - now));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        return -ETIMEDOUT;
                ssize_t got = read(fd, buf + len, ANSWER_MAX - len);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got < 0)
                        return -errno;
                if (got == 0)
                        break;
                len += (size_t)got;
        }
        char *nl = memchr(buf, '\n', len);
        if (!nl)
                return -EPROTO;
        json_t *o = json_loadb(buf, (size_t)(nl - buf), 0, NULL);
        if (!json_is_object(o)) {
                json_decref(o);
                return -EPROTO;
        }
        *ret = o;
        return 0;
}

int sv_approvals_sandbox_of(const char *aid, char id[17])
{
        if (!aid || strlen(aid) < 18 || aid[16] != '-' || strlen(aid) > 16 + 1 + 20)
                return -EINVAL;
        memcpy(id, aid, 16);
        id[16] = '\0';
        if (!sv_stop_id_ok(id))
                return -EINVAL;
        for (const char *p = aid + 17; *p; p++)
                if (*p < '0' || *p > '9')
                        return -EINVAL;
        return 0;
}

int sv_approvals_list(const char *run_dir, const char *id, uint64_t timeout_ms, json_t **ret)
{
        json_t *req = json_pack("{s:s}", "op", CONTROL_OP_APPROVALS);
        json_t *ans = NULL;
        int r = call(run_dir, id, req, timeout_ms, &ans);
        json_decref(req);
        if (r < 0)
                return r;
        json_t *l = json_object_get(ans, "approvals");
        if (!json_is_true(json_object_get(ans, "ok")) || !json_is_array(l)) {
                json_decref(ans);
                return -EPROTO;
        }
        *ret = json_incref(l);
        json_decref(ans);
        return 0;
}

int sv_approvals_decide(const char *run_dir, const char *aid, const char *decision, const char *by,
                        uint64_t timeout_ms, json_t **ret)
{
        char id[17];
        if (sv_approvals_sandbox_of(aid, id) < 0)
                return -EINVAL;
        json_t *req = json_pack("{s:s, s:s, s:s, s:s}", "op", CONTROL_OP_APPROVE, "id", aid,
                                "decision", decision, "by", by);
        json_t *ans = NULL;
        int r = call(run_dir, id, req, timeout_ms, &ans);
        json_decref(req);
        if (r < 0)
                return r;
        const char *e = json_string_value(json_object_get(ans, "error"));
        if (e) {
                r = STREQ(e, CONTROL_ERR_UNKNOWN_APPROVAL) ? -ESRCH
                    : STREQ(e, CONTROL_ERR_BAD_REQUEST)    ? -EINVAL
                    : STREQ(e, CONTROL_ERR_AUDIT_FAILED)   ? -EIO
                                                           : -EPROTO;
                json_decref(ans);
                return r;
        }
        json_t *o = json_object_get(ans, "approval");
        if (!json_is_object(o)) {
                json_decref(ans);
                return -EPROTO;
        }
        *ret = json_incref(o);
        json_decref(ans);
        return 0;
}
