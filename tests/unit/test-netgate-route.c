/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "netgate/http.h"
#include "netgate/netgate.h"
#include "netgate/route.h"
#include "policy.h"
#include "secrets.h"
#include "util.h"

#include "netgate-test-util.h"

#define KEY_VAR "AIRLOCK_ROUTE_TEST_KEY"
#define KEY     "sk-route-test-8d7c6b5a4f3e"

/* ---- header rules, without a network ---- */

static struct policy_route *route_conf(const char *upstream)
{
        struct policy_route *r = xcalloc(1, sizeof(*r));
        r->name = xstrdup("model");
        r->upstream = xstrdup(upstream);
        r->strip = strv_append(r->strip, &r->n_strip, "x-litellm-*");
        r->strip = strv_append(r->strip, &r->n_strip, "X-Debug");
        r->record = strv_append(r->record, &r->n_record, "x-litellm-call-id");
        r->inject = xcalloc(2, sizeof(*r->inject));
        r->inject[0] = (struct policy_kv){xstrdup("x-api-key"), xstrdup("${secret:" KEY_VAR "}")};
        r->inject[1] = (struct policy_kv){
            xstrdup("x-litellm-spend-logs-metadata"),
            xstrdup("{\"sandbox\":\"${sandbox.id}\",\"account\":\"${account}\",\"run\":\"${run.id}"
                    "/${run.attempt}\"}")};
        r->n_inject = 2;
        return r;
}

static void route_conf_free(struct policy_route *r)
{
        free(r->name);
        free(r->upstream);
        for (size_t i = 0; i < r->n_inject; i++) {
                free(r->inject[i].key);
                free(r->inject[i].value);
        }
        free(r->inject);
        strv_free(r->strip);
        strv_free(r->record);
        free(r->ca_file);
        free(r);
}

static const struct secrets_vars vars = {
    .run_id = "sbx-1", .run_attempt = "1", .sandbox_id = "sbx-1", .account = "acct-7"};

static void parse(struct netgate_http_parser *p, const char *req)
{
        size_t used;
        netgate_http_parser_init(p, NETGATE_HTTP_REQUEST);
        p->origin_form = true;
        cr_assert_eq(netgate_http_parser_feed(p, req, strlen(req), &used), 1, "%s", req);
}

/* The upstream head for `req` through the route, or NULL with *ret_r set. */
static char *head_for(const char *upstream, const char *req, const char *rest, int *ret_r,
                      const char **ret_field)
{
        struct al_error err = {0};
        struct policy_route *conf = route_conf(upstream);
        struct netgate_route *rt = NULL;
        cr_assert_eq(netgate_route_new(conf, &rt, &err), 0, "%s", err.msg);
        struct netgate_http_parser *p = xcalloc(1, sizeof(*p));
        parse(p, req);
        struct secrets *s = secrets_new();
        struct evbuffer *out = evbuffer_new();
        static char field[64];
        const char *f = NULL;
        int r =
            netgate_route_write_head(rt, &p->head, rest, strlen(rest), false, s, &vars, out, &f);
        ngt_copy(field, sizeof(field), f);
        if (ret_field)
                *ret_field = field;
        if (ret_r)
                *ret_r = r;
        char *text = NULL;
        if (r == 0) {
                size_t n = evbuffer_get_length(out);
                text = xcalloc(n + 1, 1);
                evbuffer_remove(out, text, n);
        } else
                cr_expect_eq(evbuffer_get_length(out), 0, "nothing written on failure");
        evbuffer_free(out);
        secrets_free(s);
        free(p);
        netgate_route_free(rt);
        route_conf_free(conf);
        return text;
}

Test(netgate_route, strip_patterns)
{
        cr_expect(netgate_route_strip_match("x-litellm-*", "X-LiteLLM-End-User-Id", 21));
        cr_expect(netgate_route_strip_match("x-litellm-*", "x-litellm-", 10));
        cr_expect_not(netgate_route_strip_match("x-litellm-*", "x-litellm", 9));
        cr_expect_not(netgate_route_strip_match("x-litellm-*", "y-litellm-a", 11));
        cr_expect(netgate_route_strip_match("X-Debug", "x-debug", 7));
        cr_expect_not(netgate_route_strip_match("x-debug", "x-debugger", 10));
        cr_expect_not(netgate_route_strip_match("x-debug", "x-debu", 6));
        cr_expect(netgate_route_strip_match("*", "anything", 8));
}

Test(netgate_route, fields_dropped_and_injected)
{
        setenv(KEY_VAR, KEY, 1);
        const char *req = "POST /model/v1/messages?beta=1 HTTP/1.1\r\n"
                          "Host: 127.0.0.1:8080\r\n"
                          "Authorization: Bearer client-token\r\n"
                          "X-API-Key: client-key\r\n"
                          "x-litellm-end-user-id: u1\r\n"
                          "X-LITELLM-SPEND-LOGS-METADATA: forged\r\n"
                          "x-debug: 1\r\n"
                          "Proxy-Authorization: Basic eA==\r\n"
                          "Connection: keep-alive, X-Hop\r\n"
                          "X-Hop: 1\r\n"
                          "Keep-Alive: timeout=5\r\n"
                          "Content-Type: application/json\r\n"
                          "anthropic-version: 2023-06-01\r\n"
                          "Content-Length: 2\r\n"
                          "\r\n";
        int r;
        char *h =
            head_for("https://api.model.test:8443/base/", req, "/v1/messages?beta=1", &r, NULL);
        cr_assert_eq(r, 0);
        cr_expect(strncmp(h,
                          "POST /base/v1/messages?beta=1 HTTP/1.1\r\nHost: api.model.test:8443\r\n",
                          67) == 0,
                  "%s", h);
        cr_expect(strstr(h, "Content-Type: application/json\r\n"), "%s", h);
        cr_expect(strstr(h, "anthropic-version: 2023-06-01\r\n"), "%s", h);
        cr_expect(strstr(h, "Content-Length: 2\r\n"), "%s", h);
        cr_expect(strstr(h, "x-api-key: " KEY "\r\n"), "%s", h);
        cr_expect(strstr(h,
                         "x-litellm-spend-logs-metadata: "
                         "{\"sandbox\":\"sbx-1\",\"account\":\"acct-7\",\"run\":\"sbx-1/1\"}\r\n"),
                  "%s", h);
        const char *gone[] = {"client-token", "client-key", "end-user", "forged",
                              "x-debug",      "Proxy-",     "X-Hop",    "Keep-Alive",
                              "127.0.0.1",    "Connection"};
        for (size_t i = 0; i < ARRAY_SIZE(gone); i++)
                cr_expect_null(strcasestr(h, gone[i]), "%s in %s", gone[i], h);
        cr_expect(strstr(h, "\r\n\r\n") == h + strlen(h) - 4);
        free(h);
}

Test(netgate_route, paths_below_the_route)
{
        setenv(KEY_VAR, KEY, 1);
        char *h = head_for("http://api.model.test", "GET /model HTTP/1.1\r\n\r\n", "", NULL, NULL);
        cr_expect(strncmp(h, "GET / HTTP/1.1\r\nHost: api.model.test\r\n", 38) == 0, "%s", h);
        free(h);
        h = head_for("http://api.model.test/v1", "GET /model?x=1 HTTP/1.1\r\n\r\n", "?x=1", NULL,
                     NULL);
        cr_expect(strncmp(h, "GET /v1/?x=1 HTTP/1.1\r\n", 23) == 0, "%s", h);
        free(h);
        h = head_for("https://[2001:db8::1]", "GET /model/a HTTP/1.1\r\n\r\n", "/a", NULL, NULL);
        cr_expect(strstr(h, "Host: [2001:db8::1]\r\n"), "%s", h);
        free(h);
        h = head_for("https://[2001:db8::1]:444/", "GET /model/a HTTP/1.1\r\n\r\n", "/a", NULL,
                     NULL);
        cr_expect(strncmp(h, "GET /a HTTP/1.1\r\nHost: [2001:db8::1]:444\r\n", 42) == 0, "%s", h);
        free(h);
}

Test(netgate_route, control_characters_after_expansion_refused)
{
        const char *field = NULL;
        int r;
        setenv(KEY_VAR, "sk-1\r\nX-Evil: 1", 1);
        char *h =
            head_for("http://api.model.test", "GET /model/ HTTP/1.1\r\n\r\n", "/", &r, &field);
        cr_expect_null(h);
        cr_expect_eq(r, -EBADMSG);
        cr_expect_str_eq(field, "x-api-key");
        setenv(KEY_VAR, "sk-1\n", 1);
        h = head_for("http://api.model.test", "GET /model/ HTTP/1.1\r\n\r\n", "/", &r, &field);
        cr_expect_null(h);
        cr_expect_eq(r, -EBADMSG);
        unsetenv(KEY_VAR);
        h = head_for("http://api.model.test", "GET /model/ HTTP/1.1\r\n\r\n", "/", &r, &field);
        cr_expect_null(h);
        cr_expect_lt(r, 0);
        cr_expect_neq(r, -EBADMSG);
        cr_expect_str_eq(field, "x-api-key");
}

Test(netgate_route, bad_upstreams_and_ca_files)
{
        struct al_error err = {0};
        struct netgate_route *rt = NULL;
        struct policy_route *conf = route_conf("http://:80/");
        cr_expect_lt(netgate_route_new(conf, &rt, &err), 0);
        cr_expect(strstr(err.msg, "model"), "%s", err.msg);
        free(conf->upstream);
        conf->upstream = xstrdup("http://host:99999/");
        cr_expect_lt(netgate_route_new(conf, &rt, &err), 0);
        free(conf->upstream);
        conf->upstream = xstrdup("https://host/");
        conf->ca_file = xstrdup("/nonexistent/ca.pem");
        cr_expect_lt(netgate_route_new(conf, &rt, &err), 0);
        cr_expect(strstr(err.msg, "/nonexistent/ca.pem"), "%s", err.msg);
        route_conf_free(conf);
        cr_expect_null(rt);
}

/* ---- end to end, in this process: the gate, a plain-HTTP upstream and a
 * client on 127.0.0.1, one event loop ---- */

static struct event_base *base;
static struct netgate *gate;
static struct policy *pol;
static struct secrets *secrets;
static struct evhttp *upstream;
static uint16_t up_port, routes_port;

static struct ngt_seen seen;
static int stream_sent;

struct rec {
        char protocol[16], decision[8], reason[64], route[80], path[256], method[16], rule[64];
        char recorded[256], address[64];
        int status;
        uint64_t up, down;
};
static struct rec recs[32];
static size_t n_recs;

static void recorder(void *ud, const struct netgate_record *r)
{
        cr_assert_lt(n_recs, ARRAY_SIZE(recs));
        struct rec *x = &recs[n_recs++];
        ngt_copy(x->protocol, sizeof(x->protocol), r->protocol);
        ngt_copy(x->decision, sizeof(x->decision), r->decision);
        ngt_copy(x->reason, sizeof(x->reason), r->reason);
        ngt_copy(x->route, sizeof(x->route), r->route);
        ngt_copy(x->path, sizeof(x->path), r->path);
        ngt_copy(x->method, sizeof(x->method), r->method);
        ngt_copy(x->rule, sizeof(x->rule), r->rule);
        ngt_copy(x->address, sizeof(x->address), r->address);
        for (size_t i = 0; i < r->n_recorded; i++) {
                size_t l = strlen(x->recorded);
                snprintf(x->recorded + l, sizeof(x->recorded) - l, "%s=%s;", r->recorded[i].name,
                         r->recorded[i].value);
        }
        x->status = r->status;
        x->up = r->bytes_up;
        x->down = r->bytes_down;
        cr_expect_str_eq(r->sandbox, "sbx-route");
}

#define BIG_SIZE (8u << 20)

struct stream {
        struct evhttp_request *req;
        struct event *ev;
};

static void stream_next(evutil_socket_t fd, short what, void *ud)
{
        struct stream *st = ud;
        struct evbuffer *b = evbuffer_new();
        evbuffer_add_printf(b, "data: %d\n\n", stream_sent++);
        evhttp_send_reply_chunk(st->req, b);
        evbuffer_free(b);
        if (stream_sent == 3) {
                evhttp_send_reply_end(st->req);
                event_free(st->ev);
                free(st);
                return;
        }
        struct timeval tv = {0, 300000};
        evtimer_add(st->ev, &tv);
}

static void up_handler(struct evhttp_request *req, void *ud)
{
        struct evkeyvalq *h = evhttp_request_get_input_headers(req);
        ngt_capture(&seen, req);
        struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
        evhttp_add_header(oh, "x-litellm-call-id", "call-123");
        if (strcmp(seen.uri, "/v1/stream") == 0) {
                struct stream *st = xcalloc(1, sizeof(*st));
                st->req = req;
                st->ev = evtimer_new(base, stream_next, st);
                evhttp_add_header(oh, "Content-Type", "text/event-stream");
                evhttp_send_reply_start(req, 200, "OK");
                stream_next(-1, 0, st);
                return;
        }
        if (strcmp(seen.uri, "/v1/big") == 0) {
                struct evbuffer *big = evbuffer_new();
                for (size_t i = 0; i < BIG_SIZE; i += 4096) {
                        uint8_t block[4096];
                        for (size_t k = 0; k < sizeof(block); k++)
                                block[k] = ngt_pattern(i + k);
                        evbuffer_add(big, block, sizeof(block));
                }
                evhttp_send_reply(req, 200, "OK", big);
                evbuffer_free(big);
                return;
        }
        /* An upstream that repeats the key it was given. */
        const char *key = evhttp_find_header(h, "x-api-key");
        if (key)
                evhttp_add_header(oh, "x-echo-key", key);
        struct evbuffer *out = evbuffer_new();
        evbuffer_add_printf(out, "upstream got %s with %zu bytes", seen.uri, seen.body_len);
        evhttp_send_reply(req, 200, "OK", out);
        evbuffer_free(out);
}

static void add_route(const char *name, const char *upstream_url)
{
        pol->routes = xrealloc(pol->routes, pol->n_routes + 1, sizeof(*pol->routes));
        struct policy_route *conf = route_conf(upstream_url);
        free(conf->name);
        conf->name = xstrdup(name);
        pol->routes[pol->n_routes++] = *conf;
        free(conf);
}

static void start_gate(bool allow_loopback)
{
        struct al_error err = {0};
        if (allow_loopback)
                pol->net_allow_private =
                    strv_append(pol->net_allow_private, &pol->n_net_allow_private, "127.0.0.0/8");
        pol->net_hosts = xcalloc(1, sizeof(*pol->net_hosts));
        pol->net_hosts[0] = (struct policy_kv){xstrdup("upstream.test"), xstrdup("127.0.0.1")};
        pol->n_net_hosts = 1;
        char *url = xasprintf("http://upstream.test:%u/v1/", up_port);
        add_route("model", url);
        free(url);
        url = xasprintf("https://127.0.0.1:%u", up_port);
        add_route("tls", url);
        free(url);

        gate = netgate_new(base, pol, "sbx-route", &err);
        cr_assert_not_null(gate, "%s", err.msg);
        netgate_set_recorder(gate, recorder, NULL);
        int fd = ngt_loopback_socket(SOCK_STREAM);
        cr_expect_lt(netgate_add_listener(gate, NETGATE_PROTO_ROUTES, fd, &err), 0, "routes first");
        cr_assert_eq(netgate_set_routes(gate, pol->routes, pol->n_routes, secrets, &vars, &err), 0,
                     "%s", err.msg);
        routes_port = ngt_local_port(fd);
        cr_assert_eq(netgate_add_listener(gate, NETGATE_PROTO_ROUTES, fd, &err), 0, "%s", err.msg);
}

static void setup_common(bool allow_loopback)
{
        signal(SIGPIPE, SIG_IGN);
        setenv(KEY_VAR, KEY, 1);
        base = event_base_new();
        cr_assert_not_null(base);
        upstream = ngt_upstream_start(base, up_handler, &up_port);
        memset(&seen, 0, sizeof(seen));
        stream_sent = 0;
        n_recs = 0;
        secrets = secrets_new();
        pol = policy_new();
        start_gate(allow_loopback);
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
        ngt_teardown(base, &gate, upstream, &pol, &secrets);
}

/* ---- the client ---- */

struct tc {
        int fd;
        char in[65536];
        size_t in_len;
        bool eof;
};

static struct tc *tc_open(void)
{
        struct tc *t = xcalloc(1, sizeof(*t));
        t->fd = ngt_connect_loopback(routes_port);
        return t;
}

static void tc_close(struct tc *t)
{
        close(t->fd);
        free(t);
}

static void tc_send(struct tc *t, const char *s)
{
        size_t off = 0, len = strlen(s);
        while (off < len) {
                ssize_t n = send(t->fd, s + off, len - off, MSG_NOSIGNAL);
                if (n > 0)
                        off += (size_t)n;
                else
                        event_base_loop(base, EVLOOP_NONBLOCK);
        }
}

typedef bool (*tc_done_fn)(struct tc *t, const void *arg);

static bool tc_drive(struct tc *t, tc_done_fn done, const void *arg)
{
        uint64_t deadline = now_monotonic_us() + 10 * 1000000ULL;
        while (now_monotonic_us() < deadline) {
                event_base_loop(base, EVLOOP_NONBLOCK);
                for (;;) {
                        ssize_t n = recv(t->fd, t->in + t->in_len, sizeof(t->in) - t->in_len - 1,
                                         MSG_DONTWAIT);
                        if (n > 0) {
                                t->in_len += (size_t)n;
                                continue;
                        }
                        if (n == 0 || (errno != EAGAIN && errno != EINTR))
                                t->eof = true;
                        break;
                }
                t->in[t->in_len] = '\0';
                if (done(t, arg))
                        return true;
                if (t->eof)
                        return done(t, arg);
                struct pollfd pfd = {t->fd, POLLIN, 0};
                poll(&pfd, 1, 1);
        }
        return false;
}

static bool have_response(struct tc *t, const void *unused)
{
        return ngt_response_complete(t->in, t->in_len, t->eof);
}

static bool has_text(struct tc *t, const void *s)
{
        return strstr(t->in, s) != NULL;
}

static int status_of(struct tc *t)
{
        return ngt_status_of(t->in, t->in_len);
}

static void wait_records(size_t n)
{
        ngt_wait_records(base, &n_recs, n);
}

static struct tc *call(const char *req)
{
        struct tc *t = tc_open();
        tc_send(t, req);
        cr_assert(tc_drive(t, have_response, NULL), "no response: %s", t->in);
        return t;
}

/* ---- tests ---- */

Test(netgate_route_e2e, call_strips_injects_records, .init = setup, .fini = teardown)
{
        struct tc *t = call("POST /model/messages?x=1 HTTP/1.1\r\n"
                            "Host: 127.0.0.1:8080\r\n"
                            "x-api-key: client-key\r\n"
                            "Authorization: Bearer client-token\r\n"
                            "x-litellm-end-user-id: u1\r\n"
                            "Content-Length: 5\r\n"
                            "\r\n"
                            "hello");
        cr_expect_eq(status_of(t), 200, "%s", t->in);
        cr_expect(strstr(t->in, "upstream got /v1/messages?x=1 with 5 bytes"), "%s", t->in);
        cr_expect_str_eq(seen.uri, "/v1/messages?x=1");
        cr_expect(strstr(seen.headers, "x-api-key: " KEY "\n"), "%s", seen.headers);
        char *host = xasprintf("Host: upstream.test:%u\n", up_port);
        cr_expect(strstr(seen.headers, host), "%s", seen.headers);
        free(host);
        cr_expect(strstr(seen.headers, "x-litellm-spend-logs-metadata: "
                                       "{\"sandbox\":\"sbx-1\",\"account\":\"acct-7\""),
                  "%s", seen.headers);
        cr_expect_null(strstr(seen.headers, "client-"), "%s", seen.headers);
        cr_expect_null(strcasestr(seen.headers, "end-user"), "%s", seen.headers);
        cr_expect_null(strcasestr(seen.headers, "authorization"), "%s", seen.headers);

        /* The upstream repeated the key in a field: the sandbox sees it masked. */
        cr_expect_null(strstr(t->in, KEY), "%s", t->in);
        cr_expect(strstr(t->in, "x-echo-key: " REDACTOR_MARK "\r\n"), "%s", t->in);
        cr_expect(strstr(t->in, "x-litellm-call-id: call-123\r\n"), "%s", t->in);

        wait_records(1);
        const struct rec *r = &recs[0];
        cr_expect_str_eq(r->protocol, "route");
        cr_expect_str_eq(r->decision, "allow");
        cr_expect_str_eq(r->reason, "");
        cr_expect_str_eq(r->route, "model");
        cr_expect_str_eq(r->method, "POST");
        cr_expect_str_eq(r->path, "/messages?x=1");
        cr_expect_str_eq(r->recorded, "x-litellm-call-id=call-123;");
        cr_expect_eq(r->status, 200);
        cr_expect_gt(r->up, 5);
        cr_expect_gt(r->down, 40);

        /* Keep-alive: a second call on the same connection. */
        t->in_len = 0;
        t->in[0] = '\0';
        tc_send(t, "GET /model/again HTTP/1.1\r\nHost: x\r\n\r\n");
        cr_assert(tc_drive(t, have_response, NULL), "%s", t->in);
        cr_expect_eq(status_of(t), 200, "%s", t->in);
        cr_expect_str_eq(seen.uri, "/v1/again");
        wait_records(2);
        cr_expect_str_eq(recs[1].path, "/again");
        cr_expect_str_eq(recs[0].address, "127.0.0.1");
        cr_expect_str_eq(recs[1].address, "127.0.0.1", "a reused upstream keeps its address");
        tc_close(t);
}

Test(netgate_route_e2e, chunked_request_body, .init = setup, .fini = teardown)
{
        struct tc *t = call("POST /model/up HTTP/1.1\r\nHost: x\r\n"
                            "Transfer-Encoding: chunked\r\n\r\n"
                            "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n");
        cr_expect_eq(status_of(t), 200, "%s", t->in);
        cr_expect(strstr(t->in, "upstream got /v1/up with 7 bytes"), "%s", t->in);
        tc_close(t);
}

Test(netgate_route_e2e, stream_arrives_chunk_by_chunk, .init = setup, .fini = teardown)
{
        struct tc *t = tc_open();
        tc_send(t, "GET /model/stream HTTP/1.1\r\nHost: x\r\n\r\n");
        cr_assert(tc_drive(t, has_text, "data: 0"), "%s", t->in);
        cr_expect_lt(stream_sent, 3, "the first event arrived before the upstream finished");
        cr_expect(strstr(t->in, "Transfer-Encoding: chunked\r\n"), "%s", t->in);
        cr_expect(strstr(t->in, "Content-Type: text/event-stream\r\n"), "%s", t->in);
        cr_assert(tc_drive(t, have_response, NULL), "%s", t->in);
        cr_expect(strstr(t->in, "data: 2"), "%s", t->in);
        wait_records(1);
        cr_expect_str_eq(recs[0].recorded, "x-litellm-call-id=call-123;");
        tc_close(t);
}

Test(netgate_route_e2e, refusals, .init = setup, .fini = teardown)
{
        struct tc *t = call("GET /nope/x HTTP/1.1\r\nHost: x\r\n\r\n");
        cr_expect_eq(status_of(t), 404, "%s", t->in);
        cr_expect(strstr(t->in, "X-Airlock-Denied: unknown_route\r\n"), "%s", t->in);
        tc_close(t);
        wait_records(1);
        cr_expect_str_eq(recs[0].decision, "deny");
        cr_expect_str_eq(recs[0].reason, "unknown_route");
        cr_expect_str_eq(recs[0].route, "nope");

        char *abs =
            xasprintf("GET http://127.0.0.1:%u/model/x HTTP/1.1\r\nHost: x\r\n\r\n", routes_port);
        t = call(abs);
        free(abs);
        cr_expect_eq(status_of(t), 400, "%s", t->in);
        cr_expect(strstr(t->in, "X-Airlock-Denied: bad_request\r\n"), "%s", t->in);
        tc_close(t);

        t = call("CONNECT upstream.test:443 HTTP/1.1\r\nHost: x\r\n\r\n");
        cr_expect_eq(status_of(t), 400, "%s", t->in);
        tc_close(t);

        t = call("GET /model/a/../../etc HTTP/1.1\r\nHost: x\r\n\r\n");
        cr_expect_eq(status_of(t), 400, "%s", t->in);
        cr_expect(strstr(t->in, "X-Airlock-Denied: bad_path\r\n"), "%s", t->in);
        tc_close(t);
        t = call("GET /model/%2E%2e/x HTTP/1.1\r\nHost: x\r\n\r\n");
        cr_expect_eq(status_of(t), 400, "%s", t->in);
        tc_close(t);
        cr_expect_eq(seen.count, 0, "nothing reached the upstream");
}

Test(netgate_route_e2e, injected_value_with_newline_refused, .init = setup, .fini = teardown)
{
        setenv(KEY_VAR, "sk-1\r\nX-Evil: 1", 1);
        struct tc *t = call("GET /model/x HTTP/1.1\r\nHost: x\r\n\r\n");
        cr_expect_eq(status_of(t), 400, "%s", t->in);
        cr_expect(strstr(t->in, "X-Airlock-Error: bad_inject_value\r\n"), "%s", t->in);
        cr_expect(strstr(t->in, "x-api-key"), "the field is named: %s", t->in);
        cr_expect_null(strstr(t->in, "sk-1"), "the value is not: %s", t->in);
        cr_expect_null(strstr(t->in, "Evil"), "%s", t->in);
        cr_expect_eq(seen.count, 0);
        tc_close(t);
}

Test(netgate_route_e2e, tls_failure_is_502, .init = setup, .fini = teardown)
{
        /* The upstream speaks plain HTTP: the handshake fails. */
        struct tc *t = call("GET /tls/x HTTP/1.1\r\nHost: x\r\n\r\n");
        cr_expect_eq(status_of(t), 502, "%s", t->in);
        cr_expect(strstr(t->in, "X-Airlock-Error: upstream_tls\r\n"), "%s", t->in);
        tc_close(t);
        wait_records(1);
        cr_expect_str_eq(recs[0].reason, "upstream_tls");
        cr_expect_str_eq(recs[0].route, "tls");
}

Test(netgate_route_e2e, private_upstream_needs_allow_private, .init = setup_no_private,
     .fini = teardown)
{
        struct tc *t = call("GET /model/x HTTP/1.1\r\nHost: x\r\n\r\n");
        cr_expect_eq(status_of(t), 403, "%s", t->in);
        cr_expect(strstr(t->in, "X-Airlock-Denied: private_address\r\n"), "%s", t->in);
        tc_close(t);
        wait_records(1);
        cr_expect_str_eq(recs[0].decision, "deny");
        cr_expect(strstr(recs[0].rule, "127.0.0.0/8"), "%s", recs[0].rule);
        cr_expect_eq(seen.count, 0);
}

/* Bodies larger than every buffer on the way, both directions: nothing is
 * held whole, and every byte arrives in order. */
Test(netgate_route_e2e, large_bodies_both_ways, .init = setup, .fini = teardown)
{
        struct tc *t = tc_open();
        char head[128];
        snprintf(head, sizeof(head),
                 "POST /model/up HTTP/1.1\r\nHost: x\r\nContent-Length: %u\r\n\r\n", BIG_SIZE);
        tc_send(t, head);
        static char block[65536];
        memset(block, 'u', sizeof(block));
        size_t sent = 0;
        while (sent < BIG_SIZE) {
                ssize_t n = send(t->fd, block, sizeof(block), MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n > 0)
                        sent += (size_t)n;
                event_base_loop(base, EVLOOP_NONBLOCK);
        }
        cr_assert(tc_drive(t, have_response, NULL), "%s", t->in);
        char want[128];
        snprintf(want, sizeof(want), "upstream got /v1/up with %u bytes", BIG_SIZE);
        cr_expect(strstr(t->in, want), "%s", t->in);
        tc_close(t);

        t = tc_open();
        tc_send(t, "GET /model/big HTTP/1.1\r\nHost: x\r\n\r\n");
        cr_assert(tc_drive(t, has_text, "\r\n\r\n"), "%s", t->in);
        cr_expect_eq(status_of(t), 200, "%s", t->in);
        const char *body = strstr(t->in, "\r\n\r\n") + 4;
        size_t got = 0, bad = 0;
        for (const char *p = body; p < t->in + t->in_len; p++, got++)
                bad += (uint8_t)*p != ngt_pattern(got);
        uint64_t deadline = now_monotonic_us() + 20 * 1000000ULL;
        while (got < BIG_SIZE && now_monotonic_us() < deadline) {
                event_base_loop(base, EVLOOP_NONBLOCK);
                ssize_t n = recv(t->fd, block, sizeof(block), MSG_DONTWAIT);
                for (ssize_t i = 0; i < n; i++, got++)
                        bad += (uint8_t)block[i] != ngt_pattern(got);
                if (n <= 0)
                        poll(NULL, 0, 1);
        }
        cr_expect_eq(got, BIG_SIZE);
        cr_expect_eq(bad, 0);
        tc_close(t);
        wait_records(2);
        cr_expect_gt(recs[0].up, BIG_SIZE);
        cr_expect_gt(recs[1].down, BIG_SIZE);
}

/* Encoded traversal: whatever an upstream could resolve outside the route's
 * base path is refused before anything is sent. */
Test(netgate_route, path_traversal_forms_refused)
{
        static const struct {
                const char *rest;
                const char *problem; /* NULL: passes */
        } cases[] = {
            {"", NULL},
            {"/v1/messages", NULL},
            {"/v1/a.b/..c/...", NULL},
            {"/v1/a%20b/%41", NULL},
            {"/v1/x;v=1/y", NULL},
            {"/v1/x?next=../..%2f%5c;..", NULL},
            {"?a=%2F", NULL},
            {"/..", "segment"},
            {"/./x", "segment"},
            {"/a/%2e%2E/b", "segment"},
            {"/a/.%2e", "segment"},
            {"/..;/admin", "parameters"},
            {"/..;jsessionid=1/admin", "parameters"},
            {"/.;/x", "parameters"},
            {"/..%3b/admin", "parameters"},
            {"/..%2fadmin", "%2F"},
            {"/a%2F..%2Fb", "%2F"},
            {"/..\\admin", "backslash"},
            {"/a\\b", "backslash"},
            {"/..%5cadmin", "%5C"},
            {"/%252e%252e/admin", "double encoding"},
            {"/%25", "double encoding"},
            {"/a%00b", "NUL"},
            {"/a%zz", "hex digits"},
            {"/a%2", "hex digits"},
            {"/a%2/b", "hex digits"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                const char *p = netgate_route_path_problem(cases[i].rest, strlen(cases[i].rest));
                if (!cases[i].problem)
                        cr_expect_null(p, "%s refused: %s", cases[i].rest, p);
                else {
                        cr_expect_not_null(p, "%s passed", cases[i].rest);
                        if (p)
                                cr_expect(strstr(p, cases[i].problem), "%s: %s", cases[i].rest, p);
                }
        }
}

Test(netgate_route_e2e, encoded_traversal_refused_with_400, .init = setup, .fini = teardown)
{
        static const char *const paths[] = {
            "/model/..%2f..%2fadmin",  "/model/..;/admin",       "/model/..\\admin",
            "/model/%252e%252e/admin", "/model/..%5c..%5cadmin",
        };
        for (size_t i = 0; i < ARRAY_SIZE(paths); i++) {
                char *req = xasprintf("GET %s HTTP/1.1\r\nHost: x\r\n\r\n", paths[i]);
                struct tc *t = call(req);
                free(req);
                cr_expect_eq(status_of(t), 400, "%s: %s", paths[i], t->in);
                cr_expect(strstr(t->in, "X-Airlock-Denied: bad_path\r\n"), "%s", t->in);
                cr_expect(strstr(t->in, "the path holds "), "%s", t->in);
                tc_close(t);
        }
        cr_expect_eq(seen.count, 0, "nothing reached the upstream");
        struct tc *t = call("GET /model/v1/a%20b?q=..%2f HTTP/1.1\r\nHost: x\r\n\r\n");
        cr_expect_eq(status_of(t), 200, "%s", t->in);
        tc_close(t);
}
