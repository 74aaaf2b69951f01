/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/* The network gate: an HTTP/1.1 forward proxy (absolute-URI requests and
 * CONNECT tunnels) and a SOCKS5 CONNECT server, run on the supervisor's event
 * loop, accepting on listeners that live in the sandbox's network namespace.
 * Every request is checked against the policy's allow and deny rules, its
 * name is resolved by the gate, every address is checked against the private
 * ranges, and the gate connects to exactly the address it checked. Routes
 * (netgate/route.h) forward origin-form requests to configured upstreams. */

struct event_base;
struct policy;
struct policy_route;
struct netgate;
struct secrets;
struct secrets_vars;

enum netgate_proto {
        NETGATE_PROTO_HTTP,
        NETGATE_PROTO_SOCKS5,
        NETGATE_PROTO_ROUTES, /* http://127.0.0.1:8080/<route>/...; needs netgate_set_routes() */
};

struct netgate_header {
        const char *name;
        const char *value;
};

#define NETGATE_MAX_CONNECTIONS 256

/* One per decision: denied requests when refused, allowed ones when they end
 * (an HTTP request when its response is done, a tunnel when it closes).
 * Strings are valid during the call only. */
struct netgate_record {
        const char *sandbox;
        const char *protocol; /* "http", "connect", "socks5" or "route" */
        const char *method;   /* HTTP method; NULL for SOCKS5 */
        const char *host;     /* canonical; escaped raw bytes when refused as bad_host */
        uint16_t port;
        const char *address;  /* the address connected to or refused; "" when none */
        const char *decision; /* "allow" or "deny" */
        /* Machine-readable. For "deny": not_allowed, denied_by_rule, bad_host,
         * port_not_allowed, ip_literal_not_listed, private_address,
         * budget_requests, budget_bytes, bad_request, head_too_large,
         * unsupported, command_not_supported, address_type_not_supported,
         * cleartext_secret (a secret would go into plain HTTP off the host,
         * cleartext.c).
         * For "allow": NULL when it completed, else how it ended early:
         * dns_failed, upstream_failed, budget_bytes, client_closed, timeout,
         * shutdown, revoked (the rules changed and refuse it now). */
        const char *reason;
        const char *rule; /* the rule (or private range, or budget) that decided; NULL if none */
        /* Through network.parentProxy: "address" (the parent was handed
         * the address the gate checked) or "name" (parentProxySendNames:
         * the parent resolved the name again); NULL: direct. */
        const char *parent;
        int status;          /* HTTP status sent to the client, or the SOCKS5 reply code */
        uint64_t bytes_up;   /* client to upstream */
        uint64_t bytes_down; /* upstream to client */
        uint64_t duration_ms;

        /* Protocol "route" only; NULL and 0 otherwise. Reasons there also:
         * unknown_route, bad_path, bad_inject_value, inject_failed (deny),
         * upstream_tls (allow). */
        const char *route;    /* the route's name; escaped raw bytes when unknown */
        const char *path;     /* path and query below the route; escaped */
        const char *upstream; /* the route's upstream URL */
        const struct netgate_header *recorded; /* response headers the route's "record" names */
        size_t n_recorded;
        /* The host tool whose call sent this request (netgate_route_fetch());
         * NULL for the sandbox's own requests. */
        const char *tool;

        /* Refusals are aggregated: the first 8 of a kind (protocol, host,
         * port, reason, rule, route, status) in a window of
         * NETGATE_REFUSAL_WINDOW_MS are recorded one by one with count 0;
         * the rest are counted and recorded when the window ends as one
         * record with count = how many it stands for.
         * Protocol "gate", reason "budget_refusals": the refusal budget
         * (network.budget.refusals) is spent, count = the refusals made; the
         * gate then closes every new connection without a record. */
        uint64_t count;

        /* The record closes something that has already ended (a request
         * answered, a tunnel closed, refusals counted over a window):
         * nothing waits for its line, so the recorder may write it with the
         * other closing records of the same event-loop turn, in one append
         * at the end of that turn. false: the line comes before what it
         * records (a refusal's answer, a socket handed over, a terminated
         * connection's start), and the recorder writes it at once. */
        bool ended;
};

#define NETGATE_REFUSAL_WINDOW_MS 1000

struct netgate_stats {
        uint64_t connections; /* client connections accepted */
        uint64_t active;      /* client connections open now */
        uint64_t requests;    /* decisions: allowed + denied */
        uint64_t allowed;
        uint64_t denied;
        uint64_t bytes_up;
        uint64_t bytes_down;
        uint64_t closed; /* connections closed unanswered: the refusal budget is spent */
};

/* The gate copies what it needs from the policy (rules, allowPrivate, hosts,
 * budget); errors name the policy field. */
struct netgate *netgate_new(struct event_base *base, const struct policy *p, const char *sandbox_id,
                            struct al_error *err);

/* Accept on listen_fd, a bound, listening stream socket. On success the gate
 * owns it and closes it in netgate_free(); on failure the caller still does. */
int netgate_add_listener(struct netgate *g, enum netgate_proto proto, int listen_fd,
                         struct al_error *err);

void netgate_set_recorder(struct netgate *g, void (*fn)(void *ud, const struct netgate_record *rec),
                          void *ud);

/* Serve these routes on NETGATE_PROTO_ROUTES listeners (call before adding
 * one). Route strings are copied; `s` must outlive the gate (NULL: secrets
 * from the environment only), `vars` is copied. Errors name the route. */
int netgate_set_routes(struct netgate *g, const struct policy_route *routes, size_t n,
                       const struct secrets *s, const struct secrets_vars *vars,
                       struct al_error *err);

/* The sandbox's TLS authority (netgate/ca.h), for the routes with
 * "terminate": call before netgate_set_routes(). `ca` must outlive the
 * gate. */
struct netgate_ca;
void netgate_set_ca(struct netgate *g, const struct netgate_ca *ca);

/* Sentinel secrets (netgate/sentinel.h): in request heads to one of
 * `hosts`, `placeholder` (NETGATE_SENTINEL_PREFIX and 32 hex digits, what
 * the sandbox's environment holds) is replaced by the value of the secret
 * `secret` (from `s`, else the host's environment). Call before
 * netgate_set_routes(); `s` must outlive the gate. Errors name the
 * sentinel's variable, never a value. */
struct netgate_sentinel_def {
        const char *env;
        const char *placeholder;
        const char *secret;
        char *const *hosts;
        size_t n_hosts;
        /* The sentinel's "cleartext": plain HTTP off the host may carry the
         * value to every listed host, or to these "HOST:PORT" only; else
         * such a request is refused (cleartext_secret). */
        bool cleartext;
        char *const *cleartext_at;
        size_t n_cleartext_at;
};
int netgate_set_sentinels(struct netgate *g, const struct netgate_sentinel_def *defs, size_t n,
                          const struct secrets *s, struct al_error *err);

/* ---- a request of the host's own, through a route ----
 *
 * The host (the tool gateway's HTTP runner) sends a request it built through
 * one of the routes: it is served exactly as a sandbox's request to
 * http://127.0.0.1:8080/<route><path> is (over a socket pair into the
 * routes' front-end): the route's inject, strip and record rules, its CA
 * file, the private address check, the connect and TLS verification, the
 * gate's budgets, a "route" record through the gate's recorder, marked with
 * `tool`. Injected values are scrubbed from the response as for the sandbox.
 * The gate's own refusals come back as its answers (403 with
 * X-Airlock-Denied, 502 with X-Airlock-Error, ...), like any status. */

#define NETGATE_FETCH_BODY_MAX (4u << 20) /* request body */

struct netgate_fetch_request {
        const char *route;  /* the route's name */
        const char *method; /* an HTTP token: "GET", "POST", ... */
        /* Below the route: "", "/..." or "?...": printable ASCII without
         * spaces, already percent-encoded. The route's path check applies. */
        const char *path;
        const void *body; /* NULL: no body */
        size_t body_len;
        const struct netgate_header *headers; /* extra request fields */
        size_t n_headers;
        uint64_t response_max; /* response body bytes; more fails with -EFBIG */
        uint32_t timeout_ms;   /* the whole request; 0 is refused */
        const char *tool;      /* the record's "tool" */
};

struct netgate_fetch_response {
        int status;
        const struct netgate_header *headers; /* as the sandbox would see them */
        size_t n_headers;
        const char *body; /* NUL-terminated after body_len bytes */
        size_t body_len;
        /* The gate answered itself: the value of its X-Airlock-Denied or
         * X-Airlock-Error field (the record's reason), else NULL. */
        const char *gate_reason;
};

struct netgate_fetch;

/* `err` 0 with the response, or -ETIMEDOUT, -EFBIG (the body is over
 * response_max), -EBADMSG (a malformed answer), -ECONNRESET (the
 * connection ended before the answer did), -ENOMEM. Called once, from the
 * loop, unless the fetch was canceled first; the fetch is freed when it
 * returns. */
typedef void (*netgate_fetch_cb)(void *ud, int err, const struct netgate_fetch_response *resp);

/* Start the request. -ENOENT: the gate serves no routes; -EINVAL: a bad
 * method, path, header or timeout (err names it; no value is shown);
 * -EMSGSIZE: the body is over NETGATE_FETCH_BODY_MAX. *ret is the fetch in
 * flight, until `cb` or netgate_fetch_cancel(). */
int netgate_route_fetch(struct netgate *g, const struct netgate_fetch_request *req,
                        netgate_fetch_cb cb, void *ud, struct netgate_fetch **ret,
                        struct al_error *err);

/* Stop a fetch in flight; its callback is not called. NULL is fine. */
void netgate_fetch_cancel(struct netgate_fetch *f);

/* ---- asking the operator (network.onUnlisted "ask") ----
 *
 * A request the lists do not name (reasons not_allowed, port_not_allowed,
 * ip_literal_not_listed; never denied_by_rule or bad_host) is handed to the
 * asker instead of refused. The connection waits, unread and without its
 * head timeout (the ask has its own), and the loop goes on serving every
 * other connection. */

enum netgate_ask_answer {
        NETGATE_ASK_ALLOW, /* decided already (remembered): go on */
        NETGATE_ASK_DENY,  /* decided already, or refused: *ret_reason says why */
        NETGATE_ASK_HELD,  /* `done` will be called, unless canceled first */
};

struct netgate_ask {
        const char *host; /* canonical */
        uint16_t port;
        const char *protocol; /* "http", "connect" or "socks5" */
};

typedef void (*netgate_ask_done_fn)(void *conn, bool allow, const char *reason);

struct netgate_asker {
        enum netgate_ask_answer (*ask)(void *ud, const struct netgate_ask *q,
                                       netgate_ask_done_fn done, void *conn, uint64_t *ret_token,
                                       const char **ret_reason);
        /* The connection closed while held: `done` must not be called. */
        void (*cancel)(void *ud, uint64_t token);
        void *ud;
};

/* A held request decided again on the rules in force now (a live grant
 * or revoke may have changed them while it waited): NULL when an approval
 * may still let it through (the rules allow it, or it is still only not
 * listed); else the reason the rules refuse it now ("denied_by_rule",
 * "bad_host"), the rule's text copied to `rule` (empty when none). */
const char *netgate_ask_recheck(const struct netgate *g, const char *host, uint16_t port,
                                char *rule, size_t rule_size);

/* Ask through `a` (copied) when the policy says "ask"; NULL: refuse. */
void netgate_set_asker(struct netgate *g, const struct netgate_asker *a);

/* Resolve through this name server ("IP" or "IP:port") instead of the ones in
 * /etc/resolv.conf. */
int netgate_set_nameserver(struct netgate *g, const char *server, struct al_error *err);

/* Replace the allow and deny rules (and, when `budget` is given, the
 * request, byte and refusal budgets; not the rate) of a running gate: the
 * next decision uses them, and what is open is decided again at once.
 * Each CONNECT or SOCKS5 tunnel, request in flight, transparent relay (or
 * relay announced and not yet accepted) the new rules refuse is closed,
 * recorded as an allowed connection ended with reason "revoked"; an idle
 * kept upstream they refuse is dropped. What they still allow goes on. On
 * failure (a rule that does not parse, err names it) nothing changes. */
struct policy_budget;
int netgate_set_rules(struct netgate *g, char *const *allow, size_t n_allow, char *const *deny,
                      size_t n_deny, const struct policy_budget *budget, struct al_error *err);

void netgate_get_stats(const struct netgate *g, struct netgate_stats *ret);

/* Closes every connection (recording the allowed ones still open) and the
 * listeners; cancels the fetches in flight. */
struct netgate *netgate_free(struct netgate *g);
