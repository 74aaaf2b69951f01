/* SPDX-License-Identifier: Apache-2.0 */
/* The emergency stop's client side (estop.h). */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "control-proto.h"
#include "estop.h"
#include "util.h"

#define ESTOP_ANSWER_MAX 4096

int sv_estop(const char *run_dir, const char *id, const char *by, uint64_t timeout_ms,
             struct sv_estop_result *res, struct al_error *err)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        *res = (struct sv_estop_result){0};
        int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s/control.sock", run_dir, id);
        if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
                return al_error_set_message(err, ENAMETOOLONG,
                                            "the run directory's path is too long");
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return al_error_set(err, errno, "socket");
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                if (errno == ENOENT || errno == ECONNREFUSED)
                        return al_error_set_message(err, ENOENT, "no running sandbox %s in %s", id,
                                                    run_dir);
                return al_error_set(err, errno, "connecting to sandbox %s's supervisor", id);
        }
        json_t *o = json_pack("{s:s, s:s}", "op", CONTROL_OP_ESTOP, "by", by);
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!s)
                return al_error_set(err, ENOMEM, "estop request");
        _cleanup_free_ char *line = xasprintf("%s\n", s);
        free(s);
        int r = write_full(fd, line, strlen(line));
        if (r < 0)
                return al_error_set(err, -r, "asking sandbox %s's supervisor", id);

        char buf[ESTOP_ANSWER_MAX + 1];
        size_t len = 0;
        uint64_t end = now_monotonic_us() / 1000 + timeout_ms;
        while (!memchr(buf, '\n', len)) {
                uint64_t now = now_monotonic_us() / 1000;
                if (now >= end || len >= ESTOP_ANSWER_MAX)
                        return al_error_set_message(err, ETIMEDOUT,
                                                    "sandbox %s's supervisor did not answer", id);
                struct pollfd p = {.fd = fd, .events = POLLIN};
                int pr = poll(&p, 1, (int)(end - now));
                if (pr < 0 && errno != EINTR)
                        return al_error_set(err, errno, "waiting for sandbox %s's supervisor", id);
                if (pr <= 0)
                        continue;
                ssize_t k = read(fd, buf + len, ESTOP_ANSWER_MAX - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        return al_error_set_message(
                            err, EPIPE, "sandbox %s's supervisor closed the connection", id);
                len += (size_t)k;
        }
        buf[len] = '\0';
        json_error_t jerr;
        json_t *a = json_loads(buf, JSON_DISABLE_EOF_CHECK, &jerr);
        const char *code = json_string_value(json_object_get(a, "error"));
        const char *msg = json_string_value(json_object_get(a, "message"));
        if (json_is_true(json_object_get(a, "ok"))) {
                res->driver_told = json_is_true(json_object_get(a, "driverTold"));
                res->received_at = json_number_value(json_object_get(a, "receivedAt"));
                json_decref(a);
                return 0;
        }
        if (code && STREQ(code, CONTROL_ERR_NO_HARDWARE))
                r = al_error_set_message(err, ENODEV, "sandbox %s has no hardware section", id);
        else
                r = al_error_set_message(err, EIO, "sandbox %s's supervisor answered: %s%s%s", id,
                                         code ? code : "not an answer", msg ? ": " : "",
                                         msg ? msg : "");
        json_decref(a);
        return r;
}
