/* SPDX-License-Identifier: Apache-2.0 */
/* The plan: what accepting would do to the workspace as it is now, one
 * item per path, sorted. diff shows it, accept applies (part of) it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "review-internal.h"

void plan_done(struct plan *p)
{
        for (size_t i = 0; i < p->n; i++)
                free(p->v[i].path);
        free(p->v);
        strarr_done(&p->accepted);
        *p = (struct plan){0};
}

static int plan_add(struct plan *p, const char *path, enum op op, mode_t mode, const struct host *h)
{
        if (p->n >= 2 * (size_t)REVIEW_MAX_ENTRIES)
                return -E2BIG;
        if (p->n == p->cap) {
                p->cap = p->cap ? p->cap * 2 : 64;
                p->v = xrealloc(p->v, p->cap, sizeof(struct item));
        }
        p->v[p->n++] = (struct item){.path = xstrdup(path), .op = op, .mode = mode, .host = *h};
        return 0;
}

static int cmp_item(const void *a, const void *b)
{
        const struct item *x = a, *y = b;
        int c = strcmp(x->path, y->path);
        return c ? c : (int)x->op - (int)y->op;
}

/* Whether a request for req takes path: path is at or beneath it and, if
 * path holds hidden code points, req names every one of them. Such a name
 * is never taken by a request for a directory above it, nor by accepting
 * everything. */
bool plan_request_takes(const char *req, const char *path)
{
        return review_is_beneath(path, req) && strlen(req) >= review_hidden_end(path);
}

static bool plan_covered(const struct plan *p, const char *path)
{
        for (size_t i = 0; i < p->accepted.n; i++)
                if (plan_request_takes(p->accepted.v[i], path))
                        return true;
        return false;
}

struct planner {
        struct review *rv;
        struct plan *p;
        struct al_error *err;
        enum hstate *hs; /* per manifest entry */
};

/* Removal items for the workspace entry at path and, for a directory,
 * everything beneath it. */
static int plan_remove(struct planner *pl, int at, const char *name, char *path, size_t plen,
                       unsigned depth)
{
        struct host h;
        int r = review_host_stat(at, name, &h);
        if (r < 0)
                return al_error_set(pl->err, r, "inspecting \"%s\" in the workspace", path);
        if (h.mode == 0)
                return 0;
        r = plan_add(pl->p, path, OP_REMOVE, 0, &h);
        if (r < 0)
                return al_error_set(pl->err, r, "too many changes");
        if (!S_ISDIR(h.mode))
                return 0;
        if (depth >= REVIEW_MAX_DEPTH)
                return al_error_set_message(pl->err, ELOOP, "\"%s\" in the workspace is too deep",
                                            path);
        int fd = review_open_beneath(at, name, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return al_error_set(pl->err, fd, "opening \"%s\" in the workspace", path);
        _cleanup_(closedirp) DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return al_error_set(pl->err, errno, "reading \"%s\" in the workspace", path);
        }
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                size_t nlen = strlen(de->d_name);
                if (plen + 1 + nlen >= PATH_MAX)
                        return al_error_set_message(pl->err, ENAMETOOLONG, "a path beneath \"%s\"",
                                                    path);
                path[plen] = '/';
                memcpy(path + plen + 1, de->d_name, nlen + 1);
                r = plan_remove(pl, dirfd(d), de->d_name, path, plen + 1 + nlen, depth + 1);
                path[plen] = '\0';
                if (r < 0)
                        return r;
        }
        if (errno)
                return al_error_set(pl->err, errno, "reading \"%s\" in the workspace", path);
        return 0;
}

static int plan_remove_path(struct planner *pl, const char *rel)
{
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s", rel);
        return plan_remove(pl, pl->rv->ws_fd, rel, path, strlen(path), 0);
}

/* Remove what the workspace has in directory dir that the opaque upper
 * directory lacks. */
static int plan_replace_children(struct planner *pl, const char *dir)
{
        int fd = review_open_beneath(pl->rv->ws_fd, dir, O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return al_error_set(pl->err, fd, "opening \"%s\" in the workspace", dir);
        _cleanup_(closedirp) DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return al_error_set(pl->err, errno, "reading \"%s\" in the workspace", dir);
        }
        char path[PATH_MAX];
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                if (STREQ(de->d_name, ".") || STREQ(de->d_name, ".."))
                        continue;
                if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
                        return al_error_set_message(pl->err, ENAMETOOLONG, "a path beneath \"%s\"",
                                                    dir);
                if (manifest_find(&pl->rv->m, path))
                        continue;
                int r = plan_remove(pl, dirfd(d), de->d_name, path, strlen(path), 0);
                if (r < 0)
                        return r;
        }
        if (errno)
                return al_error_set(pl->err, errno, "reading \"%s\" in the workspace", dir);
        return 0;
}

static enum hstate parent_state(struct planner *pl, const char *path)
{
        char dir[PATH_MAX];
        review_split_path(path, dir);
        if (!dir[0])
                return H_MERGE;
        const struct entry *e = manifest_find(&pl->rv->m, dir);
        if (!e || e->type != T_DIR)
                return H_NONE;
        return pl->hs[e - pl->rv->m.e];
}

static int plan_items(struct review *rv, struct plan *p, struct al_error *err);

int plan_build(struct review *rv, struct plan *p, struct al_error *err)
{
        return review_xdev_explain(plan_items(rv, p, err), err);
}

static int plan_items(struct review *rv, struct plan *p, struct al_error *err)
{
        _cleanup_free_ enum hstate *hs = xcalloc(rv->m.n_e, sizeof(enum hstate));
        struct planner pl = {.rv = rv, .p = p, .err = err, .hs = hs};
        json_t *acc = json_object_get(rv->meta, "accepted");
        size_t i;
        json_t *v;
        int r;

        *p = (struct plan){0};
        json_array_foreach(acc, i, v) strarr_add(&p->accepted, json_string_value(v));
        /* Paths discarded one by one are settled too: the host keeps its own. */
        json_t *dis = json_object_get(rv->meta, "discarded");
        json_array_foreach(dis, i, v) strarr_add(&p->accepted, json_string_value(v));

        for (i = 0; i < rv->m.n_e; i++) {
                const struct entry *e = &rv->m.e[i];
                hs[i] = H_NONE;
                bool covered = plan_covered(p, e->path);
                enum hstate ps = parent_state(&pl, e->path);
                struct host h = {0};
                if (ps != H_NONE || covered) {
                        r = review_host_stat(rv->ws_fd, e->path, &h);
                        if (r < 0)
                                return al_error_set(err, r, "inspecting \"%s\" in the workspace",
                                                    e->path);
                }
                if (covered) {
                        /* Taken already; what it holds may not be (a name
                         * with hidden characters), and is planned against
                         * the directory that is there now. */
                        if (e->type == T_DIR && S_ISDIR(h.mode))
                                hs[i] = H_MERGE;
                        continue;
                }
                if (e->type == T_DIR) {
                        if (S_ISDIR(h.mode)) {
                                bool opaque = strarr_has(&rv->m.opaque, e->path);
                                hs[i] = ps == H_REPLACE || opaque ? H_REPLACE : H_MERGE;
                                /* A mode change, or set-id bits the diff
                                 * must show even though accept drops them. */
                                if (((h.mode & 0777) != (e->mode & 0777) ||
                                     (e->mode & 07000 & ~h.mode)) &&
                                    (r = plan_add(p, e->path, OP_DIR, e->mode, &h)) < 0)
                                        return al_error_set(err, r, "too many changes");
                                if (hs[i] == H_REPLACE &&
                                    (r = plan_replace_children(&pl, e->path)) < 0)
                                        return r;
                                continue;
                        }
                        if (h.mode && (r = plan_remove_path(&pl, e->path)) < 0)
                                return r;
                        struct host none = {0};
                        if ((r = plan_add(p, e->path, OP_DIR, e->mode, &none)) < 0)
                                return al_error_set(err, r, "too many changes");
                        continue;
                }
                if (S_ISDIR(h.mode)) {
                        if ((r = plan_remove_path(&pl, e->path)) < 0)
                                return r;
                        h = (struct host){0};
                }
                r = plan_add(p, e->path, e->type == T_FILE ? OP_FILE : OP_SYMLINK, e->mode, &h);
                if (r < 0)
                        return al_error_set(err, r, "too many changes");
        }
        for (i = 0; i < rv->m.deleted.n; i++) {
                const char *path = rv->m.deleted.v[i];
                if (plan_covered(p, path) || manifest_find(&rv->m, path))
                        continue;
                /* Beneath an opaque directory the removal is planned already. */
                if (parent_state(&pl, path) != H_MERGE)
                        continue;
                if ((r = plan_remove_path(&pl, path)) < 0)
                        return r;
        }

        if (p->n > 1)
                qsort(p->v, p->n, sizeof(struct item), cmp_item);
        size_t o = 0;
        for (i = 0; i < p->n; i++) {
                if ((o > 0 && cmp_item(&p->v[o - 1], &p->v[i]) == 0) ||
                    plan_covered(p, p->v[i].path)) {
                        free(p->v[i].path);
                        continue;
                }
                p->v[o++] = p->v[i];
        }
        p->n = o;
        return 0;
}
