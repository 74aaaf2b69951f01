/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include "error.h"
#include "policy.h"

/* What both supervisors (airlock run's and a long-lived sandbox's) set up
 * around a sandbox: the audit log, the routes' secrets, the network gate. */

struct audit;
struct event_base;
struct netgate;
struct netgate_ca;
struct netgate_record;
struct secrets;

/* Expand every route template once, so that a missing secret is a setup
 * error naming it and every secret in use is known to the redactor before
 * the sandbox prints anything. */
int gates_check_routes(const struct policy *p, struct secrets *s, const char *sandbox,
                       const char *account, struct al_error *err);

/* Open the audit log with the secrets' redactor on every field. */
struct audit_options;
/* Open the audit log with the secrets' redactor on every field and the
 * rotation of rot (NULL: the defaults, audit.h). */
int gates_open_audit(const char *path, struct secrets *s, const struct audit_options *rot,
                     struct audit **ret, struct al_error *err);

/* Start the network gate on the listeners the spawner handed over (taking
 * the ones it uses: they are set to -1); the routes listener when the policy
 * has routes, their templates expanded from `s` (which must outlive the
 * gate) and `account`. */
int gates_start_netgate(struct event_base *base, const struct policy *p, const char *sandbox,
                        struct secrets *s, const char *account, const struct netgate_ca *ca,
                        int *listen_fds,
                        void (*recorder)(void *ud, const struct netgate_record *rec), void *ud,
                        struct netgate **ret, struct al_error *err);

struct sv_connect_notify;

/* Transparent mode: the gate's name server on *dns_fd, its relay on
 * *relay_fd and the connect() notifications on *notify_fd (each taken and
 * set to -1; -1 when pid 1 sent none: a kernel without the notification
 * keeps the proxy only). */
int gates_start_transparent(struct event_base *base, struct netgate *g, int *dns_fd, int *relay_fd,
                            int *notify_fd, struct sv_connect_notify **ret, struct al_error *err);
