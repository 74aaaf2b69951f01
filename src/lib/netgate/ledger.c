/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/bufferevent_struct.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "netgate/netgate-internal.h"
#include "util.h"

/* The bottom of the network gate: what every connection reports to and
 * draws from. Records and their aggregation, the refusal budget, the
 * request and byte budgets, the rate limit, the stats, and the connection
 * count that pauses the listeners. */

/* ---- records and budgets ---- */

static bool str_eq(const char *a, const char *b)
{
        return a == b || (a && b && STREQ(a, b));
}

static char *str_dup(const char *s)
{
        return s ? xstrdup(s) : NULL;
}

static void kind_free(struct netgate_refusal_kind *k)
{
        free(k->reason);
        free(k->rule);
        free(k->route);
        free(k->upstream);
}

static bool kind_matches(const struct netgate_refusal_kind *k, const struct netgate_record *r)
{
        return STREQ(k->protocol, r->protocol) && STREQ(k->host, r->host ? r->host : "") &&
               k->port == r->port && str_eq(k->reason, r->reason) && str_eq(k->rule, r->rule) &&
               str_eq(k->route, r->route) && k->status == r->status;
}

static void kind_emit(struct netgate *g, const struct netgate_refusal_kind *k)
{
        struct netgate_record r = {
            .sandbox = g->sandbox,
            .protocol = k->protocol,
            .host = k->host[0] ? k->host : NULL,
            .port = k->port,
            .address = k->address,
            .decision = "deny",
            .reason = k->reason,
            .rule = k->rule,
            .status = k->status,
            .route = k->route,
            .upstream = k->upstream,
            .count = k->count,
            .ended = true, /* what the window counted, all answered */
        };
        if (g->recorder)
                g->recorder(g->recorder_ud, &r);
}

/* Record what the window counted; forget kinds that were quiet in it. */
void netgate_refusals_flush(struct netgate *g, bool all)
{
        size_t kept = 0;
        for (size_t i = 0; i < g->n_kinds; i++) {
                struct netgate_refusal_kind *k = &g->kinds[i];
                bool busy = k->seen;
                if (k->count > 0)
                        kind_emit(g, k);
                k->count = 0;
                k->singles = 0;
                k->seen = false;
                if (busy && !all) {
                        if (kept != i)
                                g->kinds[kept] = *k;
                        kept++;
                } else
                        kind_free(k);
        }
        g->n_kinds = kept;
}

static void kinds_arm(struct netgate *g)
{
        struct timeval tv = {.tv_sec = NETGATE_REFUSAL_WINDOW_MS / 1000,
                             .tv_usec = (NETGATE_REFUSAL_WINDOW_MS % 1000) * 1000};
        if (g->n_kinds > 0 && g->kinds_timer && !evtimer_pending(g->kinds_timer, NULL))
                evtimer_add(g->kinds_timer, &tv);
}

void netgate_refusals_tick(int fd, short what, void *ud)
{
        struct netgate *g = ud;
        netgate_refusals_flush(g, false);
        kinds_arm(g);
}

/* The refusal budget is spent: what was counted is recorded, then one
 * record says so, and from now on new connections are closed unanswered
 * and unrecorded (accept_cb), at a bounded rate. */
static void close_gate(struct netgate *g)
{
        netgate_refusals_flush(g, true);
        if (g->kinds_timer)
                evtimer_del(g->kinds_timer);
        g->closed = true;
        struct netgate_record r = {
            .sandbox = g->sandbox,
            .protocol = "gate",
            .host = NULL,
            .address = "",
            .decision = "deny",
            .reason = "budget_refusals",
            .rule = "network.budget.refusals",
            .count = g->refusals_used,
        };
        if (g->recorder)
                g->recorder(g->recorder_ud, &r);
}

/* Every refusal is charged to the refusal budget; repeated ones are counted
 * rather than written one line each (NETGATE_REFUSAL_WINDOW_MS). */
static void emit_refusal(struct netgate *g, struct netgate_record *r)
{
        if (g->closed)
                return;
        g->refusals_used++;
        bool last = g->budget.refusals && g->refusals_used >= g->budget.refusals;
        bool known = false;
        for (size_t i = 0; i < g->n_kinds && !last; i++) {
                struct netgate_refusal_kind *k = &g->kinds[i];
                if (!kind_matches(k, r))
                        continue;
                known = k->seen = true;
                if (k->singles >= NETGATE_REFUSAL_SINGLES) {
                        k->count++;
                        return;
                }
                k->singles++;
                break;
        }
        if (!known && !last && g->n_kinds < NETGATE_REFUSAL_KINDS) {
                struct netgate_refusal_kind *k = &g->kinds[g->n_kinds++];
                *k = (struct netgate_refusal_kind){
                    .protocol = r->protocol,
                    .port = r->port,
                    .reason = str_dup(r->reason),
                    .rule = str_dup(r->rule),
                    .route = str_dup(r->route),
                    .upstream = str_dup(r->upstream),
                    .status = r->status,
                    .singles = 1,
                    .seen = true,
                };
                snprintf(k->host, sizeof(k->host), "%s", r->host ? r->host : "");
                snprintf(k->address, sizeof(k->address), "%s", r->address ? r->address : "");
                kinds_arm(g);
        }
        if (g->recorder)
                g->recorder(g->recorder_ud, r);
        if (last)
                close_gate(g);
}

static size_t budget_room(const struct netgate *g, size_t want)
{
        if (g->budget.bytes == 0)
                return want;
        if (g->bytes_used >= g->budget.bytes)
                return 0;
        uint64_t left = g->budget.bytes - g->bytes_used;
        return left < want ? (size_t)left : want;
}

static bool budget_bytes_exhausted(const struct netgate *g)
{
        return g->budget.bytes != 0 && g->bytes_used >= g->budget.bytes;
}

/* ---- listeners ---- */

void netgate_resume_listeners(struct netgate *g)
{
        if (!g->paused || g->n_conns >= NETGATE_MAX_CONNECTIONS)
                return;
        g->paused = false;
        for (size_t i = 0; i < g->n_listeners; i++)
                evconnlistener_enable(g->listeners[i].l);
}

void netgate_pause_listeners(struct netgate *g)
{
        if (g->paused)
                return;
        g->paused = true;
        for (size_t i = 0; i < g->n_listeners; i++)
                evconnlistener_disable(g->listeners[i].l);
}

/* ---- for the front-ends ---- */

bool netgate_fixed_host(const struct netgate *g, const char *name, struct netgate_addr *ret)
{
        for (size_t i = 0; i < g->n_hosts; i++)
                if (STREQ(g->hosts[i].name, name)) {
                        *ret = g->hosts[i].addr;
                        return true;
                }
        return false;
}

const char *netgate_address_refused(const struct netgate *g, const struct netgate_addr *a)
{
        const char *range = netgate_addr_check(a, g->allow_private, g->n_allow_private);
        if (range)
                return range;
        /* A public address of the host's own is its loopback to the gate,
         * which connects from the host: refused as the loopback is. */
        const char *own = netgate_addr_host_own(a);
        /* An IPv4-mapped address is lifted by its IPv4 address too. */
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        struct netgate_addr v4 = {.family = AF_INET};
        bool is_mapped = a->family == AF_INET6 && memcmp(a->bytes, mapped, 12) == 0;
        if (is_mapped)
                memcpy(v4.bytes, a->bytes + 12, 4);
        for (size_t i = 0; own && i < g->n_allow_private; i++)
                if (netgate_cidr_contains(&g->allow_private[i], a) ||
                    (is_mapped && netgate_cidr_contains(&g->allow_private[i], &v4)))
                        own = NULL;
        return own;
}

void netgate_emit(struct netgate *g, struct netgate_record *rec)
{
        rec->sandbox = g->sandbox;
        g->stats.requests++;
        if (STREQ(rec->decision, "allow"))
                g->stats.allowed++;
        else {
                g->stats.denied++;
                emit_refusal(g, rec);
                return;
        }
        if (g->recorder)
                g->recorder(g->recorder_ud, rec);
}

void netgate_conn_count(struct netgate *g, int delta)
{
        if (delta > 0) {
                g->n_conns++;
                g->stats.connections++;
                if (g->n_conns >= NETGATE_MAX_CONNECTIONS)
                        netgate_pause_listeners(g);
        } else {
                g->n_conns--;
                netgate_resume_listeners(g);
        }
        g->stats.active = g->n_conns;
}

const char *netgate_budget_take(struct netgate *g)
{
        if (g->closed)
                return "budget_refusals";
        if (g->budget.requests && g->requests_used >= g->budget.requests)
                return "budget_requests";
        if (budget_bytes_exhausted(g))
                return "budget_bytes";
        g->requests_used++;
        return NULL;
}

const char *netgate_budget_rule(const char *spent)
{
        return STREQ(spent, "budget_requests")   ? "network.budget.requests"
               : STREQ(spent, "budget_refusals") ? "network.budget.refusals"
                                                 : "network.budget.bytes";
}

size_t netgate_budget_allows(const struct netgate *g, size_t want)
{
        return budget_room(g, want);
}

void netgate_count_bytes(struct netgate *g, bool up, size_t n)
{
        g->bytes_used += n;
        if (up)
                g->stats.bytes_up += n;
        else
                g->stats.bytes_down += n;
}

void netgate_setup_bufferevent(struct netgate *g, struct bufferevent *bev)
{
        bufferevent_setwatermark(bev, EV_READ, 0, NETGATE_BUF_HIGH);
        if (g->rate_group)
                bufferevent_add_to_rate_limit_group(bev, g->rate_group);
}

/* Writing at once. A bufferevent registers its write event (an epoll_ctl)
 * as soon as bytes are added to an empty output, and removes it (another)
 * once the output has drained: two system calls per answer on a keep-alive
 * connection, on each side. A plain socket bufferevent (no TLS, no rate
 * limit) with nothing queued is "held" while the gate adds what it has;
 * then the bytes are written at once, and the event is registered only
 * for what the socket did not take. The held state is the one libevent
 * keeps for an idle bufferevent (writing allowed, no event pending), less
 * the allowed flag, which push puts back. */
bool netgate_bev_hold(const struct netgate *g, struct bufferevent *bev)
{
        if (g->rate_group || !bev || !(bev->enabled & EV_WRITE) ||
            bufferevent_get_underlying(bev) || bufferevent_openssl_get_ssl(bev) ||
            bufferevent_getfd(bev) < 0 || evbuffer_get_length(bufferevent_get_output(bev)) ||
            event_pending(&bev->ev_write, EV_WRITE, NULL))
                return false;
        bev->enabled &= (short)~EV_WRITE;
        return true;
}

void netgate_bev_push(struct bufferevent *bev, bool held)
{
        if (!held)
                return;
        struct evbuffer *out = bufferevent_get_output(bev);
        if (evbuffer_get_length(out) > 0) {
                /* A socket bufferevent keeps its output's start frozen
                 * except while it writes itself. */
                evbuffer_unfreeze(out, 1);
                (void)evbuffer_write(out, bufferevent_getfd(bev));
                evbuffer_freeze(out, 1);
        }
        /* What is left (or an error, which the write event then reports)
         * goes the usual way. */
        if (evbuffer_get_length(out) > 0)
                bufferevent_enable(bev, EV_WRITE);
        else
                bev->enabled |= EV_WRITE;
}

/* A freed bufferevent is finalized later, from the loop: it leaves the
 * rate group now, so that the group can be freed before the loop runs
 * again (every class sets a rate). */
void netgate_bev_free(struct bufferevent *bev)
{
        if (!bev)
                return;
        bufferevent_remove_from_rate_limit_group(bev);
        bufferevent_free(bev);
}

const struct timeval *netgate_secs(struct timeval *tv, long s)
{
        tv->tv_sec = s;
        tv->tv_usec = 0;
        return tv;
}

void netgate_set_nodelay(int fd)
{
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}
