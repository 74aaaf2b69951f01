/* SPDX-License-Identifier: Apache-2.0 */
/* Files with several names: a table by inode, so that capture and accept
 * copy such a file once and link its other names to the copy. */
#include <stdlib.h>
#include <string.h>

#include "review-internal.h"

void linktab_done(struct linktab *t)
{
        for (size_t i = 0; i < t->cap; i++)
                free(t->v[i].path);
        free(t->v);
        *t = (struct linktab){0};
}

static size_t link_hash(dev_t dev, ino_t ino, size_t cap)
{
        uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ULL ^ (uint64_t)dev * 0xc2b2ae3d27d4eb4fULL;
        return (size_t)(h ^ (h >> 29)) & (cap - 1);
}

/* The slot of (dev, ino), empty (path NULL) when it is not there yet. */
struct link_slot *link_find(struct linktab *t, dev_t dev, ino_t ino)
{
        if (t->n + 1 > t->cap / 2) {
                size_t cap = t->cap ? t->cap * 2 : 256;
                struct link_slot *v = xcalloc(cap, sizeof(*v));
                for (size_t i = 0; i < t->cap; i++) {
                        struct link_slot *o = &t->v[i];
                        if (!o->path)
                                continue;
                        size_t k = link_hash(o->dev, o->ino, cap);
                        while (v[k].path)
                                k = (k + 1) & (cap - 1);
                        v[k] = *o;
                }
                free(t->v);
                t->v = v;
                t->cap = cap;
        }
        size_t k = link_hash(dev, ino, t->cap);
        while (t->v[k].path && !(t->v[k].dev == dev && t->v[k].ino == ino))
                k = (k + 1) & (t->cap - 1);
        return &t->v[k];
}

void link_set(struct linktab *t, struct link_slot *s, const struct link_slot *val)
{
        if (!s->path)
                t->n++;
        free(s->path);
        *s = *val;
        s->path = xstrdup(val->path);
}
