/* SPDX-License-Identifier: Apache-2.0 */
/* The gate's decision on a connection caught in transparent mode
 * (transparent.h): the address back to the name the gate answered it for,
 * the rules on that name and port, the private ranges, the budgets. */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "netgate/dns.h"
#include "netgate/netgate-internal.h"
#include "netgate/parent.h"
#include "netgate/transparent.h"
#include "util.h"

struct find_ctx {
        struct netgate *g;
        uint16_t port;
        struct netgate_decision d;      /* the last name's decision */
        const struct netgate_route *rt; /* the name's terminating route */
        bool any;
};

static bool name_allows(void *ud, const char *name)
{
        struct find_ctx *f = ud;
        f->any = true;
        /* A route with "terminate" for the name and port comes first, as
         * for a CONNECT (proxy.c): the allow-list does not apply to it. */
        struct netgate_host h;
        SSL_CTX *ctx = NULL;
        if (f->g->routes && netgate_host_parse(name, strlen(name), &h) == 0) {
                f->rt = netgate_routes_terminating(f->g->routes, &h, f->port, &ctx);
                if (f->rt)
                        return true;
        }
        netgate_rules_decide(f->g->rules, name, strlen(name), f->port, &f->d);
        return f->d.allow;
}

static void deny(struct netgate_verdict *v, const char *reason, const char *rule)
{
        v->allow = false;
        v->reason = reason;
        snprintf(v->rule, sizeof(v->rule), "%s", rule ? rule : "");
}

void netgate_transparent_decide(struct netgate *g, const struct sockaddr *sa, socklen_t len,
                                bool stream, struct netgate_verdict *v)
{
        memset(v, 0, sizeof(*v));
        struct netgate_addr a;
        uint16_t port = 0;
        if (len >= sizeof(struct sockaddr_in) && sa->sa_family == AF_INET)
                port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
        else if (len >= sizeof(struct sockaddr_in6) && sa->sa_family == AF_INET6)
                port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
        v->port = port;
        if (netgate_addr_from_sockaddr(sa, len, &a) < 0) {
                snprintf(v->host, sizeof(v->host), "family %d", sa->sa_family);
                return deny(v, "address_type_not_supported", NULL);
        }
        /* An IPv4-mapped IPv6 address is the IPv4 address. */
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (a.family == AF_INET6 && memcmp(a.bytes, mapped, 12) == 0) {
                memmove(a.bytes, a.bytes + 12, 4);
                memset(a.bytes + 4, 0, 12);
                a.family = AF_INET;
        }
        v->addr = a;
        netgate_addr_format(&a, v->address);
        snprintf(v->host, sizeof(v->host), "%s", v->address);
        if (!stream)
                return deny(v, "not_stream", NULL);
        if (a.family != AF_INET)
                return deny(v, "ipv6_not_offered", NULL);

        struct find_ctx f = {.g = g, .port = port};
        const char *name = g->names ? netgate_names_find(g->names, &a, now_monotonic_us() / 1000000,
                                                         name_allows, &f)
                                    : NULL;
        if (name) {
                snprintf(v->host, sizeof(v->host), "%s", name);
        } else if (f.any) {
                /* Answered for names the rules do not allow on this port. */
                snprintf(v->host, sizeof(v->host), "%s", f.d.host.name);
                return deny(v, f.d.reason, f.d.rule ? f.d.rule->text : NULL);
        } else {
                /* Never answered by the gate: only an IP rule can allow it. */
                struct netgate_decision d;
                netgate_rules_decide(g->rules, v->address, strlen(v->address), port, &d);
                if (!d.allow)
                        return deny(v,
                                    d.reason && STREQ(d.reason, "ip_literal_not_listed")
                                        ? "not_resolved"
                                        : d.reason,
                                    d.rule ? d.rule->text : NULL);
        }
        const char *range = netgate_address_refused(g, &a);
        if (range)
                return deny(v, "private_address", range);
        if (name && f.rt) {
                /* Served by the relay, which terminates the TLS with the
                 * sandbox's CA; each request inside is a call through the
                 * route, counted by the route's budget. */
                snprintf(v->rule, sizeof(v->rule), "network.routes[%s].terminate", f.rt->name);
                v->relay = v->terminate = v->allow = true;
                return;
        }
        /* The direct path moves bytes the gate never sees. It is taken
         * where nothing needs the bytes: no byte budget and no rate (the
         * relay counts and paces), and no name whose TLS server name must
         * be checked (the relay's SNI check). So by default a connection
         * allowed by an IP rule goes direct and one allowed by a name goes
         * through the relay; network.directPath gives up the SNI check and
         * takes names direct too. A parent proxy that applies to the
         * connection takes it off the direct path: the host's own socket
         * would connect past the parent. */
        v->relay = !netgate_transparent_host_sockets(g) || (name && !g->direct_path) ||
                   netgate_parent_applies(g->parent, name ? name : v->address);
        const char *spent = netgate_budget_take(g);
        if (spent)
                return deny(v, spent, netgate_budget_rule(spent));
        v->allow = true;
}

bool netgate_transparent_host_sockets(const struct netgate *g)
{
        return !(g->relay_only || g->budget.bytes > 0 || g->rate_group);
}

void netgate_transparent_dns(struct netgate_verdict *v)
{
        memset(v, 0, sizeof(*v));
        (void)netgate_addr_parse("127.0.0.1", &v->addr);
        snprintf(v->address, sizeof(v->address), "127.0.0.1");
        snprintf(v->host, sizeof(v->host), "dns");
        v->port = 53;
        v->allow = v->relay = v->dns = true;
}

void netgate_transparent_record(struct netgate *g, const struct netgate_verdict *v,
                                const char *reason)
{
        struct netgate_record rec = {
            .protocol = "transparent",
            .host = v->host,
            .port = v->port,
            .address = v->address,
            .decision = v->allow ? "allow" : "deny",
            .reason = v->allow ? reason : v->reason,
            .rule = v->rule[0] ? v->rule : NULL,
        };
        netgate_emit(g, &rec);
}
