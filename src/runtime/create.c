/* SPDX-License-Identifier: Apache-2.0 */
/* create: the keeper. `airlock-runtime create` forks a keeper that starts
 * an idle sandbox (spawn_sandbox, the boundary of `airlock run`) on the
 * bundle's root, writes state.json, and waits on its control socket. The
 * keeper is the container's pid as the caller sees it: it runs the
 * process on `start`, forwards signals to it, and exits with its status,
 * so that a subreaper above (containerd's shim) reaps the status it
 * expects. Whoever kills the keeper kills the sandbox: pid 1 inside
 * follows its owner (docs/internals/spawn.md). */
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
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
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

#define KEEPER_EXECS_MAX 64

struct keeper {
        const struct rt_globals *g;
        struct oci_spec *spec;
        struct policy *policy;
        struct rt_state st;
        struct cgroup *cg;    /* the container's cgroup (cgp.cg when cgroupsPath) */
        struct rt_cgpath cgp; /* linux.cgroupsPath followed, or .leaves NULL */
        struct spawn_result sp;
        int listen_fd;
        int sig_fd;
        int next_id;
        int conns[KEEPER_EXECS_MAX]; /* exec connections, by slot */
        int conn_ids[KEEPER_EXECS_MAX];
        struct rt_audit audit;
        struct sock_fprog filter; /* the spec's seccomp profile, or .filter NULL */
        const char *console_socket;
        int console_fd;          /* process.terminal: the host pty's slave side, else -1 */
        int inner_pty;           /* ... and the sandbox's pty master once started, else -1 */
        pid_t gate_pid;          /* the gates' process (gate.c), or -1 */
        struct secrets *secrets; /* the node's, when the policy has routes or tools */
        char run_id[33];         /* the tool gateway's, when the policy allows a tool */
        char *tool_bin;          /* airlock-tool on the host, bound into the sandbox */
        struct netgate_ca *ca;   /* the sandbox's TLS authority, when a route terminates */
        int report_fd;           /* create's pipe, until the keeper has reported */
};

static void policy_freep(struct policy **p)
{
        if (*p)
                policy_free(*p);
}

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
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof(sa.sun_path))
                return al_error_set_message(
                    err, ENAMETOOLONG, "%s: too long for a socket; use a shorter --root", path);
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return al_error_set(err, errno, "socket");
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 16) < 0) {
                int r = al_error_set(err, errno, "listening on %s", path);
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

/* The pod's namespaces (linux.namespaces[].path), joined by the keeper so
 * that the sandbox is cloned inside them; setns checks each path is a
 * namespace of that kind. */
static int join_namespaces(const struct oci_spec *s, struct al_error *err)
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
                _cleanup_close_ int fd = open(ns[i].path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        return al_error_set(err, errno, "joining the %s namespace %s", ns[i].name,
                                            ns[i].path);
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
static void keeper_cgroup_free(struct keeper *k)
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
                size_t n = 0;
                for (size_t i = 0; k->cgp.leaves[i]; i++)
                        k->st.cgroup_leaves =
                            strv_append(k->st.cgroup_leaves, &n, k->cgp.leaves[i]);
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
static char **keeper_env(const struct keeper *k, char *const *env)
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

static int keeper_setup(struct keeper *k, struct al_error *err)
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

        r = join_namespaces(k->spec, err);
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
            .share_net = k->spec->join_net != NULL,
            .share_ipc = k->spec->join_ipc != NULL,
            .share_uts = k->spec->join_uts != NULL,
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
        const struct rt_gate_config gc = {
            .policy = k->policy,
            .sandbox = sandbox,
            .secrets = k->secrets,
            .ca = k->ca,
            .run_id = k->run_id,
            .audit = &k->audit,
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

/* Wait for pid 1's word on process `id`: started, or failed. Exits of
 * other processes met meanwhile are handled as they come. */
static void keeper_handle_event(struct keeper *k, const struct spawn_event *ev);

static int keeper_wait_started(struct keeper *k, int id, int *ret_pty, struct al_error *err)
{
        for (;;) {
                struct spawn_event ev;
                int r = spawn_read_event(k->sp.sync_fd, &ev);
                if (r < 0)
                        return al_error_set(err, -r, "the sandbox ended");
                if (ev.id == id && ev.type == SPAWN_EVENT_STARTED) {
                        if (ret_pty)
                                *ret_pty = ev.pty_fd;
                        else if (ev.pty_fd >= 0)
                                close(ev.pty_fd);
                        return 0;
                }
                if (ev.id == id && ev.type == SPAWN_EVENT_FAILED)
                        return al_error_set_message(err, ev.err ? ev.err : EINVAL, "%s",
                                                    ev.message);
                keeper_handle_event(k, &ev);
        }
}

static _Noreturn void keeper_exit(struct keeper *k, int status)
{
        /* Closing the sync socket ends pid 1, which kills the tree; the
         * cgroup kills whatever is left and is removed. */
        if (k->sp.sync_fd >= 0)
                close(k->sp.sync_fd);
        keeper_cgroup_free(k);
        if (k->gate_pid > 0)
                (void)kill(k->gate_pid, SIGKILL);
        _cleanup_free_ char *dir = rt_dir(k->g, k->st.id);
        _cleanup_free_ char *sock = xasprintf("%s/%s", dir, RUNTIME_CTL);
        unlink(sock);
        rt_audit_exit(&k->audit, status);
        rt_exit_like(status);
}

static void keeper_handle_event(struct keeper *k, const struct spawn_event *ev)
{
        if (ev->type == SPAWN_EVENT_STARTED && ev->pty_fd >= 0)
                close(ev->pty_fd);
        if (ev->type != SPAWN_EVENT_EXIT && ev->type != SPAWN_EVENT_FAILED)
                return;
        if (ev->id == 1 && ev->type == SPAWN_EVENT_EXIT) {
                if (k->inner_pty >= 0 && k->console_fd >= 0)
                        rt_console_drain(k->inner_pty, k->console_fd);
                keeper_exit(k, ev->status);
        }
        for (size_t i = 0; i < KEEPER_EXECS_MAX; i++) {
                if (k->conns[i] < 0 || k->conn_ids[i] != ev->id)
                        continue;
                char msg[64];
                snprintf(msg, sizeof(msg), "exit %d",
                         ev->type == SPAWN_EVENT_EXIT ? ev->status : (127 << 8));
                (void)ctl_send(k->conns[i], msg, NULL, 0);
                close(k->conns[i]);
                k->conns[i] = -1;
        }
}

static void reply_error(int fd, const struct al_error *err)
{
        _cleanup_free_ char *m = xasprintf("error %s", err->msg);
        (void)ctl_send(fd, m, NULL, 0);
}

static void keeper_start(struct keeper *k, int fd)
{
        struct al_error err = {0};
        if (k->st.started) {
                al_error_set_message(&err, EEXIST, "the container was already started");
                reply_error(fd, &err);
                return;
        }
        const int fds[3] = {0, 1, 2};
        const struct oci_process *pr = &k->spec->process;
        _cleanup_strv_ char **env = keeper_env(k, pr->env);
        int r;
        if (pr->terminal) {
                struct spawn_pty pty = {.on = true, .rows = pr->rows, .cols = pr->cols};
                r = spawn_exec_pty_request(k->sp.sync_fd, 1, pr->argv, env, pr->cwd, &pty);
        } else {
                r = spawn_exec_request(k->sp.sync_fd, 1, pr->argv, env, pr->cwd, fds);
        }
        if (r < 0)
                al_error_set(&err, -r, "asking the sandbox to start the process");
        else
                r = keeper_wait_started(k, 1, pr->terminal ? &k->inner_pty : NULL, &err);
        if (r >= 0 && k->inner_pty >= 0 && k->console_fd >= 0)
                rt_console_winsize(k->console_fd, k->inner_pty);
        if (r < 0) {
                rt_audit_event(&k->audit, "container.start_failed", err.msg);
                reply_error(fd, &err);
                keeper_exit(k, (err.code == ENOENT ? 127 : 126) << 8);
        }
        k->st.started = true;
        (void)rt_state_save(k->g, &k->st, &err);
        rt_audit_event(&k->audit, "container.started", NULL);
        (void)ctl_send(fd, "ok", NULL, 0);
}

/* exec: the process document and three fds; the connection stays open
 * and gets "exit STATUS" when the process ends. */
static void keeper_exec(struct keeper *k, int fd, const char *doc, const int *fds, size_t n)
{
        struct al_error err = {0};
        struct oci_process p = {0};
        size_t slot = KEEPER_EXECS_MAX;
        int pty = -1;
        int r = oci_process_parse(doc, &p, &err);
        if (r >= 0 && !p.terminal && n != 3)
                r = al_error_set_message(&err, EINVAL, "exec needs three fds");
        if (r >= 0 && (p.uid != k->spec->process.uid || p.gid != k->spec->process.gid))
                r = al_error_set_message(&err, EINVAL,
                                         "exec: process.user must be the container's own "
                                         "(%u:%u)",
                                         k->spec->process.uid, k->spec->process.gid);
        const struct oci_process *own = &k->spec->process;
        if (r >= 0 && ((p.nofile && p.nofile != own->nofile) ||
                       (p.fsize && p.fsize != own->fsize) || (p.cpu && p.cpu != own->cpu)))
                r = al_error_set_message(&err, EINVAL,
                                         "exec: process.rlimits: only the container's own "
                                         "apply; give the same or none");
        for (size_t i = 0; r >= 0 && i < KEEPER_EXECS_MAX; i++)
                if (k->conns[i] < 0) {
                        slot = i;
                        break;
                }
        if (r >= 0 && slot == KEEPER_EXECS_MAX)
                r = al_error_set_message(&err, EBUSY, "exec: too many processes at once");
        int id = ++k->next_id;
        if (r >= 0) {
                _cleanup_strv_ char **env = keeper_env(k, p.env);
                if (p.terminal) {
                        struct spawn_pty sp = {.on = true, .rows = p.rows, .cols = p.cols};
                        r = spawn_exec_pty_request(k->sp.sync_fd, id, p.argv, env, p.cwd, &sp);
                } else {
                        r = spawn_exec_request(k->sp.sync_fd, id, p.argv, env, p.cwd, fds);
                }
                if (r < 0)
                        al_error_set(&err, -r, "asking the sandbox to start the process");
        }
        if (r >= 0)
                r = keeper_wait_started(k, id, p.terminal ? &pty : NULL, &err);
        for (size_t i = 0; i < n; i++)
                close(fds[i]);
        oci_process_clear(&p);
        if (r < 0) {
                reply_error(fd, &err);
                close(fd);
                return;
        }
        rt_audit_event(&k->audit, "container.exec", NULL);
        k->conns[slot] = fd;
        k->conn_ids[slot] = id;
        /* With a terminal the proxy gets the sandbox's pty master to relay. */
        (void)ctl_send(fd, "ok", pty >= 0 ? &pty : NULL, pty >= 0 ? 1 : 0);
        if (pty >= 0)
                close(pty);
}

static void keeper_accept(struct keeper *k)
{
        int fd = accept4(k->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                return;
        /* Only the keeper's own user may drive it (the directory is 0700
         * too). */
        struct ucred cr;
        socklen_t len = sizeof(cr);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || cr.uid != geteuid()) {
                close(fd);
                return;
        }
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 5000) <= 0) {
                close(fd);
                return;
        }
        _cleanup_free_ char *buf = xcalloc(1, CTL_MSG_MAX);
        int fds[3];
        size_t n = 0;
        int r = ctl_recv(fd, buf, CTL_MSG_MAX, fds, 3, &n);
        if (r < 0) {
                close(fd);
                return;
        }
        if (STREQ(buf, "start")) {
                for (size_t i = 0; i < n; i++)
                        close(fds[i]);
                keeper_start(k, fd);
                close(fd);
        } else if (strncmp(buf, "exec ", 5) == 0) {
                keeper_exec(k, fd, buf + 5, fds, n);
        } else {
                for (size_t i = 0; i < n; i++)
                        close(fds[i]);
                (void)ctl_send(fd, "error unknown request", NULL, 0);
                close(fd);
        }
}

static void keeper_conn_msg(struct keeper *k, size_t slot)
{
        char buf[64];
        int r = ctl_recv(k->conns[slot], buf, sizeof(buf), NULL, 0, NULL);
        int sig;
        if (r < 0) {
                /* The exec's proxy is gone: so is its process. */
                (void)spawn_kill_request(k->sp.sync_fd, k->conn_ids[slot], SIGKILL);
                close(k->conns[slot]);
                k->conns[slot] = -1;
                return;
        }
        if (strncmp(buf, "kill ", 5) == 0 && rt_signal_parse(buf + 5, &sig) >= 0)
                (void)spawn_kill_request(k->sp.sync_fd, k->conn_ids[slot], sig);
}

static _Noreturn void keeper_loop(struct keeper *k)
{
        for (;;) {
                struct pollfd pf[3 + KEEPER_EXECS_MAX + 2];
                size_t slots[KEEPER_EXECS_MAX];
                nfds_t n = 0;
                pf[n++] = (struct pollfd){.fd = k->sp.sync_fd, .events = POLLIN};
                pf[n++] = (struct pollfd){.fd = k->sig_fd, .events = POLLIN};
                pf[n++] = (struct pollfd){.fd = k->listen_fd, .events = POLLIN};
                for (size_t i = 0; i < KEEPER_EXECS_MAX; i++)
                        if (k->conns[i] >= 0) {
                                slots[n - 3] = i;
                                pf[n++] = (struct pollfd){.fd = k->conns[i], .events = POLLIN};
                        }
                nfds_t n_execs = n;
                bool relay = k->console_fd >= 0 && k->inner_pty >= 0;
                if (relay) {
                        pf[n++] = (struct pollfd){.fd = k->console_fd, .events = POLLIN};
                        pf[n++] = (struct pollfd){.fd = k->inner_pty, .events = POLLIN};
                }
                if (poll(pf, n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        keeper_exit(k, 125 << 8);
                }
                if (pf[0].revents) {
                        struct spawn_event ev;
                        if (spawn_read_event(k->sp.sync_fd, &ev) < 0)
                                keeper_exit(k, 125 << 8);
                        keeper_handle_event(k, &ev);
                }
                if (pf[1].revents) {
                        struct signalfd_siginfo si;
                        while (read(k->sig_fd, &si, sizeof(si)) == sizeof(si)) {
                                int sig = (int)si.ssi_signo;
                                if (sig == SIGWINCH && k->console_fd >= 0 && k->inner_pty >= 0)
                                        rt_console_winsize(k->console_fd, k->inner_pty);
                                if (sig == SIGCHLD || sig == SIGWINCH)
                                        continue;
                                if (k->st.started)
                                        (void)spawn_kill_request(k->sp.sync_fd, 1, sig);
                                else if (sig != SIGCONT)
                                        /* Killed before start: the container
                                         * ends as if its process had been. */
                                        keeper_exit(k, sig);
                        }
                }
                if (pf[2].revents)
                        keeper_accept(k);
                if (relay && pf[n_execs].revents &&
                    rt_console_pump(k->console_fd, k->inner_pty) < 0)
                        k->console_fd = -1; /* the caller's side is gone */
                if (relay && pf[n_execs + 1].revents &&
                    rt_console_pump(k->inner_pty, k->console_fd) < 0) {
                        close(k->inner_pty);
                        k->inner_pty = -1;
                }
                for (nfds_t i = 3; i < n_execs; i++)
                        if (pf[i].revents && k->conns[slots[i - 3]] >= 0)
                                keeper_conn_msg(k, slots[i - 3]);
        }
}

/* Option parsing shared with exec: "--name value" or "--name=value". */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
        size_t n = strlen(name);
        if (strncmp(argv[*i], name, n) != 0)
                return NULL;
        if (argv[*i][n] == '=')
                return argv[*i] + n + 1;
        if (argv[*i][n] == '\0' && *i + 1 < argc)
                return argv[++*i];
        return NULL;
}

int rt_create(const struct rt_globals *g, int argc, char **argv, struct al_error *err)
{
        const char *bundle = ".", *pid_file = NULL, *id = NULL, *console_socket = NULL;
        for (int i = 0; i < argc; i++) {
                const char *v;
                if ((v = opt_value(argc, argv, &i, "--bundle")) ||
                    (v = opt_value(argc, argv, &i, "-b")))
                        bundle = v;
                else if ((v = opt_value(argc, argv, &i, "--pid-file")))
                        pid_file = v;
                else if ((v = opt_value(argc, argv, &i, "--console-socket")))
                        console_socket = v;
                else if (STREQ(argv[i], "--no-pivot") || STREQ(argv[i], "--no-new-keyring"))
                        return al_error_set_message(err, EINVAL, "create %s: not supported",
                                                    argv[i]);
                else if (argv[i][0] == '-')
                        return al_error_set_message(err, EINVAL, "create: unknown option %s",
                                                    argv[i]);
                else if (!id)
                        id = argv[i];
                else
                        return al_error_set_message(err, EINVAL, "create: one container id only");
        }
        if (!id)
                return al_error_set_message(err, EINVAL, "create: give a container id");
        int r = rt_id_check(id, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *bundle_abs = realpath(bundle, NULL);
        if (!bundle_abs)
                return al_error_set(err, errno, "bundle %s", bundle);
        _cleanup_free_ char *cfg_path = xasprintf("%s/config.json", bundle_abs);
        _cleanup_free_ char *json = NULL;
        r = read_file_at(AT_FDCWD, cfg_path, 4 * 1024 * 1024, &json, NULL);
        if (r < 0)
                return al_error_set(err, -r, "reading %s", cfg_path);

        struct keeper k = {.g = g,
                           .listen_fd = -1,
                           .sig_fd = -1,
                           .next_id = 1,
                           .console_socket = console_socket,
                           .console_fd = -1,
                           .inner_pty = -1,
                           .gate_pid = -1,
                           .report_fd = -1};
        for (size_t i = 0; i < KEEPER_EXECS_MAX; i++)
                k.conns[i] = -1;
        r = oci_spec_parse(json, bundle_abs, &k.spec, err);
        if (r < 0)
                return al_error_wrap(err, "%s", cfg_path);
        _cleanup_(policy_freep) struct policy *p = NULL;
        const char *policy_dir = getenv("AIRLOCK_RUNTIME_POLICIES");
        r = oci_spec_policy(
            k.spec, policy_dir && *policy_dir ? policy_dir : RUNTIME_POLICY_DIR_DEFAULT, &p, err);
        if (r >= 0)
                r = rt_node_policy(p, err);
        if (r >= 0)
                r = policy_finalize(p, bundle_abs, "/root", err);
        if (r >= 0)
                r = rt_node_secrets(p, &k.secrets, err);
        if (r < 0) {
                k.spec = oci_spec_free(k.spec);
                return r;
        }
        if (r >= 0 && k.spec->process.terminal != (console_socket != NULL))
                r = al_error_set_message(err, EINVAL,
                                         k.spec->process.terminal
                                             ? "process.terminal needs --console-socket"
                                             : "--console-socket without process.terminal");
        if (r < 0) {
                k.spec = oci_spec_free(k.spec);
                return r;
        }
        if (p->net_mode == POLICY_NET_GATED && k.spec->join_net) {
                k.spec = oci_spec_free(k.spec);
                return al_error_set_message(
                    err, EINVAL,
                    "annotation airlock.io/policy: a gated network needs the container's own "
                    "network namespace; remove the network namespace's path");
        }
        k.policy = p;
        if (k.spec->seccomp_json) {
                r = rt_seccomp_compile(k.spec->seccomp_json, &k.filter, err);
                if (r < 0) {
                        k.spec = oci_spec_free(k.spec);
                        return r;
                }
        }

        r = mkdir_p(g->root, 0711, 0700);
        if (r < 0 && r != -EEXIST)
                errno = -r;
        if (r < 0 && r != -EEXIST)
                return al_error_set(err, errno, "creating --root %s", g->root);
        _cleanup_free_ char *dir = rt_dir(g, id);
        if (mkdir(dir, 0700) < 0) {
                k.spec = oci_spec_free(k.spec);
                if (errno == EEXIST)
                        return al_error_set_message(err, EEXIST,
                                                    "container \"%s\" exists; delete it first", id);
                return al_error_set(err, errno, "creating %s", dir);
        }
        k.st.id = xstrdup(id);
        k.st.bundle = xstrdup(bundle_abs);
        json_t *ann = json_object();
        for (size_t i = 0; i < k.spec->n_annotations; i++)
                json_object_set_new(ann, k.spec->annotations[i].key,
                                    json_string(k.spec->annotations[i].value));
        k.st.annotations_json = json_dumps(ann, JSON_COMPACT);
        json_decref(ann);

        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return al_error_set(err, errno, "pipe");
        pid_t pid = fork();
        if (pid < 0)
                return al_error_set(err, errno, "fork");
        if (pid == 0) {
                close(pipefd[0]);
                k.report_fd = pipefd[1];
                setsid();
                struct al_error e = {0};
                r = rt_audit_open(&k.audit, g, k.spec, id, k.secrets);
                if (r < 0)
                        al_error_set_message(&e, -r, "audit: %s", k.audit.open_err.msg);
                else
                        r = keeper_setup(&k, &e);
                if (r < 0) {
                        (void)write_full(pipefd[1], e.msg, strlen(e.msg));
                        keeper_cgroup_free(&k);
                        _exit(1);
                }
                /* With a terminal the process's stdio is the pty: create's
                 * own (a pipe the caller may wait on) is let go. */
                if (k.spec->process.terminal) {
                        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                        for (int fd = 0; fd < 3 && null >= 0; fd++)
                                (void)dup3(null, fd, 0);
                        if (null > 2)
                                close(null);
                }
                rt_audit_event(&k.audit, "container.created", NULL);
                (void)write_full(pipefd[1], "", 1);
                close(pipefd[1]);
                k.report_fd = -1;
                /* The keeper keeps the three stdio fds for the process. */
                keeper_loop(&k);
        }
        close(pipefd[1]);
        char msg[AL_ERROR_MAX];
        size_t got = 0;
        ssize_t n;
        /* A lone NUL says "started"; anything else is the error. */
        while (got < sizeof(msg) - 1 && !(got == 1 && msg[0] == '\0') &&
               (n = read(pipefd[0], msg + got, sizeof(msg) - 1 - got)) > 0)
                got += (size_t)n;
        close(pipefd[0]);
        msg[got] = '\0';
        /* The keeper has its own copies: the parent's go. */
        k.spec = oci_spec_free(k.spec);
        rt_state_clear(&k.st);
        free(k.filter.filter);
        k.secrets = secrets_free(k.secrets);
        if (got == 0 || msg[0] != '\0') {
                (void)waitpid(pid, NULL, 0);
                _cleanup_free_ char *d = rt_dir(g, id);
                (void)fs_remove_tree(AT_FDCWD, d, 4);
                return al_error_set_message(err, EINVAL, "create: %s",
                                            got ? msg
                                                : "the keeper ended before the sandbox "
                                                  "started");
        }
        if (pid_file) {
                r = rt_write_pid_file(pid_file, pid, err);
                if (r < 0) {
                        /* Nobody could wait for it: the container goes. */
                        (void)kill(pid, SIGKILL);
                        (void)waitpid(pid, NULL, 0);
                        _cleanup_free_ char *d = rt_dir(g, id);
                        (void)fs_remove_tree(AT_FDCWD, d, 4);
                        return r;
                }
        }
        return 0;
}
