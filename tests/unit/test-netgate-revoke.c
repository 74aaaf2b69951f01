/* SPDX-License-Identifier: Apache-2.0 */
/* A change of the gate's rules (netgate_set_rules(), a live revoke or a
 * narrowed grant) closes what is open and no longer allowed: CONNECT and
 * SOCKS5 tunnels, transparent relays and the ones announced but not yet
 * accepted, idle kept upstreams. Each closed connection is recorded with
 * reason "revoked"; what the new rules still allow keeps working. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "netgate/netgate.h"
#include "netgate/transparent.h"
#include "policy.h"
#include "util.h"

static struct event_base *base;
static struct policy *pol;
static struct netgate *gate;
static struct evconnlistener *echo_l, *web_l;
static uint16_t echo_port, web_port, http_port, socks_port, relay_port;
static int web_open, web_closed;

#define MAX_RECS 64
static struct {
        char protocol[16], host[64], reason[32];
} recs[MAX_RECS];
static size_t n_recs;

static void recorder(void *ud, const struct netgate_record *r)
{
        (void)ud;
        if (n_recs >= MAX_RECS)
                return;
        snprintf(recs[n_recs].protocol, sizeof(recs[0].protocol), "%s", r->protocol);
        snprintf(recs[n_recs].host, sizeof(recs[0].host), "%s", r->host ? r->host : "");
        snprintf(recs[n_recs].reason, sizeof(recs[0].reason), "%s", r->reason ? r->reason : "");
        n_recs++;
}

static size_t revoked(const char *protocol, const char *host)
{
        size_t n = 0;
        for (size_t i = 0; i < n_recs; i++)
                n += STREQ(recs[i].reason, "revoked") &&
                     (!protocol || STREQ(recs[i].protocol, protocol)) && STREQ(recs[i].host, host);
        return n;
}

/* ---- servers: an echo server, and a web server answering "ok" ---- */

static void echo_read(struct bufferevent *bev, void *ud)
{
        (void)ud;
        evbuffer_add_buffer(bufferevent_get_output(bev), bufferevent_get_input(bev));
}

static void web_read(struct bufferevent *bev, void *ud)
{
        (void)ud;
        struct evbuffer *in = bufferevent_get_input(bev);
        struct evbuffer_ptr p = evbuffer_search(in, "\r\n\r\n", 4, NULL);
        if (p.pos < 0)
                return;
        bool slow = evbuffer_search(in, "GET /slow", 9, NULL).pos == 0;
        evbuffer_drain(in, (size_t)p.pos + 4);
        /* /slow: a response whose body never ends (a stream). */
        static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        static const char part[] = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\npart";
        if (slow)
                bufferevent_write(bev, part, sizeof(part) - 1);
        else
                bufferevent_write(bev, ok, sizeof(ok) - 1);
}

static void server_event(struct bufferevent *bev, short what, void *ud)
{
        (void)what;
        if (ud)
                web_closed++;
        bufferevent_free(bev);
}

static void server_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa,
                          int len, void *ud)
{
        (void)l;
        (void)sa;
        (void)len;
        struct bufferevent *bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
        bufferevent_setcb(bev, ud ? web_read : echo_read, NULL, server_event, ud);
        bufferevent_enable(bev, EV_READ | EV_WRITE);
        if (ud)
                web_open++;
}

/* ---- sockets ---- */

static int loopback_listener(uint16_t *ret_port)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t l = sizeof(sin);
        cr_assert_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
        cr_assert_eq(listen(fd, 64), 0);
        cr_assert_eq(getsockname(fd, (struct sockaddr *)&sin, &l), 0);
        *ret_port = ntohs(sin.sin_port);
        return fd;
}

static int connect_to(uint16_t port, uint16_t *ret_src)
{
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t l = sizeof(sin);
        cr_assert_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
        cr_assert_eq(getsockname(fd, (struct sockaddr *)&sin, &l), 0);
        if (ret_src)
                *ret_src = ntohs(sin.sin_port);
        sin.sin_port = htons(port);
        int r = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
        cr_assert(r == 0 || errno == EINPROGRESS);
        return fd;
}

/* Run the loop and read `fd` until `want` bytes came (or the peer closed,
 * *eof), for up to `ms`. */
static size_t pump(int fd, char *buf, size_t want, int ms, bool *eof)
{
        size_t got = 0;
        *eof = false;
        uint64_t deadline = now_monotonic_us() + (uint64_t)ms * 1000;
        while (got < want && now_monotonic_us() < deadline) {
                event_base_loop(base, EVLOOP_NONBLOCK);
                ssize_t n = recv(fd, buf + got, want - got, MSG_DONTWAIT);
                if (n > 0) {
                        got += (size_t)n;
                        continue;
                }
                if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                        *eof = true;
                        break;
                }
                poll(NULL, 0, 1);
        }
        buf[got] = '\0';
        return got;
}

static void run_loop_ms(int ms)
{
        uint64_t deadline = now_monotonic_us() + (uint64_t)ms * 1000;
        while (now_monotonic_us() < deadline) {
                event_base_loop(base, EVLOOP_NONBLOCK);
                poll(NULL, 0, 1);
        }
}

static void send_all(int fd, const void *p, size_t n)
{
        cr_assert_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* One round trip over an echo tunnel. */
static bool echoes(int fd)
{
        char buf[16];
        bool eof;
        if (send(fd, "ping", 4, MSG_NOSIGNAL) != 4)
                return false;
        return pump(fd, buf, 4, 2000, &eof) == 4 && memcmp(buf, "ping", 4) == 0;
}

/* The peer closed within two seconds, nothing relayed. */
static bool closed_soon(int fd)
{
        char buf[64];
        bool eof;
        (void)send(fd, "ping", 4, MSG_NOSIGNAL);
        size_t n = pump(fd, buf, sizeof(buf) - 1, 2000, &eof);
        return eof && n == 0;
}

static int tunnel(const char *host)
{
        int fd = connect_to(http_port, NULL);
        char req[256], buf[512];
        bool eof;
        snprintf(req, sizeof(req), "CONNECT %s:%u HTTP/1.1\r\n\r\n", host, echo_port);
        run_loop_ms(5);
        send_all(fd, req, strlen(req));
        static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
        size_t n = pump(fd, buf, sizeof(ok) - 1, 5000, &eof);
        cr_assert_eq(n, sizeof(ok) - 1, "%s", buf);
        cr_assert_str_eq(buf, ok);
        return fd;
}

static int socks(const char *host)
{
        int fd = connect_to(socks_port, NULL);
        char buf[64];
        bool eof;
        run_loop_ms(5);
        send_all(fd, "\x05\x01\x00", 3);
        cr_assert_eq(pump(fd, buf, 2, 5000, &eof), 2);
        uint8_t req[300] = {5, 1, 0, 3, (uint8_t)strlen(host)};
        memcpy(req + 5, host, strlen(host));
        req[5 + strlen(host)] = (uint8_t)(echo_port >> 8);
        req[6 + strlen(host)] = (uint8_t)echo_port;
        send_all(fd, req, 7 + strlen(host));
        cr_assert_eq(pump(fd, buf, 10, 5000, &eof), 10);
        cr_assert_eq(buf[1], 0, "SOCKS5 reply %d", buf[1]);
        return fd;
}

/* A relayed transparent connection, announced as the supervisor does. */
static int relay(const char *host, bool announce_only)
{
        struct netgate_verdict v = {.allow = true, .relay = true, .port = echo_port};
        snprintf(v.host, sizeof(v.host), "%s", host);
        snprintf(v.address, sizeof(v.address), "127.0.0.1");
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t l = sizeof(sin);
        cr_assert_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
        cr_assert_eq(getsockname(fd, (struct sockaddr *)&sin, &l), 0);
        cr_assert_eq(netgate_relay_expect(gate, &v, ntohs(sin.sin_port)), 0);
        if (announce_only)
                return fd;
        sin.sin_port = htons(relay_port);
        int r = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
        cr_assert(r == 0 || errno == EINPROGRESS);
        return fd;
}

static void relay_connect(int fd)
{
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_port = htons(relay_port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int r = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
        cr_assert(r == 0 || errno == EINPROGRESS);
}

static void add_host(const char *name)
{
        pol->net_hosts = xrealloc(pol->net_hosts, pol->n_net_hosts + 1, sizeof(*pol->net_hosts));
        pol->net_hosts[pol->n_net_hosts].key = xstrdup(name);
        pol->net_hosts[pol->n_net_hosts].value = xstrdup("127.0.0.1");
        pol->n_net_hosts++;
}

static char *rule(const char *host, uint16_t port)
{
        return xasprintf("%s:%u", host, port);
}

static void setup(void)
{
        signal(SIGPIPE, SIG_IGN);
        base = event_base_new();
        int fd = loopback_listener(&echo_port);
        echo_l = evconnlistener_new(base, server_accept, NULL, LEV_OPT_CLOSE_ON_FREE, 0, fd);
        fd = loopback_listener(&web_port);
        web_l = evconnlistener_new(base, server_accept, (void *)1, LEV_OPT_CLOSE_ON_FREE, 0, fd);
        cr_assert(echo_l && web_l);
        web_open = web_closed = 0;
        n_recs = 0;

        pol = policy_new();
        char *a[] = {rule("echo.test", echo_port), rule("keep.test", echo_port),
                     rule("web.test", web_port)};
        for (size_t i = 0; i < 3; i++) {
                pol->net_allow = strv_append(pol->net_allow, &pol->n_net_allow, a[i]);
                free(a[i]);
        }
        pol->net_allow_private =
            strv_append(pol->net_allow_private, &pol->n_net_allow_private, "127.0.0.0/8");
        add_host("echo.test");
        add_host("keep.test");
        add_host("web.test");

        struct al_error err = {0};
        gate = netgate_new(base, pol, "sbx-test", &err);
        cr_assert_not_null(gate, "%s", err.msg);
        netgate_set_recorder(gate, recorder, NULL);
        cr_assert_eq(
            netgate_add_listener(gate, NETGATE_PROTO_HTTP, loopback_listener(&http_port), &err), 0,
            "%s", err.msg);
        cr_assert_eq(
            netgate_add_listener(gate, NETGATE_PROTO_SOCKS5, loopback_listener(&socks_port), &err),
            0, "%s", err.msg);
        cr_assert_eq(netgate_add_relay_listener(gate, loopback_listener(&relay_port), &err), 0,
                     "%s", err.msg);
}

static void teardown(void)
{
        gate = netgate_free(gate);
        for (int i = 0; i < 10; i++)
                event_base_loop(base, EVLOOP_NONBLOCK);
        evconnlistener_free(echo_l);
        evconnlistener_free(web_l);
        pol = policy_free(pol);
        event_base_free(base);
}

/* Replace the rules with `allow` (each "host" on its server's port) and
 * `deny`. */
static void set_rules(const char *const *allow, size_t n_allow, const char *const *deny,
                      size_t n_deny)
{
        char *a[8], *d[8];
        for (size_t i = 0; i < n_allow; i++)
                a[i] = rule(allow[i], STREQ(allow[i], "web.test") ? web_port : echo_port);
        for (size_t i = 0; i < n_deny; i++)
                d[i] = xstrdup(deny[i]);
        struct al_error err = {0};
        cr_assert_eq(netgate_set_rules(gate, a, n_allow, d, n_deny, NULL, &err), 0, "%s", err.msg);
        for (size_t i = 0; i < n_allow; i++)
                free(a[i]);
        for (size_t i = 0; i < n_deny; i++)
                free(d[i]);
}

Test(netgate_revoke, revoke_cuts_tunnels_and_relays_keeps_the_rest, .init = setup, .fini = teardown)
{
        int ct = tunnel("echo.test"), st = socks("echo.test"), rt = relay("echo.test", false);
        int kt = tunnel("keep.test"), kr = relay("keep.test", false);
        int pending = relay("echo.test", true); /* announced, not yet connected */
        cr_assert(echoes(ct));
        cr_assert(echoes(st));
        cr_assert(echoes(rt));
        cr_assert(echoes(kt));
        cr_assert(echoes(kr));
        cr_expect_eq(revoked(NULL, "echo.test"), 0);

        set_rules((const char *[]){"keep.test", "web.test"}, 2, NULL, 0);
        cr_expect(closed_soon(ct), "the CONNECT tunnel outlived the revoke");
        cr_expect(closed_soon(st), "the SOCKS5 tunnel outlived the revoke");
        cr_expect(closed_soon(rt), "the relay outlived the revoke");
        relay_connect(pending);
        cr_expect(closed_soon(pending), "an announced relay was accepted after the revoke");
        cr_expect(echoes(kt), "a tunnel still allowed was cut");
        cr_expect(echoes(kr), "a relay still allowed was cut");
        cr_expect_eq(revoked("connect", "echo.test"), 1);
        cr_expect_eq(revoked("socks5", "echo.test"), 1);
        cr_expect_eq(revoked("transparent", "echo.test"), 1);
        cr_expect_eq(revoked(NULL, "keep.test"), 0);
        struct netgate_stats s;
        netgate_get_stats(gate, &s);
        cr_expect_eq(s.active, 2, "connections still counted: %llu", (unsigned long long)s.active);
        int fds[] = {ct, st, rt, kt, kr, pending};
        for (size_t i = 0; i < 6; i++)
                close(fds[i]);
}

Test(netgate_revoke, a_deny_rule_narrows_what_is_open, .init = setup, .fini = teardown)
{
        int ct = tunnel("echo.test"), kt = tunnel("keep.test");
        cr_assert(echoes(ct));
        set_rules((const char *[]){"echo.test", "keep.test", "web.test"}, 3,
                  (const char *[]){"echo.test"}, 1);
        cr_expect(closed_soon(ct), "a tunnel to a host denied now outlived the change");
        cr_expect(echoes(kt));
        cr_expect_eq(revoked("connect", "echo.test"), 1);
        close(ct);
        close(kt);
}

Test(netgate_revoke, the_same_rules_cut_nothing, .init = setup, .fini = teardown)
{
        int ct = tunnel("echo.test"), rt = relay("echo.test", false);
        cr_assert(echoes(ct));
        cr_assert(echoes(rt));
        set_rules((const char *[]){"echo.test", "keep.test", "web.test"}, 3, NULL, 0);
        cr_expect(echoes(ct));
        cr_expect(echoes(rt));
        cr_expect_eq(revoked(NULL, "echo.test"), 0);
        close(ct);
        close(rt);
}

Test(netgate_revoke, an_idle_kept_upstream_is_dropped, .init = setup, .fini = teardown)
{
        int fd = connect_to(http_port, NULL);
        char buf[512];
        bool eof;
        char *req =
            xasprintf("GET http://web.test:%u/ HTTP/1.1\r\nHost: web.test\r\n\r\n", web_port);
        run_loop_ms(5);
        send_all(fd, req, strlen(req));
        static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
        cr_assert_eq(pump(fd, buf, sizeof(ok) - 1, 5000, &eof), sizeof(ok) - 1, "%s", buf);
        run_loop_ms(20);
        cr_assert_eq(web_open, 1);
        cr_assert_eq(web_closed, 0, "the upstream was not kept");

        set_rules((const char *[]){"echo.test", "keep.test"}, 2, NULL, 0);
        run_loop_ms(100);
        cr_expect_eq(web_closed, 1, "the kept upstream outlived the revoke");
        /* The sandbox's connection stays; its next request is refused. */
        send_all(fd, req, strlen(req));
        size_t n = pump(fd, buf, 12, 2000, &eof);
        cr_expect_eq(n, 12);
        cr_expect_eq(strncmp(buf, "HTTP/1.1 403", 12), 0, "%s", buf);
        cr_expect_eq(web_open, 1, "the refused request reached the upstream");
        free(req);
        close(fd);
}

Test(netgate_revoke, a_request_in_flight_is_cut, .init = setup, .fini = teardown)
{
        int fd = connect_to(http_port, NULL);
        char buf[512];
        bool eof;
        char *req =
            xasprintf("GET http://web.test:%u/slow HTTP/1.1\r\nHost: web.test\r\n\r\n", web_port);
        run_loop_ms(5);
        send_all(fd, req, strlen(req));
        static const char part[] = "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\npart";
        cr_assert_eq(pump(fd, buf, sizeof(part) - 1, 5000, &eof), sizeof(part) - 1, "%s", buf);

        set_rules((const char *[]){"echo.test", "keep.test"}, 2, NULL, 0);
        size_t n = pump(fd, buf, sizeof(buf) - 1, 2000, &eof);
        cr_expect(eof && n == 0, "the response outlived the revoke (%zu bytes, eof %d)", n, eof);
        run_loop_ms(20);
        cr_expect_eq(web_closed, 1, "the upstream outlived the revoke");
        cr_expect_eq(revoked("http", "web.test"), 1);
        free(req);
        close(fd);
}

/* The operator approves every request held. */
static enum netgate_ask_answer approve(void *ud, const struct netgate_ask *q,
                                       netgate_ask_done_fn done, void *conn, uint64_t *ret_token,
                                       const char **ret_reason)
{
        (void)ud;
        (void)q;
        (void)done;
        (void)conn;
        (void)ret_token;
        (void)ret_reason;
        return NETGATE_ASK_ALLOW;
}

Test(netgate_revoke, an_approved_tunnel_falls_only_to_a_deny_rule, .init = setup, .fini = teardown)
{
        gate = netgate_free(gate);
        pol->net_ask = true;
        /* other.test is listed nowhere: approved by the operator. */
        add_host("other.test");
        struct al_error err = {0};
        gate = netgate_new(base, pol, "sbx-test", &err);
        cr_assert_not_null(gate, "%s", err.msg);
        netgate_set_recorder(gate, recorder, NULL);
        cr_assert_eq(
            netgate_add_listener(gate, NETGATE_PROTO_HTTP, loopback_listener(&http_port), &err), 0,
            "%s", err.msg);
        netgate_set_asker(gate, &(struct netgate_asker){.ask = approve});
        int at = tunnel("other.test");
        cr_assert(echoes(at));
        /* A revoke of other rules leaves it: no allow rule decided it. */
        set_rules((const char *[]){"keep.test"}, 1, NULL, 0);
        cr_expect(echoes(at), "an approved tunnel was cut by a revoke of other rules");
        /* A deny rule that names it beats the approval. */
        set_rules((const char *[]){"keep.test"}, 1, (const char *[]){"other.test"}, 1);
        cr_expect(closed_soon(at), "an approved tunnel outlived a deny rule naming it");
        cr_expect_eq(revoked("connect", "other.test"), 1);
        close(at);
}

/* A direct-path connection still connecting at the change is handed over
 * only when the rules still allow it (supervisor/connect-notify.c). */
Test(netgate_revoke, a_direct_path_verdict_is_decided_again, .init = setup, .fini = teardown)
{
        struct netgate_verdict byname = {.allow = true, .port = echo_port};
        snprintf(byname.host, sizeof(byname.host), "echo.test");
        snprintf(byname.address, sizeof(byname.address), "127.0.0.1");
        struct netgate_verdict byip = byname;
        snprintf(byip.host, sizeof(byip.host), "127.0.0.1");
        cr_expect(netgate_transparent_allowed_now(gate, &byname));
        cr_expect_not(netgate_transparent_allowed_now(gate, &byip), "no IP rule lists it");

        char *a[] = {rule("127.0.0.1", echo_port), rule("keep.test", echo_port)};
        struct al_error err = {0};
        cr_assert_eq(netgate_set_rules(gate, a, 2, NULL, 0, NULL, &err), 0, "%s", err.msg);
        cr_expect_not(netgate_transparent_allowed_now(gate, &byname), "the name was revoked");
        cr_expect(netgate_transparent_allowed_now(gate, &byip));
        free(a[0]);
        free(a[1]);
}

/* A tunnel still waiting for its first bytes (the SNI check holds them)
 * and a CONNECT still connecting are cut as well. */
Test(netgate_revoke, tunnels_not_yet_relaying_are_cut, .init = setup, .fini = teardown)
{
        int waiting = tunnel("echo.test"), relay_waiting = relay("echo.test", false);
        run_loop_ms(20);
        int connecting = connect_to(http_port, NULL);
        run_loop_ms(5);
        char *req = xasprintf("CONNECT echo.test:%u HTTP/1.1\r\n\r\n", echo_port);
        send_all(connecting, req, strlen(req));
        /* Read by the gate, decided, its upstream not yet taken up. */
        event_base_loop(base, EVLOOP_NONBLOCK);
        set_rules((const char *[]){"keep.test"}, 1, NULL, 0);
        cr_expect(closed_soon(waiting), "a tunnel in its SNI check outlived the revoke");
        cr_expect(closed_soon(relay_waiting), "a relay in its SNI check outlived the revoke");
        /* Whether it was still connecting or just became a tunnel, it is
         * closed and relays nothing. */
        char buf[256];
        bool eof;
        (void)send(connecting, "ping", 4, MSG_NOSIGNAL);
        pump(connecting, buf, sizeof(buf) - 1, 2000, &eof);
        cr_expect(eof, "a CONNECT being connected outlived the revoke");
        cr_expect_null(strstr(buf, "ping"), "%s", buf);
        free(req);
        close(waiting);
        close(relay_waiting);
        close(connecting);
}
