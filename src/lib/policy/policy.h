/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* The policy: one JSON document saying what a sandbox may do (docs/policy.md).
 * policy_new() gives the safe defaults; policy_load_*() overlays a document
 * (unknown keys are errors naming their path); the CLI then overrides fields
 * directly; policy_finalize() applies the resource class, expands "~", and
 * validates the whole. Every string is owned by the policy. */

enum policy_read_mode {
        POLICY_READ_SYSTEM = 0, /* /usr /bin /sbin /lib* /etc /opt */
        POLICY_READ_HOST,       /* all of / */
};

/* The isolation tier (docs/tiers.md): how the sandbox is built. */
enum policy_tier {
        POLICY_TIER_NAMESPACE = 0, /* namespaces over the host's system directories */
        POLICY_TIER_CONTAINER,     /* the same over an image's root file system */
        POLICY_TIER_GVISOR,        /* the command under runsc's user-space kernel */
        POLICY_TIER_MICROVM,       /* its own kernel under a hypervisor */
        POLICY_TIER_COUNT_,
};

enum policy_workspace_mode {
        POLICY_WORKSPACE_RW = 0,
        POLICY_WORKSPACE_RO,
        POLICY_WORKSPACE_OVERLAY,
};

enum policy_net_mode {
        POLICY_NET_NONE = 0,
        POLICY_NET_GATED,
};

struct policy_mount {
        char *source; /* host path, absolute after finalize; NULL for a volume */
        char *volume; /* a named volume (volume.h) instead of a host path */
        char *target; /* absolute path inside the sandbox */
        bool readonly;
        /* A repository's mount (repo.c): `source` is this path beneath the
         * workspace, and is opened from it without links when mounted. */
        char *in_workspace;
};

struct policy_kv {
        char *key;
        char *value;
};

struct policy_route {
        char *name;     /* first path segment: http://127.0.0.1:8080/<name>/... */
        char *upstream; /* http:// or https:// URL, no query */
        struct policy_kv *inject;
        size_t n_inject;
        char **strip; /* header patterns, "prefix*" allowed */
        size_t n_strip;
        char **record; /* response header names recorded in the audit log */
        size_t n_record;
        char *ca_file; /* NULL: system store */
        /* CONNECT to the upstream's host and port is not tunnelled: the gate
         * terminates the sandbox's TLS with the sandbox's own CA and serves
         * each request as a call through this route (https, no path). */
        bool terminate;
        /* Only the host's own requests (netgate_route_fetch) may use it;
         * the sandbox's get 403 host_only. */
        bool host_only;
        /* An http:// upstream off the host's loopback may get the secrets
         * `inject` names in the clear; false: such a request is refused
         * (cleartext_secret). */
        bool cleartext;
};

/* A sentinel secret (network.sentinels): the sandbox's environment holds
 * ENV=airlock-sentinel-<random>; the gate puts the secret's value in its
 * place only in requests to the hosts listed. */
struct policy_sentinel {
        char *env;    /* the variable inside */
        char *secret; /* the secret's name (--secrets, else the host environment) */
        char **hosts; /* "name" or "*.name" */
        size_t n_hosts;
        /* Plain HTTP off the host's loopback may carry the value: to every
         * listed host (cleartext), or only to these "HOST:PORT" ("*.name"
         * allowed). Neither: such a request is refused (cleartext_secret). */
        bool cleartext;
        char **cleartext_at;
        size_t n_cleartext_at;
};

/* A host tool the sandbox may ask for through the tool gateway
 * (docs/tools.md): host configuration, never the sandbox's. */
enum policy_tool_runner {
        POLICY_TOOL_BUILTIN = 0, /* core.*: answered by the gateway itself */
        POLICY_TOOL_COMMAND,     /* argv template run on the host, never a shell */
        POLICY_TOOL_HTTP,        /* a request through one of the policy's routes */
};

enum policy_tool_clamp {
        POLICY_TOOL_CLAMP = 0, /* a number outside its range is clamped, and the clamp recorded */
        POLICY_TOOL_REFUSE,    /* ... or refused with bad_args */
};

struct tool_schema; /* base/schema.h: a compiled JSON Schema subset */

struct policy_tool {
        char *name;
        char *description;
        struct tool_schema *schema; /* the arguments' schema, compiled at load */
        char *schema_json;          /* the same, as given (for listings) */
        enum policy_tool_runner runner;
        char **argv; /* COMMAND: each element a template; "${args.NAME}" fills one whole element */
        size_t n_argv;
        struct policy_kv
            *env; /* COMMAND: added to a clean environment; values may hold ${secret:NAME} */
        size_t n_env;
        char *route;  /* HTTP: the policy route the request goes through */
        char *method; /* HTTP */
        char *path;   /* HTTP: path-and-query template below the route, args percent-encoded */
        char *body;   /* HTTP: optional body template (JSON), NULL for none */
        uint32_t timeout_ms;   /* the call and its whole process tree */
        uint64_t output_max;   /* bytes of output kept; more fails the call with tool_failed */
        uint32_t rate_per_min; /* calls per minute for one sandbox; 0: the default */
        uint32_t concurrency;  /* calls of this tool running at once in one sandbox */
        enum policy_tool_clamp clamp;
};

/* Block I/O throttling (limits.io), per device backing the workspace and
 * mounts; 0 = unlimited. */
struct policy_io {
        uint64_t read_bps; /* bytes per second */
        uint64_t write_bps;
        uint64_t read_iops; /* operations per second */
        uint64_t write_iops;
};

struct policy_limits {
        uint64_t timeout_ms;     /* wall clock; 0 = none */
        uint64_t cpu_time_s;     /* RLIMIT_CPU; 0 = none */
        uint64_t memory;         /* bytes; cgroup limit, no swap */
        uint64_t pids;           /* cgroup pids.max */
        uint64_t cpus_milli;     /* 1000 = one cpu */
        uint64_t disk;           /* size of each of /tmp and $HOME (tmpfs) */
        uint64_t open_files;     /* RLIMIT_NOFILE */
        uint64_t file_size;      /* RLIMIT_FSIZE */
        uint64_t output;         /* captured stdout+stderr bytes */
        uint64_t workspace_disk; /* bytes a read-write workspace may grow by; 0 = none */
        struct policy_io io;
};

struct policy_budget {
        uint64_t requests; /* 0 = unlimited */
        uint64_t bytes;
        uint64_t rate;     /* bytes per second */
        uint64_t refusals; /* refused requests before the gate closes; 0 = unlimited */
        bool rate_set;     /* rate given explicitly (else the class's) */
};

#define POLICY_REFUSALS_DEFAULT 1000

/* The "health" section: 0 turns a check off. */
struct policy_health {
        double max_denial_rate;     /* denied / decided over the window, (0, 1] */
        uint64_t window_ms;         /* 0: POLICY_HEALTH_WINDOW_DEFAULT_MS */
        uint64_t min_decisions;     /* 0: POLICY_HEALTH_MIN_DECISIONS_DEFAULT */
        double max_memory_fraction; /* peak memory / limits.memory, (0, 1] */
};
#define POLICY_ASK_TIMEOUT_DEFAULT_MS 30000
#define POLICY_ASK_TIMEOUT_MAX_MS     600000
#define POLICY_DENY_REASON_MAX        256 /* bytes of one network.denyReasons text */

#define POLICY_HEALTH_WINDOW_DEFAULT_MS     60000
#define POLICY_HEALTH_WINDOW_MAX_MS         3600000
#define POLICY_HEALTH_MIN_DECISIONS_DEFAULT 10
#define POLICY_HEALTH_MIN_DECISIONS_MAX     1000000

struct policy {
        /* workspace */
        char *workspace; /* host path; NULL = none */
        enum policy_workspace_mode workspace_mode;
        bool protect_git; /* .git/hooks and .git/config read-only (default true) */
        bool allow_broad; /* "/", a system directory or a whole home is allowed as workspace */

        /* isolation */
        enum policy_tier tier;
        char *image;            /* tier container: an imported image's name or id */
        bool trust_repo_config; /* .airlock/isolation.json may add network and mounts */
        char *repo_applied;     /* JSON: what that file applied (repo.h), for the audit; not
                                 * part of the policy's JSON */

        /* filesystem */
        enum policy_read_mode read;
        char **deny_read; /* host paths, in addition to the mandatory list */
        size_t n_deny_read;
        char **allow_write; /* sandbox paths for the Landlock write allow-list */
        size_t n_allow_write;
        char **deny_write; /* host paths made read-only wherever they show up */
        size_t n_deny_write;
        char **allow_read; /* host paths under a deny_read entry shown again */
        size_t n_allow_read;
        struct policy_mount *mounts;
        size_t n_mounts;

        /* network */
        enum policy_net_mode net_mode;
        bool net_mode_set; /* mode given explicitly (else gated iff allow rules exist) */
        char **net_allow;
        size_t n_net_allow;
        char **net_deny;
        size_t n_net_deny;
        char **net_allow_private; /* CIDRs */
        size_t n_net_allow_private;
        struct policy_kv *net_hosts; /* name -> IP literal */
        size_t n_net_hosts;
        struct policy_route *routes;
        size_t n_routes;
        struct policy_sentinel *sentinels;
        size_t n_sentinels;
        char *net_parent_proxy; /* http://HOST:PORT or socks5://HOST:PORT; NULL: direct */
        char **net_no_proxy;    /* names ("*.name") and IP literals reached directly */
        size_t n_net_no_proxy;
        /* network.parentProxySendNames: the parent is handed the name (it
         * resolves it again) instead of the address the gate checked. */
        bool net_parent_send_names;
        struct policy_budget budget;
        /* network.onUnlisted / tools.onUnlisted: "ask" holds a request the
         * lists do not name and asks the operator (ask.c); "deny" (false)
         * refuses it. */
        bool net_ask;
        /* network.directPath: in transparent mode, a connection allowed
         * by a name, with no byte budget and no rate, is handed to the
         * sandbox as the host's own connected socket (no relay, no SNI
         * check); false: those go through the gate's relay. One allowed by
         * an IP rule goes direct either way (netgate/transparent.c). */
        bool net_direct_path;
        struct policy_kv *net_deny_reasons; /* network.denyReasons: host pattern -> text */
        size_t n_net_deny_reasons;

        /* limits */
        struct policy_limits limits;
        char *class_name;    /* small, medium (default), large, xlarge */
        unsigned limits_set; /* POLICY_LIMIT_* bits set explicitly, kept over the class */

        /* process */
        struct policy_kv *env;
        size_t n_env;
        uint32_t uid; /* inside the sandbox; default 1000 */
        uint32_t gid;
        /* "users": inside uids and gids 0 to users-1 all exist, each its own
         * unprivileged host id (boundary/idrange.h); 0: only uid/gid */
        uint32_t users;

        char **tools_allow;
        size_t n_tools_allow;
        struct policy_tool *tools; /* tools.define, and the built-ins the policy allows */
        size_t n_tools;
        bool tools_ask;          /* tools.onUnlisted: "ask" */
        uint64_t ask_timeout_ms; /* ask.timeout: an undecided ask is denied after it */

        /* hardware: the section's canonical JSON, checked (hardware.h); NULL
         * when the policy has none */
        char *hardware_json;

        /* health: when the daemon calls the sandbox unhealthy (health.c) */
        struct policy_health health;
};

enum {
        POLICY_LIMIT_TIMEOUT = 1u << 0,
        POLICY_LIMIT_CPU_TIME = 1u << 1,
        POLICY_LIMIT_MEMORY = 1u << 2,
        POLICY_LIMIT_PIDS = 1u << 3,
        POLICY_LIMIT_CPUS = 1u << 4,
        POLICY_LIMIT_DISK = 1u << 5,
        POLICY_LIMIT_OPEN_FILES = 1u << 6,
        POLICY_LIMIT_FILE_SIZE = 1u << 7,
        POLICY_LIMIT_OUTPUT = 1u << 8,
        POLICY_LIMIT_IO = 1u << 9,
        POLICY_LIMIT_WORKSPACE_DISK = 1u << 10,
};

/* A resource class: the design's table (docs/policy.md), plus a CPU quota. */
struct policy_class {
        const char *name;
        uint64_t memory;
        uint64_t cpu_time_s; /* RLIMIT_CPU */
        uint64_t net_rate;   /* network.budget.rate, bytes per second */
        uint64_t timeout_ms;
        uint64_t cpus_milli;
};

/* The defaults every policy starts from. */
struct policy *policy_new(void);
struct policy *policy_free(struct policy *p);

/* Overlay a JSON document. `origin` names it in messages (a file name). */
int policy_load_file(struct policy *p, const char *path, struct al_error *err);
int policy_load_string(struct policy *p, const char *json, const char *origin,
                       struct al_error *err);

/* Apply the class to limits not set explicitly, make paths absolute (relative
 * host paths against `base_dir`, "~" against `home`), pick the net mode, and
 * validate. */
int policy_finalize(struct policy *p, const char *base_dir, const char *home, struct al_error *err);

const struct policy_class *policy_class_find(const char *name);

/* "namespace", "container", ...; NULL for a value out of range. */
const char *policy_tier_name(enum policy_tier t);
/* The tier named `name`, or -EINVAL. */
int policy_tier_parse(const char *name, enum policy_tier *ret);
/* The tier names, comma separated, for messages. */
#define POLICY_TIER_NAMES "namespace, container, gvisor, microvm"
/* The network.denyReasons text for a canonical host (the first pattern
 * that matches it, as an allow rule would, port aside), or NULL. */
const char *policy_deny_reason(const struct policy *p, const char *host);
const char *policy_deny_reason_in(const struct policy_kv *kv, size_t n, const char *host);

/* Setters used by the CLI; each validates its argument. */
int policy_set_tier(struct policy *p, const char *name, struct al_error *err);
int policy_set_class(struct policy *p, const char *name, struct al_error *err);
void policy_add_env(struct policy *p, const char *key, const char *value);
void policy_add_mount(struct policy *p, const char *source, const char *target, bool readonly);
/* How many mounts name a host path (the others are volumes). */
size_t policy_host_mounts(const struct policy *p);
/* A named volume at `target` (volume.h). */
void policy_add_volume(struct policy *p, const char *name, const char *target, bool readonly);
void policy_add_deny_read(struct policy *p, const char *path);
/* Set one of `limits` from text as a flag gives it: `key` is the key in the
 * "limits" object ("memory", "timeout", ...), `value` is written as in a
 * policy ("512M", "5m", "1.5"); "io.readBps", "io.writeBps", "io.readIops"
 * and "io.writeIops" name the members of "limits.io". Marks the limit as set
 * explicitly. */
int policy_set_limit(struct policy *p, const char *key, const char *value, struct al_error *err);

/* Tool definitions from a JSON file {"define": {NAME: {...}}} (docs/tools.md),
 * added to the policy's tools.define: `airlock run --tools FILE`, the
 * daemon's operator file. A name defined twice is refused. */
int policy_tools_load_file(struct policy *p, const char *path, struct al_error *err);
/* The definition of a tool (or, after policy_finalize, an allowed
 * built-in); NULL for none. */
const struct policy_tool *policy_tool_find(const struct policy *p, const char *name);
/* Whether tools.allow lets the sandbox call `name` ("*" in an entry matches
 * as in a shell glob). */
bool policy_tool_allowed(const struct policy *p, const char *name);
/* Whether `name` is a built-in tool (core.*). */
bool policy_tool_builtin(const char *name);

/* One entry checked as the policy's loader checks it: NULL when good,
 * else why not (for a message naming the field). */
const char *policy_check_net_rule(const char *rule);
const char *policy_check_mount_target(const char *target);
const char *policy_check_env(const char *name, const char *value);

/* The policy as canonical JSON (for the result, the audit log's digest, the
 * daemon). Caller frees. */
char *policy_to_json(const struct policy *p);

/* The mandatory deny-read entries, relative to each home ("~/" prefix) or
 * absolute, NULL-terminated. Glob patterns allowed in the last component. */
extern const char *const policy_mandatory_deny[];
