/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "netgate/addr.h"
#include "netgate/dns.h"
#include "netgate/netgate-internal.h"
#include "netgate/netgate.h"
#include "netgate/rules.h"
#include "netgate/upstream.h"
#include "netgate/http.h"
#include "netgate/parent.h"
#include "policy.h"
#include "secrets.h"
#include "util.h"

/* The network gate's public side (netgate.h): creating it from the policy,
 * its listeners, and accepting. An accepted connection goes to its
 * front-end: proxy.c (HTTP, CONNECT, SOCKS5) or route.c (routes). */

#define RATE_TICK_MS    100
#define CLOSED_TICK_MS  100 /* past the refusal budget: at most CLOSED_PER_TICK */
#define CLOSED_PER_TICK 50  /* connections closed per tick, then the listeners pause */

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
                      void *ud)
{
        struct netgate_listener *lst = ud;
        struct netgate *g = lst->g;
        if (g->n_conns >= NETGATE_MAX_CONNECTIONS) {
                close(fd);
                netgate_pause_listeners(g);
                return;
        }
        if (g->closed) {
                /* Past the refusal budget a connection costs the host one
                 * accept and one close, and at most CLOSED_PER_TICK of them
                 * per tick: the listeners pause for the rest of it. */
                uint64_t now = now_monotonic_us();
                close(fd);
                g->stats.closed++;
                if (now - g->closed_tick_us >= CLOSED_TICK_MS * 1000) {
                        g->closed_tick_us = now;
                        g->closed_in_tick = 0;
                }
                if (++g->closed_in_tick >= CLOSED_PER_TICK) {
                        uint64_t left = g->closed_tick_us + CLOSED_TICK_MS * 1000 - now;
                        struct timeval wait = {.tv_sec = 0, .tv_usec = (suseconds_t)left};
                        netgate_pause_listeners(g);
                        evtimer_add(g->resume_timer, &wait);
                }
                return;
        }
        if (lst->proto == NETGATE_PROTO_ROUTES) {
                netgate_routes_accept(g->routes, fd, NULL);
                return;
        }
        netgate_proxy_accept(g, lst->proto, fd);
}

static void resume_cb(evutil_socket_t fd, short what, void *ud)
{
        netgate_resume_listeners(ud);
}

static void accept_error_cb(struct evconnlistener *l, void *ud)
{
        struct netgate_listener *lst = ud;
        struct netgate *g = lst->g;
        int err = EVUTIL_SOCKET_ERROR();
        /* Out of descriptors or memory: the listener would report the same
         * pending connection in a busy loop. Back off for a second. */
        if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
                struct timeval tv;
                netgate_pause_listeners(g);
                evtimer_add(g->resume_timer, netgate_secs(&tv, 1));
        }
}

/* ---- public ---- */

struct netgate *netgate_new(struct event_base *base, const struct policy *p, const char *sandbox_id,
                            struct al_error *err)
{
        if (!base || !p) {
                al_error_set(err, EINVAL, "creating the network gate");
                return NULL;
        }
        struct netgate *g = xcalloc(1, sizeof(*g));
        g->base = base;
        g->sandbox = xstrdup(sandbox_id ? sandbox_id : "");
        if (netgate_rules_new(p->net_allow, p->n_net_allow, p->net_deny, p->n_net_deny, &g->rules,
                              err) < 0)
                return netgate_free(g);

        g->allow_private = xcalloc(p->n_net_allow_private, sizeof(*g->allow_private));
        for (size_t i = 0; i < p->n_net_allow_private; i++) {
                if (netgate_cidr_parse(p->net_allow_private[i], &g->allow_private[i]) < 0) {
                        char esc[128];
                        const char *s = p->net_allow_private[i] ? p->net_allow_private[i] : "";
                        netgate_escape(s, strlen(s), esc, sizeof(esc));
                        al_error_set(err, 0,
                                     "network.allowPrivate[%zu] \"%s\": not an address or CIDR "
                                     "range",
                                     i, esc);
                        return netgate_free(g);
                }
        }
        g->n_allow_private = p->n_net_allow_private;

        g->hosts = xcalloc(p->n_net_hosts, sizeof(*g->hosts));
        for (size_t i = 0; i < p->n_net_hosts; i++) {
                const struct policy_kv *kv = &p->net_hosts[i];
                struct netgate_host h;
                char esc[128];
                const char *k = kv->key ? kv->key : "";
                netgate_escape(k, strlen(k), esc, sizeof(esc));
                if (netgate_host_parse(k, strlen(k), &h) < 0 || h.kind != NETGATE_HOST_NAME) {
                        al_error_set(err, 0, "network.hosts \"%s\": not a host name", esc);
                        return netgate_free(g);
                }
                if (netgate_addr_parse(kv->value, &g->hosts[i].addr) < 0) {
                        al_error_set(err, 0, "network.hosts \"%s\": not an IP address", esc);
                        return netgate_free(g);
                }
                memcpy(g->hosts[i].name, h.name, sizeof(h.name));
        }
        g->n_hosts = p->n_net_hosts;

        if (p->net_parent_proxy && netgate_parent_new(p->net_parent_proxy, p->net_no_proxy,
                                                      p->n_net_no_proxy, &g->parent, err) < 0)
                return netgate_free(g);
        if (g->parent)
                g->parent->send_names = p->net_parent_send_names;
        /* The parent is reached as any upstream is: a private address only
         * when allowPrivate lifts it (a policy is not always the host's). */
        const char *range = g->parent ? netgate_address_refused(g, &g->parent->addr) : NULL;
        if (range) {
                char a[NETGATE_ADDR_STRLEN];
                netgate_addr_format(&g->parent->addr, a);
                al_error_set(err, 0,
                             "network.parentProxy: %s is at %s (%s), not in network.allowPrivate; "
                             "add it there",
                             g->parent->host, a, range);
                return netgate_free(g);
        }
        g->ask = p->net_ask;
        g->direct_path = p->net_direct_path;
        /* Under gvisor every connection is the Sentry's, and runsc's own
         * Unix connects need their real peer (see
         * netgate_transparent_host_sockets): no host socket is handed out. */
        g->relay_only = p->tier == POLICY_TIER_GVISOR;
        if (p->n_net_deny_reasons) {
                g->deny_reasons = xcalloc(p->n_net_deny_reasons, sizeof(*g->deny_reasons));
                for (size_t i = 0; i < p->n_net_deny_reasons; i++) {
                        g->deny_reasons[i].key = xstrdup(p->net_deny_reasons[i].key);
                        g->deny_reasons[i].value = xstrdup(p->net_deny_reasons[i].value);
                }
                g->n_deny_reasons = p->n_net_deny_reasons;
        }

        g->budget = p->budget;
        if (g->budget.rate > 0) {
                uint64_t per_tick = g->budget.rate / (1000 / RATE_TICK_MS);
                if (per_tick == 0)
                        per_tick = 1;
                if (per_tick > EV_RATE_LIMIT_MAX)
                        per_tick = EV_RATE_LIMIT_MAX;
                struct timeval tick = {0, RATE_TICK_MS * 1000};
                g->rate_cfg = ev_token_bucket_cfg_new((size_t)per_tick, (size_t)per_tick,
                                                      (size_t)per_tick, (size_t)per_tick, &tick);
                if (g->rate_cfg)
                        g->rate_group = bufferevent_rate_limit_group_new(base, g->rate_cfg);
                if (!g->rate_group) {
                        al_error_set(err, ENOMEM, "network.budget.rate");
                        return netgate_free(g);
                }
        }
        g->resume_timer = evtimer_new(base, resume_cb, g);
        g->kinds_timer = evtimer_new(base, netgate_refusals_tick, g);
        if (!g->resume_timer || !g->kinds_timer) {
                al_error_set(err, ENOMEM, "creating the network gate");
                return netgate_free(g);
        }
        return g;
}

int netgate_add_listener(struct netgate *g, enum netgate_proto proto, int listen_fd,
                         struct al_error *err)
{
        int accepting = 0;
        socklen_t len = sizeof(accepting);
        if (g->n_listeners >= NETGATE_LISTENERS_MAX)
                return al_error_set(err, ENOSPC, "adding a gate listener");
        if (proto != NETGATE_PROTO_HTTP && proto != NETGATE_PROTO_SOCKS5 &&
            !(proto == NETGATE_PROTO_ROUTES && g->routes))
                return al_error_set(err, EINVAL, "adding a gate listener");
        if (getsockopt(listen_fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) < 0)
                return al_error_set(err, errno, "adding gate listener fd %d", listen_fd);
        if (!accepting)
                return al_error_set(err, EINVAL, "adding gate listener fd %d: not listening",
                                    listen_fd);
        int fl = fcntl(listen_fd, F_GETFL);
        if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
            fcntl(listen_fd, F_SETFD, FD_CLOEXEC) < 0)
                return al_error_set(err, errno, "adding gate listener fd %d", listen_fd);

        struct netgate_listener *lst = &g->listeners[g->n_listeners];
        lst->g = g;
        lst->proto = proto;
        lst->l = evconnlistener_new(g->base, accept_cb, lst,
                                    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, listen_fd);
        if (!lst->l)
                return al_error_set(err, ENOMEM, "adding gate listener fd %d", listen_fd);
        evconnlistener_set_error_cb(lst->l, accept_error_cb);
        if (g->paused)
                evconnlistener_disable(lst->l);
        g->n_listeners++;
        return 0;
}

void netgate_set_recorder(struct netgate *g, void (*fn)(void *ud, const struct netgate_record *rec),
                          void *ud)
{
        g->recorder = fn;
        g->recorder_ud = ud;
}

int netgate_set_routes(struct netgate *g, const struct policy_route *routes, size_t n,
                       const struct secrets *s, const struct secrets_vars *vars,
                       struct al_error *err)
{
        struct netgate_routes *rs = NULL;
        int r = netgate_routes_new(g, g->base, routes, n, s, vars, &rs, err);
        if (r < 0)
                return r;
        netgate_routes_free(g->routes);
        g->routes = rs;
        return 0;
}

int netgate_set_sentinels(struct netgate *g, const struct netgate_sentinel_def *defs, size_t n,
                          const struct secrets *s, struct al_error *err)
{
        netgate_sentinels_clear(&g->sentinels);
        g->sentinels.v = xcalloc(n + 1, sizeof(*g->sentinels.v));
        for (size_t i = 0; i < n; i++) {
                const struct netgate_sentinel_def *d = &defs[i];
                const char *v = secrets_get(s, d->secret);
                if (!v)
                        return al_error_set(err, 0,
                                            "sentinel %s: the secret %s is not in --secrets nor in "
                                            "the host's environment",
                                            d->env, d->secret);
                if (!v[0] || strlen(v) > NETGATE_SENTINEL_VALUE_MAX || !netgate_http_value_ok(v))
                        return al_error_set(err, 0,
                                            "sentinel %s: the secret %s is empty, over %d bytes, "
                                            "or holds control characters (a stray newline?)",
                                            d->env, d->secret, NETGATE_SENTINEL_VALUE_MAX);
                if (strlen(d->placeholder) != NETGATE_SENTINEL_LEN ||
                    strncmp(d->placeholder, NETGATE_SENTINEL_PREFIX,
                            sizeof(NETGATE_SENTINEL_PREFIX) - 1) != 0)
                        return al_error_set(err, EINVAL, "sentinel %s: not a placeholder", d->env);
                struct netgate_sentinel *t = &g->sentinels.v[g->sentinels.n++];
                t->placeholder = xstrdup(d->placeholder);
                t->value = xstrdup(v);
                t->value_len = strlen(v);
                t->hosts = xcalloc(d->n_hosts + 1, sizeof(*t->hosts));
                for (size_t j = 0; j < d->n_hosts; j++)
                        t->hosts[j] = xstrdup(d->hosts[j]);
                t->n_hosts = d->n_hosts;
                t->env = xstrdup(d->env);
                t->cleartext = d->cleartext;
                t->cleartext_at = xcalloc(d->n_cleartext_at + 1, sizeof(*t->cleartext_at));
                for (size_t j = 0; j < d->n_cleartext_at; j++)
                        t->cleartext_at[j] = xstrdup(d->cleartext_at[j]);
                t->n_cleartext_at = d->n_cleartext_at;
        }
        g->secrets = s;
        return 0;
}

void netgate_set_ca(struct netgate *g, const struct netgate_ca *ca)
{
        g->ca = ca;
}

int netgate_set_nameserver(struct netgate *g, const char *server, struct al_error *err)
{
        int r;
        if (!netgate_resolver(g, false))
                return al_error_set(err, ENOMEM, "setting the gate's name server");
        evdns_base_clear_nameservers_and_suspend(g->dns);
        r = evdns_base_nameserver_ip_add(g->dns, server);
        evdns_base_resume(g->dns);
        if (r != 0)
                return al_error_set(err, 0, "name server \"%s\": not an IP address[:port]",
                                    server ? server : "");
        return 0;
}

int netgate_set_rules(struct netgate *g, char *const *allow, size_t n_allow, char *const *deny,
                      size_t n_deny, const struct policy_budget *budget, struct al_error *err)
{
        struct netgate_rules *r = NULL;
        int ret = netgate_rules_new(allow, n_allow, deny, n_deny, &r, err);
        if (ret < 0)
                return ret;
        netgate_rules_free(g->rules);
        g->rules = r;
        if (budget) {
                g->budget.requests = budget->requests;
                g->budget.bytes = budget->bytes;
                g->budget.refusals = budget->refusals;
        }
        /* What is open was decided on the old rules: whatever the new ones
         * refuse is closed now, not at its next connection. */
        netgate_proxy_recheck(g);
        netgate_relay_recheck(g);
        return 0;
}

void netgate_get_stats(const struct netgate *g, struct netgate_stats *ret)
{
        *ret = g->stats;
        ret->active = g->n_conns;
}

struct netgate *netgate_free(struct netgate *g)
{
        if (!g)
                return NULL;
        netgate_transparent_free(g);
        netgate_fetch_cancel_all(g);
        netgate_proxy_close_all(g);
        netgate_mitm_close_all(g);
        netgate_sentinels_clear(&g->sentinels);
        g->parent = netgate_parent_free(g->parent);
        g->routes = netgate_routes_free(g->routes);
        /* What was counted and not yet recorded. */
        netgate_refusals_flush(g, true);
        if (g->kinds_timer)
                event_free(g->kinds_timer);
        for (size_t i = 0; i < g->n_listeners; i++)
                evconnlistener_free(g->listeners[i].l);
        if (g->resume_timer)
                event_free(g->resume_timer);
        if (g->dns)
                evdns_base_free(g->dns, 1);
        if (g->rate_group)
                bufferevent_rate_limit_group_free(g->rate_group);
        if (g->rate_cfg)
                ev_token_bucket_cfg_free(g->rate_cfg);
        netgate_rules_free(g->rules);
        netgate_names_free(g->names);
        free(g->allow_private);
        free(g->hosts);
        for (size_t i = 0; i < g->n_deny_reasons; i++) {
                free(g->deny_reasons[i].key);
                free(g->deny_reasons[i].value);
        }
        free(g->deny_reasons);
        free(g->sandbox);
        free(g);
        return NULL;
}

void netgate_set_asker(struct netgate *g, const struct netgate_asker *a)
{
        if (a)
                g->asker = *a;
        else
                memset(&g->asker, 0, sizeof(g->asker));
}

bool netgate_reason_askable(const char *reason)
{
        return reason && (STREQ(reason, "not_allowed") || STREQ(reason, "port_not_allowed") ||
                          STREQ(reason, "ip_literal_not_listed"));
}

const char *netgate_ask_recheck(const struct netgate *g, const char *host, uint16_t port,
                                char *rule, size_t rule_size)
{
        struct netgate_decision d;
        if (rule_size)
                rule[0] = '\0';
        netgate_rules_decide(g->rules, host ? host : "", host ? strlen(host) : 0, port, &d);
        if (d.allow || (g->ask && netgate_reason_askable(d.reason)))
                return NULL;
        if (d.rule && rule_size)
                snprintf(rule, rule_size, "%s", d.rule->text);
        return d.reason ? d.reason : "not_allowed";
}

const char *netgate_deny_reason(const struct netgate *g, const char *host)
{
        return policy_deny_reason_in(g->deny_reasons, g->n_deny_reasons, host);
}
