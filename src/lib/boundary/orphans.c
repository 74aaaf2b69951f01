/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "audit.h"
#include "cgroup.h"
#include "control.h"
#include "orphans.h"
#include "quota.h"
#include "supervisor.h"
#include "opencalls.h"
#include "trace.h"
#include "util.h"

#define RECORD_MAX (64 * 1024)
/* How far back from the end of the audit log a sweep looks for an end the
 * run recorded itself: that end is its last line, written just before it
 * dropped the record, so only a kill in that instant leaves both. */
#define AUDIT_TAIL (4 * 1024 * 1024)
/* A record still being written carries a dot-name; one left by an owner
 * that died in that instant is removed once this old. */
#define TMP_STALE_S 60

enum owner { OWNER_RUN, OWNER_SUPERVISE };

struct record {
        int fd;
        char *dir;
        char *path;
};

static bool is_id(const char *s)
{
        return strlen(s) == 16 && strspn(s, "0123456789abcdef") == 16;
}

static char *absolute(const char *path)
{
        if (!path)
                return NULL;
        if (path[0] == '/')
                return xstrdup(path);
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof(cwd)))
                return NULL;
        return xasprintf("%s/%s", cwd, path);
}

/* The leaves the run's cgroup will have: the same computation as the
 * supervisor's cgroup_open(), in the same process. */
static json_t *cgroup_dirs(const char *id)
{
        json_t *a = json_array();
        struct cgroup_limits none = {0};
        struct cgroup *cg = NULL;
        struct al_error e = {0};
        _cleanup_free_ char *name = xasprintf("airlock-%s", id);
        if (cgroup_open(name, &none, &cg, &e) < 0)
                return a; /* the run fails the same way, before making one */
        for (size_t i = 0; i < cg->n_dirs; i++)
                json_array_append_new(a, json_string(cg->dirs[i]));
        /* Beside them, leaves of owners that died with no record left to
         * find them by (a state root removed since): their lock tells. The
         * spawner sweeps while the sandbox builds its root (cgroup.h). */
        cgroup_sweep_later(cg);
        /* The supervisor opens the same leaves next: the layout once. */
        cgroup_keep(cg);
        return a;
}

static void record_drop(struct record *rec)
{
        if (rec->path)
                (void)unlink(rec->path);
        if (rec->fd >= 0)
                close(rec->fd);
        free(rec->path);
        free(rec->dir);
        *rec = (struct record){.fd = -1};
}

/* Write <state_root>/runs/<id>, locked for as long as this process lives. */
static int record_start(const char *state_root, const char *id, enum owner owner,
                        const char *audit_path, struct record *rec, struct al_error *err)
{
        *rec = (struct record){.fd = -1};
        rec->dir = xasprintf("%s/runs", state_root);
        int r = mkdir_p(rec->dir, 0700, 0700);
        if (r < 0) {
                r = al_error_set(err, r, "recording the run in %s", rec->dir);
                record_drop(rec);
                return r;
        }
        _cleanup_free_ char *audit = absolute(audit_path);
        json_t *o = json_pack("{s:s, s:s, s:i, s:I, s:o, s:o}", "sandbox", id, "owner",
                              owner == OWNER_RUN ? "run" : "supervise", "pid", (int)getpid(),
                              "startedUs", (json_int_t)now_realtime_us(), "audit",
                              audit ? json_string(audit) : json_null(), "cgroups", cgroup_dirs(id));
        _cleanup_free_ char *json = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!json) {
                record_drop(rec);
                return al_error_set(err, ENOMEM, "recording the run");
        }

        /* Written under a dot-name and renamed when complete and locked: a
         * sweep never sees a record without its owner's lock on it. */
        _cleanup_free_ char *tmp = xasprintf("%s/.%s", rec->dir, id);
        rec->fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (rec->fd < 0) {
                r = al_error_set(err, errno, "recording the run in %s", tmp);
                record_drop(rec);
                return r;
        }
        rec->path = xasprintf("%s/%s", rec->dir, id);
        if (flock(rec->fd, LOCK_EX) < 0 || (r = write_full(rec->fd, json, strlen(json))) < 0 ||
            rename(tmp, rec->path) < 0) {
                r = al_error_set(err, r < 0 ? -r : errno, "recording the run in %s", rec->dir);
                (void)unlink(tmp);
                free(rec->path);
                rec->path = NULL;
                record_drop(rec);
                return r;
        }
        return 0;
}

/* True when the log's tail already has this sandbox's end. */
static bool end_recorded(const char *audit_path, const char *id)
{
        size_t len = 0;
        _cleanup_free_ char *tail = audit_read_tail(audit_path, AUDIT_TAIL, &len);
        return audit_tail_has(tail, len, id, "sandbox.destroyed", NULL);
}

/* The run's end, and first each host tool call it started and never ended
 * (kept in calls_dir, opencalls.h): every tool.started has its tool.call. */
static int audit_owner_died(const char *audit_path, const char *id, json_t *rec,
                            const char *calls_dir, struct al_error *err)
{
        uint64_t now = now_realtime_us();
        json_t *calls = NULL;
        /* A calls file that cannot be read (not what the supervisor
         * writes) must not keep the run's own end off the log for good:
         * the run is ended without it, as airlockd does. */
        if (open_calls_closing(calls_dir, audit_path, id, now / 1000, "airlock", &calls) < 0)
                calls = json_array();
        int r;
        bool ended = end_recorded(audit_path, id);
        if (ended && json_array_size(calls) == 0) {
                json_decref(calls);
                return 0;
        }
        json_int_t started = json_integer_value(json_object_get(rec, "startedUs"));
        json_int_t duration = started > 0 && (uint64_t)started < now
                                  ? (json_int_t)((now - (uint64_t)started) / 1000)
                                  : 0;
        struct audit *a = NULL;
        r = audit_open(audit_path, NULL, &a, err);
        if (r < 0) {
                json_decref(calls);
                return r;
        }
        size_t i;
        json_t *f;
        json_array_foreach(calls, i, f)
        {
                if (r >= 0)
                        r = audit_append(a, id, "tool.call", f, err);
        }
        json_decref(calls);
        if (r >= 0 && !ended) {
                json_t *fields = json_pack("{s:s, s:O, s:I}", "reason", "owner_died", "ownerPid",
                                           json_object_get(rec, "pid"), "durationMs", duration);
                r = audit_append(a, id, "sandbox.destroyed", fields, err);
                json_decref(fields);
        }
        audit_close(a);
        return r;
}

/* Finish one run whose record is `name` in dirfd; 1 when finished, 0 when
 * its owner lives (or another sweep has it), -errno on failure. */
static int finish(int dirfd, const char *dir, const char *name, struct al_error *err)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT ? 0
                                       : al_error_set(err, errno, "run record %s/%s", dir, name);
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                return errno == EWOULDBLOCK
                           ? 0
                           : al_error_set(err, errno, "run record %s/%s", dir, name);
        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "run record %s/%s", dir, name);
        if (st.st_nlink == 0)
                return 0; /* finished by another sweep while we waited */
        if (!S_ISREG(st.st_mode) || st.st_size > RECORD_MAX) {
                (void)unlinkat(dirfd, name, 0);
                return 0;
        }
        _cleanup_free_ char *buf = xcalloc((size_t)st.st_size + 1, 1);
        if (pread(fd, buf, (size_t)st.st_size, 0) != st.st_size)
                return al_error_set(err, EIO, "run record %s/%s", dir, name);
        json_error_t je;
        json_t *rec = json_loads(buf, 0, &je);
        const char *id = json_string_value(json_object_get(rec, "sandbox"));
        json_t *cgs = json_object_get(rec, "cgroups");
        if (!rec || !id || !STREQ(id, name) || !json_is_array(cgs)) {
                /* Nothing can be done with it; it must not block the rest. */
                json_decref(rec);
                (void)unlinkat(dirfd, name, 0);
                return 0;
        }

        /* The tree should be gone already; make sure, then free its cgroups. */
        size_t n = json_array_size(cgs);
        char **dirs = xcalloc(n + 1, sizeof(char *));
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
                const char *d = json_string_value(json_array_get(cgs, i));
                if (d)
                        dirs[k++] = xstrdup(d);
        }
        int r = cgroup_reclaim(dirs, k);
        strv_free(dirs);
        if (r < 0) {
                r = al_error_set(err, r, "removing the cgroups of sandbox %s", id);
                json_decref(rec);
                return r;
        }

        const char *owner = json_string_value(json_object_get(rec, "owner"));
        const char *audit_path = json_string_value(json_object_get(rec, "audit"));
        _cleanup_free_ char *calls = xasprintf("%s/%s.calls", dir, name);
        if (owner && STREQ(owner, "run") && audit_path && audit_path[0] == '/') {
                r = audit_owner_died(audit_path, id, rec, calls, err);
                if (r < 0) {
                        r = al_error_wrap(err, "recording the end of sandbox %s", id);
                        json_decref(rec);
                        return r;
                }
        }
        json_decref(rec);
        (void)open_calls_remove(calls);
        if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
                return al_error_set(err, errno, "run record %s/%s", dir, name);
        return 1;
}

/* A dot-name nobody holds, older than TMP_STALE_S: its owner died while
 * writing it, before it started anything. */
static void drop_stale_tmp(int dirfd, const char *name)
{
        _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
                return;
        if ((uint64_t)st.st_mtime + TMP_STALE_S < now_realtime_us() / 1000000)
                (void)unlinkat(dirfd, name, 0);
}

static int sweep_runs(const char *state_root, struct al_error *err)
{
        _cleanup_free_ char *dir = xasprintf("%s/runs", state_root);
        int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dirfd < 0)
                return errno == ENOENT ? 0 : al_error_set(err, errno, "run records %s", dir);
        _cleanup_(closedirp) DIR *d = fdopendir(dirfd);
        if (!d) {
                close(dirfd);
                return al_error_set(err, errno, "run records %s", dir);
        }
        int found = 0, first = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                int r;
                if (de->d_name[0] == '.' && is_id(de->d_name + 1)) {
                        drop_stale_tmp(dirfd, de->d_name);
                        continue;
                }
                if (!is_id(de->d_name))
                        continue;
                struct al_error e = {0};
                r = finish(dirfd, dir, de->d_name, first < 0 ? &e : err);
                if (r > 0)
                        found++;
                else if (r < 0 && first == 0)
                        first = r;
        }
        return first < 0 ? first : found;
}

int orphans_sweep(const char *state_root, struct al_error *err)
{
        if (!state_root)
                return 0;
        int r = sweep_runs(state_root, err);
        /* Project ids a killed supervisor left on a workspace (quota.h). */
        struct al_error qe = {0};
        int q = quota_sweep(state_root, r < 0 ? &qe : err);
        if (r < 0)
                return r;
        return q < 0 ? q : r + q;
}

int orphans_run(const struct supervisor_config *cfg, struct supervisor_result *res,
                struct al_error *err)
{
        struct al_error sweep_err = {0};
        /* Another run's leftovers are not this run's failure. */
        (void)orphans_sweep(cfg->state_root, &sweep_err);
        al_trace_mark("orphans.sweep");
        if (!cfg->state_root)
                return supervisor_run(cfg, res, err);

        struct supervisor_config c = *cfg;
        char id[17];
        if (!c.sandbox_id) {
                int r = random_hex(id, 16);
                if (r < 0)
                        return al_error_set(err, r, "generating a sandbox id");
                c.sandbox_id = id;
        }
        struct record rec;
        int r = record_start(c.state_root, c.sandbox_id, OWNER_RUN, c.audit_path, &rec, err);
        if (r < 0)
                return r;
        al_trace_mark("orphans.record");
        /* Beside the record, the tool calls under way: a sweep closes
         * those a killed run left (finish()). */
        _cleanup_free_ char *calls = xasprintf("%s.calls", rec.path);
        c.open_calls_dir = calls;
        r = supervisor_run(&c, res, err);
        (void)open_calls_remove(calls);
        record_drop(&rec);
        al_trace_mark("orphans.dropped");
        return r;
}

int orphans_serve(const struct control_config *cfg, struct al_error *err)
{
        struct al_error sweep_err = {0};
        (void)orphans_sweep(cfg->keep_root, &sweep_err);
        if (!cfg->keep_root || !cfg->id || !is_id(cfg->id))
                return control_serve(cfg, err);
        struct record rec;
        int r = record_start(cfg->keep_root, cfg->id, OWNER_SUPERVISE, cfg->audit_path, &rec, err);
        if (r < 0) {
                /* The daemon waits on the ready fd for "ok" or a reason. */
                if (cfg->ready_fd >= 0) {
                        _cleanup_free_ char *msg = xasprintf("error: %s\n", err->msg);
                        (void)write_full(cfg->ready_fd, msg, strlen(msg));
                        close(cfg->ready_fd);
                }
                return r;
        }
        r = control_serve(cfg, err);
        record_drop(&rec);
        return r;
}
