/* SPDX-License-Identifier: Apache-2.0 */
/* Moving what gitguard found aside, and telling the host's own (noted at
 * the start, unchanged) from what the run made. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "gitguard-internal.h"
#include "gitops.h"
#include "util.h"

/* The run's audit log: the one given, or the lazily named one, opened at
 * the first finding (a run with none leaves the log alone). */
static struct audit *run_audit(struct guard_run *g)
{
        struct guard_audit *l = g->lazy;
        if (g->audit || !l || l->tried)
                return g->audit ? g->audit : l ? l->a : NULL;
        l->tried = true;
        struct al_error err = {0};
        if (audit_open(l->path, l->opt, &l->a, &err) < 0) {
                l->a = NULL;
                if (g->warn) {
                        char line[AL_ERROR_MAX + 64];
                        snprintf(line, sizeof(line),
                                 "airlock: warning: the git findings are not audited: %s", err.msg);
                        g->warn(line, g->userdata);
                }
        }
        return l->a;
}

void gitguard_report(struct guard_run *g, const char *rel, const char *reason, const char *moved,
                     int error)
{
        if (g->record)
                return;
        g->findings++;
        struct audit *audit = run_audit(g);
        _cleanup_free_ char *path =
            *rel ? xasprintf("%s/%s", g->root->path, rel) : xstrdup(g->root->path);
        _cleanup_free_ char *moved_path = moved ? xasprintf("%s/%s", g->root->path, moved) : NULL;
        /* Paths are the agent's bytes: recorded and shown escaped. */
        _cleanup_free_ char *ep = gitops_escape(path, strlen(path), false);
        _cleanup_free_ char *em =
            moved_path ? gitops_escape(moved_path, strlen(moved_path), false) : NULL;
        if (audit) {
                json_t *f = json_pack("{s:s, s:s, s:o}", "path", ep, "reason", reason, "movedTo",
                                      em ? json_string(em) : json_null());
                if (error)
                        json_object_set_new(f, "error", json_string(strerror(error)));
                struct al_error err = {0};
                (void)audit_append(audit, g->id, g->event ? g->event : "git.neutralised", f, &err);
                json_decref(f);
        }
        if (g->warn) {
                char line[PATH_MAX * 3 + 512];
                if (moved)
                        snprintf(line, sizeof(line),
                                 "airlock: warning: %s: %s; moved to %s so that host git does not "
                                 "use it",
                                 ep, reason, em);
                else if (error)
                        snprintf(line, sizeof(line),
                                 "airlock: warning: %s: %s; it could not be moved aside (%s): do "
                                 "not run git there before checking it",
                                 ep, reason, strerror(error));
                else
                        snprintf(line, sizeof(line), "airlock: warning: %s: %s", ep, reason);
                g->warn(line, g->userdata);
        }
}

/* The mode and a hash of what dfd/name holds (a link's target, a file's
 * bytes up to HASHED_MAX); false for anything else. */
#define HASHED_MAX (16 * 1024 * 1024)
static bool fingerprint_of(int dfd, const char *name, struct fingerprint *ret)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return false;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        if (S_ISLNK(st.st_mode)) {
                buf = xcalloc(PATH_MAX + 1, 1);
                ssize_t n = readlinkat(dfd, name, buf, PATH_MAX);
                if (n < 0)
                        return false;
                len = (size_t)n;
        } else if (!S_ISREG(st.st_mode) ||
                   gitguard_read_small(dfd, name, HASHED_MAX, &buf, &len) < 0)
                return false;
        ret->mode = st.st_mode;
        ret->size = st.st_size;
        sha256(buf, len, ret->hash);
        return true;
}

static int cmp_known(const void *a, const void *b)
{
        return strcmp(((const struct fingerprint *)a)->rel, ((const struct fingerprint *)b)->rel);
}

void gitguard_known_sort(struct root_start *rs)
{
        if (rs->n_known > 1)
                qsort(rs->known, rs->n_known, sizeof(*rs->known), cmp_known);
}

/* The first noted entry of rel (n_known when none). */
static size_t known_first(const struct root_start *rs, const char *rel)
{
        size_t lo = sorted_first_at_or_after(rs->known, rs->n_known, sizeof(*rs->known),
                                             offsetof(typeof(*rs->known), rel), rel);
        return lo < rs->n_known && STREQ(rs->known[lo].rel, rel) ? lo : rs->n_known;
}

static bool known_at_start(const struct root_start *rs, const char *rel,
                           const struct fingerprint *fp)
{
        for (size_t i = known_first(rs, rel); i < rs->n_known && STREQ(rs->known[i].rel, rel); i++)
                if (rs->known[i].mode == fp->mode &&
                    memcmp(rs->known[i].hash, fp->hash, sizeof(fp->hash)) == 0)
                        return true;
        return false;
}

/* Whether the host had something at rel of dfd/name's mode and size: only
 * then is it read and hashed (thousands of sparse files the run made must
 * not each be read to the hash's limit). */
static bool worth_hashing(const struct root_start *rs, const char *rel, int dfd, const char *name)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return false;
        for (size_t i = known_first(rs, rel); i < rs->n_known && STREQ(rs->known[i].rel, rel); i++)
                if (rs->known[i].mode == st.st_mode &&
                    (S_ISLNK(st.st_mode) || rs->known[i].size == st.st_size))
                        return true;
        return false;
}

/* The name of the next try at moving `base` aside: base.airlock-quarantine,
 * then .1 to .9, then a random one, so that names the agent took
 * beforehand cannot stop the move. */
static int quarantine_name(char to[NAME_MAX + 1], const char *base, int i)
{
        if (strlen(base) + strlen(GITGUARD_SUFFIX) + 18 > NAME_MAX)
                return -ENAMETOOLONG;
        char rnd[17];
        if (i == 0)
                snprintf(to, NAME_MAX + 1, "%s%s", base, GITGUARD_SUFFIX);
        else if (i < 10)
                snprintf(to, NAME_MAX + 1, "%s%s.%d", base, GITGUARD_SUFFIX, i);
        else if (random_hex(rnd, 16) == 0)
                snprintf(to, NAME_MAX + 1, "%s%s.%s", base, GITGUARD_SUFFIX, rnd);
        else
                return -EEXIST;
        return 0;
}

static void quarantine(struct guard_run *g, int dfd, const char *name, const char *rel, int todfd,
                       const char *to_rel_dir, const char *reason, bool force)
{
        struct fingerprint fp = {0};
        bool have = (g->record || (!force && worth_hashing(g->root, rel, dfd, name))) &&
                    fingerprint_of(dfd, name, &fp);
        if (g->record) {
                struct root_start *rs = g->start;
                if (have && rs->n_known < KNOWN_MAX) {
                        rs->known = xrealloc(rs->known, rs->n_known + 1, sizeof(*rs->known));
                        fp.rel = xstrdup(rel);
                        rs->known[rs->n_known++] = fp;
                }
                return;
        }
        if (have && known_at_start(g->root, rel, &fp))
                return;
        /* A name too long for the suffix is moved under a short one. */
        const char *base = strlen(name) + strlen(GITGUARD_SUFFIX) + 18 > NAME_MAX ? "entry" : name;
        char to[NAME_MAX + 1];
        int e = EEXIST;
        for (int i = 0; i < 14 && e == EEXIST; i++) {
                int r = quarantine_name(to, base, i);
                if (r < 0) {
                        e = -r;
                        break;
                }
                e = renameat2(dfd, name, todfd, to, RENAME_NOREPLACE) < 0 ? errno : 0;
                /* The agent writes as the caller when rootless and may have
                 * taken the write bit off the directory: ours to give back. */
                struct stat st;
                if (e == EACCES && fstat(dfd, &st) == 0 && st.st_uid == geteuid() &&
                    !(st.st_mode & S_IWUSR) && fchmod(dfd, (st.st_mode & 07777) | S_IWUSR) == 0)
                        e = renameat2(dfd, name, todfd, to, RENAME_NOREPLACE) < 0 ? errno : 0;
        }
        _cleanup_free_ char *moved = e ? NULL : gitguard_join(to_rel_dir, to);
        gitguard_report(g, rel, reason, moved, e);
}

void gitguard_quarantine_into(struct guard_run *g, int dfd, const char *name, const char *rel,
                              int todfd, const char *to_rel_dir, const char *reason)
{
        quarantine(g, dfd, name, rel, todfd, to_rel_dir, reason, false);
}

void gitguard_quarantine_force(struct guard_run *g, int dfd, const char *name, const char *rel,
                               const char *reason)
{
        const char *slash = strrchr(rel, '/');
        _cleanup_free_ char *dir = xasprintf("%.*s", slash ? (int)(slash - rel) : 0, rel);
        quarantine(g, dfd, name, rel, dfd, dir, reason, true);
}

void gitguard_quarantine(struct guard_run *g, int dfd, const char *name, const char *rel,
                         const char *reason)
{
        const char *slash = strrchr(rel, '/');
        _cleanup_free_ char *dir = xasprintf("%.*s", slash ? (int)(slash - rel) : 0, rel);
        gitguard_quarantine_into(g, dfd, name, rel, dfd, dir, reason);
}
