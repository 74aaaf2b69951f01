/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "landlock.h"
#include "probe.h"
#include "quota.h"
#include "util.h"

static void say(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(char *buf, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, PROBE_TEXT_MAX, fmt, ap);
        va_end(ap);
}

static void start(struct probe_check *c, const char *name)
{
        memset(c, 0, sizeof(*c));
        c->name = name;
}

/* A sysctl's value; -1 when the file is absent or unreadable. */
static long sysctl_value(const char *path)
{
        _cleanup_free_ char *s = NULL;
        uint64_t v;
        if (read_file_at(AT_FDCWD, path, 64, &s, NULL) < 0)
                return -1;
        s[strcspn(s, "\n")] = '\0';
        return safe_atou64(s, &v) < 0 ? -1 : (long)v;
}

enum userns_stage { STAGE_UNSHARE = 1, STAGE_MAP, STAGE_MOUNT };

static int write_str(const char *path, const char *s)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return write_full(fd, s, strlen(s));
}

/* In a child: the namespaces spawn.c asks for, the uid mapping, and a mount
 * change in the new mount namespace (which an AppArmor userns restriction
 * refuses even where unshare itself succeeds). Reports (stage, errno). */
static void userns_child(int fd)
{
        int rep[2] = {0, 0};
        uid_t uid = geteuid();
        gid_t gid = getegid();
        char map[64];
        if (unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC |
                    CLONE_NEWUTS | CLONE_NEWCGROUP) < 0) {
                rep[0] = STAGE_UNSHARE;
                rep[1] = errno;
        } else {
                int r;
                snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)uid);
                r = write_str("/proc/self/uid_map", map);
                if (r >= 0)
                        r = write_str("/proc/self/setgroups", "deny");
                snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)gid);
                if (r >= 0)
                        r = write_str("/proc/self/gid_map", map);
                if (r < 0) {
                        rep[0] = STAGE_MAP;
                        rep[1] = -r;
                } else if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0) {
                        rep[0] = STAGE_MOUNT;
                        rep[1] = errno;
                }
        }
        (void)!write(fd, rep, sizeof(rep));
        _exit(0);
}

void probe_userns(struct probe_check *c)
{
        start(c, "userns");
        long unpriv = sysctl_value("/proc/sys/kernel/unprivileged_userns_clone");
        long maxns = sysctl_value("/proc/sys/user/max_user_namespaces");
        long aa = sysctl_value("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
        bool root = geteuid() == 0;

        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0) {
                say(c->detail, "cannot test: pipe: %s", strerror(errno));
                return;
        }
        pid_t pid = fork();
        if (pid == 0) {
                close(p[0]);
                userns_child(p[1]);
        }
        close(p[1]);
        int rep[2] = {-1, 0};
        if (pid > 0) {
                ssize_t n;
                while ((n = read(p[0], rep, sizeof(rep))) < 0 && errno == EINTR)
                        ;
                if (n != (ssize_t)sizeof(rep))
                        rep[0] = -1;
                while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                        ;
        }
        close(p[0]);
        if (pid < 0) {
                say(c->detail, "cannot test: fork: %s", strerror(errno));
                return;
        }
        if (rep[0] == 0) {
                c->ok = true;
                say(c->detail,
                    "a new user namespace with mount, pid, net, ipc, uts and cgroup "
                    "namespaces works for uid %u",
                    (unsigned)geteuid());
                return;
        }
        const char *what = rep[0] == STAGE_UNSHARE ? "creating the namespaces"
                           : rep[0] == STAGE_MAP   ? "mapping the uid and gid"
                           : rep[0] == STAGE_MOUNT ? "changing a mount in them"
                                                   : "the test child";
        say(c->detail, "%s failed: %s", what, rep[0] > 0 ? strerror(rep[1]) : "no report");
        if (maxns == 0)
                say(c->fix, "user namespaces are switched off (user.max_user_namespaces = 0): "
                            "sysctl -w user.max_user_namespaces=15000, and set it in "
                            "/etc/sysctl.d/ to keep it");
        else if (!root && unpriv == 0)
                say(c->fix, "unprivileged user namespaces are switched off "
                            "(kernel.unprivileged_userns_clone = 0): sysctl -w "
                            "kernel.unprivileged_userns_clone=1 (and in /etc/sysctl.d/), or "
                            "run Airlock as root");
        else if (!root && aa == 1)
                say(c->fix, "AppArmor restricts unprivileged user namespaces "
                            "(kernel.apparmor_restrict_unprivileged_userns = 1): give airlock "
                            "an AppArmor profile with the 'userns,' rule, or sysctl -w "
                            "kernel.apparmor_restrict_unprivileged_userns=0, or run as root");
        else if (rep[0] == STAGE_UNSHARE && rep[1] == ENOSPC)
                say(c->fix,
                    "the user namespace limit is reached (user.max_user_namespaces = "
                    "%ld): raise it",
                    maxns);
        else if (rep[0] == STAGE_UNSHARE && (rep[1] == EPERM || rep[1] == EINVAL))
                say(c->fix, "the environment Airlock runs in forbids new namespaces (a "
                            "container's seccomp profile or a missing capability): run it on "
                            "the host, or in a container allowed to create user namespaces");
        else
                say(c->fix, "the kernel needs CONFIG_USER_NS and the other namespace options");
}

void probe_cgroup(struct probe_check *c)
{
        start(c, "cgroup");
        struct cgroup_limits none = {0};
        struct cgroup *cg = NULL;
        struct al_error e = {0};
        bool root = geteuid() == 0;
        if (cgroup_open("airlock-doctor", &none, &cg, &e) < 0) {
                say(c->detail, "%s", e.msg);
                say(c->fix, "%s",
                    root ? "mount the cgroup controllers memory, pids and cpu"
                         : "run as root, or start Airlock in a cgroup delegated "
                           "to this user (e.g. systemd-run --user --scope -p "
                           "Delegate=yes airlock ...)");
                return;
        }
        bool v2 = STREQ(cg->ops->name, "v2");
        char dirs[PROBE_TEXT_MAX] = "";
        const char *unwritable = NULL;
        if (v2) {
                _cleanup_free_ char *path = xasprintf("%s/cgroup.controllers", cg->parent_v2);
                _cleanup_free_ char *ctl = NULL;
                (void)read_file_at(AT_FDCWD, path, 4096, &ctl, NULL);
                if (ctl)
                        ctl[strcspn(ctl, "\n")] = '\0';
                snprintf(dirs, sizeof(dirs), "%s (controllers: %s)", cg->parent_v2,
                         ctl ? ctl : "unreadable");
                if (access(cg->parent_v2, W_OK) < 0)
                        unwritable = cg->parent_v2;
                static const char *const need[] = {"memory", "pids", "cpu"};
                for (size_t i = 0; ctl && i < ARRAY_SIZE(need) && !unwritable; i++) {
                        char w[16];
                        snprintf(w, sizeof(w), "%s", need[i]);
                        bool found = false;
                        for (char *t = ctl, *sp; t && *t; t = sp ? sp + 1 : NULL) {
                                sp = strchr(t, ' ');
                                size_t len = sp ? (size_t)(sp - t) : strlen(t);
                                found = found || (len == strlen(w) && !strncmp(t, w, len));
                        }
                        if (!found) {
                                say(c->detail,
                                    "cgroup v2: the %s controller is not delegated to "
                                    "%s",
                                    need[i], dirs);
                                say(c->fix, "delegate memory, pids and cpu to this cgroup "
                                            "(systemd: Delegate=yes)");
                                cgroup_free(cg);
                                return;
                        }
                }
        } else {
                size_t len = 0;
                for (size_t i = 0; i < cg->n_dirs; i++) {
                        _cleanup_free_ char *parent = xstrdup(cg->dirs[i]);
                        char *slash = strrchr(parent, '/');
                        if (slash)
                                *slash = '\0';
                        if (!unwritable && access(parent, W_OK) < 0)
                                unwritable = cg->dirs[i];
                        len += (size_t)snprintf(dirs + len,
                                                len < sizeof(dirs) ? sizeof(dirs) - len : 0, "%s%s",
                                                i ? ", " : "", parent);
                        if (len >= sizeof(dirs))
                                break;
                }
        }
        if (unwritable) {
                say(c->detail, "cgroup %s: %s is not writable by uid %u", cg->ops->name, unwritable,
                    (unsigned)geteuid());
                say(c->fix, "run as root, or start Airlock in a cgroup delegated to this user");
                cgroup_free(cg);
                return;
        }
        c->ok = true;
        bool hybrid = !v2 && access("/sys/fs/cgroup/unified", F_OK) == 0;
        say(c->detail, "cgroup %s%s, sandboxes under %s", cg->ops->name,
            hybrid ? " (hybrid layout)" : "", dirs);
        cgroup_free(cg);
}

void probe_landlock(struct probe_check *c)
{
        start(c, "landlock");
        int abi = landlock_abi();
        if (abi > 0) {
                c->ok = true;
                say(c->detail, "Landlock ABI %d", abi);
                return;
        }
        _cleanup_free_ char *lsm = NULL;
        (void)read_file_at(AT_FDCWD, "/sys/kernel/security/lsm", 4096, &lsm, NULL);
        if (lsm)
                lsm[strcspn(lsm, "\n")] = '\0';
        say(c->detail, "Landlock is not available (active security modules: %s)",
            lsm ? lsm : "unknown");
        say(c->fix, "a kernel with CONFIG_SECURITY_LANDLOCK, with landlock in the lsm= boot "
                    "parameter (e.g. lsm=landlock,lockdown,yama,apparmor)");
}

static bool seccomp_built(void)
{
        return prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0;
}

static bool seccomp_action(uint32_t action)
{
        return syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

void probe_seccomp(struct probe_check *c)
{
        start(c, "seccomp");
        if (seccomp_built() && seccomp_action(SECCOMP_RET_KILL_PROCESS) &&
            seccomp_action(SECCOMP_RET_ERRNO)) {
                c->ok = true;
                say(c->detail, "seccomp filters, with the kill-process and errno actions");
                return;
        }
        say(c->detail,
            "seccomp filters with the kill-process and errno actions are not "
            "available: %s",
            strerror(errno));
        say(c->fix, "a kernel with CONFIG_SECCOMP_FILTER (Linux 4.14 or later)");
}

static char *find_in_path(const char *name)
{
        const char *path = getenv("PATH");
        _cleanup_free_ char *copy = xstrdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
        for (char *dir = copy, *next; dir; dir = next) {
                next = strchr(dir, ':');
                if (next)
                        *next++ = '\0';
                if (dir[0] != '/')
                        continue;
                char *p = xasprintf("%s/%s", dir, name);
                if (access(p, X_OK) == 0)
                        return p;
                free(p);
        }
        return NULL;
}

void probe_runsc(struct probe_check *c)
{
        start(c, "runsc");
        _cleanup_free_ char *p = find_in_path("runsc");
        if (p) {
                c->ok = true;
                say(c->detail, "runsc at %s", p);
                return;
        }
        say(c->detail, "runsc is not installed (not in PATH)");
        say(c->fix, "apt install runsc (Debian's gVisor package)");
}

void probe_kvm(struct probe_check *c)
{
        start(c, "kvm");
        int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (fd >= 0) {
                close(fd);
                c->ok = true;
                say(c->detail, "/dev/kvm is usable by uid %u", (unsigned)geteuid());
                return;
        }
        int e = errno;
        say(c->detail, "/dev/kvm: %s", strerror(e));
        if (e == ENOENT)
                say(c->fix, "no KVM here: enable hardware virtualisation (VT-x/AMD-V, or nested "
                            "virtualisation in a VM) and load kvm_intel or kvm_amd");
        else if (e == EACCES || e == EPERM)
                say(c->fix, "add the user to the kvm group (usermod -aG kvm USER)");
}

void probe_workspace_quota(const char *path, struct probe_check *c)
{
        start(c, "workspaceDisk");
        struct al_error e = {0};
        int r = quota_check(path, &e);
        if (r >= 0) {
                c->ok = true;
                say(c->detail,
                    "project quotas are enabled on the file system of %s: "
                    "limits.workspaceDisk can be enforced",
                    path);
                return;
        }
        say(c->detail, "%s", e.msg);
        if (r == -EPERM || r == -EACCES)
                say(c->fix, "run as root: only root sets project quotas");
        else if (r == -EOPNOTSUPP)
                say(c->fix, "put the workspace on ext4 made with mkfs.ext4 -O quota,project and "
                            "mounted with -o prjquota (the kernel needs CONFIG_QUOTA, "
                            "CONFIG_QUOTACTL and CONFIG_QFMT_V2), or on XFS mounted with -o "
                            "prjquota (CONFIG_XFS_QUOTA); or use --review, whose layer "
                            "limits.disk bounds");
}

void probe_workspace_io(const char *path, struct probe_check *c)
{
        start(c, "io");
        struct cgroup_limits l = {.io = {.write_bps = 1}};
        struct al_error e = {0};
        char *paths[] = {(char *)path};
        if (cgroup_io_devices(paths, 1, &l, &e) < 0) {
                say(c->detail, "%s", e.msg);
                say(c->fix, "use a workspace on a disk to throttle its I/O");
                return;
        }
        /* The controller as a run with limits.io would find it. */
        struct cgroup *cg = NULL;
        if (cgroup_open("airlock-doctor", &l, &cg, &e) < 0) {
                say(c->detail, "%s", e.msg);
                say(c->fix, "run as root, or delegate the %s controller to this user",
                    access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0 ? "io" : "blkio");
                return;
        }
        cgroup_free(cg);
        c->ok = true;
        say(c->detail, "the disk %u:%u backs %s: limits.io can throttle it", major(l.io.devs[0]),
            minor(l.io.devs[0]), path);
}

int probe_cgroup_dynmods(const char *mounts, struct probe_dynmods *ret)
{
        *ret = (struct probe_dynmods){0};
        for (const char *line = mounts; line && *line;) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t)(nl - line) : strlen(line);
                char buf[1024];
                if (len < sizeof(buf)) {
                        memcpy(buf, line, len);
                        buf[len] = '\0';
                        /* "source mountpoint fstype options dump pass" */
                        char *save = NULL, *f[4] = {0};
                        for (int i = 0; i < 4; i++)
                                f[i] = strtok_r(i ? NULL : buf, " ", &save);
                        bool v1 = f[2] && STREQ(f[2], "cgroup");
                        bool v2 = f[2] && STREQ(f[2], "cgroup2");
                        if (f[3] && (v1 || v2)) {
                                bool fav = false;
                                char *s2 = NULL;
                                for (char *o = strtok_r(f[3], ",", &s2); o;
                                     o = strtok_r(NULL, ",", &s2))
                                        fav = fav || STREQ(o, "favordynmods");
                                if (v1) {
                                        ret->v1++;
                                        ret->v1_favor += fav;
                                } else {
                                        ret->v2++;
                                        ret->v2_favor += fav;
                                        if (!ret->v2_at[0] && f[1] &&
                                            strlen(f[1]) < sizeof(ret->v2_at))
                                                snprintf(ret->v2_at, sizeof(ret->v2_at), "%s",
                                                         f[1]);
                                }
                        }
                }
                line = nl ? nl + 1 : NULL;
        }
        return 0;
}

void probe_start_cost(struct probe_check *c)
{
        _cleanup_free_ char *mounts = NULL;
        if (read_file_at(AT_FDCWD, "/proc/mounts", 1 << 20, &mounts, NULL) < 0) {
                start(c, "cgroup-move");
                say(c->detail, "/proc/mounts cannot be read");
                return;
        }
        probe_start_cost_of(mounts, c);
}

void probe_start_cost_of(const char *mounts, struct probe_check *c)
{
        start(c, "cgroup-move");
        struct probe_dynmods d;
        probe_cgroup_dynmods(mounts, &d);
        if (d.v1 == 0) {
                c->ok = true;
                say(c->detail, "cgroup v2 only: a sandbox is placed in its cgroup as it is "
                               "cloned (CLONE_INTO_CGROUP), no move to wait for");
                return;
        }
        /* The kernel's lock for moves is one for every hierarchy: one
         * mounted with favordynmods keeps it ready for all of them. */
        if (d.v1_favor + d.v2_favor > 0) {
                c->ok = true;
                say(c->detail,
                    "cgroup v1 with favordynmods on %zu of %zu hierarchies: moving "
                    "a sandbox into its cgroup does not wait",
                    d.v1_favor + d.v2_favor, d.v1 + d.v2);
                return;
        }
        say(c->detail,
            "cgroup v1 without favordynmods (%zu hierarchies): each start moves the sandbox "
            "into its cgroup, which waits for an RCU grace period (a few ms, more on a busy "
            "host); Airlock run as root starts that wait early, beside the setup",
            d.v1);
        /* A v1 hierarchy keeps the options it was first mounted with: a
         * remount that adds favordynmods is refused ("option or name
         * mismatch"). The v2 hierarchy takes it on a remount, and the lock
         * it relaxes is the one v1 moves take too. */
        if (d.v2_at[0])
                say(c->fix,
                    "as root: mount -o remount,favordynmods %s (this host's cgroup v2 "
                    "hierarchy; the lock it relaxes is the one every move takes, v1 ones "
                    "too; Linux 6.0 or later; forks and exits cost slightly more), or boot "
                    "with cgroup v2 (systemd.unified_cgroup_hierarchy=1)",
                    d.v2_at);
        else
                say(c->fix, "a v1 hierarchy takes favordynmods only when it is first mounted (a "
                            "remount cannot add it); as root, mount the cgroup v2 hierarchy with "
                            "it, which relaxes the lock every move takes (mkdir -p "
                            "/sys/fs/cgroup/unified && mount -t cgroup2 -o favordynmods none "
                            "/sys/fs/cgroup/unified; Linux 6.0 or later; forks and exits cost "
                            "slightly more), or boot with cgroup v2 "
                            "(systemd.unified_cgroup_hierarchy=1)");
}
