/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent/agent.h"
#include "control-proto.h"
#include "util.h"

static int connect_to(const char *path, struct al_error *err)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof(sa.sun_path))
                return al_error_set(err, -ENAMETOOLONG, "control socket %s", path);
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return al_error_set(err, -errno, "control socket");
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int e = errno;
                close(fd);
                return al_error_set(err, -e, "connecting to the sandbox's control socket %s", path);
        }
        return fd;
}

int agent_ctl_call(const char *socket_path, json_t *req, unsigned timeout_ms,
                   int (*line)(void *ud, json_t *msg), void *ud, struct al_error *err)
{
        _cleanup_close_ int fd = connect_to(socket_path, err);
        if (fd < 0)
                return fd;
        _cleanup_free_ char *s = json_dumps(req, JSON_COMPACT);
        if (!s)
                return al_error_set(err, -ENOMEM, "control request");
        if (write_full(fd, s, strlen(s)) < 0 || write_full(fd, "\n", 1) < 0)
                return al_error_set(err, -errno, "writing to the control socket");
        size_t cap = 64 * 1024, len = 0;
        _cleanup_free_ char *buf = xcalloc(cap + 1, 1);
        for (;;) {
                char *nl;
                while ((nl = memchr(buf, '\n', len))) {
                        json_t *msg = json_loadb(buf, (size_t)(nl - buf), 0, NULL);
                        size_t used = (size_t)(nl - buf) + 1;
                        memmove(buf, buf + used, len - used);
                        len -= used;
                        if (!json_is_object(msg)) {
                                json_decref(msg);
                                return al_error_set(err, -EPROTO,
                                                    "the supervisor sent a line that is not JSON");
                        }
                        int r = line(ud, msg);
                        json_decref(msg);
                        if (r < 0)
                                return r;
                }
                if (len == cap) {
                        if (cap >= CONTROL_LINE_MAX)
                                return al_error_set(err, -EPROTO,
                                                    "the supervisor sent a line over %u bytes",
                                                    CONTROL_LINE_MAX);
                        cap *= 2;
                        buf = xrealloc(buf, cap + 1, 1);
                }
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                int pr = poll(&pfd, 1, timeout_ms ? (int)timeout_ms : -1);
                if (pr < 0 && errno == EINTR)
                        continue;
                if (pr == 0)
                        return al_error_set(err, -ETIMEDOUT, "the supervisor did not answer");
                ssize_t n = read(fd, buf + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return al_error_set(err, -errno, "reading the control socket");
                if (n == 0)
                        return 0;
                len += (size_t)n;
        }
}

/* ---- exec ---- */

struct exec_state {
        struct agent_exec_result *r;
        size_t cap;
        bool exited;
        char failed[256];
};

static void keep(struct exec_state *st, const unsigned char *d, size_t n)
{
        st->r->out_total += n;
        size_t room = st->cap > st->r->out_len ? st->cap - st->r->out_len : 0;
        size_t k = n < room ? n : room;
        memcpy(st->r->out + st->r->out_len, d, k);
        st->r->out_len += k;
}

static int exec_line(void *ud, json_t *msg)
{
        struct exec_state *st = ud;
        const char *type = json_string_value(json_object_get(msg, "type"));
        if (json_is_false(json_object_get(msg, "ok"))) {
                const char *m = json_string_value(json_object_get(msg, "message"));
                const char *code = json_string_value(json_object_get(msg, "error"));
                snprintf(st->failed, sizeof(st->failed), "%s: %s", code ? code : "error",
                         m ? m : "");
                return 0;
        }
        if (!type)
                return 0;
        if (STREQ(type, "started"))
                st->r->pid = (int)json_integer_value(json_object_get(msg, "pid"));
        else if (STREQ(type, "stdout") || STREQ(type, "stderr")) {
                _cleanup_free_ unsigned char *d = NULL;
                size_t n = 0;
                const char *b = json_string_value(json_object_get(msg, "data"));
                if (b && base64_decode(b, &d, &n) >= 0)
                        keep(st, d, n);
        } else if (STREQ(type, "error")) {
                const char *m = json_string_value(json_object_get(msg, "message"));
                if (m) {
                        keep(st, (const unsigned char *)m, strlen(m));
                        keep(st, (const unsigned char *)"\n", 1);
                }
        } else if (STREQ(type, "exit")) {
                st->exited = true;
                st->r->exit_code = (int)json_integer_value(json_object_get(msg, "exitCode"));
                const char *ec = json_string_value(json_object_get(msg, "errorCode"));
                snprintf(st->r->error_code, sizeof(st->r->error_code), "%s", ec ? ec : "");
        }
        return 0;
}

int agent_exec(const char *socket_path, char *const *argv, const void *stdin_data, size_t stdin_len,
               unsigned timeout_s, size_t cap, struct agent_exec_result *ret, struct al_error *err)
{
        json_t *jargv = json_array();
        for (size_t i = 0; argv[i]; i++)
                json_array_append_new(jargv, json_string(argv[i]));
        json_t *req = json_pack("{s:s, s:o, s:s, s:I}", "op", CONTROL_OP_EXEC, "argv", jargv, "cwd",
                                "/workspace", "timeout", (json_int_t)timeout_s);
        if (stdin_data) {
                char *b = base64_encode(stdin_data, stdin_len);
                json_object_set_new(req, "stdin", json_string(b));
                free(b);
        }
        struct agent_exec_result r = {.exit_code = -1, .out = xcalloc(cap + 1, 1)};
        struct exec_state st = {.r = &r, .cap = cap};
        /* Each wait for a line is bounded by the command's own timeout and a
         * margin for its end to be reported. */
        int rr = agent_ctl_call(socket_path, req, (timeout_s + 30) * 1000, exec_line, &st, err);
        json_decref(req);
        if (rr >= 0 && !st.exited)
                rr = al_error_set(err, -EIO, "the sandbox did not run the command: %s",
                                  st.failed[0] ? st.failed : "no exit reported");
        if (rr < 0) {
                agent_exec_result_clear(&r);
                return rr;
        }
        r.out[r.out_len] = '\0';
        *ret = r;
        return 0;
}

void agent_exec_result_clear(struct agent_exec_result *r)
{
        free(r->out);
        memset(r, 0, sizeof(*r));
}
