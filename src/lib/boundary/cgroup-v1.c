/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "cgroup-internal.h"
#include "util.h"

/* In the v1 layout each controller has its own tree; the leaf exists once per
 * tree and the file names tell which tree a setting belongs to: the part
 * before the first dot names the controller. Where cgroup_open() noted
 * which controllers each tree holds, that answers without a lookup (about
 * thirty access() calls on long paths per start before); a file the
 * controller may lack (memsw without swap accounting) is checked by its
 * caller. */
static const char *dir_with(struct cgroup *cg, const char *file)
{
        static const char *const ctrls[] = CGROUP_V1_CTRLS;
        size_t len = strcspn(file, ".");
        unsigned bit = 0;
        for (size_t c = 0; c < ARRAY_SIZE(ctrls) && !bit; c++)
                if (strlen(ctrls[c]) == len && !strncmp(file, ctrls[c], len))
                        bit = 1u << c;
        bool known = cg->n_dirs > 0 && cg->ctrls[0] != 0;
        if (known && bit) {
                for (size_t i = 0; i < cg->n_dirs; i++)
                        if (cg->ctrls[i] & bit)
                                return cg->dirs[i];
                return NULL;
        }
        for (size_t i = 0; i < cg->n_dirs; i++) {
                _cleanup_free_ char *p = xasprintf("%s/%s", cg->dirs[i], file);
                if (access(p, F_OK) == 0)
                        return cg->dirs[i];
        }
        return NULL;
}

/* Whether the tree of `file`'s controller has it. */
static bool has_file(struct cgroup *cg, const char *file)
{
        const char *dir = dir_with(cg, file);
        return dir && cgroup_has(cg, dir, file);
}

static int v1_create(struct cgroup *cg, struct al_error *err)
{
        for (size_t i = 0; i < cg->n_dirs; i++) {
                if (mkdir(cg->dirs[i], 0755) < 0) {
                        int r = al_error_set(err, errno, "cgroup: creating %s", cg->dirs[i]);
                        for (size_t j = 0; j < i; j++)
                                rmdir(cg->dirs[j]);
                        return r;
                }
        }
        return 0;
}

static int v1_set(struct cgroup *cg, const char *file, uint64_t v, bool required,
                  struct al_error *err)
{
        const char *dir = dir_with(cg, file);
        if (!dir && cg->fake) {
                /* A fake tree has no control files yet: the first directory
                 * whose name says which controller it is takes them. */
                char ctrl[32];
                size_t n = strcspn(file, ".");
                snprintf(ctrl, sizeof(ctrl), "/%.*s/", (int)n, file);
                for (size_t i = 0; i < cg->n_dirs && !dir; i++)
                        if (strstr(cg->dirs[i], ctrl))
                                dir = cg->dirs[i];
        }
        if (!dir)
                return required ? al_error_set(err, ENOENT, "cgroup: no %s control file", file) : 0;
        char buf[32];
        snprintf(buf, sizeof(buf), "%" PRIu64, v);
        int r = cgroup_write(cg, dir, file, buf);
        if (r < 0 && required)
                return al_error_set(err, r, "cgroup: writing %s to %s/%s", buf, dir, file);
        return 0;
}

/* blkio.throttle.<file>: "MAJ:MIN value", one device per write. */
static int v1_set_io(struct cgroup *cg, const char *file, uint64_t v, const struct cgroup_limits *l,
                     struct al_error *err)
{
        const char *dir = dir_with(cg, file);
        for (size_t i = 0; !dir && cg->fake && i < cg->n_dirs; i++)
                if (strstr(cg->dirs[i], "/blkio/"))
                        dir = cg->dirs[i];
        if (!dir)
                return al_error_set(err, EOPNOTSUPP,
                                    "limits.io: the cgroup v1 blkio controller is not mounted; "
                                    "I/O cannot be throttled");
        if (!v)
                return 0;
        for (size_t i = 0; i < l->io.n_devs; i++) {
                char buf[64];
                snprintf(buf, sizeof(buf), "%u:%u %" PRIu64, major(l->io.devs[i]),
                         minor(l->io.devs[i]), v);
                int r = cgroup_write(cg, dir, file, buf);
                if (r < 0)
                        return al_error_set(err, r, "cgroup: writing %s to %s/%s", buf, dir, file);
        }
        return 0;
}

static int v1_apply(struct cgroup *cg, const struct cgroup_limits *l, struct al_error *err)
{
        int r;
        if (l->memory) {
                r = v1_set(cg, "memory.limit_in_bytes", l->memory, true, err);
                if (r < 0)
                        return r;
                /* memsw counts memory plus swap; equal to the memory limit
                 * means no swap. Without swap accounting, refuse swap through
                 * swappiness instead. */
                if (has_file(cg, "memory.memsw.limit_in_bytes") || cg->fake)
                        r = v1_set(cg, "memory.memsw.limit_in_bytes", l->memory, true, err);
                else
                        r = v1_set(cg, "memory.swappiness", 0, false, err);
                if (r < 0)
                        return r;
        }
        if (l->pids) {
                r = v1_set(cg, "pids.max", l->pids, true, err);
                if (r < 0)
                        return r;
        }
        if (l->cpus_milli) {
                /* Over the kernel's period for a new cgroup, 100 ms (each
                 * write to the cpu controller's bandwidth takes its locks
                 * across every cpu, so the period is left as it is). */
                r = v1_set(cg, "cpu.cfs_quota_us", l->cpus_milli * 100, true, err);
                if (r < 0)
                        return r;
        }
        if (cgroup_io_limited(l)) {
                r = v1_set_io(cg, "blkio.throttle.read_bps_device", l->io.read_bps, l, err);
                if (r >= 0)
                        r = v1_set_io(cg, "blkio.throttle.write_bps_device", l->io.write_bps, l,
                                      err);
                if (r >= 0)
                        r = v1_set_io(cg, "blkio.throttle.read_iops_device", l->io.read_iops, l,
                                      err);
                if (r >= 0)
                        r = v1_set_io(cg, "blkio.throttle.write_iops_device", l->io.write_iops, l,
                                      err);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int v1_attach(struct cgroup *cg, pid_t pid, struct al_error *err)
{
        char buf[32];
        snprintf(buf, sizeof(buf), "%d", (int)pid);
        for (size_t i = 0; i < cg->n_dirs; i++) {
                int r = cgroup_write(cg, cg->dirs[i], "cgroup.procs", buf);
                if (r < 0)
                        return al_error_set(err, r, "cgroup: moving %d into %s", (int)pid,
                                            cg->dirs[i]);
        }
        return 0;
}

static int v1_usage(struct cgroup *cg, struct cgroup_usage *ret)
{
        const char *d;
        uint64_t v;
        memset(ret, 0, sizeof(*ret));
        if ((d = dir_with(cg, "cpuacct.usage")) && cgroup_read_u64(cg, d, "cpuacct.usage", &v) >= 0)
                ret->cpu_usec = v / 1000;
        if ((d = dir_with(cg, "memory.max_usage_in_bytes")) &&
            cgroup_read_u64(cg, d, "memory.max_usage_in_bytes", &v) >= 0)
                ret->memory_peak = v;
        if ((d = dir_with(cg, "memory.oom_control")) &&
            cgroup_read_keyed(cg, d, "memory.oom_control", "oom_kill", &v) >= 0)
                ret->oom_kills = v;
        if ((d = dir_with(cg, "pids.current")) && cgroup_read_u64(cg, d, "pids.current", &v) >= 0)
                ret->pids_current = v;
        if ((d = dir_with(cg, "blkio.throttle.io_service_bytes"))) {
                _cleanup_free_ char *s = NULL;
                if (cgroup_read(cg, d, "blkio.throttle.io_service_bytes", 64 * 1024, &s) >= 0) {
                        cgroup_parse_blkio_bytes(s, &ret->io_read_bytes, &ret->io_write_bytes);
                        ret->io_measured = true;
                }
        }
        return 0;
}

/* The leaf in the freezer hierarchy (a fake tree: the one named so). */
static const char *freezer_dir(struct cgroup *cg)
{
        const char *dir = dir_with(cg, "freezer.state");
        for (size_t i = 0; !dir && cg->fake && i < cg->n_dirs; i++)
                if (strstr(cg->dirs[i], "/freezer/"))
                        dir = cg->dirs[i];
        return dir;
}

static int v1_kill(struct cgroup *cg)
{
        /* Without cgroup.kill, signal what is listed until nothing is. The
         * sandbox's pid namespace usually empties itself when its pid 1 dies;
         * this catches stragglers. */
        for (int round = 0; round < 100; round++) {
                bool any = false;
                for (size_t i = 0; i < cg->n_dirs; i++) {
                        _cleanup_free_ char *s = NULL;
                        if (cgroup_read(cg, cg->dirs[i], "cgroup.procs", 1 << 20, &s) < 0)
                                continue;
                        for (char *line = s; *line;) {
                                char *nl = strchr(line, '\n');
                                if (nl)
                                        *nl = '\0';
                                int pid;
                                if (safe_atoi(line, &pid) >= 0 && pid > 0 && !cg->fake) {
                                        kill(pid, SIGKILL);
                                        any = true;
                                }
                                if (!nl)
                                        break;
                                line = nl + 1;
                        }
                }
                /* A frozen member dies only once thawed: the SIGKILL is
                 * already pending, so it runs no more of its own code. */
                const char *fz = freezer_dir(cg);
                if (fz)
                        (void)cgroup_write(cg, fz, "freezer.state", "THAWED");
                if (!any)
                        return 0;
                usleep(1000);
        }
        return -EBUSY;
}

static int v1_freeze(struct cgroup *cg, bool frozen)
{
        const char *dir = freezer_dir(cg);
        if (!dir)
                return -EOPNOTSUPP;
        int r = cgroup_write(cg, dir, "freezer.state", frozen ? "FROZEN" : "THAWED");
        if (r < 0 || !frozen)
                return r;
        /* FREEZING while some member has not stopped yet; FROZEN once all
         * have. */
        for (int ms = 0; ms < CGROUP_FREEZE_WAIT_MS; ms++) {
                _cleanup_free_ char *s = NULL;
                if (cgroup_read(cg, dir, "freezer.state", 64, &s) >= 0 && strncmp(s, "FROZEN", 6) == 0)
                        return 0;
                usleep(1000);
        }
        return -ETIMEDOUT;
}

static int v1_destroy(struct cgroup *cg)
{
        int ret = 0;
        for (size_t i = 0; i < cg->n_dirs; i++) {
                int r = cgroup_rmdir(cg, cg->dirs[i]);
                if (r < 0)
                        ret = r;
        }
        cg->created = false;
        return ret;
}

const struct cgroup_ops cgroup_v1_ops = {
    .name = "v1",
    .create = v1_create,
    .apply = v1_apply,
    .attach = v1_attach,
    .usage = v1_usage,
    .kill = v1_kill,
    .destroy = v1_destroy,
    .freeze = v1_freeze,
};

int cgroup_v1_new(char *const *parent_dirs, size_t n, const char *name, bool fake,
                  struct cgroup **ret)
{
        if (n == 0 || n > CGROUP_V1_MAX)
                return -EINVAL;
        struct cgroup *cg = xcalloc(1, sizeof(*cg));
        cg->ops = &cgroup_v1_ops;
        cg->name = xstrdup(name);
        cg->dir_fd = -1;
        cg->fake = fake;
        for (size_t i = 0; i < n; i++)
                cg->dirs[cg->n_dirs++] = xasprintf("%s/%s", parent_dirs[i], name);
        *ret = cg;
        return 0;
}
