/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What the tool gateway's tests share: a gateway on a real event loop
 * serving a real unix socket, a blocking client that drives the loop while
 * it waits for an answer, and the records the gateway made. */

#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <event2/event.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "policy.h"
#include "secrets.h"
#include "toolgate-internal.h"
#include "toolgate.h"
#include "util.h"

#define RUN_ID "run-0123456789abcdef"

struct tg_test {
        struct event_base *base;
        struct policy *policy;
        struct secrets *secrets;
        struct toolgate *tg;
        char dir[64];
        char sock[100];
        char script[128];
        json_t *records;
        json_t *ahead; /* the records written before a tool ran */
};

static struct tg_test T;

static void tg_recorder(void *ud, const struct toolgate_record *rec)
{
        json_array_append_new(T.records, toolgate_record_json(rec));
}

static int tg_ahead(void *ud, const struct toolgate_record *rec)
{
        json_array_append_new(T.ahead, toolgate_started_json(rec));
        return 0;
}

/* The helper tool every command test runs (python3, a script file: never a
 * command string). Its first argument says what to do. */
static const char tool_py[] =
    "import sys, os, json, time\n"
    "mode = sys.argv[1]\n"
    "if mode == 'argv':\n"
    "    print(json.dumps(sys.argv[2:]))\n"
    "elif mode == 'stdin':\n"
    "    sys.stdout.write(sys.stdin.read())\n"
    "elif mode == 'env':\n"
    "    print(json.dumps({'token': os.environ.get('TOKEN', ''), 'keys': sorted(os.environ),"
    " 'cwd': os.getcwd(), 'uid': os.getuid()}))\n"
    "elif mode == 'text':\n"
    "    print('plain text, not JSON ' + os.environ.get('TOKEN', ''))\n"
    "elif mode == 'fail':\n"
    "    sys.stderr.write('it broke: ' + os.environ.get('TOKEN', '') + '\\n')\n"
    "    sys.exit(3)\n"
    "elif mode == 'big':\n"
    "    sys.stdout.write('x' * 5000)\n"
    "elif mode == 'sleep':\n"
    "    time.sleep(float(sys.argv[2]))\n"
    "    print('{\"slept\": true}')\n"
    "elif mode == 'hang':\n"
    "    if os.fork() == 0:\n"
    "        os.setsid()\n"
    "        if os.fork() == 0:\n"
    "            os.execv('/bin/sleep', ['sleep', sys.argv[2]])\n"
    "        os._exit(0)\n"
    "    os.execv('/bin/sleep', ['sleep', sys.argv[2]])\n";

/* The policy in json loaded, the gateway made on T.base and serving T.sock. */
static void tg_start(const char *json)
{
        T.policy = policy_new();
        struct al_error e = {0};
        cr_assert_eq(policy_load_string(T.policy, json, "test", &e), 0, "%s", e.msg);
        cr_assert_eq(policy_finalize(T.policy, "/", "/root", &e), 0, "%s", e.msg);

        T.base = event_base_new();
        T.secrets = secrets_new();
        struct toolgate_config cfg = {
            .policy = T.policy,
            .sandbox = "sb-test",
            .run_id = RUN_ID,
            .secrets = T.secrets,
            .recorder = tg_recorder,
            .ahead = tg_ahead,
        };
        T.tg = toolgate_new(T.base, &cfg, &e);
        cr_assert_not_null(T.tg, "%s", e.msg);

        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", T.sock);
        cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(listen(fd, 128), 0);
        cr_assert_eq(toolgate_add_listener(T.tg, fd, &e), 0, "%s", e.msg);
}

/* tools_json: the "tools" object of the policy; "%S" in it stands for the
 * helper script's path. */
static void tg_setup(const char *tools_json)
{
        memset(&T, 0, sizeof(T));
        T.records = json_array();
        T.ahead = json_array();
        snprintf(T.dir, sizeof(T.dir), "/tmp/tg-test-XXXXXX");
        cr_assert_not_null(mkdtemp(T.dir));
        chmod(T.dir, 0755);
        snprintf(T.sock, sizeof(T.sock), "%s/tool.sock", T.dir);
        snprintf(T.script, sizeof(T.script), "%s/tool.py", T.dir);
        FILE *f = fopen(T.script, "w");
        cr_assert_not_null(f);
        fputs(tool_py, f);
        fclose(f);
        chmod(T.script, 0755);

        char json[8192];
        size_t n = 0;
        n += (size_t)snprintf(json + n, sizeof(json) - n, "{\"tools\": ");
        for (const char *s = tools_json; *s && n + 200 < sizeof(json); s++) {
                if (s[0] == '%' && s[1] == 'S') {
                        n += (size_t)snprintf(json + n, sizeof(json) - n, "%s", T.script);
                        s++;
                } else
                        json[n++] = *s;
        }
        snprintf(json + n, sizeof(json) - n, "}");
        tg_start(json);
}

static void tg_teardown(void)
{
        toolgate_free(T.tg);
        T.tg = NULL;
        if (T.base)
                event_base_free(T.base);
        secrets_free(T.secrets);
        policy_free(T.policy);
        json_decref(T.records);
        json_decref(T.ahead);
        unlink(T.sock);
        unlink(T.script);
        rmdir(T.dir);
}

static int tg_connect(void)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", T.sock);
        cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        return fd;
}

static void tg_spin(void)
{
        event_base_loop(T.base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

static void tg_send(int fd, const char *line)
{
        size_t len = strlen(line), off = 0;
        while (off < len) {
                ssize_t k = send(fd, line + off, len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (k < 0 && errno == EAGAIN) {
                        tg_spin();
                        continue;
                }
                cr_assert_gt(k, 0, "send: %s", strerror(errno));
                off += (size_t)k;
        }
}

/* The next answer line on fd, the loop spun meanwhile; NULL at EOF. */
static json_t *tg_read(int fd, int timeout_ms)
{
        static char buf[1 << 22];
        static size_t have;
        static int have_fd = -1;
        if (have_fd != fd) {
                have = 0;
                have_fd = fd;
        }
        uint64_t deadline = now_monotonic_us() + (uint64_t)timeout_ms * 1000;
        for (;;) {
                char *nl = memchr(buf, '\n', have);
                if (nl) {
                        size_t n = (size_t)(nl - buf) + 1;
                        json_t *v = json_loadb(buf, n - 1, 0, NULL);
                        cr_assert_not_null(v, "not JSON: %.*s", (int)n, buf);
                        memmove(buf, buf + n, have - n);
                        have -= n;
                        return v;
                }
                cr_assert_lt(now_monotonic_us(), deadline, "no answer within %d ms", timeout_ms);
                tg_spin();
                tg_spin();
                struct pollfd p = {.fd = fd, .events = POLLIN};
                if (poll(&p, 1, 1) == 1) {
                        ssize_t k = recv(fd, buf + have, sizeof(buf) - have, MSG_DONTWAIT);
                        if (k == 0)
                                return NULL;
                        if (k > 0)
                                have += (size_t)k;
                }
        }
}

static json_t *tg_call(int fd, const char *line)
{
        tg_send(fd, line);
        return tg_read(fd, 20000);
}

static const char *str_of(json_t *o, const char *key)
{
        json_t *v = json_object_get(o, key);
        return json_is_string(v) ? json_string_value(v) : "";
}

/* The response was a refusal with this code. */
static void assert_error(json_t *r, const char *code)
{
        cr_assert_not_null(r);
        char *s = json_dumps(r, JSON_COMPACT);
        cr_assert(json_is_false(json_object_get(r, "ok")), "%s", s);
        cr_assert_str_eq(str_of(r, "errorCode"), code, "%s", s);
        free(s);
}

static json_t *last_record(void)
{
        size_t n = json_array_size(T.records);
        cr_assert_gt(n, 0, "no record");
        return json_array_get(T.records, n - 1);
}
