/* SPDX-License-Identifier: Apache-2.0 */
/* exec: another process in a running container. A proxy holds the request
 * open: it is the pid the caller waits for, it forwards the signals it gets,
 * and it exits with the process's status (the keeper reports it). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "console.h"
#include "ctl.h"
#include "spec.h"
#include "runtime.h"
#include "util.h"

/* Ask the keeper; on "ok", report 0 on `report` (when >= 0), then wait
 * for the end and exit with the process's status. */
static _Noreturn void proxy(const char *sock, const char *doc, int report, const char *console,
                            bool terminal)
{
        sigset_t set;
        sigfillset(&set);
        sigdelset(&set, SIGSEGV);
        sigprocmask(SIG_BLOCK, &set, NULL);
        int sfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
        char msg[AL_ERROR_MAX + 16];
        int fd = ctl_connect(sock);
        if (fd < 0) {
                snprintf(msg, sizeof(msg), "the container's keeper is not reachable: %s",
                         strerror(-fd));
                goto fail;
        }
        /* Not freed: this process ends in _exit, on every path. */
        char *req = xasprintf("exec %s", doc);
        const int fds[3] = {0, 1, 2};
        int slave = -1, inner = -1;
        size_t got = 0;
        int r = ctl_send(fd, req, fds, terminal ? 0 : 3);
        if (r >= 0)
                r = ctl_recv(fd, msg, sizeof(msg), &inner, 1, &got);
        if (r >= 0 && terminal && strncmp(msg, "error ", 6) != 0) {
                struct al_error e = {0};
                if (got != 1) {
                        snprintf(msg, sizeof(msg), "the keeper sent no terminal");
                        goto fail;
                }
                /* The process runs already: the caller gets its terminal. */
                if (rt_console_open(console, 0, 0, &slave, &e) < 0) {
                        snprintf(msg, sizeof(msg), "%s", e.msg);
                        goto fail;
                }
                (void)ioctl(slave, TIOCSCTTY, 0);
                rt_console_winsize(slave, inner);
        }
        if (r < 0) {
                snprintf(msg, sizeof(msg), "the keeper did not answer: %s", strerror(-r));
                goto fail;
        }
        if (strncmp(msg, "error ", 6) == 0) {
                memmove(msg, msg + 6, strlen(msg + 6) + 1);
                goto fail;
        }
        if (report >= 0) {
                (void)write_full(report, "", 1);
                close(report);
        }
        /* The container's fds are the process's now. */
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        for (int i = 0; i < 3 && null >= 0; i++)
                dup3(null, i, 0);
        for (;;) {
                struct pollfd pf[4] = {{.fd = fd, .events = POLLIN},
                                       {.fd = sfd, .events = POLLIN},
                                       {.fd = slave, .events = POLLIN},
                                       {.fd = inner, .events = POLLIN}};
                nfds_t np = slave >= 0 && inner >= 0 ? 4 : 2;
                if (poll(pf, np, -1) < 0 && errno != EINTR)
                        _exit(255);
                if (np == 4 && pf[2].revents && rt_console_pump(slave, inner) < 0)
                        slave = -1;
                if (np == 4 && pf[3].revents && rt_console_pump(inner, slave) < 0) {
                        close(inner);
                        inner = -1;
                }
                if (pf[1].revents) {
                        struct signalfd_siginfo si;
                        while (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                                if (si.ssi_signo == SIGWINCH && slave >= 0 && inner >= 0)
                                        rt_console_winsize(slave, inner);
                                if (si.ssi_signo == SIGCHLD || si.ssi_signo == SIGWINCH)
                                        continue;
                                char k[32];
                                snprintf(k, sizeof(k), "kill %u", si.ssi_signo);
                                (void)ctl_send(fd, k, NULL, 0);
                        }
                }
                if (pf[0].revents) {
                        r = ctl_recv(fd, msg, sizeof(msg), NULL, 0, NULL);
                        int status;
                        if (r < 0)
                                _exit(255);
                        if (strncmp(msg, "exit ", 5) == 0 && safe_atoi(msg + 5, &status) >= 0) {
                                if (slave >= 0 && inner >= 0)
                                        rt_console_drain(inner, slave);
                                rt_exit_like(status);
                        }
                }
        }
fail:
        if (report >= 0)
                (void)write_full(report, msg, strlen(msg));
        else
                fprintf(stderr, "airlock-runtime: exec: %s\n", msg);
        _exit(report >= 0 ? 1 : 126);
}

int rt_exec(const struct rt_globals *g, int argc, char **argv, struct al_error *err)
{
        const char *process = NULL, *pid_file = NULL, *id = NULL, *console = NULL;
        bool tty = false;
        bool detach = false;
        int i;
        for (i = 0; i < argc; i++) {
                const char *a = argv[i];
                if ((STREQ(a, "--process") || STREQ(a, "-p")) && i + 1 < argc)
                        process = argv[++i];
                else if (strncmp(a, "--process=", 10) == 0)
                        process = a + 10;
                else if (STREQ(a, "--pid-file") && i + 1 < argc)
                        pid_file = argv[++i];
                else if (strncmp(a, "--pid-file=", 11) == 0)
                        pid_file = a + 11;
                else if (STREQ(a, "--detach") || STREQ(a, "-d"))
                        detach = true;
                else if (STREQ(a, "--console-socket") && i + 1 < argc)
                        console = argv[++i];
                else if (strncmp(a, "--console-socket=", 17) == 0)
                        console = a + 17;
                else if (STREQ(a, "--tty") || STREQ(a, "-t"))
                        tty = true;
                else if (a[0] == '-')
                        return al_error_set_message(err, EINVAL, "exec: option %s is not supported",
                                                    a);
                else {
                        id = a;
                        i++;
                        break;
                }
        }
        if (!id)
                return al_error_set_message(err, EINVAL, "exec: give a container id");
        struct rt_state st = {0};
        int r = rt_state_load(g, id, &st, err);
        if (r < 0)
                return r;
        const char *status = rt_status(&st);
        rt_state_clear(&st);
        if (!STREQ(status, "running"))
                return al_error_set_message(
                    err, EINVAL, "container \"%s\" is %s; exec needs a running one", id, status);
        _cleanup_free_ char *doc = NULL;
        if (process) {
                if (i < argc)
                        return al_error_set_message(err, EINVAL,
                                                    "exec: --process and a command; give one");
                r = read_file_at(AT_FDCWD, process, CTL_MSG_MAX - 16, &doc, NULL);
                if (r < 0)
                        return al_error_set(err, -r, "reading %s", process);
        } else {
                if (i >= argc)
                        return al_error_set_message(err, EINVAL, "exec: give a command");
                json_t *o = json_object(), *args = json_array();
                for (; i < argc; i++)
                        json_array_append_new(args, json_string(argv[i]));
                json_object_set_new(o, "args", args);
                json_object_set_new(o, "cwd", json_string("/"));
                json_t *env = json_array();
                json_array_append_new(env, json_string("PATH=/usr/local/sbin:/usr/local/bin:"
                                                       "/usr/sbin:/usr/bin:/sbin:/bin"));
                json_object_set_new(o, "env", env);
                doc = json_dumps(o, JSON_COMPACT);
                json_decref(o);
        }
        /* Whether the process asks for a terminal decides, as at create;
         * --tty asks for one for a command given on the line. */
        if (tty && process)
                return al_error_set_message(err, EINVAL,
                                            "exec: --tty with --process; set process.terminal");
        if (tty) {
                json_t *o = json_loads(doc, 0, NULL);
                json_object_set_new(o, "terminal", json_true());
                free(doc);
                doc = json_dumps(o, JSON_COMPACT);
                json_decref(o);
        }
        struct oci_process pr = {0};
        r = oci_process_parse(doc, &pr, err);
        bool terminal = pr.terminal;
        oci_process_clear(&pr);
        if (r < 0)
                return al_error_wrap(err, "exec");
        if (terminal != (console != NULL))
                return al_error_set_message(err, EINVAL,
                                            terminal ? "exec: a terminal needs --console-socket"
                                                     : "exec: --console-socket without a terminal");
        _cleanup_free_ char *sock = xasprintf("%s/%s/%s", g->root, id, RUNTIME_CTL);
        if (!detach)
                proxy(sock, doc, -1, console, terminal);

        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return al_error_set(err, errno, "pipe");
        pid_t pid = fork();
        if (pid < 0)
                return al_error_set(err, errno, "fork");
        if (pid == 0) {
                close(pipefd[0]);
                setsid();
                proxy(sock, doc, pipefd[1], console, terminal);
        }
        close(pipefd[1]);
        char msg[AL_ERROR_MAX];
        size_t got = 0;
        ssize_t n;
        while (got < sizeof(msg) - 1 && (n = read(pipefd[0], msg + got, sizeof(msg) - 1 - got)) > 0)
                got += (size_t)n;
        close(pipefd[0]);
        msg[got] = '\0';
        if (got == 0 || msg[0] != '\0') {
                (void)waitpid(pid, NULL, 0);
                return al_error_set_message(err, EINVAL, "exec: %s",
                                            got ? msg
                                                : "the proxy ended before the process "
                                                  "started");
        }
        if (pid_file) {
                r = rt_write_pid_file(pid_file, pid, err);
                if (r < 0) {
                        (void)kill(pid, SIGKILL);
                        (void)waitpid(pid, NULL, 0);
                        return r;
                }
        }
        return 0;
}
