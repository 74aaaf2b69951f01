/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#include "cgroup-internal.h"
#include "util.h"

/* io last: it is enabled only with limits.io. memory stays enabled with it
 * whether or not limits.memory is set: the kernel charges a buffered write's
 * writeback to the sandbox (and io.max throttles it) only when both are on
 * the sandbox's cgroup; with io alone only direct I/O would be throttled. */
static const char *const v2_controllers[] = {"memory", "pids", "cpu", "io"};

static bool has_word(const char *list, const char *word)
{
        size_t n = strlen(word);
        for (const char *p = list; (p = strstr(p, word)); p += n)
                if ((p == list || p[-1] == ' ' || p[-1] == '+') &&
                    (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
                        return true;
        return false;
}

/* Enable the controllers for children of the parent. The kernel refuses
 * (EBUSY) while the parent itself holds processes ("no internal processes"):
 * when the only one is the caller, move it into a leaf of its own first. */
static int enable_controllers(struct cgroup *cg, struct al_error *err)
{
        const char *parent = cg->parent_v2;
        _cleanup_free_ char *path = xasprintf("%s/cgroup.controllers", parent);
        _cleanup_free_ char *avail = NULL;
        int r = read_file_at(AT_FDCWD, path, 4096, &avail, NULL);
        if (r < 0)
                return al_error_set(err, r, "cgroup: reading %s", path);
        _cleanup_free_ char *enabled = NULL;
        free(path);
        path = xasprintf("%s/cgroup.subtree_control", parent);
        (void)read_file_at(AT_FDCWD, path, 4096, &enabled, NULL);

        char want[64] = "";
        /* io only when limits.io asks for it: a host that does not delegate
         * it still runs sandboxes without one. */
        size_t n_ctrl = ARRAY_SIZE(v2_controllers) - !cgroup_io_limited(&cg->limits);
        for (size_t i = 0; i < n_ctrl; i++) {
                if (!has_word(avail, v2_controllers[i]))
                        return al_error_set(err, EOPNOTSUPP,
                                            "cgroup: controller %s is not delegated to %s",
                                            v2_controllers[i], parent);
                if (enabled && has_word(enabled, v2_controllers[i]))
                        continue;
                size_t len = strlen(want);
                snprintf(want + len, sizeof(want) - len, "%s+%s", len ? " " : "",
                         v2_controllers[i]);
        }
        if (!want[0])
                return 0;

        r = cgroup_write(cg, parent, "cgroup.subtree_control", want);
        if (r == -EBUSY && !cg->fake) {
                _cleanup_free_ char *leaf =
                    xasprintf("%s/airlock-supervisor-%d", parent, (int)getpid());
                char pid[32];
                snprintf(pid, sizeof(pid), "%d", (int)getpid());
                if (mkdir(leaf, 0755) < 0 && errno != EEXIST)
                        return al_error_set(err, errno, "cgroup: creating %s", leaf);
                r = cgroup_write(cg, leaf, "cgroup.procs", pid);
                if (r >= 0)
                        r = cgroup_write(cg, parent, "cgroup.subtree_control", want);
                if (r < 0) {
                        rmdir(leaf);
                        return al_error_set(err, r,
                                            "cgroup: %s holds other processes; run Airlock in a "
                                            "delegated cgroup of its own",
                                            parent);
                }
        }
        if (r < 0)
                return al_error_set(err, r, "cgroup: enabling %s in %s", want, parent);
        return 0;
}

static int v2_create(struct cgroup *cg, struct al_error *err)
{
        int r = enable_controllers(cg, err);
        if (r < 0)
                return r;
        if (mkdir(cg->dirs[0], 0755) < 0)
                return al_error_set(err, errno, "cgroup: creating %s", cg->dirs[0]);
        cg->dir_fd = open(cg->dirs[0], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cg->dir_fd < 0) {
                r = -errno;
                rmdir(cg->dirs[0]);
                return al_error_set(err, r, "cgroup: opening %s", cg->dirs[0]);
        }
        return 0;
}

static int v2_write(struct cgroup *cg, const char *file, const char *value, struct al_error *err)
{
        int r = cgroup_write(cg, cg->dirs[0], file, value);
        if (r < 0)
                return al_error_set(err, r, "cgroup: writing %s to %s/%s", value, cg->dirs[0],
                                    file);
        return 0;
}

static int v2_apply(struct cgroup *cg, const struct cgroup_limits *l, struct al_error *err)
{
        char buf[64];
        int r;
        if (l->memory) {
                snprintf(buf, sizeof(buf), "%" PRIu64, l->memory);
                r = v2_write(cg, "memory.max", buf, err);
                if (r < 0)
                        return r;
                /* Without swap support the file is absent: nothing to refuse. */
                if (cg->fake || cgroup_has(cg, cg->dirs[0], "memory.swap.max")) {
                        r = v2_write(cg, "memory.swap.max", "0", err);
                        if (r < 0)
                                return r;
                }
                /* One OOM kill takes the whole sandbox, not a random member. */
                r = v2_write(cg, "memory.oom.group", "1", err);
                if (r < 0)
                        return r;
        }
        if (l->pids) {
                snprintf(buf, sizeof(buf), "%" PRIu64, l->pids);
                r = v2_write(cg, "pids.max", buf, err);
                if (r < 0)
                        return r;
        }
        if (l->cpus_milli) {
                snprintf(buf, sizeof(buf), "%" PRIu64 " 100000", l->cpus_milli * 100);
                r = v2_write(cg, "cpu.max", buf, err);
                if (r < 0)
                        return r;
        }
        if (cgroup_io_limited(l)) {
                /* One line per device; the kernel keeps each. */
                for (size_t i = 0; i < l->io.n_devs; i++) {
                        char line[160];
                        r = cgroup_io_max_line(l, i, line, sizeof(line));
                        if (r >= 0)
                                r = v2_write(cg, "io.max", line, err);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

static int v2_attach(struct cgroup *cg, pid_t pid, struct al_error *err)
{
        char buf[32];
        snprintf(buf, sizeof(buf), "%d", (int)pid);
        return v2_write(cg, "cgroup.procs", buf, err);
}

static int v2_usage(struct cgroup *cg, struct cgroup_usage *ret)
{
        uint64_t v;
        memset(ret, 0, sizeof(*ret));
        if (cgroup_read_keyed(cg, cg->dirs[0], "cpu.stat", "usage_usec", &v) >= 0)
                ret->cpu_usec = v;
        if (cgroup_read_u64(cg, cg->dirs[0], "memory.peak", &v) >= 0 ||
            cgroup_read_u64(cg, cg->dirs[0], "memory.current", &v) >= 0)
                ret->memory_peak = v;
        if (cgroup_read_keyed(cg, cg->dirs[0], "memory.events", "oom_kill", &v) >= 0)
                ret->oom_kills = v;
        if (cgroup_read_u64(cg, cg->dirs[0], "pids.current", &v) >= 0)
                ret->pids_current = v;
        _cleanup_free_ char *stat = NULL;
        if (cgroup_read(cg, cg->dirs[0], "io.stat", 64 * 1024, &stat) >= 0) {
                cgroup_parse_io_stat(stat, &ret->io_read_bytes, &ret->io_write_bytes);
                ret->io_measured = true;
        }
        return 0;
}

static int v2_kill(struct cgroup *cg)
{
        if (cg->fake)
                return 0;
        int r = cgroup_write(cg, cg->dirs[0], "cgroup.kill", "1");
        /* cgroup.kill reaches frozen members too; thaw so nothing is left
         * frozen for whoever looks next. */
        (void)cgroup_write(cg, cg->dirs[0], "cgroup.freeze", "0");
        return r;
}

static int v2_freeze(struct cgroup *cg, bool frozen)
{
        int r = cgroup_write(cg, cg->dirs[0], "cgroup.freeze", frozen ? "1" : "0");
        if (r < 0)
                return r == -ENOENT ? -EOPNOTSUPP : r;
        if (!frozen)
                return 0;
        /* The write asks; "frozen 1" in cgroup.events says every member has
         * stopped (a task in the kernel stops on its way back out). */
        for (int ms = 0; ms < CGROUP_FREEZE_WAIT_MS; ms++) {
                uint64_t v = 0;
                if (cgroup_read_keyed(cg, cg->dirs[0], "cgroup.events", "frozen", &v) >= 0 && v == 1)
                        return 0;
                usleep(1000);
        }
        return -ETIMEDOUT;
}

static int v2_destroy(struct cgroup *cg)
{
        cg->created = false;
        return cgroup_rmdir(cg, cg->dirs[0]);
}

const struct cgroup_ops cgroup_v2_ops = {
    .name = "v2",
    .create = v2_create,
    .apply = v2_apply,
    .attach = v2_attach,
    .usage = v2_usage,
    .kill = v2_kill,
    .destroy = v2_destroy,
    .freeze = v2_freeze,
};

int cgroup_v2_new(const char *parent_dir, const char *name, bool fake, struct cgroup **ret)
{
        struct cgroup *cg = xcalloc(1, sizeof(*cg));
        cg->ops = &cgroup_v2_ops;
        cg->name = xstrdup(name);
        cg->parent_v2 = xstrdup(parent_dir);
        cg->dirs[0] = xasprintf("%s/%s", parent_dir, name);
        cg->n_dirs = 1;
        cg->dir_fd = -1;
        cg->fake = fake;
        *ret = cg;
        return 0;
}
