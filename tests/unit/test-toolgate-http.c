/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "netgate/netgate.h"
#include "policy.h"
#include "secrets.h"
#include "toolgate/toolgate.h"
#include "util.h"

#include "netgate-test-util.h"

/* The tool gateway's HTTP runner end to end, in this process: a gateway on
 * a unix socket, the network gate with one route, and a plain-HTTP
 * upstream on 127.0.0.1 started here, one event loop. */

#define KEY_VAR "AIRLOCK_TOOL_HTTP_TEST_KEY"
#define KEY     "ghp-tool-http-test-9a8b7c6d5e"
#define RUN_ID  "run-tool-http-1"

static struct event_base *base;
static struct evhttp *upstream;
static uint16_t up_port;
static struct policy *pol;
static struct secrets *secrets;
static struct netgate *gate;
static struct toolgate *tg;
static char sock_dir[32], sock_path[64];

static struct ngt_seen seen;

static struct {
        size_t n;
        char tool[64], decision[8], reason[64];
} netrec;

static struct {
        size_t n;
        char error_code[32];
        uint64_t output_bytes;
} toolrec;

static void net_recorder(void *ud, const struct netgate_record *r)
{
        if (!r->tool)
                return;
        netrec.n++;
        ngt_copy(netrec.tool, sizeof(netrec.tool), r->tool);
        ngt_copy(netrec.decision, sizeof(netrec.decision), r->decision);
        ngt_copy(netrec.reason, sizeof(netrec.reason), r->reason);
}

static void tool_recorder(void *ud, const struct toolgate_record *r)
{
        toolrec.n++;
        ngt_copy(toolrec.error_code, sizeof(toolrec.error_code), r->error_code);
        toolrec.output_bytes = r->output_bytes;
}

static void up_handler(struct evhttp_request *req, void *ud)
{
        struct evkeyvalq *h = evhttp_request_get_input_headers(req);
        ngt_capture(&seen, req);
        if (strstr(seen.uri, "/hang"))
                return; /* never answers */
        struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
        struct evbuffer *out = evbuffer_new();
        const char *key = evhttp_find_header(h, "x-api-key");
        if (strstr(seen.uri, "/text")) {
                /* Plain text that repeats the key. */
                evbuffer_add_printf(out, "token is %s", key ? key : "none");
                evhttp_send_reply(req, 200, "OK", out);
        } else if (strstr(seen.uri, "/missing")) {
                evbuffer_add_printf(out, "{\"message\":\"Not Found\"}");
                evhttp_send_reply(req, 404, "Not Found", out);
        } else {
                /* JSON that repeats the key, in a field and in the body. */
                if (key)
                        evhttp_add_header(oh, "x-echo-key", key);
                evhttp_add_header(oh, "Content-Type", "application/json");
                evbuffer_add_printf(out, "{\"uri\":\"%s\",\"key\":\"%s\",\"pulls\":[1,2]}",
                                    seen.uri, key ? key : "");
                evhttp_send_reply(req, 200, "OK", out);
        }
        evbuffer_free(out);
}

#define POLICY_FMT                                                                                 \
        "{\"network\": {\"mode\": \"gated\", %s"                                                   \
        "  \"hosts\": {\"forge.test\": \"127.0.0.1\"},"                                            \
        "  \"routes\": [{\"name\": \"forge\", \"upstream\": \"http://forge.test:%u/api\","         \
        "               \"inject\": {\"x-api-key\": \"${secret:" KEY_VAR "}\"}}]},"                \
        " \"tools\": {\"allow\": [\"forge.pulls\", \"forge.text\", \"forge.missing\","             \
        "                       \"forge.hang\", \"forge.form\"],"                                  \
        "  \"define\": {"                                                                          \
        "   \"forge.pulls\": {\"description\": \"List pull requests\","                            \
        "     \"args\": {\"type\": \"object\", \"properties\": {"                                  \
        "        \"repo\": {\"type\": \"string\", \"maxLength\": 100},"                            \
        "        \"limit\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 50}},"            \
        "        \"required\": [\"repo\"], \"additionalProperties\": false},"                      \
        "     \"http\": {\"route\": \"forge\", \"method\": \"POST\","                              \
        "              \"path\": \"/repos/${args.repo}/pulls?limit=${args.limit}\","               \
        "              \"body\": \"{\\\"repo\\\": \\\"${args.repo}\\\", \\\"limit\\\": "           \
        "\\\"${args.limit}\\\", \\\"note\\\": \\\"for ${args.repo}\\\"}\"}},"                      \
        "   \"forge.text\": {\"args\": {\"type\": \"object\", \"additionalProperties\": false},"   \
        "     \"http\": {\"route\": \"forge\", \"method\": \"GET\", \"path\": \"/text\"}},"        \
        "   \"forge.missing\": {\"args\": {\"type\": \"object\", \"additionalProperties\": "       \
        "false},"                                                                                  \
        "     \"http\": {\"route\": \"forge\", \"method\": \"GET\", \"path\": \"/missing\"}},"     \
        "   \"forge.form\": {\"args\": {\"type\": \"object\", \"properties\": {"                   \
        "        \"q\": {\"type\": \"string\"}}, \"additionalProperties\": false},"                \
        "     \"http\": {\"route\": \"forge\", \"method\": \"POST\", \"path\": \"/form\","         \
        "              \"body\": \"q=${args.q}&n=1\"}},"                                           \
        "   \"forge.hang\": {\"args\": {\"type\": \"object\", \"additionalProperties\": false},"   \
        "     \"http\": {\"route\": \"forge\", \"method\": \"GET\", \"path\": \"/hang\"},"         \
        "     \"timeout\": \"300ms\"}}}}"

static void setup_common(bool allow_loopback)
{
        struct al_error err = {0};
        signal(SIGPIPE, SIG_IGN);
        setenv(KEY_VAR, KEY, 1);
        base = event_base_new();
        upstream = ngt_upstream_start(base, up_handler, &up_port);
        memset(&seen, 0, sizeof(seen));
        memset(&netrec, 0, sizeof(netrec));
        memset(&toolrec, 0, sizeof(toolrec));

        char *json = xasprintf(
            POLICY_FMT, allow_loopback ? "\"allowPrivate\": [\"127.0.0.0/8\"]," : "", up_port);
        pol = policy_new();
        cr_assert_eq(policy_load_string(pol, json, "policy.json", &err), 0, "%s", err.msg);
        free(json);
        secrets = secrets_new();

        gate = netgate_new(base, pol, "sbx-tool-http", &err);
        cr_assert_not_null(gate, "%s", err.msg);
        netgate_set_recorder(gate, net_recorder, NULL);
        static const struct secrets_vars vars = {.run_id = RUN_ID, .sandbox_id = "sbx-tool-http"};
        cr_assert_eq(netgate_set_routes(gate, pol->routes, pol->n_routes, secrets, &vars, &err), 0,
                     "%s", err.msg);

        struct toolgate_config cfg = {
            .policy = pol,
            .sandbox = "sbx-tool-http",
            .run_id = RUN_ID,
            .secrets = secrets,
            .netgate = gate,
            .recorder = tool_recorder,
        };
        tg = toolgate_new(base, &cfg, &err);
        cr_assert_not_null(tg, "%s", err.msg);

        snprintf(sock_dir, sizeof(sock_dir), "/tmp/tg-http-XXXXXX");
        cr_assert_not_null(mkdtemp(sock_dir));
        snprintf(sock_path, sizeof(sock_path), "%s/tool.sock", sock_dir);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock_path);
        cr_assert_eq(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
        cr_assert_eq(listen(fd, 16), 0);
        cr_assert_eq(toolgate_add_listener(tg, fd, &err), 0, "%s", err.msg);
}

static void setup(void)
{
        setup_common(true);
}

static void setup_no_private(void)
{
        setup_common(false);
}

static void teardown(void)
{
        if (tg)
                toolgate_free(tg);
        ngt_teardown(base, &gate, upstream, &pol, &secrets);
        unlink(sock_path);
        rmdir(sock_dir);
}

/* ---- a caller inside the sandbox ---- */

/* Send one request line and drive the loop until its answer line. */
static json_t *call(const char *line)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock_path);
        cr_assert_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
        fcntl(fd, F_SETFL, O_NONBLOCK);
        cr_assert_eq(send(fd, line, strlen(line), MSG_NOSIGNAL), (ssize_t)strlen(line));
        char in[65536];
        size_t len = 0;
        uint64_t deadline = now_monotonic_us() + 10 * 1000000ULL;
        while (now_monotonic_us() < deadline && !memchr(in, '\n', len)) {
                event_base_loop(base, EVLOOP_NONBLOCK);
                ssize_t n = recv(fd, in + len, sizeof(in) - len - 1, MSG_DONTWAIT);
                if (n > 0)
                        len += (size_t)n;
                else if (n == 0)
                        break;
                else {
                        struct pollfd pfd = {fd, POLLIN, 0};
                        poll(&pfd, 1, 1);
                }
        }
        close(fd);
        in[len] = '\0';
        cr_assert(memchr(in, '\n', len), "no answer line: %s", in);
        json_error_t jerr;
        json_t *j = json_loads(in, JSON_DISABLE_EOF_CHECK, &jerr);
        cr_assert_not_null(j, "not JSON: %s", in);
        /* Let the gates finish their records. */
        ngt_spin(base, 20);
        return j;
}

static const char *error_code(json_t *j)
{
        return json_string_value(json_object_get(j, "errorCode"));
}

TestSuite(toolgate_http, .init = setup, .fini = teardown, .timeout = 60);

Test(toolgate_http, injected_header_reaches_the_upstream_never_the_result)
{
        json_t *j = call("{\"runId\": \"" RUN_ID "\", \"callId\": \"c1\", \"tool\": "
                         "\"forge.pulls\", \"args\": {\"repo\": \"a b:c\", \"limit\": 5}}\n");
        char *text = json_dumps(j, JSON_COMPACT);
        cr_assert(json_is_true(json_object_get(j, "ok")), "%s", text);
        cr_expect_eq(seen.count, 1);
        /* The argument filled one path element, percent-encoded whole; the
         * injected key reached the upstream. */
        cr_expect_str_eq(seen.uri, "/api/repos/a%20b%3Ac/pulls?limit=5");
        cr_expect(strstr(seen.headers, "x-api-key: " KEY "\n"), "%s", seen.headers);
        /* The body template: each argument JSON-encoded in its place. */
        json_t *body = json_loads(seen.body, 0, NULL);
        cr_assert_not_null(body, "%s", seen.body);
        cr_expect_str_eq(json_string_value(json_object_get(body, "repo")), "a b:c");
        cr_expect_eq(json_integer_value(json_object_get(body, "limit")), 5);
        cr_expect_str_eq(json_string_value(json_object_get(body, "note")), "for a b:c");
        json_decref(body);
        /* The answer is JSON, and the key it repeated never came back. */
        json_t *v = json_object_get(j, "value");
        cr_expect(json_is_object(v), "%s", text);
        cr_expect_eq(json_array_size(json_object_get(v, "pulls")), 2, "%s", text);
        cr_expect_null(strstr(text, KEY), "%s", text);
        cr_expect_eq(netrec.n, 1);
        cr_expect_str_eq(netrec.tool, "forge.pulls");
        cr_expect_str_eq(netrec.decision, "allow");
        cr_expect_eq(toolrec.n, 1);
        cr_expect_eq(toolrec.error_code[0], '\0');
        free(text);
        json_decref(j);
}

Test(toolgate_http, text_answer_is_a_string_and_scrubbed)
{
        json_t *j = call("{\"runId\": \"" RUN_ID "\", \"callId\": \"c2\", \"tool\": "
                         "\"forge.text\", \"args\": {}}\n");
        char *text = json_dumps(j, JSON_COMPACT);
        cr_assert(json_is_true(json_object_get(j, "ok")), "%s", text);
        const char *v = json_string_value(json_object_get(j, "value"));
        cr_assert_not_null(v, "%s", text);
        cr_expect(strncmp(v, "token is ", 9) == 0, "%s", v);
        cr_expect_null(strstr(text, KEY), "%s", text);
        free(text);
        json_decref(j);
}

Test(toolgate_http, status_400_and_above_is_tool_failed)
{
        json_t *j = call("{\"runId\": \"" RUN_ID "\", \"callId\": \"c3\", \"tool\": "
                         "\"forge.missing\", \"args\": {}}\n");
        char *text = json_dumps(j, JSON_COMPACT);
        cr_expect(json_is_false(json_object_get(j, "ok")), "%s", text);
        cr_expect_str_eq(error_code(j), "tool_failed", "%s", text);
        cr_expect(strstr(json_string_value(json_object_get(j, "safeMessage")), "404"), "%s", text);
        free(text);
        json_decref(j);
}

Test(toolgate_http, timeout)
{
        uint64_t t0 = now_monotonic_us();
        json_t *j = call("{\"runId\": \"" RUN_ID "\", \"callId\": \"c4\", \"tool\": "
                         "\"forge.hang\", \"args\": {}}\n");
        char *text = json_dumps(j, JSON_COMPACT);
        cr_expect(json_is_false(json_object_get(j, "ok")), "%s", text);
        cr_expect_str_eq(error_code(j), "timeout", "%s", text);
        cr_expect_lt(now_monotonic_us() - t0, 5000000ULL);
        cr_expect_eq(seen.count, 1);
        free(text);
        json_decref(j);
}

Test(toolgate_http, argument_cannot_leave_its_path_element)
{
        /* Percent-encoded whole, "/" and ".." stay inside the element, and
         * the route's path check refuses the encoded separator: nothing
         * is sent. */
        json_t *j = call("{\"runId\": \"" RUN_ID "\", \"callId\": \"c6\", \"tool\": "
                         "\"forge.pulls\", \"args\": {\"repo\": \"../../admin\"}}\n");
        char *text = json_dumps(j, JSON_COMPACT);
        cr_expect(json_is_false(json_object_get(j, "ok")), "%s", text);
        cr_expect_str_eq(error_code(j), "tool_failed", "%s", text);
        cr_expect(strstr(json_string_value(json_object_get(j, "safeMessage")), "bad_path"), "%s",
                  text);
        cr_expect_eq(seen.count, 0, "nothing reached the upstream");
        free(text);
        json_decref(j);
}

Test(toolgate_http, text_body_template_gets_json_encoded_arguments)
{
        json_t *j = call("{\"runId\": \"" RUN_ID "\", \"callId\": \"c8\", \"tool\": "
                         "\"forge.form\", \"args\": {\"q\": \"a\\\"b\\n\"}}\n");
        char *text = json_dumps(j, JSON_COMPACT);
        cr_assert(json_is_true(json_object_get(j, "ok")), "%s", text);
        cr_expect_str_eq(seen.body, "q=\"a\\\"b\\n\"&n=1");
        free(text);
        json_decref(j);
}

Test(toolgate_http, freed_with_a_call_in_flight)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sun = {.sun_family = AF_UNIX};
        snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock_path);
        cr_assert_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
        const char *line = "{\"runId\": \"" RUN_ID "\", \"callId\": \"c7\", \"tool\": "
                           "\"forge.hang\", \"args\": {}}\n";
        cr_assert_eq(send(fd, line, strlen(line), MSG_NOSIGNAL), (ssize_t)strlen(line));
        uint64_t deadline = now_monotonic_us() + 5 * 1000000ULL;
        while (seen.count == 0 && now_monotonic_us() < deadline)
                event_base_loop(base, EVLOOP_NONBLOCK);
        cr_assert_eq(seen.count, 1, "the request reached the upstream");
        /* The gateway goes while the upstream still holds the request:
         * the call ends as "internal" (shutdown), nothing is left. */
        toolgate_free(tg);
        tg = NULL;
        cr_expect_eq(toolrec.n, 1);
        cr_expect_str_eq(toolrec.error_code, "internal");
        close(fd);
}

TestSuite(toolgate_http_private, .init = setup_no_private, .fini = teardown, .timeout = 60);

Test(toolgate_http_private, route_to_a_private_address_refused)
{
        json_t *j = call("{\"runId\": \"" RUN_ID "\", \"callId\": \"c5\", \"tool\": "
                         "\"forge.pulls\", \"args\": {\"repo\": \"x\"}}\n");
        char *text = json_dumps(j, JSON_COMPACT);
        cr_expect(json_is_false(json_object_get(j, "ok")), "%s", text);
        cr_expect_str_eq(error_code(j), "tool_failed", "%s", text);
        cr_expect(strstr(json_string_value(json_object_get(j, "safeMessage")), "private_address"),
                  "%s", text);
        cr_expect_eq(seen.count, 0, "nothing reached the upstream");
        cr_expect_eq(netrec.n, 1);
        cr_expect_str_eq(netrec.decision, "deny");
        cr_expect_str_eq(netrec.reason, "private_address");
        cr_expect_str_eq(netrec.tool, "forge.pulls");
        free(text);
        json_decref(j);
}
