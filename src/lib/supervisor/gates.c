/* SPDX-License-Identifier: Apache-2.0 */
#include "audit.h"
#include "connect-notify.h"
#include "gates.h"
#include "netgate/netgate.h"
#include "netgate/transparent.h"
#include "secrets.h"
#include "spawn.h"
#include "util.h"

static struct secrets_vars route_vars(const char *sandbox, const char *account)
{
        return (struct secrets_vars){.run_id = sandbox, .run_attempt = "1", .sandbox_id = sandbox,
                                     .account = account ? account : ""};
}

int gates_check_routes(const struct policy *p, struct secrets *s, const char *sandbox,
                       const char *account, struct al_error *err)
{
        struct secrets_vars vars = route_vars(sandbox, account);
        for (size_t i = 0; s && i < p->n_routes; i++)
                for (size_t j = 0; j < p->routes[i].n_inject; j++) {
                        char *v = NULL;
                        int r = secrets_expand(s, p->routes[i].inject[j].value, &vars, &v, err);
                        free(v);
                        if (r < 0)
                                return al_error_wrap(err, "route %s, header %s", p->routes[i].name,
                                                     p->routes[i].inject[j].key);
                }
        return 0;
}

int gates_open_audit(const char *path, struct secrets *s, const struct audit_options *rot,
                     struct audit **ret, struct al_error *err)
{
        struct audit_options ao = {.sync = AUDIT_SYNC_BATCH};
        if (rot) {
                ao.rotate_size = rot->rotate_size;
                ao.rotate_keep = rot->rotate_keep;
        }
        struct redactor *redactor = s ? secrets_redactor(s) : NULL;
        if (redactor) {
                ao.redact = redactor_audit_hook;
                ao.redact_userdata = redactor;
        }
        return audit_open(path, &ao, ret, err);
}

int gates_start_netgate(struct event_base *base, const struct policy *p, const char *sandbox,
                        struct secrets *s, const char *account, const struct netgate_ca *ca,
                        int *listen_fds,
                        void (*recorder)(void *ud, const struct netgate_record *rec), void *ud,
                        struct netgate **ret, struct al_error *err)
{
        static const struct {
                enum spawn_listener which;
                enum netgate_proto proto;
        } listeners[] = {
                {SPAWN_LISTEN_HTTP, NETGATE_PROTO_HTTP},
                {SPAWN_LISTEN_SOCKS, NETGATE_PROTO_SOCKS5},
        };
        *ret = NULL;
        if (listen_fds[SPAWN_LISTEN_HTTP] < 0)
                return 0;
        struct netgate *g = netgate_new(base, p, sandbox, err);
        if (!g)
                return -EINVAL;
        if (ca)
                netgate_set_ca(g, ca);
        for (size_t i = 0; i < ARRAY_SIZE(listeners); i++) {
                int r = netgate_add_listener(g, listeners[i].proto, listen_fds[listeners[i].which], err);
                if (r < 0) {
                        netgate_free(g);
                        return r;
                }
                listen_fds[listeners[i].which] = -1;
        }
        if (p->n_routes > 0 && listen_fds[SPAWN_LISTEN_ROUTES] >= 0) {
                struct secrets_vars vars = route_vars(sandbox, account);
                int r = netgate_set_routes(g, p->routes, p->n_routes, s, &vars, err);
                if (r >= 0)
                        r = netgate_add_listener(g, NETGATE_PROTO_ROUTES,
                                                 listen_fds[SPAWN_LISTEN_ROUTES], err);
                if (r < 0) {
                        netgate_free(g);
                        return r;
                }
                listen_fds[SPAWN_LISTEN_ROUTES] = -1;
        }
        netgate_set_recorder(g, recorder, ud);
        *ret = g;
        return 0;
}

int gates_start_transparent(struct event_base *base, struct netgate *g, int *dns_fd, int *relay_fd,
                            int *notify_fd, struct sv_connect_notify **ret, struct al_error *err)
{
        *ret = NULL;
        if (*dns_fd >= 0) {
                int r = netgate_add_dns(g, *dns_fd, err);
                if (r < 0)
                        return r;
                *dns_fd = -1;
        }
        if (*relay_fd >= 0) {
                int r = netgate_add_relay_listener(g, *relay_fd, err);
                if (r < 0)
                        return r;
                *relay_fd = -1;
        }
        if (*notify_fd < 0)
                return 0;
        *ret = sv_connect_notify_new(base, g, *notify_fd, err);
        *notify_fd = -1; /* taken, even on failure */
        return *ret ? 0 : -ENOMEM;
}
