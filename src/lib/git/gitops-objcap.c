/* SPDX-License-Identifier: Apache-2.0 */
/* Object size caps: an object database backend wrapped so that every
 * object's size is checked from its header before it is inflated
 * (GITOPS_OBJECT_MAX each, GITOPS_INFLATE_MAX in all). */
#include <git2/sys/odb_backend.h>
#include <stdlib.h>
#include <unistd.h>

#include "gitops-internal.h"

struct capped_backend {
        git_odb_backend parent;
        git_odb_backend *inner;
        struct inflate_budget *budget;
};

static int size_refused(const git_oid *id, size_t len, bool total)
{
        char hex[GITOPS_OID_HEX + 1];
        git_oid_tostr(hex, sizeof(hex), id);
        if (total)
                git_error_set(GIT_ERROR_ODB,
                              "reading object %.12s would inflate more than %llu MiB of the "
                              "agent's objects in all; refusing",
                              hex, (unsigned long long)(GITOPS_INFLATE_MAX >> 20));
        else
                git_error_set(GIT_ERROR_ODB,
                              "object %.12s inflates to %zu bytes, more than the %llu MiB "
                              "Airlock reads from an agent's repository; refusing",
                              hex, len, (unsigned long long)(GITOPS_OBJECT_MAX >> 20));
        return -1;
}

static int capped_read(void **buf, size_t *len, git_object_t *type, git_odb_backend *b,
                       const git_oid *id)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        if (gitops_past_deadline()) {
                git_error_set_str(GIT_ERROR_ODB, "the operation took too long");
                return -1;
        }
        size_t size;
        git_object_t t;
        int r = cb->inner->read_header(&size, &t, cb->inner, id);
        if (r < 0)
                return r;
        if (size > GITOPS_OBJECT_MAX)
                return size_refused(id, size, false);
        if (cb->budget->used + size > GITOPS_INFLATE_MAX)
                return size_refused(id, size, true);
        cb->budget->used += size;
        return cb->inner->read(buf, len, type, cb->inner, id);
}

static int capped_read_header(size_t *len, git_object_t *type, git_odb_backend *b,
                              const git_oid *id)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        return cb->inner->read_header(len, type, cb->inner, id);
}

static int capped_exists(git_odb_backend *b, const git_oid *id)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        return cb->inner->exists(cb->inner, id);
}

static int capped_exists_prefix(git_oid *out, git_odb_backend *b, const git_oid *id, size_t n)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        return cb->inner->exists_prefix(out, cb->inner, id, n);
}

static int capped_refresh(git_odb_backend *b)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        return cb->inner->refresh ? cb->inner->refresh(cb->inner) : 0;
}

static int capped_foreach(git_odb_backend *b, git_odb_foreach_cb fn, void *payload)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        return cb->inner->foreach (cb->inner, fn, payload);
}

static void capped_free(git_odb_backend *b)
{
        struct capped_backend *cb = (struct capped_backend *)b;
        cb->inner->free(cb->inner);
        free(cb);
}

static git_odb_backend *capped_new(git_odb_backend *inner, struct inflate_budget *budget)
{
        struct capped_backend *cb = xcalloc(1, sizeof(*cb));
        git_odb_init_backend(&cb->parent, GIT_ODB_BACKEND_VERSION);
        cb->parent.read = capped_read;
        cb->parent.read_header = capped_read_header;
        cb->parent.exists = capped_exists;
        cb->parent.exists_prefix = capped_exists_prefix;
        cb->parent.refresh = capped_refresh;
        cb->parent.foreach = capped_foreach;
        cb->parent.free = capped_free;
        cb->inner = inner;
        cb->budget = budget;
        return &cb->parent;
}

/* A packed object is inflated inside the pack reader, also as the base of
 * a delta, without passing capped_read: every object in the packs is
 * checked against the cap from its header before anything is read. */
struct pack_check {
        git_odb_backend *pack;
        int error;
};

static int pack_check_one(const git_oid *id, void *payload)
{
        struct pack_check *pc = payload;
        size_t size;
        git_object_t t;
        if (gitops_past_deadline()) {
                git_error_set_str(GIT_ERROR_ODB, "the operation took too long");
                return -1;
        }
        int r = pc->pack->read_header(&size, &t, pc->pack, id);
        if (r < 0)
                return r;
        if (size > GITOPS_OBJECT_MAX)
                return size_refused(id, size, false);
        return 0;
}

/* An object database over exactly <copy>/objects, each read capped. The
 * budget lives as long as the odb (it is freed with the last backend). */
int gitops_capped_backends(const char *objects, struct inflate_budget *budget,
                           git_odb_backend **ret_pack, git_odb_backend **ret_loose,
                           struct al_error *err)
{
        git_odb_backend *pack = NULL, *loose = NULL;
        if (git_odb_backend_pack(&pack, objects) < 0)
                return gitops_fail_git(err, EIO, "reading the agent's packs");
        struct pack_check pc = {.pack = pack};
        if (pack->foreach (pack, pack_check_one, &pc) < 0) {
                pack->free(pack);
                return gitops_past_deadline()
                           ? gitops_fail_deadline(err)
                           : gitops_fail_git(err, EFBIG, "the agent's repository");
        }
        if (git_odb_backend_loose(&loose, objects, -1, 0, 0, 0) < 0) {
                pack->free(pack);
                return gitops_fail_git(err, EIO, "reading the agent's objects");
        }
        *ret_pack = capped_new(pack, budget);
        *ret_loose = capped_new(loose, budget);
        return 0;
}
