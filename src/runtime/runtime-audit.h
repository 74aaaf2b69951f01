/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>

#include "runtime.h"
#include "spec.h"

struct audit;
struct secrets;

/* The node's audit log for containers (AIRLOCK_RUNTIME_AUDIT, else the
 * caller's default audit path): each event names the container and, from
 * the io.kubernetes.* annotations, its pod and namespace. */
struct rt_audit {
        struct audit *a;
        char *sandbox; /* "oci:<id>" */
        char *pod, *ns, *container;
        struct al_error open_err;
};

/* Opened in the keeper: a log that cannot be opened fails the create.
 * `secrets` (may be NULL): their values are redacted from every line. */
int rt_audit_open(struct rt_audit *ra, const struct rt_globals *g, const struct oci_spec *s,
                  const char *id, struct secrets *secrets);
int rt_audit_event(struct rt_audit *ra, const char *kind, const char *message);
/* An event with these fields (taken). */
int rt_audit_fields(struct rt_audit *ra, const char *kind, json_t *fields);
void rt_audit_exit(struct rt_audit *ra, int status);
