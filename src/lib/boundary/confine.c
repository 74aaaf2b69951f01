/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <linux/securebits.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "confine.h"
#include "landlock.h"
#include "seccomp.h"
#include "tier.h"
#include "trace.h"
#include "microvm.h"
#include "util.h"

extern char **environ;

static int set_rlimit(int resource, uint64_t value, const char *name, struct al_error *err)
{
        struct rlimit rl = {.rlim_cur = value, .rlim_max = value};
        if (setrlimit(resource, &rl) < 0)
                return al_error_set(err, errno, "setting %s", name);
        return 0;
}

/* Found once per process tree: pid 1 finds it when it drops its own
 * capabilities, every command it forks inherits the answer. */
static int cached_last_cap = -1;

/* The highest capability this kernel knows: the kernel answers
 * PR_CAP_AMBIENT_IS_SET for 0..cap_last_cap and refuses (EINVAL) anything
 * above, so a binary search of seven side-effect-free prctl calls finds what
 * /proc/sys/kernel/cap_last_cap says, without opening /proc (about 25 us of
 * a cold start). Read from /proc when prctl does not answer. */
int confine_last_cap(void)
{
        if (cached_last_cap > 0)
                return cached_last_cap;
        /* Only EINVAL says "no such capability": any other refusal (a
         * filter around Airlock) would make the answer too low, and leave
         * capabilities in the bounding set. */
        int lo = 0, hi = 64; /* lo is valid; hi is not */
        bool asked = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, 0, 0, 0) >= 0;
        while (asked && hi - lo > 1) {
                int mid = lo + (hi - lo) / 2;
                if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, mid, 0, 0) >= 0)
                        lo = mid;
                else if (errno == EINVAL)
                        hi = mid;
                else
                        asked = false;
        }
        if (asked && lo > 0)
                return cached_last_cap = lo;
        _cleanup_free_ char *s = NULL;
        int v;
        cached_last_cap = CAP_LAST_CAP;
        if (read_file_at(AT_FDCWD, "/proc/sys/kernel/cap_last_cap", 64, &s, NULL) >= 0) {
                s[strcspn(s, "\n")] = '\0';
                if (safe_atoi(s, &v) >= 0 && v > 0 && v < 64)
                        cached_last_cap = v;
        }
        return cached_last_cap;
}

/* Set once this process has emptied its bounding set. The set only ever
 * shrinks and a fork inherits it whole, so a command forked by a pid 1 that
 * set this has nothing left to drop (and no right to get any back). */
static bool bset_empty;

static int confine_empty_bset(struct al_error *err)
{
        if (bset_empty)
                return 0;
        /* One drop a capability, no read first: dropping one already gone
         * succeeds. Only a process without CAP_SETPCAP is refused (EPERM),
         * and for it what is gone already is no error. */
        int last = confine_last_cap();
        for (int cap = 0; cap <= last; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL &&
                    !(errno == EPERM && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 0))
                        return al_error_set(err, errno,
                                            "dropping capability %d from the bounding set", cap);
        bset_empty = true;
        return 0;
}

int confine_drop_caps(struct al_error *err)
{
        return confine_drop_caps_but(0, err);
}

int confine_drop_caps_but(uint64_t keep, struct al_error *err)
{
        /* Processes that an idle sandbox's pid 1 starts, and the command a
         * cold pid 1 forks, come from a parent that has emptied its bounding
         * set already: what is gone needs no CAP_SETPCAP to stay gone, and
         * is not asked for again. */
        int r = confine_empty_bset(err);
        if (r < 0)
                return r;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return al_error_set(err, errno, "clearing ambient capabilities");
        /* A uid 0 inside regains nothing on execve, and the bits stay set. */
        unsigned long bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP |
                             SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED |
                             SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        int cur = prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
        if ((cur < 0 || ((unsigned long)cur & bits) != bits) &&
            prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
                return al_error_set(err, errno, "setting securebits");
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
        struct __user_cap_data_struct data[2];
        memset(data, 0, sizeof(data));
        /* What is kept stays permitted and effective, never inheritable and
         * out of the bounding set: no program executed gets it back. */
        data[0].permitted = data[0].effective = (uint32_t)keep;
        data[1].permitted = data[1].effective = (uint32_t)(keep >> 32);
        if (syscall(SYS_capset, &hdr, data) < 0)
                return al_error_set(err, errno, "clearing capabilities");
        return 0;
}

void confine_close_except(const int *keep, size_t n)
{
        int k[8];
        size_t m = 0;
        for (size_t i = 0; i < n && m < ARRAY_SIZE(k) - 1; i++)
                if (keep[i] >= 3)
                        k[m++] = keep[i];
        if (al_trace_fd() >= 3)
                k[m++] = al_trace_fd();
        /* Ascending, for the gaps between them. */
        for (size_t i = 1; i < m; i++)
                for (size_t j = i; j > 0 && k[j - 1] > k[j]; j--) {
                        int t = k[j];
                        k[j] = k[j - 1];
                        k[j - 1] = t;
                }
        unsigned from = 3;
        for (size_t i = 0; i < m; i++) {
                if ((unsigned)k[i] > from)
                        close_range(from, (unsigned)k[i] - 1, 0);
                if ((unsigned)k[i] + 1 > from)
                        from = (unsigned)k[i] + 1;
        }
        close_range(from, ~0U, 0);
}

int confine_landlock_build(const struct confine_config *c, int *ret_fd, struct al_error *err)
{
        *ret_fd = -1;
        /* The gvisor tier: runsc builds its own namespaces, mounts and
         * seccomp filter around its user-space kernel, which Landlock and
         * Airlock's filter forbid; the agent's system calls never reach this
         * kernel's (tier.h, docs/tiers.md). */
        if (c->policy->tier == POLICY_TIER_GVISOR)
                return 0;
        /* The microvm tier's QEMU drives /dev/kvm when it uses KVM. */
        const char *paths[72];
        size_t n = 0;
        for (size_t i = 0; i < c->n_write_paths && n < ARRAY_SIZE(paths) - 1; i++)
                paths[n++] = c->write_paths[i];
        if (c->policy->tier == POLICY_TIER_MICROVM && tier_microvm_wants_kvm())
                paths[n++] = "/dev/kvm";
        int r = landlock_build_writes(paths, n, true, ret_fd, err);
        if (r < 0)
                return r;
        /* Required: built, or the error above. */
        return *ret_fd >= 0 ? 0 : al_error_set(err, EOPNOTSUPP, "landlock: no ruleset");
}

/* The new session, the descriptors and the limits: the first steps, the
 * same for every command of the sandbox. */
static int confine_session(const struct confine_config *c, struct al_error *err)
{
        const struct policy_limits *l = &c->policy->limits;
        int r;

        /* A new session: no controlling terminal to push input into. */
        if (setsid() < 0)
                return al_error_set(err, errno, "setsid");
        /* A terminal the sandbox owns (pty.c) becomes the session's, so that
         * job control and ^C work; the user's terminal never gets here. */
        if (c->ctty && ioctl(0, TIOCSCTTY, 0) < 0)
                return al_error_set(err, errno, "making the terminal the controlling terminal");

        /* Nothing but stdio (and the error channel, closed by execve) crosses
         * into the command: a leaked fd is an escape (CVE-2024-21626). */
        int keep[] = {c->keep_fd, c->landlock_fd >= 3 ? c->landlock_fd : -1};
        confine_close_except(keep, ARRAY_SIZE(keep));

        /* The microvm tier's guest puts these two on its command
         * (microvm.c): on QEMU they would end the run, not the command. */
        bool vm = c->policy->tier == POLICY_TIER_MICROVM;
        if (l->open_files && !vm &&
            (r = set_rlimit(RLIMIT_NOFILE, l->open_files, "the open files limit", err)) < 0)
                return r;
        if (l->file_size && !vm &&
            (r = set_rlimit(RLIMIT_FSIZE, l->file_size, "the file size limit", err)) < 0)
                return r;
        if (l->cpu_time_s &&
            (r = set_rlimit(RLIMIT_CPU, l->cpu_time_s, "the cpu time limit", err)) < 0)
                return r;
        if ((r = set_rlimit(RLIMIT_CORE, 0, "the core size limit", err)) < 0)
                return r;
        return 0;
}

/* Who it runs as, no_new_privs, Landlock, no capabilities, seccomp. */
static int confine_restrict(const struct confine_config *c, struct al_error *err)
{
        int r;
        if (setresgid(c->gid, c->gid, c->gid) < 0)
                return al_error_set(err, errno, "setting gid %u", (unsigned)c->gid);
        if (setresuid(c->uid, c->uid, c->uid) < 0)
                return al_error_set(err, errno, "setting uid %u", (unsigned)c->uid);

        /* Landlock wants no_new_privs (or CAP_SYS_ADMIN, about to go). */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return al_error_set(err, errno, "setting no_new_privs");

        bool gvisor = c->policy->tier == POLICY_TIER_GVISOR;
        /* The gvisor tier: runsc builds its own namespaces, mounts and
         * seccomp filter around its user-space kernel, which Landlock and
         * Airlock's filter forbid; the agent's system calls never reach this
         * kernel's (tier.h, docs/tiers.md). */
        if (!gvisor) {
                _cleanup_close_ int own = -1;
                int fd = c->landlock_fd;
                if (fd < 3) {
                        r = confine_landlock_build(c, &own, err);
                        if (r < 0)
                                return r;
                        fd = own;
                }
                r = landlock_restrict_fd(fd, err);
                if (r < 0)
                        return r;
                if (fd == c->landlock_fd)
                        close(fd);
                al_trace_mark("cmd.landlock");
        }

        if ((r = confine_drop_caps(err)) < 0)
                return r;
        al_trace_mark("cmd.caps");

        if (!gvisor && !c->seccomp_inherited) {
                r = seccomp_install(err);
                if (r < 0)
                        return r;
                al_trace_mark("cmd.seccomp");
        }
        /* A second filter only narrows: the kernel runs both and the
         * strictest answer wins. */
        if (c->extra_filter &&
            syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, c->extra_filter) < 0)
                return al_error_set(err, errno, "seccomp: loading the container's own filter");
        return 0;
}

int confine_prepare(const struct confine_config *c, struct al_error *err)
{
        int r = confine_session(c, err);
        return r < 0 ? r : confine_restrict(c, err);
}

int confine_exec(const struct confine_config *c, int *ret_exec_errno, struct al_error *err)
{
        *ret_exec_errno = 0;
        /* execvp searches the sandbox's PATH, so the clean environment must
         * already be ours. */
        environ = (char **)c->envp;
        if (c->policy->tier == POLICY_TIER_MICROVM) {
                struct tier_vm_run run = {
                    .policy = c->policy,
                    .argv = c->argv,
                    .envp = c->envp,
                    .cwd = c->cwd,
                    .uid = c->uid,
                    .gid = c->gid,
                    .errfd = c->keep_fd,
                    .ctty = c->ctty,
                };
                return tier_microvm_exec(&run, ret_exec_errno, err);
        }
        if (c->policy->tier == POLICY_TIER_GVISOR) {
                _cleanup_free_ char **argv = tier_gvisor_argv(c->argv, c->cwd);
                execv(argv[0], argv);
                *ret_exec_errno = errno;
                return al_error_set(err, errno, "%s", argv[0]);
        }
        al_trace_mark("cmd.exec");
        execvp(c->argv[0], c->argv);
        *ret_exec_errno = errno;
        return al_error_set(err, errno, "%s", c->argv[0]);
}

int confine_and_exec(const struct confine_config *c, int *ret_exec_errno, struct al_error *err)
{
        int r;
        *ret_exec_errno = 0;
        if ((r = confine_session(c, err)) < 0)
                return r;
        if (c->cwd && chdir(c->cwd) < 0)
                return al_error_set(err, errno, "changing to %s", c->cwd);
        al_trace_mark("cmd.session");
        if ((r = confine_restrict(c, err)) < 0)
                return r;
        return confine_exec(c, ret_exec_errno, err);
}
