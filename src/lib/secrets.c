/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "secrets-internal.h"
#include "secrets.h"
#include "util.h"

int sbuf_append(struct sbuf *b, const char *p, size_t n)
{
        if (n > b->max - b->len)
                return -E2BIG;
        if (b->len + n + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 64;
                while (cap < b->len + n + 1)
                        cap *= 2;
                b->data = xrealloc(b->data, cap, 1);
                b->cap = cap;
        }
        memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = '\0';
        return 0;
}

void sbuf_wipe(struct sbuf *b)
{
        if (b->data)
                explicit_bzero(b->data, b->cap);
        free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
}

char *sbuf_take(struct sbuf *b, size_t *ret_len)
{
        if (!b->data)
                b->data = xcalloc(1, 1);
        if (ret_len)
                *ret_len = b->len;
        b->len = b->cap = 0;
        return TAKE_PTR(b->data);
}

/* Secrets. */

struct secret {
        char *name;
        char *value;
        size_t len;
        unsigned line; /* where the dotenv file set it */
};

struct secrets {
        struct secret *v;
        size_t n;
        struct redactor *redactor;
};

struct secrets *secrets_new(void)
{
        struct secrets *s = xcalloc(1, sizeof(*s));
        s->redactor = redactor_new();
        return s;
}

struct secrets *secrets_free(struct secrets *s)
{
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n; i++) {
                explicit_bzero(s->v[i].value, s->v[i].len);
                free(s->v[i].value);
                free(s->v[i].name);
        }
        free(s->v);
        redactor_free(s->redactor);
        free(s);
        return NULL;
}

static void secretsp(struct secrets **s)
{
        secrets_free(*s);
}

static bool is_name_char(char c, bool first)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
               (!first && c >= '0' && c <= '9');
}

static bool is_name(const char *p, size_t n)
{
        if (n == 0 || n > 256)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_name_char(p[i], i == 0))
                        return false;
        return true;
}

static const struct secret *find(const struct secrets *s, const char *name, size_t n)
{
        for (size_t i = 0; i < s->n; i++)
                if (strlen(s->v[i].name) == n && memcmp(s->v[i].name, name, n) == 0)
                        return &s->v[i];
        return NULL;
}

static void add_secret(struct secrets *s, const char *name, size_t name_len, char *value,
                       size_t len, unsigned line)
{
        s->v = xrealloc(s->v, s->n + 1, sizeof(*s->v));
        s->v[s->n].name = strndup(name, name_len);
        if (!s->v[s->n].name)
                abort();
        s->v[s->n].value = value;
        s->v[s->n].len = len;
        s->v[s->n].line = line;
        s->n++;
}

static int load_json(struct secrets *s, const char *path, const char *buf, size_t len,
                     struct al_error *err)
{
        json_error_t jerr;
        json_t *o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
        const char *key;
        json_t *val;
        int r = 0;

        /* The parser's own message quotes the text near the error, which
         * is a secret's value: only where, and what kind of error. */
        if (!o)
                return al_error_set(
                    err, 0, "secrets file \"%s\": line %d, column %d: not valid JSON (%s)", path,
                    jerr.line, jerr.column,
                    json_error_code(&jerr) == json_error_duplicate_key ? "a duplicate name"
                    : json_error_code(&jerr) == json_error_premature_end_of_input
                        ? "it ends too early"
                    : json_error_code(&jerr) == json_error_invalid_syntax
                        ? "a value is not a quoted string, or a comma or brace is "
                          "missing"
                        : "a bad escape, a control character or bad UTF-8 in a "
                          "string");
        if (!json_is_object(o)) {
                json_decref(o);
                return al_error_set(err, 0, "secrets file \"%s\": not a JSON object", path);
        }
        json_object_foreach(o, key, val)
        {
                if (!is_name(key, strlen(key))) {
                        r = al_error_set(err, 0,
                                         "secrets file \"%s\": \"%s\" is not a valid name "
                                         "(letters, digits and _, not starting with a digit)",
                                         path, key);
                        break;
                }
                if (!json_is_string(val)) {
                        r = al_error_set(err, 0,
                                         "secrets file \"%s\": the value of \"%s\" is not a string",
                                         path, key);
                        break;
                }
                size_t n = json_string_length(val);
                char *v = xcalloc(n + 1, 1);
                memcpy(v, json_string_value(val), n);
                add_secret(s, key, strlen(key), v, n, 0);
        }
        json_decref(o);
        return r;
}

static void skip_blank(const char **p)
{
        while (**p == ' ' || **p == '\t' || **p == '\r')
                (*p)++;
}

/* A quoted dotenv value starting after its opening quote; may span lines. */
static int dotenv_quoted(const char **pp, char quote, unsigned *line, struct sbuf *out)
{
        const char *p = *pp;

        for (;;) {
                char c = *p;
                if (c == '\0')
                        return -EINVAL;
                p++;
                if (c == quote)
                        break;
                if (c == '\n')
                        (*line)++;
                if (quote == '"' && c == '\\' && *p) {
                        char e = *p++;
                        switch (e) {
                        case 'n':
                                c = '\n';
                                break;
                        case 'r':
                                c = '\r';
                                break;
                        case 't':
                                c = '\t';
                                break;
                        case '"':
                        case '\\':
                        case '$':
                                c = e;
                                break;
                        default:
                                if (sbuf_append(out, "\\", 1) < 0)
                                        return -E2BIG;
                                c = e;
                                if (c == '\n')
                                        (*line)++;
                        }
                }
                if (sbuf_append(out, &c, 1) < 0)
                        return -E2BIG;
        }
        *pp = p;
        return 0;
}

static int load_dotenv(struct secrets *s, const char *path, const char *buf, struct al_error *err)
{
        const char *p = buf;
        unsigned line = 1;

        while (*p) {
                skip_blank(&p);
                if (*p == '\n') {
                        p++;
                        line++;
                        continue;
                }
                if (*p == '\0')
                        break;
                if (*p == '#') {
                        p += strcspn(p, "\n");
                        continue;
                }
                if (strncmp(p, "export", 6) == 0 && (p[6] == ' ' || p[6] == '\t')) {
                        p += 6;
                        skip_blank(&p);
                }
                const char *name = p;
                while (is_name_char(*p, p == name))
                        p++;
                size_t name_len = (size_t)(p - name);
                skip_blank(&p);
                if (name_len == 0 || *p != '=')
                        return al_error_set(err, 0,
                                            "secrets file \"%s\": line %u: expected NAME=VALUE",
                                            path, line);
                if (!is_name(name, name_len))
                        return al_error_set(err, 0, "secrets file \"%s\": line %u: name too long",
                                            path, line);
                p++;
                while (*p == ' ' || *p == '\t')
                        p++;

                unsigned start_line = line;
                struct sbuf val = {.max = SECRETS_FILE_MAX};
                if (*p == '"' || *p == '\'') {
                        char q = *p++;
                        if (dotenv_quoted(&p, q, &line, &val) < 0) {
                                sbuf_wipe(&val);
                                return al_error_set(err, 0,
                                                    "secrets file \"%s\": line %u: unterminated "
                                                    "%s quote",
                                                    path, start_line,
                                                    q == '"' ? "double" : "single");
                        }
                        skip_blank(&p);
                        if (*p == '#')
                                p += strcspn(p, "\n");
                        if (*p != '\n' && *p != '\0') {
                                sbuf_wipe(&val);
                                return al_error_set(err, 0,
                                                    "secrets file \"%s\": line %u: unexpected "
                                                    "text after the closing quote",
                                                    path, line);
                        }
                } else {
                        const char *v = p;
                        while (*p && *p != '\n' &&
                               !(*p == '#' && p > v && (p[-1] == ' ' || p[-1] == '\t')))
                                p++;
                        const char *end = p;
                        while (end > v && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
                                end--;
                        if (sbuf_append(&val, v, (size_t)(end - v)) < 0) {
                                sbuf_wipe(&val);
                                return al_error_set(err, E2BIG, "secrets file \"%s\"", path);
                        }
                        p += strcspn(p, "\n");
                }

                const struct secret *dup = find(s, name, name_len);
                if (dup) {
                        sbuf_wipe(&val);
                        return al_error_set(err, 0,
                                            "secrets file \"%s\": line %u: %.*s is already set "
                                            "on line %u",
                                            path, start_line, (int)name_len, name, dup->line);
                }
                size_t len = 0;
                char *value = sbuf_take(&val, &len);
                add_secret(s, name, name_len, value, len, start_line);
        }
        return 0;
}

int secrets_load_file(const char *path, struct secrets **ret, struct al_error *err)
{
        struct stat st;

        if (!path)
                return al_error_set(err, EINVAL, "loading secrets");
        /* O_NONBLOCK: a FIFO planted at the path must not hang us before the
         * type check refuses it. */
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return al_error_set(err, errno, "opening secrets file \"%s\"", path);
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "inspecting secrets file \"%s\"", path);
        if (!S_ISREG(st.st_mode))
                return al_error_set(err, 0, "secrets file \"%s\" is not a regular file", path);
        if (st.st_uid != geteuid())
                return al_error_set(err, 0,
                                    "secrets file \"%s\" is owned by uid %u, not by the caller "
                                    "(uid %u)",
                                    path, (unsigned)st.st_uid, (unsigned)geteuid());
        if (st.st_mode & 077)
                return al_error_set(err, 0,
                                    "secrets file \"%s\" has mode %04o; it must be 0600 or "
                                    "stricter (chmod 600 \"%s\")",
                                    path, (unsigned)(st.st_mode & 07777), path);
        if (st.st_size > SECRETS_FILE_MAX)
                return al_error_set(err, EFBIG, "secrets file \"%s\"", path);

        struct sbuf b = {.max = SECRETS_FILE_MAX};
        for (;;) {
                char chunk[4096];
                ssize_t n = read(fd, chunk, sizeof(chunk));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        int e = errno;
                        sbuf_wipe(&b);
                        return al_error_set(err, e, "reading secrets file \"%s\"", path);
                }
                if (n == 0)
                        break;
                int r = sbuf_append(&b, chunk, (size_t)n);
                explicit_bzero(chunk, sizeof(chunk));
                if (r < 0) {
                        sbuf_wipe(&b);
                        return al_error_set(err, EFBIG, "secrets file \"%s\"", path);
                }
        }
        if (!b.data)
                b.data = xcalloc(1, 1);
        if (memchr(b.data, '\0', b.len)) {
                sbuf_wipe(&b);
                return al_error_set(err, 0, "secrets file \"%s\" contains a NUL byte", path);
        }

        _cleanup_(secretsp) struct secrets *s = secrets_new();
        const char *p = b.data;
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
                p++;
        int r =
            *p == '{' ? load_json(s, path, b.data, b.len, err) : load_dotenv(s, path, b.data, err);
        sbuf_wipe(&b);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

static int lookup(const struct secrets *s, const char *name, size_t n, const char **ret)
{
        const char *v;
        size_t len;
        const struct secret *e = find(s, name, n);

        if (e) {
                v = e->value;
                len = e->len;
        } else {
                char key[257];
                if (n >= sizeof(key))
                        return -ENOENT;
                memcpy(key, name, n);
                key[n] = '\0';
                v = secure_getenv(key);
                if (!v)
                        return -ENOENT;
                len = strlen(v);
        }
        /* A value we could not register must not be handed out: it would
         * reach the logs unredacted. */
        int r = redactor_add(s->redactor, v, len);
        if (r < 0)
                return r;
        *ret = v;
        return 0;
}

const char *secrets_get(const struct secrets *s, const char *name)
{
        const char *v = NULL;

        if (!s || !name || lookup(s, name, strlen(name), &v) < 0)
                return NULL;
        return v;
}

struct redactor *secrets_redactor(const struct secrets *s)
{
        return s ? s->redactor : NULL;
}

static int expand_var(const struct secrets *s, const char *name, size_t n,
                      const struct secrets_vars *vars, const char **ret, struct al_error *err)
{
        static const struct secrets_vars none = {0};
        const struct {
                const char *name;
                const char *value;
        } table[] = {
            {"run.id", (vars ? vars : &none)->run_id},
            {"run.attempt", (vars ? vars : &none)->run_attempt},
            {"sandbox.id", (vars ? vars : &none)->sandbox_id},
            {"account", (vars ? vars : &none)->account},
        };

        if (n > 7 && memcmp(name, "secret:", 7) == 0) {
                const char *key = name + 7;
                size_t klen = n - 7;
                if (!is_name(key, klen))
                        return al_error_set(err, 0, "\"%.*s\" is not a valid secret name",
                                            (int)klen, key);
                int r = lookup(s, key, klen, ret);
                if (r == -ENOENT)
                        return al_error_set(err, 0,
                                            "secret \"%.*s\" is not set (neither in the secrets "
                                            "file nor in the environment)",
                                            (int)klen, key);
                if (r < 0)
                        return al_error_set(err, r, "secret \"%.*s\" cannot be redacted", (int)klen,
                                            key);
                return 0;
        }
        for (size_t i = 0; i < ARRAY_SIZE(table); i++)
                if (strlen(table[i].name) == n && memcmp(table[i].name, name, n) == 0) {
                        if (!table[i].value)
                                return al_error_set(err, 0, "\"${%s}\" has no value here",
                                                    table[i].name);
                        *ret = table[i].value;
                        return 0;
                }
        return al_error_set(err, 0, "unknown template variable \"${%.*s}\"", (int)n, name);
}

int secrets_expand(const struct secrets *s, const char *template, const struct secrets_vars *vars,
                   char **ret, struct al_error *err)
{
        struct sbuf out = {.max = SECRETS_EXPAND_MAX};
        const char *p = template;
        int r = 0;

        if (!s || !template)
                return al_error_set(err, EINVAL, "expanding a template");
        while (*p && r >= 0) {
                if (p[0] == '$' && p[1] == '$' && p[2] == '{') {
                        r = sbuf_append(&out, "${", 2);
                        p += 3;
                        continue;
                }
                if (p[0] != '$' || p[1] != '{') {
                        size_t n = strcspn(p + 1, "$") + 1;
                        r = sbuf_append(&out, p, n);
                        p += n;
                        continue;
                }
                const char *end = strchr(p + 2, '}');
                if (!end) {
                        sbuf_wipe(&out);
                        return al_error_set(err, 0, "unterminated \"${\" in \"%s\"", template);
                }
                const char *v = NULL;
                int e = expand_var(s, p + 2, (size_t)(end - p - 2), vars, &v, err);
                if (e < 0) {
                        sbuf_wipe(&out);
                        return e;
                }
                r = sbuf_append(&out, v, strlen(v));
                p = end + 1;
        }
        if (r < 0) {
                sbuf_wipe(&out);
                return al_error_set(err, 0, "the expanded value is longer than %d bytes",
                                    SECRETS_EXPAND_MAX);
        }
        *ret = sbuf_take(&out, NULL);
        return 0;
}
