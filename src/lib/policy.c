/* SPDX-License-Identifier: Apache-2.0 */
#include <fnmatch.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include "netgate/rules.h"
#include "policy.h"
#include "utf8.h"
#include "util.h"

#define POLICY_MAX_SIZE (1024 * 1024)

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

const char *const policy_mandatory_deny[] = {
    "~/.ssh",      "~/.aws",       "~/.gnupg",       "~/.config/gh",
    "~/.netrc",    "~/.docker",    "~/.kube",        "~/.git-credentials",
    "/etc/shadow", "/etc/gshadow", "/etc/ssh/*_key", NULL,
};

static const struct policy_class classes[] = {
    {"small", 256ULL << 20, 500, 5 * 60 * 1000},
    {"medium", 512ULL << 20, 1000, 15 * 60 * 1000},
    {"large", 1ULL << 30, 2000, 30 * 60 * 1000},
    {"xlarge", 4ULL << 30, 4000, 60 * 60 * 1000},
};

#define CLASS_NAMES "small, medium, large, xlarge"

/* Indexed by the enums in policy.h. */
static const char *const workspace_modes[] = {"rw", "ro", "overlay"};
static const char *const read_modes[] = {"system", "host"};
static const char *const net_modes[] = {"none", "gated"};

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

static const struct limit_desc limit_descs[] = {
    {"timeout", POLICY_LIMIT_TIMEOUT, KIND_DURATION, offsetof(struct policy_limits, timeout_ms), 0,
     INT64_MAX},
    {"cpuTime", POLICY_LIMIT_CPU_TIME, KIND_SECONDS, offsetof(struct policy_limits, cpu_time_s), 0,
     INT64_MAX},
    {"memory", POLICY_LIMIT_MEMORY, KIND_SIZE, offsetof(struct policy_limits, memory), MEMORY_MIN,
     INT64_MAX},
    {"pids", POLICY_LIMIT_PIDS, KIND_COUNT, offsetof(struct policy_limits, pids), PIDS_MIN,
     PIDS_MAX},
    {"cpus", POLICY_LIMIT_CPUS, KIND_CPUS, offsetof(struct policy_limits, cpus_milli),
     CPUS_MILLI_MIN, CPUS_MILLI_MAX},
    {"disk", POLICY_LIMIT_DISK, KIND_SIZE, offsetof(struct policy_limits, disk), 1, INT64_MAX},
    {"openFiles", POLICY_LIMIT_OPEN_FILES, KIND_COUNT, offsetof(struct policy_limits, open_files),
     OPEN_FILES_MIN, OPEN_FILES_MAX},
    {"fileSize", POLICY_LIMIT_FILE_SIZE, KIND_SIZE, offsetof(struct policy_limits, file_size), 1,
     INT64_MAX},
    {"output", POLICY_LIMIT_OUTPUT, KIND_SIZE, offsetof(struct policy_limits, output), 1,
     INT64_MAX},
};

static uint64_t *limit_field(struct policy_limits *l, const struct limit_desc *d)
{
        return (uint64_t *)((char *)l + d->offset);
}

static const struct limit_desc *limit_desc_find(const char *key)
{
        for (size_t i = 0; i < ARRAY_SIZE(limit_descs); i++)
                if (STREQ(limit_descs[i].key, key))
                        return &limit_descs[i];
        return NULL;
}

const struct policy_class *policy_class_find(const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < ARRAY_SIZE(classes); i++)
                if (STREQ(classes[i].name, name))
                        return &classes[i];
        return NULL;
}

/* Lifetime */

static void strv_free_n(char **v, size_t n)
{
        if (!v)
                return;
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

static void kv_free_n(struct policy_kv *kv, size_t n)
{
        if (!kv)
                return;
        for (size_t i = 0; i < n; i++) {
                free(kv[i].key);
                free(kv[i].value);
        }
        free(kv);
}

static void mounts_free_n(struct policy_mount *m, size_t n)
{
        if (!m)
                return;
        for (size_t i = 0; i < n; i++) {
                free(m[i].source);
                free(m[i].target);
        }
        free(m);
}

static void routes_free_n(struct policy_route *r, size_t n)
{
        if (!r)
                return;
        for (size_t i = 0; i < n; i++) {
                free(r[i].name);
                free(r[i].upstream);
                kv_free_n(r[i].inject, r[i].n_inject);
                strv_free_n(r[i].strip, r[i].n_strip);
                strv_free_n(r[i].record, r[i].n_record);
                free(r[i].ca_file);
        }
        free(r);
}

struct policy *policy_new(void)
{
        struct policy *p = xcalloc(1, sizeof(*p));
        const struct policy_class *c = policy_class_find("medium");

        p->workspace_mode = POLICY_WORKSPACE_RW;
        p->protect_git = true;
        p->allow_broad = false;
        p->read = POLICY_READ_SYSTEM;
        p->net_mode = POLICY_NET_NONE;
        p->class_name = xstrdup(c->name);
        p->limits = (struct policy_limits){
            .timeout_ms = c->timeout_ms,
            .cpu_time_s = 0,
            .memory = c->memory,
            .pids = 256,
            .cpus_milli = c->cpus_milli,
            .disk = 1ULL << 30,
            .open_files = 1024,
            .file_size = 1ULL << 30,
            .output = 16ULL << 20,
        };
        p->uid = 1000;
        p->gid = 1000;
        p->budget.refusals = POLICY_REFUSALS_DEFAULT;
        return p;
}

struct policy *policy_free(struct policy *p)
{
        if (!p)
                return NULL;
        free(p->workspace);
        strv_free_n(p->deny_read, p->n_deny_read);
        strv_free_n(p->allow_write, p->n_allow_write);
        strv_free_n(p->deny_write, p->n_deny_write);
        strv_free_n(p->allow_read, p->n_allow_read);
        mounts_free_n(p->mounts, p->n_mounts);
        strv_free_n(p->net_allow, p->n_net_allow);
        strv_free_n(p->net_deny, p->n_net_deny);
        strv_free_n(p->net_allow_private, p->n_net_allow_private);
        kv_free_n(p->net_hosts, p->n_net_hosts);
        routes_free_n(p->routes, p->n_routes);
        free(p->class_name);
        kv_free_n(p->env, p->n_env);
        strv_free_n(p->tools_allow, p->n_tools_allow);
        free(p);
        return NULL;
}

static void policy_freep(struct policy **p)
{
        policy_free(*p);
}

static char **strv_dup_n(char *const *v, size_t n)
{
        if (!v)
                return NULL;
        char **r = xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++)
                r[i] = xstrdup(v[i]);
        return r;
}

static struct policy_kv *kv_dup_n(const struct policy_kv *kv, size_t n)
{
        if (!kv)
                return NULL;
        struct policy_kv *r = xcalloc(n, sizeof(*r));
        for (size_t i = 0; i < n; i++) {
                r[i].key = xstrdup(kv[i].key);
                r[i].value = xstrdup(kv[i].value);
        }
        return r;
}

static struct policy *policy_dup(const struct policy *p)
{
        struct policy *d = xcalloc(1, sizeof(*d));

        *d = *p;
        d->workspace = xstrdup(p->workspace);
        d->deny_read = strv_dup_n(p->deny_read, p->n_deny_read);
        d->allow_write = strv_dup_n(p->allow_write, p->n_allow_write);
        d->deny_write = strv_dup_n(p->deny_write, p->n_deny_write);
        d->allow_read = strv_dup_n(p->allow_read, p->n_allow_read);
        d->mounts = p->mounts ? xcalloc(p->n_mounts, sizeof(*d->mounts)) : NULL;
        for (size_t i = 0; d->mounts && i < p->n_mounts; i++) {
                d->mounts[i].source = xstrdup(p->mounts[i].source);
                d->mounts[i].target = xstrdup(p->mounts[i].target);
                d->mounts[i].readonly = p->mounts[i].readonly;
        }
        d->net_allow = strv_dup_n(p->net_allow, p->n_net_allow);
        d->net_deny = strv_dup_n(p->net_deny, p->n_net_deny);
        d->net_allow_private = strv_dup_n(p->net_allow_private, p->n_net_allow_private);
        d->net_hosts = kv_dup_n(p->net_hosts, p->n_net_hosts);
        d->routes = p->routes ? xcalloc(p->n_routes, sizeof(*d->routes)) : NULL;
        for (size_t i = 0; d->routes && i < p->n_routes; i++) {
                const struct policy_route *s = &p->routes[i];
                struct policy_route *t = &d->routes[i];
                *t = *s;
                t->name = xstrdup(s->name);
                t->upstream = xstrdup(s->upstream);
                t->inject = kv_dup_n(s->inject, s->n_inject);
                t->strip = strv_dup_n(s->strip, s->n_strip);
                t->record = strv_dup_n(s->record, s->n_record);
                t->ca_file = xstrdup(s->ca_file);
        }
        d->class_name = xstrdup(p->class_name);
        d->env = kv_dup_n(p->env, p->n_env);
        d->tools_allow = strv_dup_n(p->tools_allow, p->n_tools_allow);
        return d;
}

/* Replace *p's contents by *t's and free what *p held. */
static void policy_commit(struct policy *p, struct policy *t)
{
        struct policy old = *p;
        *p = *t;
        *t = old;
        policy_free(t);
}

/* Messages */

struct ctx {
        const char *origin; /* prefix of every message; NULL for none */
        struct al_error *err;
        char path[256]; /* JSON path of the value being read */
};

static int fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct ctx *c, const char *fmt, ...)
{
        char msg[AL_ERROR_MAX];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (c->origin)
                return al_error_set(c->err, 0, "%s: %s", c->origin, msg);
        return al_error_set(c->err, 0, "%s", msg);
}

/* Values are echoed in messages: keep them short, and free of bytes that a
 * terminal would act on. */
static const char *shown(char *buf, size_t size, const char *s)
{
        size_t n = 0;

        if (!s)
                s = "(null)";
        for (; *s && n + 4 < size; s++)
                buf[n++] = ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s;
        if (*s) {
                n = n > 3 ? n - 3 : n;
                memcpy(buf + n, "...", 3);
                n += 3;
        }
        buf[n] = '\0';
        return buf;
}

#define SHOWN(s) shown((char[72]){0}, 72, (s))

static int fail_value(struct ctx *c, const char *path, const char *why, const char *value)
{
        return fail(c, "\"%s\" %s (got \"%s\")", path, why, SHOWN(value));
}

static size_t path_push(struct ctx *c, const char *key)
{
        size_t old = strlen(c->path), n = old;

        if (n > 0 && n + 1 < sizeof(c->path))
                c->path[n++] = '.';
        for (; *key && n + 1 < sizeof(c->path); key++)
                c->path[n++] = ((unsigned char)*key < 0x20 || *key == 0x7f) ? '?' : *key;
        c->path[n] = '\0';
        return old;
}

static size_t path_push_index(struct ctx *c, size_t i)
{
        size_t old = strlen(c->path);
        snprintf(c->path + old, sizeof(c->path) - old, "[%zu]", i);
        return old;
}

static void path_pop(struct ctx *c, size_t mark)
{
        c->path[mark] = '\0';
}

/* Syntax checks. Each returns NULL when the value is good, else why not. */

static bool is_alpha(char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static bool is_digit(char ch)
{
        return ch >= '0' && ch <= '9';
}

static bool is_alnum(char ch)
{
        return is_alpha(ch) || is_digit(ch);
}

static bool utf8_valid(const char *s)
{
        return utf8_str_valid(s);
}

static bool is_hostname(const char *s)
{
        size_t len = strlen(s), label = 0;

        if (len > 0 && s[len - 1] == '.')
                len--;
        if (len == 0 || len > 253)
                return false;
        for (size_t i = 0; i < len; i++) {
                if (s[i] == '.') {
                        if (label == 0)
                                return false;
                        label = 0;
                        continue;
                }
                if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_')
                        return false;
                if (++label > 63)
                        return false;
        }
        return label > 0;
}

static bool is_ip(const char *s, int family)
{
        unsigned char buf[16];
        return inet_pton(family, s, buf) == 1;
}

static bool is_port(const char *s)
{
        uint64_t v;
        if (strlen(s) > 5 || safe_atou64(s, &v) < 0)
                return false;
        return v >= 1 && v <= 65535;
}

/* RFC 9110 token: the grammar of header names. */
static bool is_token(const char *s)
{
        if (!s || !*s)
                return false;
        for (; *s; s++)
                if (!is_alnum(*s) && !strchr("!#$%&'*+-.^_`|~", *s))
                        return false;
        return true;
}

static bool is_env_name(const char *s)
{
        if (!s || !(is_alpha(*s) || *s == '_'))
                return false;
        for (; *s; s++)
                if (!is_alnum(*s) && *s != '_')
                        return false;
        return true;
}

/* "${secret:NAME}" references stay verbatim for the module that resolves
 * them; here only their syntax is checked. Other "${" text is left alone. */
static bool templates_valid(const char *v)
{
        static const char open[] = "${secret:";
        const char *t = v;

        while ((t = strstr(t, open))) {
                t += sizeof(open) - 1;
                if (!is_alpha(*t) && *t != '_')
                        return false;
                while (is_alnum(*t) || *t == '_')
                        t++;
                if (*t != '}')
                        return false;
        }
        return true;
}

#define WHY_TEMPLATE "must write secret references as ${secret:NAME}, NAME of letters, digits and _"

static const char *check_host_path(const char *s)
{
        if (!s || !*s)
                return "must not be empty";
        if (!utf8_valid(s))
                return "must be valid UTF-8";
        if (s[0] == '~' && s[1] != '\0' && s[1] != '/')
                return "must be absolute, relative, or start with \"~/\" (\"~user\" is not "
                       "supported)";
        return NULL;
}

static const char *check_sandbox_path(const char *s)
{
        if (!s || s[0] != '/')
                return "must be an absolute path";
        if (!utf8_valid(s))
                return "must be valid UTF-8";
        for (const char *c = s; *c;) {
                c += strspn(c, "/");
                size_t len = strcspn(c, "/");
                if (len == 2 && c[0] == '.' && c[1] == '.')
                        return "must not contain \"..\"";
                c += len;
        }
        return NULL;
}

static const char *check_mount_target(const char *s)
{
        const char *why = check_sandbox_path(s);
        if (why)
                return why;
        for (const char *c = s; *c;) {
                c += strspn(c, "/");
                size_t len = strcspn(c, "/");
                if (len == 0 || (len == 1 && c[0] == '.')) {
                        c += len;
                        continue;
                }
                if ((len == 4 && strncmp(c, "proc", 4) == 0) ||
                    (len == 3 && strncmp(c, "dev", 3) == 0))
                        return "must not be /proc, /dev or a path under them";
                return NULL;
        }
        return "must not be \"/\"";
}

/* The gate's own parser decides: a policy that loads is one the gate
 * accepts, with the same host-name grammar. */
static const char *check_net_rule(const char *r)
{
        static const char why[] =
            "must be a host name, \"*.\" and a domain, or an IP address, optionally with \":port\"";
        if (!r || !*r)
                return why;
        if (strstr(r, "://"))
                return "must be a host name or host:port, not a URL";
        /* A port after the host (not inside a bare IPv6 address) must be one. */
        const char *colon = strrchr(r, ':');
        bool bare_v6 = colon && r[0] != '[' && strchr(r, ':') != colon;
        if (colon && !bare_v6 && (r[0] != '[' || colon[-1] == ']') && !is_port(colon + 1))
                return "must have a port from 1 to 65535";
        struct netgate_rule rule;
        if (netgate_rule_parse(r, &rule) < 0)
                return why;
        netgate_rule_done(&rule);
        return NULL;
}

static const char *check_cidr(const char *s)
{
        static const char why[] =
            "must be an IP address or a CIDR range such as \"10.0.0.0/8\" or \"fd00::/8\"";
        char addr[INET6_ADDRSTRLEN + 1];
        const char *slash;
        size_t n;
        uint64_t bits, max;

        if (!s)
                return why;
        slash = strchr(s, '/');
        n = slash ? (size_t)(slash - s) : strlen(s);
        if (n == 0 || n >= sizeof(addr))
                return why;
        memcpy(addr, s, n);
        addr[n] = '\0';
        if (is_ip(addr, AF_INET))
                max = 32;
        else if (is_ip(addr, AF_INET6))
                max = 128;
        else
                return why;
        if (!slash)
                return NULL;
        slash++;
        if (strlen(slash) > 3 || (slash[0] == '0' && slash[1] != '\0') ||
            safe_atou64(slash, &bits) < 0 || bits > max)
                return why;
        return NULL;
}

static const char *check_route_name(const char *s)
{
        size_t n = 0;
        if (!s)
                return "is required";
        for (; s[n]; n++)
                if (!(s[n] >= 'a' && s[n] <= 'z') && !is_digit(s[n]) && s[n] != '_' && s[n] != '-')
                        return "must be 1 to 64 of a-z, 0-9, _ and -";
        if (n == 0 || n > 64)
                return "must be 1 to 64 of a-z, 0-9, _ and -";
        return NULL;
}

static const char *check_upstream(const char *u)
{
        static const char why[] =
            "must be an http:// or https:// URL with a host and no user info, query or fragment";
        const char *rest;

        if (!u)
                return "is required";
        if (strncmp(u, "https://", 8) == 0)
                rest = u + 8;
        else if (strncmp(u, "http://", 7) == 0)
                rest = u + 7;
        else
                return why;
        if (*rest == '\0' || *rest == '/' || *rest == ':')
                return why;
        for (const char *q = u; *q; q++)
                if ((unsigned char)*q <= 0x20 || (unsigned char)*q >= 0x7f || *q == '?' ||
                    *q == '#')
                        return why;
        /* Credentials belong in "inject", where they stay on the host. */
        size_t authority = strcspn(rest, "/");
        if (memchr(rest, '@', authority))
                return why;
        return NULL;
}

/* Headers that decide how a message is framed or routed; letting a policy set
 * them would invite request smuggling past the upstream. */
static const char *const framing_headers[] = {
    "connection", "content-length", "host",    "keep-alive",        "proxy-connection",
    "te",         "trailer",        "upgrade", "transfer-encoding",
};

static const char *check_inject_header(const char *h)
{
        if (!is_token(h))
                return "must be an HTTP header name";
        for (size_t i = 0; i < ARRAY_SIZE(framing_headers); i++)
                if (strcasecmp(h, framing_headers[i]) == 0)
                        return "must not be a hop-by-hop or framing header";
        return NULL;
}

static const char *check_header_value(const char *v)
{
        if (!v)
                return "must be a string";
        for (const char *q = v; *q; q++)
                if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f)
                        return "must not contain control characters";
        if (!utf8_valid(v))
                return "must be valid UTF-8";
        if (!templates_valid(v))
                return WHY_TEMPLATE;
        return NULL;
}

static const char *check_env_value(const char *v)
{
        if (!v)
                return "must be a string";
        if (!utf8_valid(v))
                return "must be valid UTF-8";
        if (!templates_valid(v))
                return WHY_TEMPLATE;
        return NULL;
}

static const char *check_tool_name(const char *s)
{
        static const char why[] = "must be 1 to 128 of letters, digits, and . _ : * -";
        size_t n = 0;
        if (!s)
                return why;
        for (; s[n]; n++)
                if (!is_alnum(s[n]) && !strchr("._:*-", s[n]))
                        return why;
        return n == 0 || n > 128 ? why : NULL;
}

/* Numbers */

static const char *kind_what(enum value_kind kind, uint64_t min)
{
        switch (kind) {
        case KIND_DURATION:
        case KIND_SECONDS:
                return "a duration in seconds, or a string such as \"30s\" or \"5m\"";
        case KIND_SIZE:
                return "a size in bytes, or a string such as \"512M\"";
        case KIND_CPUS:
                return "a number greater than 0 and at most 1024";
        case KIND_COUNT:
                break;
        }
        return min > 0 ? "a positive integer" : "a non-negative integer";
}

static int check_range(struct ctx *c, const char *path, enum value_kind kind, uint64_t v,
                       uint64_t min, uint64_t max)
{
        if (v >= min && v <= max)
                return 0;
        switch (kind) {
        case KIND_CPUS:
                if (v > 0 && v < min)
                        return fail(c, "\"%s\" must be at least %.2f (the kernel refuses less)",
                                    path, (double)min / 1000.0);
                return fail(c, "\"%s\" must be %s", path, kind_what(kind, min));
        case KIND_COUNT:
                if (v > 0 && v < min)
                        return fail(c,
                                    "\"%s\" must be at least %" PRIu64
                                    " (a sandbox cannot start with less)",
                                    path, min);
                if (v < min)
                        return fail(c, "\"%s\" must be %s", path, kind_what(kind, min));
                return fail(c, "\"%s\" must be at most %" PRIu64, path, max);
        case KIND_SIZE:
                if (v > 0 && v < min)
                        return fail(c,
                                    "\"%s\" must be at least %" PRIu64
                                    " bytes (a sandbox cannot start with less)",
                                    path, min);
                if (v < min)
                        return fail(c, "\"%s\" must be greater than 0", path);
                break;
        case KIND_DURATION:
        case KIND_SECONDS:
                break;
        }
        return fail(c, "\"%s\" is too large", path);
}

/* Text as a flag or a JSON string gives it. -EDOM: a duration that is not
 * zero but rounds to 0 ms, which would silently mean "no limit". */
static int parse_text(const char *s, enum value_kind kind, uint64_t *ret)
{
        uint64_t v;
        int r;

        switch (kind) {
        case KIND_COUNT:
                return safe_atou64(s, ret);
        case KIND_SIZE:
                return parse_size(s, ret);
        case KIND_CPUS:
                /* A plain decimal; parse_duration_ms() reads exactly that
                 * into thousandths when no unit follows. */
                if (!*s || s[strspn(s, "0123456789.")] != '\0')
                        return -EINVAL;
                return parse_duration_ms(s, ret);
        case KIND_DURATION:
        case KIND_SECONDS:
                r = parse_duration_ms(s, &v);
                if (r < 0)
                        return r;
                if (v == 0 && strpbrk(s, "123456789"))
                        return -EDOM;
                *ret = v;
                return 0;
        }
        return -EINVAL;
}

static int parse_json_value(struct ctx *c, json_t *v, enum value_kind kind, uint64_t min,
                            uint64_t max, uint64_t *ret)
{
        const char *what = kind_what(kind, min);
        bool duration = kind == KIND_DURATION || kind == KIND_SECONDS;
        uint64_t x;

        if (json_is_integer(v)) {
                json_int_t i = json_integer_value(v);
                if (i < 0)
                        return fail(c, "\"%s\" must be %s", c->path, what);
                x = (uint64_t)i;
                if (duration || kind == KIND_CPUS) {
                        if (x > INT64_MAX / 1000)
                                return check_range(c, c->path, kind, UINT64_MAX, min, max);
                        x *= 1000;
                }
        } else if (json_is_real(v) && (duration || kind == KIND_CPUS)) {
                double d = json_real_value(v);
                if (!isfinite(d) || d < 0)
                        return fail(c, "\"%s\" must be %s", c->path, what);
                if (d > 9e15)
                        return check_range(c, c->path, kind, UINT64_MAX, min, max);
                x = (uint64_t)(d * 1000.0 + 0.5);
                if (x == 0 && d > 0 && duration)
                        return fail(c, "\"%s\" must be 0 or at least 1ms", c->path);
        } else if (json_is_string(v) && (duration || kind == KIND_SIZE)) {
                const char *s = json_string_value(v);
                int r = parse_text(s, kind, &x);
                if (r == -ERANGE)
                        return fail(c, "\"%s\" is too large", c->path);
                if (r == -EDOM)
                        return fail(c, "\"%s\" must be 0 or at least 1ms (got \"%s\")", c->path,
                                    SHOWN(s));
                if (r < 0)
                        return fail(c, "\"%s\" must be %s (got \"%s\")", c->path, what, SHOWN(s));
        } else
                return fail(c, "\"%s\" must be %s", c->path, what);

        int r = check_range(c, c->path, kind, x, min, max);
        if (r < 0)
                return r;
        *ret = x;
        return 0;
}

static void limit_store(struct policy *p, const struct limit_desc *d, uint64_t v)
{
        *limit_field(&p->limits, d) = d->kind == KIND_SECONDS ? v / 1000 + (v % 1000 != 0) : v;
        p->limits_set |= d->bit;
}

/* Loading: one handler per key, tables per object. */

struct field {
        const char *name;
        int (*parse)(struct ctx *c, void *target, json_t *v);
};

static int parse_fields(struct ctx *c, void *target, json_t *obj, const struct field *fields,
                        size_t n_fields)
{
        const char *key;
        json_t *v;

        if (!json_is_object(obj))
                return fail(c, "\"%s\" must be an object", c->path);
        json_object_foreach(obj, key, v)
        {
                const struct field *f = NULL;
                size_t mark = path_push(c, key);
                for (size_t i = 0; i < n_fields && !f; i++)
                        if (STREQ(fields[i].name, key))
                                f = &fields[i];
                if (!f)
                        return fail(c, "unknown key \"%s\"", c->path);
                int r = f->parse(c, target, v);
                if (r < 0)
                        return r;
                path_pop(c, mark);
        }
        return 0;
}

static int get_string(struct ctx *c, json_t *v, char **field)
{
        if (!json_is_string(v))
                return fail(c, "\"%s\" must be a string", c->path);
        free(*field);
        *field = xstrdup(json_string_value(v));
        return 0;
}

static int get_string_or_null(struct ctx *c, json_t *v, char **field)
{
        if (json_is_null(v)) {
                free(*field);
                *field = NULL;
                return 0;
        }
        if (!json_is_string(v))
                return fail(c, "\"%s\" must be a string or null", c->path);
        return get_string(c, v, field);
}

static int get_bool(struct ctx *c, json_t *v, bool *field)
{
        if (!json_is_boolean(v))
                return fail(c, "\"%s\" must be true or false", c->path);
        *field = json_is_true(v);
        return 0;
}

static int get_enum(struct ctx *c, json_t *v, const char *const *names, size_t n, int *ret)
{
        char list[128] = "";

        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(list);
                snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", names[i]);
        }
        if (!json_is_string(v))
                return fail(c, "\"%s\" must be one of %s", c->path, list);
        for (size_t i = 0; i < n; i++)
                if (STREQ(names[i], json_string_value(v))) {
                        *ret = (int)i;
                        return 0;
                }
        char why[160];
        snprintf(why, sizeof(why), "must be one of %s", list);
        return fail_value(c, c->path, why, json_string_value(v));
}

/* An array of strings replaces the list it is read into. */
static int get_strv(struct ctx *c, json_t *v, char ***field, size_t *n)
{
        size_t i;
        json_t *e;

        if (!json_is_array(v))
                return fail(c, "\"%s\" must be an array of strings", c->path);
        strv_free_n(*field, *n);
        *field = NULL;
        *n = 0;
        json_array_foreach(v, i, e)
        {
                if (!json_is_string(e)) {
                        path_push_index(c, i);
                        return fail(c, "\"%s\" must be a string", c->path);
                }
                *field = strv_append(*field, n, json_string_value(e));
        }
        return 0;
}

/* An object of strings replaces the map it is read into. */
static int get_kv(struct ctx *c, json_t *v, struct policy_kv **field, size_t *n)
{
        const char *key;
        json_t *e;

        if (!json_is_object(v))
                return fail(c, "\"%s\" must be an object", c->path);
        kv_free_n(*field, *n);
        *field = xcalloc(json_object_size(v), sizeof(**field));
        *n = 0;
        json_object_foreach(v, key, e)
        {
                if (!json_is_string(e)) {
                        path_push(c, key);
                        return fail(c, "\"%s\" must be a string", c->path);
                }
                (*field)[*n].key = xstrdup(key);
                (*field)[*n].value = xstrdup(json_string_value(e));
                (*n)++;
        }
        return 0;
}

/* workspace */

static int ws_path(struct ctx *c, void *t, json_t *v)
{
        return get_string_or_null(c, v, &((struct policy *)t)->workspace);
}

static int ws_mode(struct ctx *c, void *t, json_t *v)
{
        int m;
        int r = get_enum(c, v, workspace_modes, ARRAY_SIZE(workspace_modes), &m);
        if (r >= 0)
                ((struct policy *)t)->workspace_mode = (enum policy_workspace_mode)m;
        return r;
}

static int ws_protect_git(struct ctx *c, void *t, json_t *v)
{
        return get_bool(c, v, &((struct policy *)t)->protect_git);
}

static int ws_allow_broad(struct ctx *c, void *t, json_t *v)
{
        return get_bool(c, v, &((struct policy *)t)->allow_broad);
}

static const struct field workspace_fields[] = {
    {"path", ws_path},
    {"mode", ws_mode},
    {"protectGit", ws_protect_git},
    {"allowBroad", ws_allow_broad},
};

/* filesystem */

static int fs_read(struct ctx *c, void *t, json_t *v)
{
        int m;
        int r = get_enum(c, v, read_modes, ARRAY_SIZE(read_modes), &m);
        if (r >= 0)
                ((struct policy *)t)->read = (enum policy_read_mode)m;
        return r;
}

static int fs_deny_read(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return get_strv(c, v, &p->deny_read, &p->n_deny_read);
}

static int fs_allow_write(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return get_strv(c, v, &p->allow_write, &p->n_allow_write);
}

static int fs_deny_write(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return get_strv(c, v, &p->deny_write, &p->n_deny_write);
}

static int fs_allow_read(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return get_strv(c, v, &p->allow_read, &p->n_allow_read);
}

static int mount_source(struct ctx *c, void *t, json_t *v)
{
        return get_string(c, v, &((struct policy_mount *)t)->source);
}

static int mount_target(struct ctx *c, void *t, json_t *v)
{
        return get_string(c, v, &((struct policy_mount *)t)->target);
}

static int mount_readonly(struct ctx *c, void *t, json_t *v)
{
        return get_bool(c, v, &((struct policy_mount *)t)->readonly);
}

static const struct field mount_fields[] = {
    {"source", mount_source},
    {"target", mount_target},
    {"readonly", mount_readonly},
};

static int fs_mounts(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        size_t i;
        json_t *e;

        if (!json_is_array(v))
                return fail(c, "\"%s\" must be an array", c->path);
        mounts_free_n(p->mounts, p->n_mounts);
        p->n_mounts = json_array_size(v);
        p->mounts = xcalloc(p->n_mounts, sizeof(*p->mounts));
        json_array_foreach(v, i, e)
        {
                size_t mark = path_push_index(c, i);
                p->mounts[i].readonly = true;
                int r = parse_fields(c, &p->mounts[i], e, mount_fields, ARRAY_SIZE(mount_fields));
                if (r < 0)
                        return r;
                path_pop(c, mark);
        }
        return 0;
}

static const struct field filesystem_fields[] = {
    {"read", fs_read},
    {"denyRead", fs_deny_read},
    {"allowWrite", fs_allow_write},
    {"denyWrite", fs_deny_write},
    {"allowRead", fs_allow_read},
    {"mounts", fs_mounts},
};

/* network */

static int net_mode(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        int m;
        int r = get_enum(c, v, net_modes, ARRAY_SIZE(net_modes), &m);
        if (r >= 0) {
                p->net_mode = (enum policy_net_mode)m;
                p->net_mode_set = true;
        }
        return r;
}

static int net_allow(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return get_strv(c, v, &p->net_allow, &p->n_net_allow);
}

static int net_deny(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return get_strv(c, v, &p->net_deny, &p->n_net_deny);
}

static int net_allow_private(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return get_strv(c, v, &p->net_allow_private, &p->n_net_allow_private);
}

static int net_hosts(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return get_kv(c, v, &p->net_hosts, &p->n_net_hosts);
}

static int route_name(struct ctx *c, void *t, json_t *v)
{
        return get_string(c, v, &((struct policy_route *)t)->name);
}

static int route_upstream(struct ctx *c, void *t, json_t *v)
{
        return get_string(c, v, &((struct policy_route *)t)->upstream);
}

static int route_inject(struct ctx *c, void *t, json_t *v)
{
        struct policy_route *r = t;
        return get_kv(c, v, &r->inject, &r->n_inject);
}

static int route_strip(struct ctx *c, void *t, json_t *v)
{
        struct policy_route *r = t;
        return get_strv(c, v, &r->strip, &r->n_strip);
}

static int route_record(struct ctx *c, void *t, json_t *v)
{
        struct policy_route *r = t;
        return get_strv(c, v, &r->record, &r->n_record);
}

static int route_ca_file(struct ctx *c, void *t, json_t *v)
{
        return get_string_or_null(c, v, &((struct policy_route *)t)->ca_file);
}

static const struct field route_fields[] = {
    {"name", route_name},   {"upstream", route_upstream}, {"inject", route_inject},
    {"strip", route_strip}, {"record", route_record},     {"caFile", route_ca_file},
};

static int net_routes(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        size_t i;
        json_t *e;

        if (!json_is_array(v))
                return fail(c, "\"%s\" must be an array", c->path);
        routes_free_n(p->routes, p->n_routes);
        p->n_routes = json_array_size(v);
        p->routes = xcalloc(p->n_routes, sizeof(*p->routes));
        json_array_foreach(v, i, e)
        {
                size_t mark = path_push_index(c, i);
                int r = parse_fields(c, &p->routes[i], e, route_fields, ARRAY_SIZE(route_fields));
                if (r < 0)
                        return r;
                path_pop(c, mark);
        }
        return 0;
}

static int budget_requests(struct ctx *c, void *t, json_t *v)
{
        return parse_json_value(c, v, KIND_COUNT, 0, INT64_MAX,
                                &((struct policy *)t)->budget.requests);
}

static int budget_bytes(struct ctx *c, void *t, json_t *v)
{
        return parse_json_value(c, v, KIND_SIZE, 0, INT64_MAX, &((struct policy *)t)->budget.bytes);
}

static int budget_rate(struct ctx *c, void *t, json_t *v)
{
        return parse_json_value(c, v, KIND_SIZE, 0, INT64_MAX, &((struct policy *)t)->budget.rate);
}

static int budget_refusals(struct ctx *c, void *t, json_t *v)
{
        return parse_json_value(c, v, KIND_COUNT, 0, INT64_MAX,
                                &((struct policy *)t)->budget.refusals);
}

static const struct field budget_fields[] = {
    {"requests", budget_requests},
    {"bytes", budget_bytes},
    {"rate", budget_rate},
    {"refusals", budget_refusals},
};

static int net_budget(struct ctx *c, void *t, json_t *v)
{
        return parse_fields(c, t, v, budget_fields, ARRAY_SIZE(budget_fields));
}

static const struct field network_fields[] = {
    {"mode", net_mode},     {"allow", net_allow},
    {"deny", net_deny},     {"allowPrivate", net_allow_private},
    {"hosts", net_hosts},   {"routes", net_routes},
    {"budget", net_budget},
};

/* limits: keys and handling come from limit_descs. */

static int parse_limits(struct ctx *c, struct policy *p, json_t *obj)
{
        const char *key;
        json_t *v;

        if (!json_is_object(obj))
                return fail(c, "\"%s\" must be an object", c->path);
        json_object_foreach(obj, key, v)
        {
                size_t mark = path_push(c, key);
                const struct limit_desc *d = limit_desc_find(key);
                uint64_t x;
                if (!d)
                        return fail(c, "unknown key \"%s\"", c->path);
                int r = parse_json_value(c, v, d->kind, d->min, d->max, &x);
                if (r < 0)
                        return r;
                limit_store(p, d, x);
                path_pop(c, mark);
        }
        return 0;
}

/* top level */

static int top_workspace(struct ctx *c, void *t, json_t *v)
{
        return parse_fields(c, t, v, workspace_fields, ARRAY_SIZE(workspace_fields));
}

static int top_filesystem(struct ctx *c, void *t, json_t *v)
{
        return parse_fields(c, t, v, filesystem_fields, ARRAY_SIZE(filesystem_fields));
}

static int top_network(struct ctx *c, void *t, json_t *v)
{
        return parse_fields(c, t, v, network_fields, ARRAY_SIZE(network_fields));
}

static int top_limits(struct ctx *c, void *t, json_t *v)
{
        return parse_limits(c, t, v);
}

static int top_class(struct ctx *c, void *t, json_t *v)
{
        return get_string(c, v, &((struct policy *)t)->class_name);
}

static int top_env(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return get_kv(c, v, &p->env, &p->n_env);
}

static int tools_allow(struct ctx *c, void *t, json_t *v)
{
        struct policy *p = t;
        return get_strv(c, v, &p->tools_allow, &p->n_tools_allow);
}

static const struct field tools_fields[] = {
    {"allow", tools_allow},
};

static int top_tools(struct ctx *c, void *t, json_t *v)
{
        return parse_fields(c, t, v, tools_fields, ARRAY_SIZE(tools_fields));
}

static int get_id(struct ctx *c, json_t *v, uint32_t *field)
{
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > UID_MAX_INSIDE)
                return fail(c, "\"%s\" must be an integer from 0 to %d", c->path, UID_MAX_INSIDE);
        *field = (uint32_t)json_integer_value(v);
        return 0;
}

static int top_uid(struct ctx *c, void *t, json_t *v)
{
        return get_id(c, v, &((struct policy *)t)->uid);
}

static int top_gid(struct ctx *c, void *t, json_t *v)
{
        return get_id(c, v, &((struct policy *)t)->gid);
}

static const struct field top_fields[] = {
    {"workspace", top_workspace},
    {"filesystem", top_filesystem},
    {"network", top_network},
    {"limits", top_limits},
    {"class", top_class},
    {"env", top_env},
    {"tools", top_tools},
    {"uid", top_uid},
    {"gid", top_gid},
};

/* Validation of the whole policy, whoever set its fields. */

static int check_strv(struct ctx *c, const char *name, char *const *v, size_t n,
                      const char *(*check)(const char *))
{
        char path[128];
        for (size_t i = 0; i < n; i++) {
                const char *why = check(v[i]);
                if (why) {
                        snprintf(path, sizeof(path), "%s[%zu]", name, i);
                        return fail_value(c, path, why, v[i]);
                }
        }
        return 0;
}

static int validate_network(struct ctx *c, const struct policy *p)
{
        char path[128];
        const char *why;
        int r;

        if ((unsigned)p->net_mode > POLICY_NET_GATED)
                return fail(c, "\"network.mode\" is out of range");
        r = check_strv(c, "network.allow", p->net_allow, p->n_net_allow, check_net_rule);
        if (r < 0)
                return r;
        r = check_strv(c, "network.deny", p->net_deny, p->n_net_deny, check_net_rule);
        if (r < 0)
                return r;
        r = check_strv(c, "network.allowPrivate", p->net_allow_private, p->n_net_allow_private,
                       check_cidr);
        if (r < 0)
                return r;
        for (size_t i = 0; i < p->n_net_hosts; i++) {
                const struct policy_kv *h = &p->net_hosts[i];
                if (!h->key || !is_hostname(h->key))
                        return fail_value(c, "network.hosts", "keys must be host names", h->key);
                if (!h->value || !(is_ip(h->value, AF_INET) || is_ip(h->value, AF_INET6))) {
                        snprintf(path, sizeof(path), "network.hosts.%s", SHOWN(h->key));
                        return fail_value(c, path, "must be an IPv4 or IPv6 address", h->value);
                }
        }
        for (size_t i = 0; i < p->n_routes; i++) {
                const struct policy_route *rt = &p->routes[i];

                snprintf(path, sizeof(path), "network.routes[%zu].name", i);
                if ((why = check_route_name(rt->name)))
                        return rt->name ? fail_value(c, path, why, rt->name)
                                        : fail(c, "\"%s\" %s", path, why);
                for (size_t j = 0; j < i; j++)
                        if (STREQ(p->routes[j].name, rt->name))
                                return fail(c, "\"%s\" \"%s\" is already used by routes[%zu]", path,
                                            rt->name, j);

                snprintf(path, sizeof(path), "network.routes[%zu].upstream", i);
                if ((why = check_upstream(rt->upstream)))
                        return rt->upstream ? fail_value(c, path, why, rt->upstream)
                                            : fail(c, "\"%s\" %s", path, why);

                for (size_t j = 0; j < rt->n_inject; j++) {
                        const struct policy_kv *h = &rt->inject[j];
                        if ((why = check_inject_header(h->key))) {
                                snprintf(path, sizeof(path), "network.routes[%zu].inject", i);
                                return fail(c, "\"%s\" keys %s (got \"%s\")", path, why,
                                            SHOWN(h->key));
                        }
                        if ((why = check_header_value(h->value))) {
                                snprintf(path, sizeof(path), "network.routes[%zu].inject.%s", i,
                                         h->key);
                                return fail_value(c, path, why, h->value);
                        }
                }
                for (size_t j = 0; j < rt->n_strip; j++)
                        if (!is_token(rt->strip[j])) {
                                snprintf(path, sizeof(path), "network.routes[%zu].strip[%zu]", i,
                                         j);
                                return fail_value(c, path,
                                                  "must be an HTTP header name, \"*\" allowed",
                                                  rt->strip[j]);
                        }
                for (size_t j = 0; j < rt->n_record; j++)
                        if (!is_token(rt->record[j])) {
                                snprintf(path, sizeof(path), "network.routes[%zu].record[%zu]", i,
                                         j);
                                return fail_value(c, path, "must be an HTTP header name",
                                                  rt->record[j]);
                        }
                if (rt->ca_file && (why = check_host_path(rt->ca_file))) {
                        snprintf(path, sizeof(path), "network.routes[%zu].caFile", i);
                        return fail_value(c, path, why, rt->ca_file);
                }
        }
        if (p->net_mode_set && p->net_mode == POLICY_NET_NONE) {
                if (p->n_net_allow > 0)
                        return fail(c,
                                    "\"network.mode\" is \"none\" but \"network.allow\" has %zu "
                                    "rule(s); remove them or use mode \"gated\"",
                                    p->n_net_allow);
                if (p->n_routes > 0)
                        return fail(c,
                                    "\"network.mode\" is \"none\" but \"network.routes\" has %zu "
                                    "route(s); remove them or use mode \"gated\"",
                                    p->n_routes);
        }
        return 0;
}

static int validate(struct ctx *c, const struct policy *p)
{
        char path[128];
        const char *why;
        int r;

        if (!policy_class_find(p->class_name))
                return fail_value(c, "class", "must be one of " CLASS_NAMES, p->class_name);

        if ((unsigned)p->workspace_mode > POLICY_WORKSPACE_OVERLAY)
                return fail(c, "\"workspace.mode\" is out of range");
        if (p->workspace && (why = check_host_path(p->workspace)))
                return fail_value(c, "workspace.path", why, p->workspace);

        if ((unsigned)p->read > POLICY_READ_HOST)
                return fail(c, "\"filesystem.read\" is out of range");
        r = check_strv(c, "filesystem.denyRead", p->deny_read, p->n_deny_read, check_host_path);
        if (r < 0)
                return r;
        r = check_strv(c, "filesystem.allowWrite", p->allow_write, p->n_allow_write,
                       check_sandbox_path);
        if (r < 0)
                return r;
        r = check_strv(c, "filesystem.denyWrite", p->deny_write, p->n_deny_write, check_host_path);
        if (r < 0)
                return r;
        r = check_strv(c, "filesystem.allowRead", p->allow_read, p->n_allow_read, check_host_path);
        if (r < 0)
                return r;
        for (size_t i = 0; i < p->n_mounts; i++) {
                const struct policy_mount *m = &p->mounts[i];
                snprintf(path, sizeof(path), "filesystem.mounts[%zu].source", i);
                if (!m->source)
                        return fail(c, "\"%s\" is required", path);
                if ((why = check_host_path(m->source)))
                        return fail_value(c, path, why, m->source);
                snprintf(path, sizeof(path), "filesystem.mounts[%zu].target", i);
                if (!m->target)
                        return fail(c, "\"%s\" is required", path);
                if ((why = check_mount_target(m->target)))
                        return fail_value(c, path, why, m->target);
        }

        r = validate_network(c, p);
        if (r < 0)
                return r;

        for (size_t i = 0; i < ARRAY_SIZE(limit_descs); i++) {
                const struct limit_desc *d = &limit_descs[i];
                uint64_t v = *limit_field((struct policy_limits *)&p->limits, d);
                snprintf(path, sizeof(path), "limits.%s", d->key);
                r = check_range(c, path, d->kind, v, d->min, d->max);
                if (r < 0)
                        return r;
        }
        if (p->budget.requests > INT64_MAX || p->budget.bytes > INT64_MAX ||
            p->budget.rate > INT64_MAX || p->budget.refusals > INT64_MAX)
                return fail(c, "\"network.budget\" is too large");

        for (size_t i = 0; i < p->n_env; i++) {
                const struct policy_kv *e = &p->env[i];
                if (!is_env_name(e->key))
                        return fail(c,
                                    "\"env\" keys must be names of letters, digits and _, not "
                                    "starting with a digit (got \"%s\")",
                                    SHOWN(e->key));
                if ((why = check_env_value(e->value))) {
                        snprintf(path, sizeof(path), "env.%s", e->key);
                        return fail_value(c, path, why, e->value);
                }
        }
        r = check_strv(c, "tools.allow", p->tools_allow, p->n_tools_allow, check_tool_name);
        if (r < 0)
                return r;
        if (p->uid > UID_MAX_INSIDE)
                return fail(c, "\"uid\" must be an integer from 0 to %d", UID_MAX_INSIDE);
        if (p->gid > UID_MAX_INSIDE)
                return fail(c, "\"gid\" must be an integer from 0 to %d", UID_MAX_INSIDE);
        return 0;
}

/* Loading */

static int too_large(struct al_error *err, const char *origin)
{
        al_error_set(err, 0, "%s: larger than 1 MiB, refused", origin);
        if (err)
                err->code = EFBIG;
        return -EFBIG;
}

static int load_json(struct policy *p, const char *text, size_t len, const char *origin,
                     struct al_error *err)
{
        struct ctx c = {.origin = origin ? origin : "policy", .err = err};
        json_error_t jerr;
        int r;

        if (len > POLICY_MAX_SIZE)
                return too_large(err, c.origin);
        json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!doc)
                return al_error_set(err, 0, "%s:%d:%d: %s", c.origin, jerr.line, jerr.column,
                                    jerr.text);
        if (!json_is_object(doc)) {
                json_decref(doc);
                return fail(&c, "the document must be a JSON object");
        }

        _cleanup_(policy_freep) struct policy *t = policy_dup(p);
        r = parse_fields(&c, t, doc, top_fields, ARRAY_SIZE(top_fields));
        if (r >= 0 && json_object_get(doc, "uid") && !json_object_get(doc, "gid"))
                t->gid = t->uid;
        json_decref(doc);
        if (r < 0)
                return r;
        r = validate(&c, t);
        if (r < 0)
                return r;
        policy_commit(p, TAKE_PTR(t));
        return 0;
}

int policy_load_string(struct policy *p, const char *json, const char *origin, struct al_error *err)
{
        if (!json)
                return al_error_set(err, 0, "%s: no policy text", origin ? origin : "policy");
        return load_json(p, json, strnlen(json, POLICY_MAX_SIZE + 1), origin, err);
}

int policy_load_file(struct policy *p, const char *path, struct al_error *err)
{
        _cleanup_free_ char *text = NULL;
        size_t len = 0;

        /* read_file_at() refuses a file of exactly `max` bytes, so ask for one
         * more and check the length here. */
        int r = read_file_at(AT_FDCWD, path, POLICY_MAX_SIZE + 1, &text, &len);
        if (r == -EFBIG || (r >= 0 && len > POLICY_MAX_SIZE))
                return too_large(err, path);
        if (r < 0)
                return al_error_set(err, r, "reading policy \"%s\"", path);
        return load_json(p, text, len, path, err);
}

/* Setters */

int policy_set_class(struct policy *p, const char *name, struct al_error *err)
{
        const struct policy_class *cl = policy_class_find(name);
        if (!cl)
                return al_error_set(err, 0, "unknown class \"%s\" (one of " CLASS_NAMES ")",
                                    SHOWN(name));
        free(p->class_name);
        p->class_name = xstrdup(cl->name);
        return 0;
}

int policy_set_limit(struct policy *p, const char *key, const char *value, struct al_error *err)
{
        struct ctx c = {.err = err};
        const struct limit_desc *d = key ? limit_desc_find(key) : NULL;
        uint64_t v;

        if (!d)
                return al_error_set(err, 0, "unknown limit \"%s\"", SHOWN(key));
        path_push(&c, "limits");
        path_push(&c, d->key);
        int r = value ? parse_text(value, d->kind, &v) : -EINVAL;
        if (r == -ERANGE)
                return fail(&c, "\"%s\" is too large", c.path);
        if (r == -EDOM)
                return fail(&c, "\"%s\" must be 0 or at least 1ms (got \"%s\")", c.path,
                            SHOWN(value));
        if (r < 0)
                return fail(&c, "\"%s\" must be %s (got \"%s\")", c.path,
                            kind_what(d->kind, d->min), SHOWN(value));
        r = check_range(&c, c.path, d->kind, v, d->min, d->max);
        if (r < 0)
                return r;
        limit_store(p, d, v);
        return 0;
}

void policy_add_env(struct policy *p, const char *key, const char *value)
{
        for (size_t i = 0; i < p->n_env; i++)
                if (p->env[i].key && key && STREQ(p->env[i].key, key)) {
                        free(p->env[i].value);
                        p->env[i].value = xstrdup(value ? value : "");
                        return;
                }
        p->env = xrealloc(p->env, p->n_env + 1, sizeof(*p->env));
        p->env[p->n_env].key = xstrdup(key);
        p->env[p->n_env].value = xstrdup(value ? value : "");
        p->n_env++;
}

void policy_add_mount(struct policy *p, const char *source, const char *target, bool readonly)
{
        p->mounts = xrealloc(p->mounts, p->n_mounts + 1, sizeof(*p->mounts));
        p->mounts[p->n_mounts] = (struct policy_mount){
            .source = xstrdup(source),
            .target = xstrdup(target),
            .readonly = readonly,
        };
        p->n_mounts++;
}

void policy_add_deny_read(struct policy *p, const char *path)
{
        p->deny_read = strv_append(p->deny_read, &p->n_deny_read, path);
}

/* Finalizing */

/* Make `path` absolute: "~" and "~/x" against home, relative paths against
 * base. Only "." components and repeated or trailing slashes are dropped;
 * ".." stays, since which directory it names depends on symlinks on disk. */
static int resolve_path(struct ctx *c, const char *name, char **path, const char *base,
                        const char *home)
{
        const char *s = *path;
        _cleanup_free_ char *joined = NULL;

        if (s[0] == '~') {
                if (!home)
                        return fail(c, "\"%s\" starts with \"~\" but no home directory is known",
                                    name);
                joined = xasprintf("%s/%s", home, s[1] ? s + 2 : "");
        } else if (s[0] == '/')
                joined = xstrdup(s);
        else
                joined = xasprintf("%s/%s", base, s);

        char *out = xcalloc(strlen(joined) + 2, 1);
        size_t n = 0;
        for (const char *q = joined; *q;) {
                q += strspn(q, "/");
                size_t len = strcspn(q, "/");
                if (len == 0 || (len == 1 && q[0] == '.')) {
                        q += len;
                        continue;
                }
                out[n++] = '/';
                memcpy(out + n, q, len);
                n += len;
                q += len;
        }
        if (n == 0)
                out[n++] = '/';
        out[n] = '\0';
        free(*path);
        *path = out;
        return 0;
}

static bool under_path(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        if (STREQ(dir, "/"))
                return true;
        return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* An allowRead entry shows again a part of a denyRead entry: it must lie
 * strictly under one, and never under the mandatory list (checked here for
 * the caller's home and absolute entries, and against every home's real
 * paths when the sandbox starts). Both are absolute and normalised here. */
static int check_allow_read(struct ctx *c, const struct policy *t, size_t i)
{
        const char *a = t->allow_read[i];
        char name[64];
        snprintf(name, sizeof(name), "filesystem.allowRead[%zu]", i);
        bool under = false;
        for (size_t j = 0; j < t->n_deny_read; j++)
                if (under_path(a, t->deny_read[j]) && !STREQ(a, t->deny_read[j]))
                        under = true;
        if (!under)
                return fail_value(c, name,
                                  "must lie under a filesystem.denyRead entry (it re-allows "
                                  "reading part of one)",
                                  a);
        for (size_t j = 0; policy_mandatory_deny[j]; j++) {
                const char *m = policy_mandatory_deny[j];
                if (m[0] == '~') {
                        /* "~/.ssh" for any home: a component ".ssh" right
                         * after a home-like prefix is refused outright. */
                        const char *rest = m + 1;
                        const char *hit = strstr(a, rest);
                        size_t n = strlen(rest);
                        while (hit) {
                                if (hit[n] == '\0' || hit[n] == '/')
                                        return fail_value(c, name,
                                                          "is on the mandatory deny list and "
                                                          "cannot be re-allowed",
                                                          a);
                                hit = strstr(hit + 1, rest);
                        }
                } else if (under_path(a, m) || fnmatch(m, a, FNM_PATHNAME) == 0)
                        return fail_value(
                            c, name, "is on the mandatory deny list and cannot be re-allowed", a);
        }
        return 0;
}

int policy_finalize(struct policy *p, const char *base_dir, const char *home, struct al_error *err)
{
        struct ctx c = {.origin = "policy", .err = err};
        _cleanup_free_ char *cwd = NULL;
        char name[128];
        int r;

        if (!base_dir) {
                cwd = get_current_dir_name();
                if (!cwd)
                        return al_error_set(err, errno, "policy: getting the current directory");
                base_dir = cwd;
        }
        if (base_dir[0] != '/')
                return fail(&c, "base directory \"%s\" is not absolute", SHOWN(base_dir));
        if (home && home[0] != '/')
                return fail(&c, "home directory \"%s\" is not absolute", SHOWN(home));

        r = validate(&c, p);
        if (r < 0)
                return r;

        _cleanup_(policy_freep) struct policy *t = policy_dup(p);
        if (t->workspace) {
                r = resolve_path(&c, "workspace.path", &t->workspace, base_dir, home);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < t->n_deny_read; i++) {
                snprintf(name, sizeof(name), "filesystem.denyRead[%zu]", i);
                r = resolve_path(&c, name, &t->deny_read[i], base_dir, home);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < t->n_deny_write; i++) {
                snprintf(name, sizeof(name), "filesystem.denyWrite[%zu]", i);
                r = resolve_path(&c, name, &t->deny_write[i], base_dir, home);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < t->n_allow_read; i++) {
                snprintf(name, sizeof(name), "filesystem.allowRead[%zu]", i);
                r = resolve_path(&c, name, &t->allow_read[i], base_dir, home);
                if (r < 0)
                        return r;
                r = check_allow_read(&c, t, i);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < t->n_mounts; i++) {
                snprintf(name, sizeof(name), "filesystem.mounts[%zu].source", i);
                r = resolve_path(&c, name, &t->mounts[i].source, base_dir, home);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < t->n_routes; i++) {
                if (!t->routes[i].ca_file)
                        continue;
                snprintf(name, sizeof(name), "network.routes[%zu].caFile", i);
                r = resolve_path(&c, name, &t->routes[i].ca_file, base_dir, home);
                if (r < 0)
                        return r;
        }

        const struct policy_class *cl = policy_class_find(t->class_name);
        if (!(t->limits_set & POLICY_LIMIT_MEMORY))
                t->limits.memory = cl->memory;
        if (!(t->limits_set & POLICY_LIMIT_CPUS))
                t->limits.cpus_milli = cl->cpus_milli;
        if (!(t->limits_set & POLICY_LIMIT_TIMEOUT))
                t->limits.timeout_ms = cl->timeout_ms;
        if (!(t->limits_set & POLICY_LIMIT_FILE_SIZE))
                t->limits.file_size = t->limits.disk;

        if (!t->net_mode_set)
                t->net_mode =
                    t->n_net_allow > 0 || t->n_routes > 0 ? POLICY_NET_GATED : POLICY_NET_NONE;

        policy_commit(p, TAKE_PTR(t));
        return 0;
}

/* Canonical JSON */

static json_t *str_json(const char *s)
{
        return s ? json_string(s) : json_null();
}

static json_t *strv_json(char *const *v, size_t n)
{
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
                json_array_append_new(a, str_json(v[i]));
        return a;
}

static json_t *kv_json(const struct policy_kv *kv, size_t n)
{
        json_t *o = json_object();
        for (size_t i = 0; i < n; i++)
                if (kv[i].key)
                        json_object_set_new(o, kv[i].key, str_json(kv[i].value));
        return o;
}

/* Thousandths as a JSON number: an integer when whole. */
static json_t *milli_json(uint64_t v)
{
        if (v % 1000 == 0)
                return json_integer((json_int_t)(v / 1000));
        return json_real((double)v / 1000.0);
}

static const char *enum_name(const char *const *names, size_t n, unsigned v)
{
        return v < n ? names[v] : "invalid";
}

char *policy_to_json(const struct policy *p)
{
        json_t *root = json_object(), *o, *a;

        o = json_object();
        json_object_set_new(o, "path", str_json(p->workspace));
        json_object_set_new(o, "mode",
                            json_string(enum_name(workspace_modes, ARRAY_SIZE(workspace_modes),
                                                  p->workspace_mode)));
        json_object_set_new(o, "protectGit", json_boolean(p->protect_git));
        if (p->allow_broad) /* written only when set, so older digests hold */
                json_object_set_new(o, "allowBroad", json_true());
        json_object_set_new(root, "workspace", o);

        o = json_object();
        json_object_set_new(o, "read",
                            json_string(enum_name(read_modes, ARRAY_SIZE(read_modes), p->read)));
        json_object_set_new(o, "denyRead", strv_json(p->deny_read, p->n_deny_read));
        json_object_set_new(o, "allowWrite", strv_json(p->allow_write, p->n_allow_write));
        if (p->n_deny_write)
                json_object_set_new(o, "denyWrite", strv_json(p->deny_write, p->n_deny_write));
        if (p->n_allow_read)
                json_object_set_new(o, "allowRead", strv_json(p->allow_read, p->n_allow_read));
        a = json_array();
        for (size_t i = 0; i < p->n_mounts; i++)
                json_array_append_new(a, json_pack("{s:o, s:o, s:b}", "source",
                                                   str_json(p->mounts[i].source), "target",
                                                   str_json(p->mounts[i].target), "readonly",
                                                   p->mounts[i].readonly));
        json_object_set_new(o, "mounts", a);
        json_object_set_new(root, "filesystem", o);

        o = json_object();
        json_object_set_new(o, "mode",
                            json_string(enum_name(net_modes, ARRAY_SIZE(net_modes), p->net_mode)));
        json_object_set_new(o, "allow", strv_json(p->net_allow, p->n_net_allow));
        json_object_set_new(o, "deny", strv_json(p->net_deny, p->n_net_deny));
        json_object_set_new(o, "allowPrivate",
                            strv_json(p->net_allow_private, p->n_net_allow_private));
        json_object_set_new(o, "hosts", kv_json(p->net_hosts, p->n_net_hosts));
        a = json_array();
        for (size_t i = 0; i < p->n_routes; i++) {
                const struct policy_route *r = &p->routes[i];
                json_array_append_new(
                    a, json_pack(
                           "{s:o, s:o, s:o, s:o, s:o, s:o}", "name", str_json(r->name), "upstream",
                           str_json(r->upstream), "inject", kv_json(r->inject, r->n_inject),
                           "strip", strv_json(r->strip, r->n_strip), "record",
                           strv_json(r->record, r->n_record), "caFile", str_json(r->ca_file)));
        }
        json_object_set_new(o, "routes", a);
        json_object_set_new(o, "budget",
                            json_pack("{s:I, s:I, s:I, s:I}", "requests",
                                      (json_int_t)p->budget.requests, "bytes",
                                      (json_int_t)p->budget.bytes, "rate",
                                      (json_int_t)p->budget.rate, "refusals",
                                      (json_int_t)p->budget.refusals));
        json_object_set_new(root, "network", o);

        o = json_object();
        for (size_t i = 0; i < ARRAY_SIZE(limit_descs); i++) {
                const struct limit_desc *d = &limit_descs[i];
                uint64_t v = *limit_field((struct policy_limits *)&p->limits, d);
                json_object_set_new(o, d->key,
                                    d->kind == KIND_DURATION || d->kind == KIND_CPUS
                                        ? milli_json(v)
                                        : json_integer((json_int_t)v));
        }
        json_object_set_new(root, "limits", o);

        json_object_set_new(root, "class", str_json(p->class_name));
        json_object_set_new(root, "env", kv_json(p->env, p->n_env));
        json_object_set_new(
            root, "tools",
            json_pack("{s:o}", "allow", strv_json(p->tools_allow, p->n_tools_allow)));
        json_object_set_new(root, "uid", json_integer(p->uid));
        json_object_set_new(root, "gid", json_integer(p->gid));

        char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(15));
        json_decref(root);
        return s;
}
