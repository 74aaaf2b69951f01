/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "audit.h"
#include "grants.h"
#include "policy.h"
#include "util.h"

struct grant *grant_free(struct grant *g)
{
        if (!g)
                return NULL;
        free(g->name);
        strv_free(g->classes);
        strv_free(g->secrets);
        strv_free(g->tools);
        free(g);
        return NULL;
}

int grant_token_new(char ret[static GRANT_TOKEN_LEN + 1])
{
        char hex[65];
        int r = random_hex(hex, 64);
        if (r < 0)
                return r;
        memcpy(ret, GRANT_TOKEN_PREFIX, strlen(GRANT_TOKEN_PREFIX));
        memcpy(ret + strlen(GRANT_TOKEN_PREFIX), hex, 64);
        ret[GRANT_TOKEN_LEN] = '\0';
        return 0;
}

void grant_token_hash(const char *token, size_t len, char ret[static GRANT_HASH_HEX + 1])
{
        audit_hash_hex(token, len, ret);
}

int grant_bearer_token(const char *header, const char **ret, size_t *ret_len)
{
        if (!header || strncasecmp(header, "Bearer ", 7) != 0)
                return -EINVAL;
        const char *t = header + 7;
        while (*t == ' ')
                t++;
        size_t n = 0;
        while (t[n] && t[n] != ' ') {
                if (!isgraph((unsigned char)t[n]))
                        return -EINVAL;
                if (++n > GRANT_TOKEN_MAX)
                        return -EINVAL;
        }
        for (const char *p = t + n; *p; p++)
                if (*p != ' ')
                        return -EINVAL;
        if (n == 0)
                return -EINVAL;
        *ret = t;
        *ret_len = n;
        return 0;
}

bool grant_name_valid(const char *name)
{
        size_t n = name ? strlen(name) : 0;
        if (n == 0 || n > GRANT_NAME_MAX || name[0] == '.' || name[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
                        return false;
        return true;
}

int grant_parse_classes(const char *csv, char ***ret, size_t *ret_n, struct al_error *err)
{
        _cleanup_strv_ char **v = NULL;
        size_t n = 0;
        const char *p = csv;
        for (;;) {
                const char *end = strchr(p, ',');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                char name[32];
                if (len == 0 || len >= sizeof(name))
                        return al_error_set(err, 0,
                                            "classes: expected a comma-separated list of "
                                            "small, medium, large, xlarge (got \"%s\")",
                                            csv);
                memcpy(name, p, len);
                name[len] = '\0';
                if (!policy_class_find(name))
                        return al_error_set(err, 0, "classes: unknown class \"%s\"", name);
                for (size_t i = 0; i < n; i++)
                        if (STREQ(v[i], name))
                                return al_error_set(err, 0, "classes: \"%s\" given twice", name);
                if (n >= GRANT_CLASSES_MAX)
                        return al_error_set(err, 0, "classes: at most %d", GRANT_CLASSES_MAX);
                v = strv_append(v, &n, name);
                if (!end)
                        break;
                p = end + 1;
        }
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

bool grant_allows_class(const struct grant *g, const char *class_name)
{
        if (!g->classes)
                return true;
        for (size_t i = 0; i < g->n_classes; i++)
                if (STREQ(g->classes[i], class_name))
                        return true;
        return false;
}

/* The names as one comma-separated string, as the store keeps them. */
static char *join_commas(char *const *v, size_t n_v)
{
        size_t len = 1;
        for (size_t i = 0; i < n_v; i++)
                len += strlen(v[i]) + 1;
        char *s = xcalloc(len, 1);
        size_t off = 0;
        for (size_t i = 0; i < n_v; i++) {
                if (i > 0)
                        s[off++] = ',';
                size_t n = strlen(v[i]);
                memcpy(s + off, v[i], n);
                off += n;
        }
        s[off] = '\0';
        return s;
}

char *grant_classes_string(const struct grant *g)
{
        return join_commas(g->classes, g->n_classes);
}

bool grant_secret_reserved(const char *name)
{
        return STREQ(name, "GIT_TOKEN") || STREQ(name, "GIT_USERNAME");
}

static bool secret_name_valid(const char *s, size_t n)
{
        if (n == 0 || n > 256 || (s[0] >= '0' && s[0] <= '9'))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!isalnum((unsigned char)s[i]) && s[i] != '_')
                        return false;
        return true;
}

int grant_add_secret(char ***v, size_t *n, const char *name, struct al_error *err)
{
        if (!secret_name_valid(name, strlen(name)))
                return al_error_set(err, 0,
                                    "secret \"%s\": expected a name of letters, digits and _, "
                                    "not starting with a digit",
                                    name);
        if (grant_secret_reserved(name))
                return al_error_set(err, 0,
                                    "secret \"%s\" is the daemon's git credential, which no "
                                    "policy may inject; a grant with allowGit has the daemon "
                                    "clone and push with it instead",
                                    name);
        for (size_t i = 0; i < *n; i++)
                if (STREQ((*v)[i], name))
                        return al_error_set(err, 0, "secret \"%s\" given twice", name);
        if (*n >= GRANT_SECRETS_MAX)
                return al_error_set(err, 0, "at most %d secrets", GRANT_SECRETS_MAX);
        *v = strv_append(*v, n, name);
        return 0;
}

char *grant_secrets_string(const struct grant *g)
{
        return join_commas(g->secrets, g->n_secrets);
}

/* A comma-separated list of names, each checked and added by add. */
static int parse_names(const char *csv,
                       int (*add)(char ***, size_t *, const char *, struct al_error *), char ***ret,
                       size_t *ret_n, struct al_error *err)
{
        _cleanup_strv_ char **v = NULL;
        size_t n = 0;
        const char *p = csv;
        while (p && *p) {
                const char *end = strchr(p, ',');
                size_t len = end ? (size_t)(end - p) : strlen(p);
                _cleanup_free_ char *name = xasprintf("%.*s", (int)len, p);
                int r = add(&v, &n, name, err);
                if (r < 0)
                        return r;
                p = end ? end + 1 : NULL;
        }
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

int grant_parse_secrets(const char *csv, char ***ret, size_t *ret_n, struct al_error *err)
{
        return parse_names(csv, grant_add_secret, ret, ret_n, err);
}

bool grant_allows_secret(const struct grant *g, const char *name)
{
        if (grant_secret_reserved(name))
                return false;
        for (size_t i = 0; i < g->n_secrets; i++)
                if (STREQ(g->secrets[i], name))
                        return true;
        return false;
}

static bool tool_name_valid(const char *name)
{
        size_t n = strlen(name);
        if (n == 0 || n > GRANT_TOOL_NAME_MAX || name[0] == '.' || name[0] == '-')
                return false;
        return strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
               n;
}

int grant_add_tool(char ***v, size_t *n, const char *name, struct al_error *err)
{
        if (!tool_name_valid(name))
                return al_error_set(err, 0,
                                    "tool \"%s\": expected a tool name of 1 to 64 of A-Z a-z "
                                    "0-9 . _ -, such as core.time",
                                    name);
        for (size_t i = 0; i < *n; i++)
                if (STREQ((*v)[i], name))
                        return al_error_set(err, 0, "tool \"%s\" given twice", name);
        if (*n >= GRANT_TOOLS_MAX)
                return al_error_set(err, 0, "at most %d tools", GRANT_TOOLS_MAX);
        *v = strv_append(*v, n, name);
        return 0;
}

char *grant_tools_string(const struct grant *g)
{
        return join_commas(g->tools, g->n_tools);
}

int grant_parse_tools(const char *csv, char ***ret, size_t *ret_n, struct al_error *err)
{
        return parse_names(csv, grant_add_tool, ret, ret_n, err);
}

bool grant_allows_tool(const struct grant *g, const char *name)
{
        for (size_t i = 0; i < g->n_tools; i++)
                if (STREQ(g->tools[i], name))
                        return true;
        return false;
}

static int refuse(struct grant_policy_refusal *ret, const char *limit, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int refuse(struct grant_policy_refusal *ret, const char *limit, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(ret->message, sizeof(ret->message), fmt, ap);
        va_end(ap);
        ret->limit = limit;
        return -EPERM;
}

/* Every "${secret:NAME}" in `v`, wherever it stands (also after "$$", which
 * only a literal would follow: refusing a literal is the safe mistake). */
static int check_template(const struct grant *g, const char *route, const char *field,
                          const char *v, struct grant_policy_refusal *ret)
{
        static const char open[] = "${secret:";
        for (const char *t = v; (t = strstr(t, open));) {
                t += sizeof(open) - 1;
                size_t n = strcspn(t, "}");
                char name[257];
                if (n >= sizeof(name))
                        return refuse(ret, "secrets",
                                      "route \"%s\" header \"%s\" names a secret longer than "
                                      "256 bytes",
                                      route, field);
                memcpy(name, t, n);
                name[n] = '\0';
                if (grant_secret_reserved(name))
                        return refuse(ret, "secrets",
                                      "route \"%s\" header \"%s\" injects ${secret:%s}, the "
                                      "daemon's git credential: no policy may use it (a grant "
                                      "with allowGit has the daemon clone and push instead)",
                                      route, field, name);
                if (!grant_allows_secret(g, name))
                        return refuse(ret, "secrets",
                                      "route \"%s\" header \"%s\" injects ${secret:%s}, which "
                                      "grant \"%s\" does not name (airlock grant create "
                                      "--secret %s)",
                                      route, field, name, g->name, name);
                t += n;
        }
        return 0;
}

int grant_check_policy(const struct grant *g, const struct policy *p,
                       struct grant_policy_refusal *ret)
{
        for (size_t i = 0; i < p->n_routes; i++) {
                const struct policy_route *rt = &p->routes[i];
                const char *name = rt->name ? rt->name : "?";
                for (size_t j = 0; j < rt->n_inject; j++) {
                        const struct policy_kv *kv = &rt->inject[j];
                        int r = check_template(g, name, kv->key ? kv->key : "?",
                                               kv->value ? kv->value : "", ret);
                        if (r < 0)
                                return r;
                }
        }
        /* A sentinel sends a secret's value to the hosts it lists: the
         * same secrets as a route's inject. */
        for (size_t i = 0; i < p->n_sentinels; i++) {
                const struct policy_sentinel *s = &p->sentinels[i];
                const char *name = s->secret ? s->secret : "";
                if (grant_secret_reserved(name))
                        return refuse(ret, "secrets",
                                      "network.sentinels names %s, the daemon's git credential: "
                                      "no policy may use it",
                                      name);
                if (!grant_allows_secret(g, name))
                        return refuse(ret, "secrets",
                                      "network.sentinels names the secret %s, which grant \"%s\" "
                                      "does not name (airlock grant create --secret %s)",
                                      name, g->name, name);
        }
        /* A tool acts on the host with the daemon's rights and secrets: only
         * those the grant names. */
        for (size_t i = 0; i < p->n_tools_allow; i++)
                if (!grant_allows_tool(g, p->tools_allow[i]))
                        return refuse(ret, "tools",
                                      "tools.allow names \"%s\", which grant \"%s\" does not "
                                      "allow (airlock grant create --tool %s)",
                                      p->tools_allow[i], g->name, p->tools_allow[i]);
        /* An approved ask would reach a tool the grant does not name. */
        if (p->tools_ask)
                return refuse(ret, "tools",
                              "tools.onUnlisted \"ask\" is not available through the API: "
                              "name the tools in tools.allow (airlock grant create --tool NAME)");
        /* The direct path hands the sandbox a socket of the host's: a
         * host-side choice, as host paths are. */
        if (p->net_direct_path && !g->allow_host_workspace)
                return refuse(ret, "allowHostWorkspace",
                              "network.directPath hands the sandbox the host's own sockets; "
                              "it needs a grant with --allow-host-workspace");
        if (g->allow_host_workspace)
                return 0;
        /* The gate connects from the host's own network: a private range
         * reaches the host's loopback services, the cloud metadata address
         * and the host's LAN, host power as host paths are. */
        if (p->n_net_allow_private)
                return refuse(ret, "allowHostWorkspace",
                              "network.allowPrivate (\"%.64s\") reaches the daemon host's own "
                              "network (its loopback services, the cloud metadata address, its "
                              "LAN); it needs a grant with allowHostWorkspace",
                              p->net_allow_private[0]);
        /* The parent resolves the names again, past the private check. */
        if (p->net_parent_send_names)
                return refuse(ret, "allowHostWorkspace",
                              "network.parentProxySendNames lets the parent proxy resolve names "
                              "again, past the gate's private-address check; it needs a grant "
                              "with allowHostWorkspace");
        const char *why;
        for (size_t i = 0; i < p->n_routes; i++)
                if (p->routes[i].ca_file) {
                        return refuse(ret, "allowHostWorkspace",
                                      "route \"%s\" names a host file (caFile): host paths "
                                      "need a grant with allowHostWorkspace",
                                      p->routes[i].name ? p->routes[i].name : "?");
                }
        if (p->n_deny_read > 0)
                why = "filesystem.denyRead names host paths";
        else if (p->n_deny_write > 0)
                why = "filesystem.denyWrite names host paths";
        else if (p->n_allow_read > 0)
                why = "filesystem.allowRead names host paths";
        else if (p->allow_broad)
                why = "workspace.allowBroad";
        else if (policy_host_mounts(p) > 0)
                why = "host mounts";
        else if (p->workspace)
                why = "a host workspace";
        else if (p->read == POLICY_READ_HOST)
                why = "filesystem.read \"host\"";
        else
                return 0;
        return refuse(ret, "allowHostWorkspace", "%s needs a grant with allowHostWorkspace", why);
}

/* The largest limits of the classes a grant allows. */
static void class_ceiling(const struct grant *g, uint64_t *mem, uint64_t *cpus, uint64_t *timeout)
{
        *mem = *cpus = *timeout = 0;
        for (size_t i = 0; i < g->n_classes; i++) {
                const struct policy_class *c = policy_class_find(g->classes[i]);
                if (!c)
                        continue;
                *mem = c->memory > *mem ? c->memory : *mem;
                *cpus = c->cpus_milli > *cpus ? c->cpus_milli : *cpus;
                *timeout = c->timeout_ms > *timeout ? c->timeout_ms : *timeout;
        }
}

int grant_check_limits(const struct grant *g, const struct policy *p,
                       struct grant_policy_refusal *ret)
{
        const char *cls = p->class_name ? p->class_name : "medium";
        if (!grant_allows_class(g, cls)) {
                _cleanup_free_ char *allowed = grant_classes_string(g);
                return refuse(ret, "classes", "class \"%s\" is beyond the grant's classes (%s)",
                              cls, allowed);
        }
        if (!g->classes)
                return 0;
        uint64_t mem, cpus, timeout;
        class_ceiling(g, &mem, &cpus, &timeout);
        if (p->limits.memory > mem)
                return refuse(ret, "limits.memory",
                              "limits.memory %" PRIu64 " is beyond the grant's classes (at most "
                              "%" PRIu64 ")",
                              p->limits.memory, mem);
        if (p->limits.cpus_milli > cpus)
                return refuse(ret, "limits.cpus",
                              "limits.cpus %.3f is beyond the grant's classes (at most %.3f)",
                              (double)p->limits.cpus_milli / 1000, (double)cpus / 1000);
        if (p->limits.timeout_ms == 0 || p->limits.timeout_ms > timeout) {
                char a[64];
                snprintf(a, sizeof(a), "%.3f", (double)p->limits.timeout_ms / 1000);
                return refuse(ret, "limits.timeout",
                              "limits.timeout %s s is beyond the grant's classes (at most %.3f s)",
                              p->limits.timeout_ms ? a : "none", (double)timeout / 1000);
        }
        return 0;
}
