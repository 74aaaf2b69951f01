/* SPDX-License-Identifier: Apache-2.0 */
/* The keeper's setup (keeper.h): the container's cgroup (linux.cgroupsPath
 * or a leaf of Airlock's own), the pod's namespaces joined, the idle
 * sandbox, the gates' process, the control socket and state.json. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgpath.h"
#include "cgroup.h"
#include "env.h"
#include "fs.h"
#include "console.h"
#include "ctl.h"
#include "gate.h"
#include "gates.h"
#include "netgate/ca.h"
#include "node.h"
#include "runtime.h"
#include "runtime-audit.h"
#include "spawn.h"
#include "seccomp-spec.h"
#include "secrets.h"
#include "spec.h"
#include "toolgate/toolgate.h"
#include "util.h"

#include "keeper.h"

static char *now_rfc3339(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct tm tm;
        gmtime_r(&ts.tv_sec, &tm);
        char buf[64];
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
        return xasprintf("%s.%09ldZ", buf, ts.tv_nsec);
}

static int listen_ctl(const char *path, struct al_error *err)
{
        struct sockaddr_un sa;
        _cleanup_close_ int dfd = -1;
        int r = ctl_addr(path, &sa, &dfd);
        if (r < 0)
                return al_error_set(err, -r, "%s: the control socket; use a shorter --root", path);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return al_error_set(err, errno, "socket");
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0) {
                r = al_error_set(err, errno, "listening on %s", path);
                close(fd);
                return r;
        }
        return fd;
}

/* The file that freezes the sandbox's cgroup: v2's cgroup.freeze in the
 * leaf, or v1's freezer.state in the freezer hierarchy. */
static void find_freezer(struct keeper *k)
{
        for (size_t i = 0; k->cg && i < k->cg->n_dirs; i++) {
                _cleanup_free_ char *v2 = xasprintf("%s/cgroup.freeze", k->cg->dirs[i]);
                _cleanup_free_ char *v1 = xasprintf("%s/freezer.state", k->cg->dirs[i]);
                if (access(v2, W_OK) == 0) {
                        k->st.freeze_file = TAKE_PTR(v2);
                        return;
                }
                if (access(v1, W_OK) == 0) {
                        k->st.freeze_file = TAKE_PTR(v1);
                        return;
                }
        }
}

/* A namespace named by path, opened only once it is known to be one (on
 * nsfs): a FIFO there would hold the open forever, a device be opened by
 * root. */
static int open_namespace(const char *path, const char *what, int *ret, struct al_error *err)
{
        _cleanup_close_ int p = open(path, O_PATH | O_CLOEXEC);
        if (p < 0)
                return al_error_set(err, errno, "joining the %s namespace %s", what, path);
        struct statfs sfs;
        if (fstatfs(p, &sfs) < 0)
                return al_error_set(err, errno, "the %s namespace %s", what, path);
        if (sfs.f_type != NSFS_MAGIC)
                return al_error_set_message(err, EINVAL,
                                            "linux.namespaces: %s is not a namespace (give a "
                                            "/proc/PID/ns/%s path or a bind mount of one)",
                                            path, STREQ(what, "network") ? "net" : what);
        _cleanup_free_ char *self = xasprintf("/proc/self/fd/%d", p);
        int fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return al_error_set(err, errno, "joining the %s namespace %s", what, path);
        *ret = fd;
        return 0;
}

/* The pod's namespaces (linux.namespaces[].path), joined by the keeper so
 * that the sandbox is cloned inside them; setns checks each path is a
 * namespace of that kind. */
static int join_namespaces(const struct oci_spec *s, bool gated, int *ret_net_fd,
                           struct al_error *err)
{
        const struct {
                const char *path;
                int type;
                const char *name;
        } ns[] = {{s->join_net, CLONE_NEWNET, "network"},
                  {s->join_ipc, CLONE_NEWIPC, "ipc"},
                  {s->join_uts, CLONE_NEWUTS, "uts"}};
        for (size_t i = 0; i < ARRAY_SIZE(ns); i++) {
                if (!ns[i].path)
                        continue;
                int fd = -1;
                int r = open_namespace(ns[i].path, ns[i].name, &fd, err);
                if (r < 0)
                        return r;
                _cleanup_close_ int fd_owned = fd;
                /* Naming the runtime's own namespace is sharing the
                 * host's, which is refused as when the entry is missing. */
                static const char *const own[] = {"/proc/self/ns/net", "/proc/self/ns/ipc",
                                                  "/proc/self/ns/uts"};
                struct stat a, b;
                if (fstat(fd, &a) < 0 || stat(own[i], &b) < 0)
                        return al_error_set(err, errno, "the %s namespace %s", ns[i].name,
                                            ns[i].path);
                if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
                        return al_error_set_message(
                            err, EINVAL,
                            "linux.namespaces: %s is the host's %s namespace, which Airlock "
                            "does not share",
                            ns[i].path, ns[i].name);
                /* Gated: the sandbox keeps a namespace of its own, and the
                 * gates connect from the pod's (podnet.h). */
                if (gated && ns[i].type == CLONE_NEWNET) {
                        if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNET)
                                return al_error_set_message(
                                    err, EINVAL, "linux.namespaces: %s is not a network namespace",
                                    ns[i].path);
                        *ret_net_fd = TAKE_FD(fd_owned);
                        continue;
                }
                if (setns(fd, ns[i].type) < 0)
                        return al_error_set(err, errno, "joining the %s namespace %s (is it one?)",
                                            ns[i].name, ns[i].path);
        }
        return 0;
}

/* linux.resources.cpu.shares: a relative weight, v1's cpu.shares or v2's
 * cpu.weight (the usual conversion from shares). */
static int set_cpu_weight(struct cgroup *cg, uint64_t shares, struct al_error *err)
{
        for (size_t i = 0; i < cg->n_dirs; i++) {
                _cleanup_free_ char *v1 = xasprintf("%s/cpu.shares", cg->dirs[i]);
                _cleanup_free_ char *v2 = xasprintf("%s/cpu.weight", cg->dirs[i]);
                char buf[32];
                const char *file = NULL;
                if (access(v1, W_OK) == 0) {
                        file = v1;
                        snprintf(buf, sizeof(buf), "%" PRIu64, shares);
                } else if (access(v2, W_OK) == 0) {
                        file = v2;
                        snprintf(buf, sizeof(buf), "%" PRIu64, 1 + ((shares - 2) * 9999) / 262142);
                }
                if (!file)
                        continue;
                int r = write_file_at(AT_FDCWD, file, buf);
                if (r < 0)
                        return al_error_set(err, -r, "linux.resources.cpu.shares: writing %s",
                                            file);
                return 0;
        }
        return al_error_set_message(err, EOPNOTSUPP,
                                    "linux.resources.cpu.shares: the container's cgroup has no "
                                    "cpu controller");
}

/* The container's cgroup goes, the keeper having left it first when it
 * was in (emptying a leaf kills whatever is in it). */
void keeper_cgroup_free(struct keeper *k)
{
        if (k->cgp.leaves) {
                rt_cgpath_leave(&k->cgp);
                rt_cgpath_free(&k->cgp);
                k->cg = NULL;
                return;
        }
        k->cg = cgroup_free(k->cg);
}

/* The container's cgroup: the one linux.cgroupsPath names, which the
 * keeper itself joins (the caller finds the container's cgroup from the
 * pid it is given, as containerd's shim does), or without it a leaf
 * airlock-<hex> beneath the caller's own. */
static int keeper_cgroup(struct keeper *k, struct al_error *err)
{
        struct cgroup_limits lim;
        int r = cgroup_limits_from_policy(k->policy, &lim, err);
        if (r < 0)
                return al_error_wrap(err, "cgroup");
        if (k->spec->cgroups_path) {
                r = rt_cgpath_setup(k->spec->cgroups_path, &lim, &k->cgp, err);
                if (r < 0)
                        return r;
                k->cg = k->cgp.cg;
                k->st.cgroup_name = xstrdup(k->cg->name);
                size_t n = 0, n_ids = 0;
                for (size_t i = 0; k->cgp.leaves[i]; i++) {
                        _cleanup_free_ char *id = rt_cgpath_id(k->cgp.leaves[i]);
                        if (!id)
                                return al_error_set_message(
                                    err, ENOENT, "linux.cgroupsPath: %s is gone", k->cgp.leaves[i]);
                        k->st.cgroup_leaves =
                            strv_append(k->st.cgroup_leaves, &n, k->cgp.leaves[i]);
                        k->st.cgroup_leaf_ids = strv_append(k->st.cgroup_leaf_ids, &n_ids, id);
                }
                return rt_cgpath_enter(&k->cgp, getpid(), err);
        }
        char hex[17];
        r = random_hex(hex, 16);
        if (r < 0)
                return al_error_set(err, -r, "random id");
        hex[16] = '\0';
        k->st.cgroup_name = xasprintf("airlock-%s", hex);
        r = cgroup_setup(k->st.cgroup_name, &lim, &k->cg, err);
        if (r < 0)
                return al_error_wrap(err, "cgroup");
        return 0;
}

/* What the gates need before the sandbox is made: the tool gateway's
 * client and run id, the routes' templates checked against the node's
 * secrets, and the CA a terminating route signs with (its bundle written
 * for the sandbox to bind at SPAWN_CA_BUNDLE). */
static int keeper_gate_prepare(struct keeper *k, const char *sandbox, char **ret_bundle,
                               struct al_error *err)
{
        const struct policy *p = k->policy;
        if (toolgate_wanted(p)) {
                k->tool_bin = rt_node_tool_bin();
                if (!k->tool_bin)
                        return al_error_set_message(err, ENOENT,
                                                    "the tool gateway's client airlock-tool is "
                                                    "not installed beside airlock-runtime");
                int r = random_hex(k->run_id, 32);
                if (r < 0)
                        return al_error_set(err, -r, "random run id");
                k->run_id[32] = '\0';
        }
        int r = gates_check_routes(p, k->secrets, sandbox, NULL, err);
        if (r < 0)
                return r;
        bool terminate = false;
        for (size_t i = 0; i < p->n_routes; i++)
                terminate = terminate || p->routes[i].terminate;
        if (!terminate || p->net_mode != POLICY_NET_GATED)
                return 0;
        r = netgate_ca_new(sandbox, &k->ca, err);
        if (r >= 0)
                r = netgate_ca_write_bundle(k->ca, SPAWN_CA_BUNDLE, "/tmp", ret_bundle, err);
        return r;
}

/* The container's process environment: the spec's, and what the gates put
 * there as under airlock run (the tool gateway's endpoint, the CA of a
 * terminating route). */
char **keeper_env(const struct keeper *k, char *const *env)
{
        size_t n = 0;
        char **out = NULL;
        for (size_t i = 0; env && env[i]; i++)
                out = strv_append(out, &n, env[i]);
        if (!out)
                out = xcalloc(1, sizeof(char *));
        if (k->run_id[0]) {
                env_add_tool(&out, k->run_id);
                if (k->policy->net_mode == POLICY_NET_GATED)
                        env_set(&out, "GIT_SSH_COMMAND",
                                "ssh -o ProxyCommand='" SPAWN_TOOL_BIN " connect %h %p'");
        }
        if (k->ca)
                env_add_ca(&out, SPAWN_CA_BUNDLE);
        return out;
}

int keeper_setup(struct keeper *k, struct al_error *err)
{
        int r = keeper_cgroup(k, err);
        if (r < 0)
                return r;
        if (k->cg->n_dirs > 0)
                k->st.cgroup_dir = xstrdup(k->cg->dirs[0]);
        size_t n_parents = 0;
        for (size_t i = 0; i < k->cg->n_dirs; i++) {
                _cleanup_free_ char *parent = xstrdup(k->cg->dirs[i]);
                char *slash = strrchr(parent, '/');
                if (slash)
                        *slash = '\0';
                k->st.cgroup_parents = strv_append(k->st.cgroup_parents, &n_parents, parent);
        }
        k->st.cgroup_v2 = k->cg->ops == &cgroup_v2_ops;
        k->st.max_memory = k->policy->limits.memory;
        k->st.max_pids = k->policy->limits.pids;
        k->st.max_cpus_milli = k->policy->limits.cpus_milli;
        find_freezer(k);
        if (k->spec->cpu_shares) {
                r = set_cpu_weight(k->cg, k->spec->cpu_shares, err);
                if (r < 0)
                        return r;
        }

        bool gated = k->policy->net_mode == POLICY_NET_GATED;
        r = join_namespaces(k->spec, gated, &k->pod_netns_fd, err);
        if (r < 0)
                return r;
        /* Inherited by the sandbox and every process in it. */
        if (k->spec->process.oom_score_adj_set) {
                char v[16];
                snprintf(v, sizeof(v), "%d", k->spec->process.oom_score_adj);
                r = write_file_at(AT_FDCWD, "/proc/self/oom_score_adj", v);
                if (r < 0)
                        return al_error_set(err, -r, "process.oomScoreAdj %s", v);
        }
        _cleanup_free_ char *sandbox = xasprintf("oci:%s", k->st.id);
        _cleanup_free_ char *ca_bundle = NULL;
        r = keeper_gate_prepare(k, sandbox, &ca_bundle, err);
        if (r < 0)
                return r;
        char *empty[] = {NULL};
        struct spawn_config sc = {
            .policy = k->policy,
            .argv = NULL,
            .envp = empty,
            .home = "/root",
            .caller_home = "/root",
            .stdin_fd = -1,
            .stdout_fd = -1,
            .stderr_fd = -1,
            .cgroup = k->cg,
            .rootfs = k->spec->root,
            .rootfs_readonly = k->spec->root_readonly,
            .tmpfs_dirs = k->spec->tmpfs,
            .tmpfs_sizes = k->spec->tmpfs_sizes,
            .extra_filter = k->filter.filter ? &k->filter : NULL,
            .share_net = k->spec->join_net != NULL && !gated,
            .share_ipc = k->spec->join_ipc != NULL,
            .share_uts = k->spec->join_uts != NULL,
            .hostname = k->spec->hostname,
            .tool_bin = k->tool_bin,
            .ca_bundle = ca_bundle,
        };
        r = spawn_sandbox(&sc, &k->sp, err);
        /* The sandbox has its CA bundle bound by now. */
        if (ca_bundle)
                unlink(ca_bundle);
        if (r < 0)
                return r;
        if (k->spec->process.terminal) {
                r = rt_console_open(k->console_socket, k->spec->process.rows, k->spec->process.cols,
                                    &k->console_fd, err);
                if (r < 0)
                        return r;
                /* The keeper's controlling terminal: a resize of the
                 * caller's side reaches the keeper as SIGWINCH. */
                (void)ioctl(k->console_fd, TIOCSCTTY, 0);
        }
        /* The gates' process lets go of the keeper's hold on the sandbox;
         * the tool socket is the gates' own. */
        const int hold[] = {k->sp.sync_fd, k->sp.pidfd,    k->sp.upper_fd,
                            k->sp.pty_fd,  k->sp.netns_fd, k->report_fd};
        _cleanup_free_ char *state_dir = rt_dir(k->g, k->st.id);
        const struct rt_gate_config gc = {
            .state_dir = state_dir,
            .policy = k->policy,
            .sandbox = sandbox,
            .secrets = k->secrets,
            .ca = k->ca,
            .run_id = k->run_id,
            .audit = &k->audit,
            .pod_netns_fd = k->pod_netns_fd,
            .pod_resolv = k->pod_resolv,
        };
        r = rt_gate_start(&gc, &k->sp, hold, ARRAY_SIZE(hold), &k->gate_pid, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *dir = rt_dir(k->g, k->st.id);
        _cleanup_free_ char *sock = xasprintf("%s/%s", dir, RUNTIME_CTL);
        k->listen_fd = listen_ctl(sock, err);
        if (k->listen_fd < 0)
                return k->listen_fd;

        sigset_t set;
        sigfillset(&set);
        sigdelset(&set, SIGSEGV);
        sigdelset(&set, SIGBUS);
        sigdelset(&set, SIGILL);
        sigdelset(&set, SIGFPE);
        sigprocmask(SIG_BLOCK, &set, NULL);
        k->sig_fd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        if (k->sig_fd < 0)
                return al_error_set(err, errno, "signalfd");

        k->st.pid = getpid();
        k->st.pid_start = rt_pid_start(k->st.pid);
        k->st.created = now_rfc3339();
        return rt_state_save(k->g, &k->st, err);
}
