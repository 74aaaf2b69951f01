/* SPDX-License-Identifier: Apache-2.0 */
/* The network gate of a container whose policy (airlock.io/policy) allows
 * hosts: the same gate as `airlock run`'s (gates_start_netgate), served by
 * a child of the keeper on the listeners the sandbox made inside its own
 * network namespace, each decision in the audit log. The keeper uses no
 * event loop, so the gate gets a process of its own; it dies with the
 * keeper (parent-death signal), and the keeper kills it at the end. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <event2/event.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "events.h"
#include "gates.h"
#include "gate.h"
#include "util.h"

static void on_decision(void *ud, const struct netgate_record *rec)
{
        struct rt_audit *ra = ud;
        json_t *f = events_net_decision(rec);
        if (f)
                (void)rt_audit_fields(ra, events_net_kind(rec), f);
}

int rt_gate_start(const struct policy *p, const char *sandbox, struct spawn_result *sp,
                  struct rt_audit *ra, const int *close_fds, size_t n_close, pid_t *ret_pid,
                  struct al_error *err)
{
        int *listen_fds = sp->listen_fds;
        *ret_pid = -1;
        if (listen_fds[SPAWN_LISTEN_HTTP] < 0)
                return 0;
        pid_t keeper = getpid();
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return al_error_set(err, errno, "gate: pipe");
        pid_t pid = fork();
        if (pid < 0)
                return al_error_set(err, errno, "gate: fork");
        if (pid == 0) {
                close(pipefd[0]);
                (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != keeper)
                        _exit(1);
                for (size_t i = 0; i < n_close; i++)
                        if (close_fds[i] >= 0)
                                close(close_fds[i]);
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);
                for (int fd = 0; fd < 3 && null >= 0; fd++)
                        (void)dup3(null, fd, 0);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                signal(SIGPIPE, SIG_IGN);
                struct al_error e = {0};
                struct event_base *base = event_base_new();
                struct netgate *g = NULL;
                struct sv_connect_notify *cn = NULL;
                int r = base ? gates_start_netgate(base, p, sandbox, NULL, NULL, NULL, listen_fds,
                                                   on_decision, ra, &g, &e)
                             : al_error_set(&e, ENOMEM, "gate: event base");
                if (r >= 0)
                        r = gates_start_transparent(base, g, &sp->dns_fd, &sp->relay_fd,
                                                    &sp->notify_fd, &cn, &e);
                if (r < 0) {
                        (void)write_full(pipefd[1], e.msg, strlen(e.msg));
                        _exit(1);
                }
                (void)write_full(pipefd[1], "", 1);
                close(pipefd[1]);
                event_base_dispatch(base);
                _exit(0);
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
                kill(pid, SIGKILL);
                return al_error_set_message(err, EINVAL, "network gate: %s",
                                            got ? msg : "it ended before it started");
        }
        /* The gate holds the listeners and transparent mode's fds now. */
        int *held[SPAWN_LISTEN_MAX + 3] = {&sp->dns_fd, &sp->relay_fd, &sp->notify_fd};
        for (int i = 0; i < SPAWN_LISTEN_MAX; i++)
                held[3 + i] = &listen_fds[i];
        for (size_t i = 0; i < ARRAY_SIZE(held); i++)
                if (*held[i] >= 0) {
                        close(*held[i]);
                        *held[i] = -1;
                }
        *ret_pid = pid;
        return 0;
}
