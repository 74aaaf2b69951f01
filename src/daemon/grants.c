/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
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
                        return al_error_set(err, 0, "classes: expected a comma-separated list of "
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

char *grant_classes_string(const struct grant *g)
{
        size_t len = 1;
        for (size_t i = 0; i < g->n_classes; i++)
                len += strlen(g->classes[i]) + 1;
        char *s = xcalloc(len, 1);
        size_t off = 0;
        for (size_t i = 0; i < g->n_classes; i++) {
                if (i > 0)
                        s[off++] = ',';
                size_t n = strlen(g->classes[i]);
                memcpy(s + off, g->classes[i], n);
                off += n;
        }
        s[off] = '\0';
        return s;
}
