/* SPDX-License-Identifier: Apache-2.0 */
/* The argument schemas of host tools: a JSON Schema subset, compiled at
 * policy load, checked against every call's arguments (which are hostile:
 * the sandbox wrote them). */
#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "schema.h"
#include "utf8.h"
#include "util.h"

struct node {
        enum tool_schema_type type;
        /* object */
        char **names;
        struct node **props;
        size_t n_props;
        bool *required; /* per property */
        /* every type */
        json_t *enum_values; /* array, NULL for none */
        /* numbers */
        bool has_min, has_max;
        double min, max;
        /* strings: lengths in characters */
        bool has_min_len, has_max_len;
        size_t min_len, max_len;
        bool has_pattern;
        regex_t re;
        /* arrays */
        struct node *items;
        bool has_max_items;
        size_t max_items;
};

struct tool_schema {
        unsigned refs;
        struct node *root;
};

static const char *const type_names[] = {"object", "string",  "integer",
                                         "number", "boolean", "array"};

static void node_free(struct node *n)
{
        if (!n)
                return;
        for (size_t i = 0; i < n->n_props; i++) {
                free(n->names[i]);
                node_free(n->props[i]);
        }
        free(n->names);
        free(n->props);
        free(n->required);
        json_decref(n->enum_values);
        if (n->has_pattern)
                regfree(&n->re);
        node_free(n->items);
        free(n);
}

struct compile {
        char *why;
        size_t why_size;
        size_t nodes;
        char path[256];
};

static int bad(struct compile *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct compile *c, const char *fmt, ...)
{
        char msg[256];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (c->path[0])
                snprintf(c->why, c->why_size, "\"%s\": %s", c->path, msg);
        else
                snprintf(c->why, c->why_size, "%s", msg);
        return -EINVAL;
}

static size_t push(struct compile *c, const char *seg)
{
        size_t mark = strlen(c->path);
        snprintf(c->path + mark, sizeof(c->path) - mark, "%s%s", mark ? "." : "", seg);
        return mark;
}

static void pop(struct compile *c, size_t mark)
{
        c->path[mark] = '\0';
}

static int get_count(struct compile *c, json_t *v, const char *key, size_t *ret)
{
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1 << 24)
                return bad(c, "\"%s\" must be an integer from 0 to %d", key, 1 << 24);
        *ret = (size_t)json_integer_value(v);
        return 0;
}

static int compile_node(struct compile *c, const json_t *doc, unsigned depth, struct node **ret);

static int compile_properties(struct compile *c, struct node *n, json_t *v, unsigned depth)
{
        const char *key;
        json_t *e;

        if (!json_is_object(v))
                return bad(c, "\"properties\" must be an object");
        size_t count = json_object_size(v);
        n->names = xcalloc(count, sizeof(*n->names));
        n->props = xcalloc(count, sizeof(*n->props));
        n->required = xcalloc(count, sizeof(*n->required));
        json_object_foreach(v, key, e)
        {
                if (!*key || strlen(key) > 128 || !utf8_str_valid(key))
                        return bad(c, "property names must be 1 to 128 bytes of UTF-8");
                size_t mark = push(c, key);
                n->names[n->n_props] = xstrdup(key);
                int r = compile_node(c, e, depth + 1, &n->props[n->n_props]);
                n->n_props++;
                if (r < 0)
                        return r;
                pop(c, mark);
        }
        return 0;
}

static int compile_required(struct compile *c, struct node *n, json_t *v)
{
        size_t i;
        json_t *e;

        if (!json_is_array(v))
                return bad(c, "\"required\" must be an array of property names");
        json_array_foreach(v, i, e)
        {
                size_t k = n->n_props;
                for (size_t j = 0; json_is_string(e) && j < n->n_props && k == n->n_props; j++)
                        if (STREQ(n->names[j], json_string_value(e)))
                                k = j;
                if (k == n->n_props)
                        return bad(c,
                                   "\"required\" names \"%.64s\", which is not in \"properties\"",
                                   json_is_string(e) ? json_string_value(e) : "(not a string)");
                n->required[k] = true;
        }
        return 0;
}

/* A value fits the node's type (for enum members; no other checks). */
static bool type_fits(const struct node *n, const json_t *v)
{
        switch (n->type) {
        case TOOL_SCHEMA_STRING:
                return json_is_string(v);
        case TOOL_SCHEMA_INTEGER:
                return json_is_integer(v);
        case TOOL_SCHEMA_NUMBER:
                return json_is_number(v);
        case TOOL_SCHEMA_BOOLEAN:
                return json_is_boolean(v);
        default:
                return false;
        }
}

static const char *const keywords[] = {
    "type",        "properties", "required", "additionalProperties",
    "enum",        "minimum",    "maximum",  "minLength",
    "maxLength",   "pattern",    "items",    "maxItems",
    "description", "title",
};

static int compile_keys(struct compile *c, struct node *n, const json_t *doc, unsigned depth)
{
        const char *key;
        json_t *v;
        int r = 0;

        json_object_foreach((json_t *)doc, key, v)
        {
                bool known = false;
                for (size_t i = 0; i < ARRAY_SIZE(keywords) && !known; i++)
                        known = STREQ(keywords[i], key);
                if (!known)
                        return bad(c, "unknown schema keyword \"%.64s\" (the subset: %s)", key,
                                   "type, properties, required, additionalProperties, enum, "
                                   "minimum, maximum, minLength, maxLength, pattern, items, "
                                   "maxItems, description, title");
                bool obj = n->type == TOOL_SCHEMA_OBJECT, str = n->type == TOOL_SCHEMA_STRING;
                bool num = n->type == TOOL_SCHEMA_INTEGER || n->type == TOOL_SCHEMA_NUMBER;
                bool arr = n->type == TOOL_SCHEMA_ARRAY;
                if (STREQ(key, "type"))
                        continue;
                if (STREQ(key, "description") || STREQ(key, "title")) {
                        if (!json_is_string(v))
                                return bad(c, "\"%s\" must be a string", key);
                        continue;
                }
                if (((STREQ(key, "properties") || STREQ(key, "required") ||
                      STREQ(key, "additionalProperties")) &&
                     !obj) ||
                    ((STREQ(key, "minimum") || STREQ(key, "maximum")) && !num) ||
                    ((STREQ(key, "minLength") || STREQ(key, "maxLength") ||
                      STREQ(key, "pattern")) &&
                     !str) ||
                    ((STREQ(key, "items") || STREQ(key, "maxItems")) && !arr) ||
                    (STREQ(key, "enum") && (obj || arr)))
                        return bad(c, "\"%s\" does not apply to type \"%s\"", key,
                                   type_names[n->type]);
                if (STREQ(key, "properties"))
                        r = compile_properties(c, n, v, depth);
                else if (STREQ(key, "additionalProperties")) {
                        if (!json_is_false(v))
                                return bad(c, "\"additionalProperties\" can only be false (it "
                                              "always is: an argument the schema does not name "
                                              "is refused)");
                } else if (STREQ(key, "enum")) {
                        size_t i;
                        json_t *e;
                        if (!json_is_array(v) || json_array_size(v) == 0 ||
                            json_array_size(v) > TOOL_SCHEMA_ENUM_MAX)
                                return bad(c, "\"enum\" must be an array of 1 to %d values",
                                           TOOL_SCHEMA_ENUM_MAX);
                        json_array_foreach(v, i, e) if (!type_fits(n, e)) return bad(
                            c, "\"enum\" value %zu is not of type \"%s\"", i, type_names[n->type]);
                        n->enum_values = json_incref(v);
                } else if (STREQ(key, "minimum") || STREQ(key, "maximum")) {
                        if (!json_is_number(v) || !isfinite(json_number_value(v)))
                                return bad(c, "\"%s\" must be a number", key);
                        if (STREQ(key, "minimum")) {
                                n->has_min = true;
                                n->min = json_number_value(v);
                        } else {
                                n->has_max = true;
                                n->max = json_number_value(v);
                        }
                } else if (STREQ(key, "minLength")) {
                        n->has_min_len = true;
                        r = get_count(c, v, key, &n->min_len);
                } else if (STREQ(key, "maxLength")) {
                        n->has_max_len = true;
                        r = get_count(c, v, key, &n->max_len);
                } else if (STREQ(key, "maxItems")) {
                        n->has_max_items = true;
                        r = get_count(c, v, key, &n->max_items);
                } else if (STREQ(key, "pattern")) {
                        if (!json_is_string(v) || json_string_length(v) > TOOL_SCHEMA_PATTERN_MAX ||
                            strlen(json_string_value(v)) != json_string_length(v))
                                return bad(c, "\"pattern\" must be a string of at most %d bytes",
                                           TOOL_SCHEMA_PATTERN_MAX);
                        int e = regcomp(&n->re, json_string_value(v), REG_EXTENDED | REG_NOSUB);
                        if (e != 0) {
                                char msg[128];
                                regerror(e, NULL, msg, sizeof(msg));
                                return bad(c,
                                           "\"pattern\" is not a POSIX extended regular "
                                           "expression: %s",
                                           msg);
                        }
                        n->has_pattern = true;
                } else if (STREQ(key, "items")) {
                        size_t mark = push(c, "items");
                        r = compile_node(c, v, depth + 1, &n->items);
                        if (r >= 0)
                                pop(c, mark);
                }
                if (r < 0)
                        return r;
        }
        /* required refers to properties: after all keys are read. */
        v = json_object_get(doc, "required");
        if (v && (r = compile_required(c, n, v)) < 0)
                return r;
        if (n->has_min && n->has_max && n->min > n->max)
                return bad(c, "\"minimum\" is above \"maximum\"");
        if (n->has_min_len && n->has_max_len && n->min_len > n->max_len)
                return bad(c, "\"minLength\" is above \"maxLength\"");
        if (n->type == TOOL_SCHEMA_ARRAY && !n->items)
                return bad(c, "an array needs \"items\" (the type of its elements)");
        return 0;
}

static int compile_node(struct compile *c, const json_t *doc, unsigned depth, struct node **ret)
{
        if (depth > TOOL_SCHEMA_DEPTH_MAX)
                return bad(c, "the schema nests deeper than %d levels", TOOL_SCHEMA_DEPTH_MAX);
        if (++c->nodes > TOOL_SCHEMA_NODES_MAX)
                return bad(c, "the schema has more than %d nodes", TOOL_SCHEMA_NODES_MAX);
        if (!json_is_object(doc))
                return bad(c, "a schema must be an object");
        json_t *t = json_object_get(doc, "type");
        if (!json_is_string(t))
                return bad(c, "\"type\" is required: one of object, string, integer, number, "
                              "boolean, array");
        struct node *n = xcalloc(1, sizeof(*n));
        *ret = n;
        size_t k = ARRAY_SIZE(type_names);
        for (size_t i = 0; i < ARRAY_SIZE(type_names); i++)
                if (STREQ(type_names[i], json_string_value(t)))
                        k = i;
        if (k == ARRAY_SIZE(type_names))
                return bad(c,
                           "\"type\" must be one of object, string, integer, number, boolean, "
                           "array (got \"%.32s\")",
                           json_string_value(t));
        n->type = (enum tool_schema_type)k;
        return compile_keys(c, n, doc, depth);
}

struct tool_schema *tool_schema_compile(const json_t *doc, char *why, size_t why_size)
{
        struct compile c = {.why = why, .why_size = why_size};
        struct node *root = NULL;

        int r = compile_node(&c, doc, 1, &root);
        if (r >= 0 && root->type != TOOL_SCHEMA_OBJECT)
                r = bad(&c, "the arguments' schema must be of type \"object\"");
        if (r < 0) {
                node_free(root);
                return NULL;
        }
        struct tool_schema *s = xcalloc(1, sizeof(*s));
        s->refs = 1;
        s->root = root;
        return s;
}

struct tool_schema *tool_schema_ref(struct tool_schema *s)
{
        if (s)
                s->refs++;
        return s;
}

struct tool_schema *tool_schema_unref(struct tool_schema *s)
{
        if (!s || --s->refs > 0)
                return NULL;
        node_free(s->root);
        free(s);
        return NULL;
}

int tool_schema_property(const struct tool_schema *s, const char *name,
                         enum tool_schema_type *ret_type, bool *ret_required)
{
        const struct node *n = s ? s->root : NULL;
        for (size_t i = 0; n && i < n->n_props; i++)
                if (STREQ(n->names[i], name)) {
                        if (ret_type)
                                *ret_type = n->props[i]->type;
                        if (ret_required)
                                *ret_required = n->required[i];
                        return 0;
                }
        return -ENOENT;
}

/* Checking */

struct check {
        bool clamp;
        json_t **clamps;
        char *why;
        size_t why_size;
        char path[256]; /* the argument: "q", "filter.labels[2]" */
};

static int refuse(struct check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(struct check *c, const char *fmt, ...)
{
        char msg[200];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (c->path[0])
                snprintf(c->why, c->why_size, "argument \"%s\": %s", c->path, msg);
        else
                snprintf(c->why, c->why_size, "arguments: %s", msg);
        return -EINVAL;
}

static bool in_enum(const struct node *n, const json_t *v)
{
        size_t i;
        json_t *e;

        json_array_foreach(n->enum_values, i, e)
        {
                if (json_is_number(e) && json_is_number(v)) {
                        if (json_number_value(e) == json_number_value(v))
                                return true;
                } else if (json_equal(e, v))
                        return true;
        }
        return false;
}

static size_t utf8_chars(const char *s, size_t len)
{
        size_t n = 0;
        for (size_t i = 0; i < len; i++)
                if (((unsigned char)s[i] & 0xC0) != 0x80)
                        n++;
        return n;
}

static int check_number(struct check *c, const struct node *n, json_t *v)
{
        double x = json_number_value(v);
        double to = x;

        if (n->has_min && x < n->min)
                to = n->type == TOOL_SCHEMA_INTEGER ? ceil(n->min) : n->min;
        else if (n->has_max && x > n->max)
                to = n->type == TOOL_SCHEMA_INTEGER ? floor(n->max) : n->max;
        if (to == x)
                return 0;
        if (!c->clamp)
                return refuse(c, "%g is outside the range %g to %g", x,
                              n->has_min ? n->min : -HUGE_VAL, n->has_max ? n->max : HUGE_VAL);
        json_t *from = json_copy(v);
        if (n->type == TOOL_SCHEMA_INTEGER) {
                if (to < -9.2e18 || to > 9.2e18)
                        return refuse(c, "the range cannot hold an integer");
                json_integer_set(v, (json_int_t)to);
        } else if (json_is_integer(v) && to == floor(to) && fabs(to) < 9e15)
                json_integer_set(v, (json_int_t)to);
        else if (json_is_integer(v)) {
                json_decref(from);
                return refuse(c, "%g is outside the range", x);
        } else
                json_real_set(v, to);
        if (!*c->clamps)
                *c->clamps = json_array();
        json_array_append_new(*c->clamps,
                              json_pack("{s:s, s:o, s:O}", "arg", c->path, "from", from, "to", v));
        return 0;
}

static int check_node(struct check *c, const struct node *n, json_t *v);

static int check_object(struct check *c, const struct node *n, json_t *v)
{
        const char *key;
        json_t *e;

        if (!json_is_object(v))
                return refuse(c, "must be an object");
        json_object_foreach(v, key, e)
        {
                size_t k = n->n_props;
                for (size_t i = 0; i < n->n_props && k == n->n_props; i++)
                        if (STREQ(n->names[i], key))
                                k = i;
                size_t mark = strlen(c->path);
                if (k == n->n_props) {
                        char shown[72];
                        size_t j = 0;
                        for (const char *s = key; *s && j < sizeof(shown) - 1; s++)
                                shown[j++] = (unsigned char)*s < 0x20 || *s == '"' ? '?' : *s;
                        shown[j] = '\0';
                        return refuse(c,
                                      "unknown argument \"%s\" (the tool's schema does not "
                                      "name it)",
                                      shown);
                }
                snprintf(c->path + mark, sizeof(c->path) - mark, "%s%s", mark ? "." : "", key);
                int r = check_node(c, n->props[k], e);
                if (r < 0)
                        return r;
                c->path[mark] = '\0';
        }
        for (size_t i = 0; i < n->n_props; i++)
                if (n->required[i] && !json_object_get(v, n->names[i])) {
                        size_t mark = strlen(c->path);
                        snprintf(c->path + mark, sizeof(c->path) - mark, "%s%s", mark ? "." : "",
                                 n->names[i]);
                        return refuse(c, "is required");
                }
        return 0;
}

static int check_node(struct check *c, const struct node *n, json_t *v)
{
        int r;

        switch (n->type) {
        case TOOL_SCHEMA_OBJECT:
                return check_object(c, n, v);
        case TOOL_SCHEMA_STRING: {
                if (!json_is_string(v))
                        return refuse(c, "must be a string");
                const char *s = json_string_value(v);
                size_t len = json_string_length(v);
                size_t chars = utf8_chars(s, len);
                if (n->has_min_len && chars < n->min_len)
                        return refuse(c, "must be at least %zu characters", n->min_len);
                if (n->has_max_len && chars > n->max_len)
                        return refuse(c, "must be at most %zu characters", n->max_len);
                if (n->has_pattern) {
                        /* regexec stops at a NUL: a value holding one cannot be matched
                         * as a whole, so it is refused. */
                        if (memchr(s, '\0', len))
                                return refuse(c, "must not contain a NUL character");
                        if (regexec(&n->re, s, 0, NULL, 0) != 0)
                                return refuse(c, "does not match the tool's pattern");
                }
                break;
        }
        case TOOL_SCHEMA_INTEGER:
                /* 3.0 is refused too: the tool gets exactly the integer text. */
                if (!json_is_integer(v))
                        return refuse(c, "must be an integer");
                if ((r = check_number(c, n, v)) < 0)
                        return r;
                break;
        case TOOL_SCHEMA_NUMBER:
                if (!json_is_number(v))
                        return refuse(c, "must be a number");
                if ((r = check_number(c, n, v)) < 0)
                        return r;
                break;
        case TOOL_SCHEMA_BOOLEAN:
                if (!json_is_boolean(v))
                        return refuse(c, "must be true or false");
                break;
        case TOOL_SCHEMA_ARRAY: {
                size_t i;
                json_t *e;
                if (!json_is_array(v))
                        return refuse(c, "must be an array");
                if (n->has_max_items && json_array_size(v) > n->max_items)
                        return refuse(c, "must have at most %zu items", n->max_items);
                json_array_foreach(v, i, e)
                {
                        size_t mark = strlen(c->path);
                        snprintf(c->path + mark, sizeof(c->path) - mark, "[%zu]", i);
                        if ((r = check_node(c, n->items, e)) < 0)
                                return r;
                        c->path[mark] = '\0';
                }
                break;
        }
        }
        if (n->enum_values && !in_enum(n, v))
                return refuse(c, "must be one of the tool's enumerated values");
        return 0;
}

int tool_schema_check(const struct tool_schema *s, json_t *args, bool clamp, json_t **clamps,
                      char *why, size_t why_size)
{
        struct check c = {.clamp = clamp, .clamps = clamps, .why = why, .why_size = why_size};
        return check_node(&c, s->root, args);
}
