/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>

/* Shared by the policy module's files (policy.c, load*.c, check.c,
 * numbers.c, json.c, ...); nothing outside src/lib/policy includes it. */
#include <stddef.h>
#include <stdint.h>

#include "policy.h"
#include "util.h"

#define UID_MAX_INSIDE 65535

/* PID_MAX_LIMIT on 64-bit kernels. */
#define PIDS_MAX 4194304
/* The kernel's default fs.nr_open, the ceiling of RLIMIT_NOFILE. */
#define OPEN_FILES_MAX 1048576
#define CPUS_MILLI_MAX (1024 * 1000)
/* The smallest limits a sandbox can start under; below them the kernel or
 * the setup itself refuses later, with a message that no longer names the
 * field. pids: pid 1 and the command. cpus: the kernel's smallest CFS quota
 * is 1 ms per 100 ms period. openFiles: the setup holds stdio, its error
 * channel, a Landlock ruleset and one path at once, and the command's loader
 * needs a few more. memory: the setup alone is charged about 512 KiB. */
#define PIDS_MIN       2
#define CPUS_MILLI_MIN 10
#define OPEN_FILES_MIN 8
#define MEMORY_MIN     (1ULL << 20)

#define CLASS_NAMES "small, medium, large, xlarge"

/* Indexed by the enums in policy.h. */
extern const char *const policy_workspace_modes[3];
extern const char *const policy_read_modes[2];
extern const char *const policy_net_modes[2];
extern const char *const policy_tier_names_v[POLICY_TIER_COUNT_];

enum value_kind {
        KIND_DURATION, /* milliseconds */
        KIND_SECONDS,  /* parsed as a duration, stored in whole seconds rounded up */
        KIND_SIZE,     /* bytes */
        KIND_COUNT,
        KIND_CPUS, /* thousandths of a cpu */
};

struct limit_desc {
        const char *key;
        unsigned bit;
        enum value_kind kind;
        size_t offset;
        uint64_t min, max;
};

extern const struct limit_desc policy_limit_descs[];
extern const size_t policy_n_limit_descs;

uint64_t *policy_limit_field(struct policy_limits *l, const struct limit_desc *d);
/* limits.io's members: offsets into struct policy_io. */
extern const struct limit_desc policy_io_descs[];
extern const size_t policy_n_io_descs;
uint64_t *policy_io_field(struct policy_io *io, const struct limit_desc *d);
const struct limit_desc *policy_io_desc_find(const char *key);
const struct limit_desc *policy_limit_desc_find(const char *key);

void strv_free_n(char **v, size_t n);
void policy_kv_free_n(struct policy_kv *kv, size_t n);
void mounts_free_n(struct policy_mount *m, size_t n);
void policy_routes_free_n(struct policy_route *r, size_t n);
void policy_sentinels_free_n(struct policy_sentinel *v, size_t n);
void policy_freep(struct policy **p);
struct policy *policy_dup(const struct policy *p);
/* Replace *p's contents by *t's and free what *p held. */
void policy_commit(struct policy *p, struct policy *t);

/* Messages */

struct ctx {
        const char *origin; /* prefix of every message; NULL for none */
        struct al_error *err;
        char path[256]; /* JSON path of the value being read */
};

int policy_fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Values are echoed in messages: keep them short, and free of bytes that a
 * terminal would act on. */
const char *policy_shown(char *buf, size_t size, const char *s);
#define SHOWN(s) policy_shown((char[72]){0}, 72, (s))
int policy_fail_value(struct ctx *c, const char *path, const char *why, const char *value);
size_t policy_path_push(struct ctx *c, const char *key);
size_t policy_path_push_index(struct ctx *c, size_t i);
void policy_path_pop(struct ctx *c, size_t mark);

/* Loading (load.c): one handler per key, a table per object; unknown keys
 * are errors naming their path. */
struct policy_field {
        const char *name;
        int (*parse)(struct ctx *c, void *target, json_t *v);
};
int policy_parse_fields(struct ctx *c, void *target, json_t *obj, const struct policy_field *fields,
                        size_t n_fields);
int policy_parse_json_value(struct ctx *c, json_t *v, enum value_kind kind, uint64_t min,
                            uint64_t max, uint64_t *ret);
int policy_get_string(struct ctx *c, json_t *v, char **field);
int policy_get_string_or_null(struct ctx *c, json_t *v, char **field);
int policy_get_bool(struct ctx *c, json_t *v, bool *field);
int policy_get_enum(struct ctx *c, json_t *v, const char *const *names, size_t n, int *ret);
int policy_get_strv(struct ctx *c, json_t *v, char ***field, size_t *n);
int policy_get_kv(struct ctx *c, json_t *v, struct policy_kv **field, size_t *n);
/* The "network" section (load-network.c). */
int policy_network_parse(struct ctx *c, void *target, json_t *v);

/* health.c: the "health" section, read and written */
int policy_health_parse(struct ctx *c, void *target, json_t *v);
/* NULL when the section is all defaults (so older digests hold). */
json_t *policy_health_json(const struct policy *p);

/* ask.c: network.onUnlisted, tools.onUnlisted, network.denyReasons, "ask" */
int policy_net_on_unlisted_parse(struct ctx *c, void *target, json_t *v);
int policy_tools_on_unlisted_parse(struct ctx *c, void *target, json_t *v);
int policy_deny_reasons_parse(struct ctx *c, void *target, json_t *v);
int policy_ask_parse(struct ctx *c, void *target, json_t *v);
/* Writes the keys that are not at their defaults (so older digests hold). */
void policy_ask_json(const struct policy *p, json_t *root, json_t *network, json_t *tools);

/* Numbers (numbers.c) */
const char *policy_kind_what(enum value_kind kind, uint64_t min);
int policy_check_range(struct ctx *c, const char *path, enum value_kind kind, uint64_t v,
                       uint64_t min, uint64_t max);
/* Text as a flag or a JSON string gives it. -EDOM: a duration that is not
 * zero but rounds to 0 ms, which would silently mean "no limit". */
int policy_parse_text(const char *s, enum value_kind kind, uint64_t *ret);
void policy_limit_store(struct policy *p, const struct limit_desc *d, uint64_t v);

/* tools.define (tools.c) */
struct json_t;
int policy_tools_parse_define(struct ctx *c, struct policy *p, struct json_t *v);
/* Cross-references: tools.allow names, HTTP routes; adds the allowed
 * built-ins to p->tools. */
int policy_tools_finalize(struct ctx *c, struct policy *p);
void policy_tools_free_n(struct policy_tool *t, size_t n);
struct policy_tool *policy_tools_dup_n(const struct policy_tool *t, size_t n);
struct json_t *policy_tools_define_json(const struct policy *p);

/* The whole policy, whoever set its fields. */
int policy_validate(struct ctx *c, const struct policy *p);
