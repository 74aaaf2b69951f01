/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <jansson.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "events.h"
#include "netgate/netgate.h"
#include "policy.h"
#include "secrets.h"
#include "util.h"

#include "netgate-test-util.h"

/* netgate_route_fetch(): the host's own request through a route, served as
 * a sandbox's is, against a plain-HTTP upstream on 127.0.0.1 in this
 * process, one event loop. */

#define KEY_VAR "AIRLOCK_FETCH_TEST_KEY"
#define KEY     "sk-fetch-test-5e4d3c2b1a"

static struct event_base *base;
static struct netgate *gate;
static struct policy *pol;
static struct secrets *secrets;
static struct evhttp *upstream;
static uint16_t up_port;

static struct ngt_seen seen;

struct rec {
        char protocol[16], decision[8], reason[64], route[80], tool[64];
        int status;
};
static struct rec recs[16];
static size_t n_recs;

static void recorder(void *ud, const struct netgate_record *r)
{
        cr_assert_lt(n_recs, ARRAY_SIZE(recs));
        struct rec *x = &recs[n_recs++];
        ngt_copy(x->protocol, sizeof(x->protocol), r->protocol);
        ngt_copy(x->decision, sizeof(x->decision), r->decision);
        ngt_copy(x->reason, sizeof(x->reason), r->reason);
        ngt_copy(x->route, sizeof(x->route), r->route);
        ngt_copy(x->tool, sizeof(x->tool), r->tool);
        x->status = r->status;
}

#define BIG_SIZE (2u << 20)

static void up_handler(struct evhttp_request *req, void *ud)
{
        struct evkeyvalq *h = evhttp_request_get_input_headers(req);
        ngt_capture(&seen, req);
        if (strcmp(seen.uri, "/v1/hang") == 0)
                return; /* never answers */
        struct evbuffer *out = evbuffer_new();
        if (strcmp(seen.uri, "/v1/big") == 0) {
                for (size_t i = 0; i < BIG_SIZE; i += 8)
                        evbuffer_add(out, "01234567", 8);
                evhttp_send_reply(req, 200, "OK", out);
                evbuffer_free(out);
                return;
        }
        /* An upstream that repeats the key it was given, in a field and
         * in its body. */
        const char *key = evhttp_find_header(h, "x-api-key");
        struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
        if (key)
                evhttp_add_header(oh, "x-echo-key", key);
        evhttp_add_header(oh, "Content-Type", "application/json");
        evbuffer_add_printf(out, "{\"uri\":\"%s\",\"key\":\"%s\"}", seen.uri, key ? key : "");
        evhttp_send_reply(req, strcmp(seen.uri, "/v1/missing") == 0 ? 404 : 200, "OK", out);
        evbuffer_free(out);
}

static void add_route(const char *name, const char *url)
{
        pol->routes = xrealloc(pol->routes, pol->n_routes + 1, sizeof(*pol->routes));
        struct policy_route *r = &pol->routes[pol->n_routes++];
        memset(r, 0, sizeof(*r));
        r->name = xstrdup(name);
        r->upstream = xstrdup(url);
        r->inject = xcalloc(1, sizeof(*r->inject));
        r->inject[0] = (struct policy_kv){xstrdup("x-api-key"), xstrdup("${secret:" KEY_VAR "}")};
        r->n_inject = 1;
}

static void setup_common(bool allow_loopback, bool routes)
{
        struct al_error err = {0};
        signal(SIGPIPE, SIG_IGN);
        setenv(KEY_VAR, KEY, 1);
        base = event_base_new();
        upstream = ngt_upstream_start(base, up_handler, &up_port);
        memset(&seen, 0, sizeof(seen));
        n_recs = 0;
        secrets = secrets_new();
        pol = policy_new();
        if (allow_loopback)
                pol->net_allow_private =
                    strv_append(pol->net_allow_private, &pol->n_net_allow_private, "127.0.0.0/8");
        pol->net_hosts = xcalloc(1, sizeof(*pol->net_hosts));
        pol->net_hosts[0] = (struct policy_kv){xstrdup("forge.test"), xstrdup("127.0.0.1")};
        pol->n_net_hosts = 1;
        char *url = xasprintf("http://forge.test:%u/v1/", up_port);
        add_route("forge", url);
        free(url);
        gate = netgate_new(base, pol, "sbx-fetch", &err);
        cr_assert_not_null(gate, "%s", err.msg);
        netgate_set_recorder(gate, recorder, NULL);
        static const struct secrets_vars vars = {.run_id = "sbx-fetch", .sandbox_id = "sbx-fetch"};
        if (routes)
                cr_assert_eq(
                    netgate_set_routes(gate, pol->routes, pol->n_routes, secrets, &vars, &err), 0,
                    "%s", err.msg);
}

static void setup(void)
{
        setup_common(true, true);
}

static void setup_no_private(void)
{
        setup_common(false, true);
}

static void setup_no_routes(void)
{
        setup_common(true, false);
}

static void teardown(void)
{
        ngt_teardown(base, &gate, upstream, &pol, &secrets);
}

/* ---- fetching ---- */

struct result {
        bool called;
        int err;
        int status;
        char *headers; /* "name: value\n"... */
        char *body;
        size_t body_len;
        char gate_reason[64];
};

static void on_done(void *ud, int err, const struct netgate_fetch_response *resp)
{
        struct result *r = ud;
        r->called = true;
        r->err = err;
        if (err < 0)
                return;
        r->status = resp->status;
        size_t size = 1;
        for (size_t i = 0; i < resp->n_headers; i++)
                size += strlen(resp->headers[i].name) + strlen(resp->headers[i].value) + 3;
        r->headers = xcalloc(size, 1);
        for (size_t i = 0; i < resp->n_headers; i++) {
                size_t l = strlen(r->headers);
                snprintf(r->headers + l, size - l, "%s: %s\n", resp->headers[i].name,
                         resp->headers[i].value);
        }
        r->body = xcalloc(resp->body_len + 1, 1);
        memcpy(r->body, resp->body, resp->body_len);
        r->body_len = resp->body_len;
        cr_expect_eq(resp->body[resp->body_len], '\0');
        ngt_copy(r->gate_reason, sizeof(r->gate_reason), resp->gate_reason);
}

static void result_free(struct result *r)
{
        free(r->headers);
        free(r->body);
}

static void drive(struct result *r, unsigned seconds)
{
        uint64_t deadline = now_monotonic_us() + seconds * 1000000ULL;
        while (!r->called && now_monotonic_us() < deadline)
                event_base_loop(base, EVLOOP_ONCE);
        cr_assert(r->called, "the fetch never completed");
        /* Let the gate's side finish and record. */
        ngt_spin(base, 20);
}

static void fetch(const struct netgate_fetch_request *req, struct result *r)
{
        struct al_error err = {0};
        struct netgate_fetch *f = NULL;
        memset(r, 0, sizeof(*r));
        cr_assert_eq(netgate_route_fetch(gate, req, on_done, r, &f, &err), 0, "%s", err.msg);
        cr_assert_not_null(f);
        drive(r, 10);
}

TestSuite(netgate_fetch, .init = setup, .fini = teardown, .timeout = 60);

Test(netgate_fetch, injected_header_reaches_the_upstream_and_never_the_result)
{
        static const struct netgate_header extra[] = {
            {"Accept", "application/json"},
            {"Authorization", "Bearer host-built"},
        };
        struct result r;
        struct netgate_fetch_request req = {
            .route = "forge",
            .method = "POST",
            .path = "/repos/a%20b/pulls?state=open",
            .body = "{\"q\":1}",
            .body_len = 7,
            .headers = extra,
            .n_headers = ARRAY_SIZE(extra),
            .response_max = 1 << 20,
            .timeout_ms = 5000,
            .tool = "forge.pulls",
        };
        fetch(&req, &r);
        cr_assert_eq(r.err, 0);
        cr_expect_eq(r.status, 200);
        cr_expect_eq(seen.count, 1);
        cr_expect_str_eq(seen.uri, "/v1/repos/a%20b/pulls?state=open");
        cr_expect(strstr(seen.headers, "x-api-key: " KEY "\n"), "%s", seen.headers);
        cr_expect(strstr(seen.headers, "Accept: application/json\n"), "%s", seen.headers);
        cr_expect_null(strstr(seen.headers, "host-built"), "%s", seen.headers);
        cr_expect_str_eq(seen.body, "{\"q\":1}");
        /* The upstream echoed the key in a field and in its body. */
        cr_expect_null(strstr(r.headers, KEY), "%s", r.headers);
        cr_expect_null(strstr(r.body, KEY), "%s", r.body);
        cr_expect(strstr(r.body, "/v1/repos/a%20b/pulls"), "%s", r.body);
        cr_expect_eq(r.gate_reason[0], '\0');
        cr_assert_eq(n_recs, 1);
        cr_expect_str_eq(recs[0].protocol, "route");
        cr_expect_str_eq(recs[0].route, "forge");
        cr_expect_str_eq(recs[0].decision, "allow");
        cr_expect_str_eq(recs[0].tool, "forge.pulls");
        cr_expect_eq(recs[0].status, 200);
        result_free(&r);
}

Test(netgate_fetch, upstream_status_comes_back)
{
        struct result r;
        struct netgate_fetch_request req = {.route = "forge",
                                            .method = "GET",
                                            .path = "/missing",
                                            .response_max = 4096,
                                            .timeout_ms = 5000,
                                            .tool = "forge.get"};
        fetch(&req, &r);
        cr_assert_eq(r.err, 0);
        cr_expect_eq(r.status, 404);
        cr_expect_eq(r.gate_reason[0], '\0');
        result_free(&r);
}

TestSuite(netgate_fetch_private, .init = setup_no_private, .fini = teardown, .timeout = 60);

Test(netgate_fetch_private, private_upstream_refused)
{
        struct result r;
        struct netgate_fetch_request req = {.route = "forge",
                                            .method = "GET",
                                            .path = "/x",
                                            .response_max = 4096,
                                            .timeout_ms = 5000,
                                            .tool = "forge.get"};
        fetch(&req, &r);
        cr_assert_eq(r.err, 0);
        cr_expect_eq(r.status, 403);
        cr_expect_str_eq(r.gate_reason, "private_address");
        cr_expect_eq(seen.count, 0, "nothing reached the upstream");
        cr_assert_eq(n_recs, 1);
        cr_expect_str_eq(recs[0].decision, "deny");
        cr_expect_str_eq(recs[0].reason, "private_address");
        cr_expect_str_eq(recs[0].tool, "forge.get");
        result_free(&r);
}

Test(netgate_fetch, timeout)
{
        struct result r;
        struct netgate_fetch_request req = {.route = "forge",
                                            .method = "GET",
                                            .path = "/hang",
                                            .response_max = 4096,
                                            .timeout_ms = 300,
                                            .tool = "forge.get"};
        uint64_t t0 = now_monotonic_us();
        fetch(&req, &r);
        cr_expect_eq(r.err, -ETIMEDOUT);
        cr_expect_lt(now_monotonic_us() - t0, 3000000ULL);
        cr_expect_eq(seen.count, 1);
}

Test(netgate_fetch, response_over_the_cap)
{
        struct result r;
        struct netgate_fetch_request req = {.route = "forge",
                                            .method = "GET",
                                            .path = "/big",
                                            .response_max = 64 * 1024,
                                            .timeout_ms = 5000,
                                            .tool = "forge.get"};
        fetch(&req, &r);
        cr_expect_eq(r.err, -EFBIG);
}

Test(netgate_fetch, unknown_route_is_the_gates_404)
{
        struct result r;
        struct netgate_fetch_request req = {.route = "nope",
                                            .method = "GET",
                                            .path = "",
                                            .response_max = 4096,
                                            .timeout_ms = 5000,
                                            .tool = "t"};
        fetch(&req, &r);
        cr_assert_eq(r.err, 0);
        cr_expect_eq(r.status, 404);
        cr_expect_str_eq(r.gate_reason, "unknown_route");
        result_free(&r);
}

Test(netgate_fetch, bad_requests_refused_before_sending)
{
        struct al_error err = {0};
        struct netgate_fetch *f = NULL;
        struct result r = {0};
        static const struct netgate_header crlf[] = {{"X-A", "1\r\nX-Injected: 1"}};
        static const struct netgate_header badname[] = {{"X A", "1"}};
        struct netgate_fetch_request bad[] = {
            {.route = "forge", .method = "GET", .path = "/a b", .timeout_ms = 100},
            {.route = "forge", .method = "GET", .path = "/a\r\nX: 1", .timeout_ms = 100},
            {.route = "forge", .method = "GET", .path = "a", .timeout_ms = 100},
            {.route = "forge", .method = "GET\r\n", .path = "/", .timeout_ms = 100},
            {.route = "forge/x", .method = "GET", .path = "/", .timeout_ms = 100},
            {.route = "forge", .method = "GET", .path = "/", .timeout_ms = 0},
            {.route = "forge",
             .method = "GET",
             .path = "/",
             .timeout_ms = 100,
             .headers = crlf,
             .n_headers = 1},
            {.route = "forge",
             .method = "GET",
             .path = "/",
             .timeout_ms = 100,
             .headers = badname,
             .n_headers = 1},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
                cr_expect_eq(netgate_route_fetch(gate, &bad[i], on_done, &r, &f, &err), -EINVAL,
                             "case %zu", i);
        struct netgate_fetch_request big = {.route = "forge",
                                            .method = "POST",
                                            .path = "/",
                                            .body = "",
                                            .body_len = NETGATE_FETCH_BODY_MAX + 1,
                                            .timeout_ms = 100};
        cr_expect_eq(netgate_route_fetch(gate, &big, on_done, &r, &f, &err), -EMSGSIZE);
        ngt_spin(base, 10);
        cr_expect_not(r.called);
        cr_expect_eq(seen.count, 0);
        cr_expect_eq(n_recs, 0);
}

TestSuite(netgate_fetch_no_routes, .init = setup_no_routes, .fini = teardown, .timeout = 60);

Test(netgate_fetch_no_routes, refused)
{
        struct al_error err = {0};
        struct netgate_fetch *f = NULL;
        struct result r = {0};
        struct netgate_fetch_request req = {
            .route = "forge", .method = "GET", .path = "/", .timeout_ms = 100};
        cr_expect_eq(netgate_route_fetch(gate, &req, on_done, &r, &f, &err), -ENOENT);
}

Test(netgate_fetch, cancel_and_free_in_flight)
{
        struct al_error err = {0};
        struct netgate_fetch *f = NULL, *g2 = NULL;
        struct result r = {0}, r2 = {0};
        struct netgate_fetch_request req = {.route = "forge",
                                            .method = "GET",
                                            .path = "/hang",
                                            .response_max = 4096,
                                            .timeout_ms = 5000,
                                            .tool = "t"};
        cr_assert_eq(netgate_route_fetch(gate, &req, on_done, &r, &f, &err), 0);
        cr_assert_eq(netgate_route_fetch(gate, &req, on_done, &r2, &g2, &err), 0);
        ngt_spin(base, 20);
        netgate_fetch_cancel(f);
        /* The other one is still in flight when the gate goes. */
        gate = netgate_free(gate);
        ngt_spin(base, 20);
        cr_expect_not(r.called);
        cr_expect_not(r2.called);
}

/* The audit event of a tool's request says so; a sandbox's has no "tool". */
Test(netgate_fetch_event, route_call_names_the_tool)
{
        struct netgate_record rec = {.protocol = "route",
                                     .decision = "allow",
                                     .route = "forge",
                                     .address = "",
                                     .tool = "forge.pulls"};
        json_t *j = events_net_decision(&rec);
        cr_assert_not_null(j);
        cr_expect_str_eq(events_net_kind(&rec), "route.call");
        cr_expect_str_eq(json_string_value(json_object_get(j, "tool")), "forge.pulls");
        json_decref(j);
        rec.tool = NULL;
        j = events_net_decision(&rec);
        cr_expect_null(json_object_get(j, "tool"));
        json_decref(j);
}
