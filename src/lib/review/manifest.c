/* SPDX-License-Identifier: Apache-2.0 */
/* The manifest: what a capture kept (entries with their real modes,
 * whiteouts, opaque directories, what was skipped and why), in memory and
 * as manifest.json. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "review-internal.h"

static const char *const etype_names[] = {"file", "dir", "symlink"};

void strarr_add(struct strarr *a, const char *s)
{
        if (a->n == a->cap) {
                a->cap = a->cap ? a->cap * 2 : 16;
                a->v = xrealloc(a->v, a->cap, sizeof(char *));
        }
        a->v[a->n++] = xstrdup(s);
}

void strarr_done(struct strarr *a)
{
        for (size_t i = 0; i < a->n; i++)
                free(a->v[i]);
        free(a->v);
        *a = (struct strarr){0};
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

bool strarr_has(const struct strarr *a, const char *s)
{
        return a->n && bsearch(&s, a->v, a->n, sizeof(char *), cmp_str);
}

void manifest_add(struct manifest *m, const char *path, enum etype type, mode_t mode)
{
        if (m->n_e == m->cap_e) {
                m->cap_e = m->cap_e ? m->cap_e * 2 : 64;
                m->e = xrealloc(m->e, m->cap_e, sizeof(struct entry));
        }
        m->e[m->n_e++] = (struct entry){.path = xstrdup(path), .type = type, .mode = mode & 07777};
}

void manifest_done(struct manifest *m)
{
        for (size_t i = 0; i < m->n_e; i++)
                free(m->e[i].path);
        free(m->e);
        strarr_done(&m->deleted);
        strarr_done(&m->opaque);
        json_decref(m->skipped);
        *m = (struct manifest){0};
}

static int cmp_entry(const void *a, const void *b)
{
        return strcmp(((const struct entry *)a)->path, ((const struct entry *)b)->path);
}

void manifest_sort(struct manifest *m)
{
        /* qsort() wants a valid pointer even for nothing. */
        if (m->n_e > 1)
                qsort(m->e, m->n_e, sizeof(struct entry), cmp_entry);
        if (m->deleted.n > 1)
                qsort(m->deleted.v, m->deleted.n, sizeof(char *), cmp_str);
        if (m->opaque.n > 1)
                qsort(m->opaque.v, m->opaque.n, sizeof(char *), cmp_str);
}

const struct entry *manifest_find(const struct manifest *m, const char *path)
{
        struct entry key = {.path = (char *)path};
        return m->n_e ? bsearch(&key, m->e, m->n_e, sizeof(struct entry), cmp_entry) : NULL;
}

int manifest_load(struct review *rv, const char *state_dir, struct al_error *err)
{
        json_t *j = NULL;
        int r = review_read_json_at(rv->dir_fd, MANIFEST_FILE, &j);
        if (r == -EPERM)
                return review_foreign_json(err, state_dir, MANIFEST_FILE);
        if (r < 0)
                return al_error_set(err, r, "reading %s/%s", state_dir, MANIFEST_FILE);
        json_t *entries = json_object_get(j, "entries");
        json_t *deleted = json_object_get(j, "deleted");
        json_t *opaque = json_object_get(j, "opaque");
        json_t *skipped = json_object_get(j, "skipped");
        size_t i;
        json_t *v;

        if (!json_is_array(entries) || !json_is_array(deleted) || !json_is_array(opaque) ||
            (skipped && !json_is_array(skipped)))
                goto bad;
        json_array_foreach(entries, i, v)
        {
                const char *path = json_string_value(json_object_get(v, "path"));
                const char *type = json_string_value(json_object_get(v, "type"));
                json_t *mode = json_object_get(v, "mode");
                if (!path || !review_path_valid(path) || !type || !json_is_integer(mode) ||
                    json_integer_value(mode) < 0 || json_integer_value(mode) > 07777)
                        goto bad;
                enum etype t;
                if (STREQ(type, "file"))
                        t = T_FILE;
                else if (STREQ(type, "dir"))
                        t = T_DIR;
                else if (STREQ(type, "symlink"))
                        t = T_SYMLINK;
                else
                        goto bad;
                manifest_add(&rv->m, path, t, (mode_t)json_integer_value(mode));
        }
        json_array_foreach(deleted, i, v)
        {
                if (!json_string_value(v) || !review_path_valid(json_string_value(v)))
                        goto bad;
                strarr_add(&rv->m.deleted, json_string_value(v));
        }
        json_array_foreach(opaque, i, v)
        {
                if (!json_string_value(v) || !review_path_valid(json_string_value(v)))
                        goto bad;
                strarr_add(&rv->m.opaque, json_string_value(v));
        }
        manifest_sort(&rv->m);
        for (i = 1; i < rv->m.n_e; i++)
                if (STREQ(rv->m.e[i - 1].path, rv->m.e[i].path))
                        goto bad;
        rv->m.skipped = skipped ? json_incref(skipped) : json_array();
        json_decref(j);
        return 0;
bad:
        json_decref(j);
        return al_error_set_message(err, EBADMSG, "%s/%s", state_dir, MANIFEST_FILE);
}

int manifest_save(int dir_fd, const struct manifest *m)
{
        json_t *entries = json_array(), *deleted = json_array(), *opaque = json_array();
        for (size_t i = 0; i < m->n_e; i++)
                json_array_append_new(entries, json_pack("{s:s, s:s, s:i}", "path", m->e[i].path,
                                                         "type", etype_names[m->e[i].type], "mode",
                                                         (int)m->e[i].mode));
        for (size_t i = 0; i < m->deleted.n; i++)
                json_array_append_new(deleted, json_string(m->deleted.v[i]));
        for (size_t i = 0; i < m->opaque.n; i++)
                json_array_append_new(opaque, json_string(m->opaque.v[i]));
        json_t *j =
            json_pack("{s:o, s:o, s:o, s:o}", "entries", entries, "deleted", deleted, "opaque",
                      opaque, "skipped", m->skipped ? json_incref(m->skipped) : json_array());
        if (!j)
                return -ENOMEM;
        int r = review_write_json_at(dir_fd, MANIFEST_FILE, j);
        json_decref(j);
        return r;
}
