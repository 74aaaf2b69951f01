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
#include "podnet.h"
#include "runtime.h"
#include "runtime-audit.h"
#include "spawn.h"
#include "seccomp-spec.h"
#include "secrets.h"
#include "spec.h"
#include "toolgate/toolgate.h"
#include "util.h"

#include "keeper.h"

static void secrets_freep(struct secrets **s)
{
        secrets_free(*s);
}

static void policy_freep(struct policy **p)
{
        if (*p)
                policy_free(*p);
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
        _cleanup_free_ char *dir = rt_dir(k->g, k->st.id);
        rt_gate_close_calls(k->gate_pid, dir, &k->audit);
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
        if (strncmp(buf, "kill ", 5) == 0 && signal_parse(buf + 5, &sig) >= 0)
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
                           .pod_netns_fd = -1,
                           .report_fd = -1};
        for (size_t i = 0; i < KEEPER_EXECS_MAX; i++)
                k.conns[i] = -1;
        r = oci_spec_parse(json, bundle_abs, &k.spec, err);
        if (r < 0)
                return al_error_wrap(err, "%s", cfg_path);
        _cleanup_(policy_freep) struct policy *p = NULL;
        /* The parent's copies go however create ends (the keeper has its
         * own). */
        _cleanup_free_ char *pod_resolv = NULL;
        _cleanup_(secrets_freep) struct secrets *secrets = NULL;
        const char *policy_dir = getenv("AIRLOCK_RUNTIME_POLICIES");
        r = oci_spec_policy(
            k.spec, policy_dir && *policy_dir ? policy_dir : RUNTIME_POLICY_DIR_DEFAULT, &p, err);
        if (r >= 0)
                r = rt_node_policy(p, err);
        /* Gated: the container resolves with the gate's name server (the
         * only one it can reach), and in a pod the gates with the pod's
         * resolver (podnet.h). */
        if (r >= 0)
                r = rt_podnet_resolv(g, p, k.spec->root, &pod_resolv, err);
        if (r >= 0)
                r = policy_finalize(p, bundle_abs, "/root", err);
        if (r >= 0)
                r = rt_node_secrets(p, &secrets, err);
        k.pod_resolv = pod_resolv;
        k.secrets = secrets;
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
