/* SPDX-License-Identifier: Apache-2.0 */
/* The review sandboxes still pending under a state root, each with what
 * accepting it now would add, modify and delete (review_list, review.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "review-internal.h"

/* Count the plan as `airlock diff` would show it now: files and symlinks
 * the workspace lacks (added) or has (modified), and removals (deleted). */
static int count(const char *state_dir, struct review_pending *ret, struct al_error *err)
{
        {
                _cleanup_(review_done) struct review meta;
                int r = review_open(state_dir, false, &meta, err);
                if (r < 0)
                        return r;
                if (!STREQ(meta.state, "pending"))
                        return -EALREADY;
                ret->workspace = xstrdup(meta.workspace);
                ret->started_ns = meta.started_ns;
        }
        _cleanup_(review_done) struct review rv;
        int r = review_load(state_dir, false, &rv, err);
        if (r < 0)
                return r;
        struct plan p;
        r = plan_build(&rv, &p, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < p.n; i++) {
                const struct item *it = &p.v[i];
                if (it->op == OP_REMOVE)
                        ret->deleted++;
                else if (it->op == OP_FILE || it->op == OP_SYMLINK) {
                        if (it->host.mode)
                                ret->modified++;
                        else
                                ret->added++;
                }
        }
        plan_done(&p);
        return 0;
}

static int cmp_pending(const void *a, const void *b)
{
        const struct review_pending *x = a, *y = b;
        if (x->started_ns != y->started_ns)
                return x->started_ns > y->started_ns ? -1 : 1;
        return strcmp(x->id, y->id);
}

void review_pending_free(struct review_pending *v, size_t n)
{
        for (size_t i = 0; v && i < n; i++) {
                free(v[i].workspace);
                free(v[i].error);
        }
        free(v);
}

int review_list_pending(const char *state_root, struct review_pending **ret, size_t *ret_n,
                        struct al_error *err)
{
        _cleanup_free_ char *sandboxes = xasprintf("%s/sandboxes", state_root);
        struct review_pending *v = NULL;
        size_t n = 0;
        int fd = open(sandboxes, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                if (errno != ENOENT)
                        return al_error_set(err, errno, "opening \"%s\"", sandboxes);
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }
        _cleanup_(closedirp) DIR *d = fdopendir(fd);
        if (!d) {
                close(fd);
                return al_error_set(err, errno, "opening \"%s\"", sandboxes);
        }
        struct dirent *de;
        while ((errno = 0, de = readdir(d))) {
                struct stat st;
                if (!review_id_valid(de->d_name) ||
                    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                    !S_ISDIR(st.st_mode))
                        continue;
                /* Without a meta.json it is no review sandbox (the daemon
                 * keeps other state beside them). */
                _cleanup_free_ char *meta = xasprintf("%s/%s", de->d_name, META_FILE);
                if (fstatat(dirfd(d), meta, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (n >= REVIEW_LIST_MAX)
                        break;
                _cleanup_free_ char *dir = xasprintf("%s/%s", sandboxes, de->d_name);
                struct review_pending e = {0};
                memcpy(e.id, de->d_name, strlen(de->d_name) + 1); /* id_valid: at most 64 */
                struct al_error ce = {0};
                int r = count(dir, &e, &ce);
                /* Accepted, discarded and failed sandboxes are not pending;
                 * one whose state cannot be read (or is locked by an accept
                 * in progress) is listed with why. */
                if (r == -EALREADY || r == -ENODATA || (r < 0 && !e.workspace && r != -EBUSY)) {
                        free(e.workspace);
                        continue;
                }
                if (r < 0) {
                        e.error = xstrdup(ce.msg);
                        e.added = e.modified = e.deleted = 0;
                }
                v = xrealloc(v, n + 1, sizeof(*v));
                v[n++] = e;
        }
        if (errno) {
                int e = errno;
                review_pending_free(v, n);
                return al_error_set(err, e, "reading \"%s\"", sandboxes);
        }
        if (n > 1)
                qsort(v, n, sizeof(*v), cmp_pending);
        *ret = v;
        *ret_n = n;
        return 0;
}
