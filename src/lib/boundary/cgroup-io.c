/* SPDX-License-Identifier: Apache-2.0 */
/* Block I/O: which devices a sandbox's limits.io applies to, the lines the
 * v2 io.max and v1 blkio.throttle.* files take, and the bytes read and
 * written from io.stat (v2) or blkio.throttle.io_service_bytes (v1). */
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "cgroup-internal.h"
#include "policy.h"
#include "util.h"

bool cgroup_io_limited(const struct cgroup_limits *l)
{
        return l->io.read_bps || l->io.write_bps || l->io.read_iops || l->io.write_iops;
}

/* The whole disk a partition belongs to: the kernel throttles whole disks
 * (io.max refuses a partition). */
static dev_t whole_disk(dev_t dev)
{
        char path[96];
        snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/partition", major(dev), minor(dev));
        if (access(path, F_OK) < 0)
                return dev;
        snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/../dev", major(dev), minor(dev));
        _cleanup_free_ char *s = NULL;
        if (read_file_at(AT_FDCWD, path, 64, &s, NULL) < 0)
                return dev;
        unsigned ma, mi;
        if (sscanf(s, "%u:%u", &ma, &mi) != 2)
                return dev;
        return makedev(ma, mi);
}

int cgroup_io_devices(char *const *paths, size_t n, struct cgroup_limits *l, struct al_error *err)
{
        const char *nodev = NULL;

        l->io.n_devs = 0;
        for (size_t i = 0; i < n; i++) {
                struct stat st;
                if (!paths[i])
                        continue;
                if (stat(paths[i], &st) < 0)
                        return al_error_set(err, errno, "limits.io: %s", paths[i]);
                if (major(st.st_dev) == 0) {
                        /* tmpfs, overlay, and the like: no block device. */
                        nodev = nodev ? nodev : paths[i];
                        continue;
                }
                dev_t d = whole_disk(st.st_dev);
                bool seen = false;
                for (size_t j = 0; j < l->io.n_devs; j++)
                        seen = seen || l->io.devs[j] == d;
                if (seen)
                        continue;
                if (l->io.n_devs == CGROUP_IO_DEVS_MAX)
                        return al_error_set(err, E2BIG,
                                            "limits.io: the workspace and mounts span more than "
                                            "%d block devices",
                                            CGROUP_IO_DEVS_MAX);
                l->io.devs[l->io.n_devs++] = d;
        }
        if (l->io.n_devs == 0) {
                if (nodev)
                        return al_error_set(err, EOPNOTSUPP,
                                            "limits.io: no block device backs %s (a memory or "
                                            "layered file system), so its I/O cannot be "
                                            "throttled; remove limits.io or use a workspace on "
                                            "a disk",
                                            nodev);
                return al_error_set(err, EINVAL,
                                    "limits.io: the sandbox has no workspace or mount to "
                                    "throttle; give a workspace or remove limits.io");
        }
        return 0;
}

static void io_value(char *buf, size_t size, uint64_t v)
{
        if (v)
                snprintf(buf, size, "%" PRIu64, v);
        else
                snprintf(buf, size, "max");
}

int cgroup_io_max_line(const struct cgroup_limits *l, size_t i, char *buf, size_t size)
{
        char rb[24], wb[24], ri[24], wi[24];
        if (i >= l->io.n_devs)
                return -EINVAL;
        io_value(rb, sizeof(rb), l->io.read_bps);
        io_value(wb, sizeof(wb), l->io.write_bps);
        io_value(ri, sizeof(ri), l->io.read_iops);
        io_value(wi, sizeof(wi), l->io.write_iops);
        int n = snprintf(buf, size, "%u:%u rbps=%s wbps=%s riops=%s wiops=%s", major(l->io.devs[i]),
                         minor(l->io.devs[i]), rb, wb, ri, wi);
        return n < 0 || (size_t)n >= size ? -ENOBUFS : 0;
}

/* v2 io.stat: "MAJ:MIN rbytes=N wbytes=N rios=N wios=N ..." per device. */
int cgroup_parse_io_stat(const char *content, uint64_t *read, uint64_t *written)
{
        *read = *written = 0;
        for (const char *line = content; line && *line;) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t)(nl - line) : strlen(line);
                for (const char *p = line; p < line + len;) {
                        const char *sp = memchr(p, ' ', (size_t)(line + len - p));
                        size_t tlen = sp ? (size_t)(sp - p) : (size_t)(line + len - p);
                        char tok[64];
                        uint64_t v;
                        if (tlen < sizeof(tok)) {
                                memcpy(tok, p, tlen);
                                tok[tlen] = '\0';
                                if (strncmp(tok, "rbytes=", 7) == 0 &&
                                    safe_atou64(tok + 7, &v) >= 0)
                                        *read += v;
                                else if (strncmp(tok, "wbytes=", 7) == 0 &&
                                         safe_atou64(tok + 7, &v) >= 0)
                                        *written += v;
                        }
                        p += tlen + 1;
                }
                line = nl ? nl + 1 : NULL;
        }
        return 0;
}

/* v1 blkio.throttle.io_service_bytes: "MAJ:MIN Read N", "MAJ:MIN Write N",
 * ..., and a "Total N" line. */
int cgroup_parse_blkio_bytes(const char *content, uint64_t *read, uint64_t *written)
{
        *read = *written = 0;
        for (const char *line = content; line && *line;) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t)(nl - line) : strlen(line);
                char buf[128], dev[32], op[16];
                uint64_t v;
                if (len < sizeof(buf)) {
                        memcpy(buf, line, len);
                        buf[len] = '\0';
                        char num[32];
                        if (sscanf(buf, "%31s %15s %31s", dev, op, num) == 3 &&
                            safe_atou64(num, &v) >= 0) {
                                if (STREQ(op, "Read"))
                                        *read += v;
                                else if (STREQ(op, "Write"))
                                        *written += v;
                        }
                }
                line = nl ? nl + 1 : NULL;
        }
        return 0;
}

int cgroup_limits_from_policy(const struct policy *p, struct cgroup_limits *l, struct al_error *err)
{
        *l = (struct cgroup_limits){
            .memory = p->limits.memory,
            .pids = p->limits.pids,
            .cpus_milli = p->limits.cpus_milli,
            .io =
                {
                    .read_bps = p->limits.io.read_bps,
                    .write_bps = p->limits.io.write_bps,
                    .read_iops = p->limits.io.read_iops,
                    .write_iops = p->limits.io.write_iops,
                },
        };
        if (!cgroup_io_limited(l))
                return 0;
        _cleanup_free_ char **paths = xcalloc(p->n_mounts + 1, sizeof(char *));
        size_t n = 0;
        if (p->workspace)
                paths[n++] = p->workspace;
        for (size_t i = 0; i < p->n_mounts; i++)
                if (p->mounts[i].source)
                        paths[n++] = p->mounts[i].source;
        return cgroup_io_devices(paths, n, l, err);
}
