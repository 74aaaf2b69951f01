/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"
#include "spec.h"

/* What spec.c and spec-linux.c share: strict JSON accessors, each error
 * naming the key ("where.key"). */
#define SPEC_STRV_MAX 4096
#define SPEC_STR_MAX  (64 * 1024)

int spec_check_keys(json_t *o, const char *where, const char *const *known, struct al_error *err);
int spec_refuse_nonempty(json_t *o, const char *key, const char *where, const char *why,
                         struct al_error *err);
int spec_get_string(json_t *o, const char *key, const char *where, bool required, const char **ret,
                    struct al_error *err);
int spec_get_u64(json_t *o, const char *key, const char *where, uint64_t max, bool *ret_set,
                 uint64_t *ret, struct al_error *err);
int spec_get_strv(json_t *o, const char *key, const char *where, char ***ret, struct al_error *err);
int spec_parse_linux(json_t *o, struct oci_spec *s, struct al_error *err);

/* Whether the spec's pod may name the installed policy `name` (p, as
 * loaded from policy_dir): a policy that holds the node's power (routes,
 * tool definitions, host mounts, the direct path) only from a namespace
 * the node lists in policy_dir/NAME.namespaces, and any policy only from
 * a listed namespace where that file exists. A spec of no pod (no CRI
 * namespace annotation) is the node's own. 0, or -EPERM with err saying
 * what to do. */
struct policy;
int oci_spec_policy_access(const struct oci_spec *s, const char *policy_dir, const char *name,
                           const struct policy *p, struct al_error *err);
