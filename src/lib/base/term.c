/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "term.h"

/* tcsetattr from a background process group stops us with SIGTTOU unless
 * it is ignored or blocked; restoring must never stop the caller. */
static int set_mode(int fd, const struct termios *t)
{
        sigset_t ttou, old;
        sigemptyset(&ttou);
        sigaddset(&ttou, SIGTTOU);
        sigprocmask(SIG_BLOCK, &ttou, &old);
        int r;
        do
                r = tcsetattr(fd, TCSADRAIN, t);
        while (r < 0 && errno == EINTR);
        int e = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        return r < 0 ? -e : 0;
}

int term_raw(int fd, struct term_saved *ret)
{
        struct termios t;
        ret->fd = -1;
        if (!isatty(fd))
                return -ENOTTY;
        if (tcgetattr(fd, &t) < 0)
                return -errno;
        ret->tio = t;
        cfmakeraw(&t);
        t.c_cc[VMIN] = 1;
        t.c_cc[VTIME] = 0;
        int r = set_mode(fd, &t);
        if (r < 0)
                return r;
        ret->fd = fd;
        return 0;
}

static volatile sig_atomic_t fatal_fd = -1;
static struct termios fatal_tio;

/* Async-signal-safe: tcsetattr, signal, raise. SIGTTOU is blocked while
 * it runs (sa_mask). */
static void on_fatal(int sig)
{
        int fd = fatal_fd;
        if (fd >= 0)
                (void)tcsetattr(fd, TCSADRAIN, &fatal_tio);
        signal(sig, SIG_DFL);
        raise(sig);
}

void term_restore_on_fatal_signals(const struct term_saved *s)
{
        static const int sigs[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM,   SIGUSR1, SIGUSR2,
                                   SIGALRM, SIGABRT, SIGSEGV, SIGBUS,    SIGFPE,  SIGILL,
                                   SIGXCPU, SIGXFSZ, SIGPROF, SIGVTALRM, SIGSYS,  SIGTRAP};
        if (s->fd < 0)
                return;
        fatal_tio = s->tio;
        fatal_fd = s->fd;
        struct sigaction sa = {.sa_handler = on_fatal};
        sigemptyset(&sa.sa_mask);
        sigaddset(&sa.sa_mask, SIGTTOU);
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
                struct sigaction old;
                /* A signal ignored by whoever started us stays ignored. */
                if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
                        continue;
                (void)sigaction(sigs[i], &sa, NULL);
        }
}

void term_restore(struct term_saved *s)
{
        if (s->fd == fatal_fd)
                fatal_fd = -1;
        if (s->fd < 0)
                return;
        (void)set_mode(s->fd, &s->tio);
        s->fd = -1;
}

int term_size(int fd, uint16_t *ret_rows, uint16_t *ret_cols)
{
        struct winsize ws;
        if (ioctl(fd, TIOCGWINSZ, &ws) < 0)
                return -errno;
        if (ws.ws_row == 0 || ws.ws_col == 0)
                return -ENOTTY;
        *ret_rows = ws.ws_row;
        *ret_cols = ws.ws_col;
        return 0;
}

int term_stdin_relay(int fd, int *ret_fd, pid_t *ret_pid)
{
        int p[2];
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid_t parent = getpid();
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                close(p[0]);
                close(p[1]);
                return -e;
        }
        if (pid == 0) {
                /* Gone with the run: a relay left behind would read the
                 * user's keys before their shell does. */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(0);
                signal(SIGINT, SIG_IGN);
                signal(SIGQUIT, SIG_IGN);
                signal(SIGPIPE, SIG_IGN);
                signal(SIGTTIN, SIG_DFL);
                sigset_t none;
                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                close(p[0]);
                char buf[4096];
                for (;;) {
                        ssize_t n = read(fd, buf, sizeof(buf));
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0)
                                _exit(0);
                        for (ssize_t o = 0; o < n;) {
                                ssize_t w = write(p[1], buf + o, (size_t)(n - o));
                                if (w < 0 && errno == EINTR)
                                        continue;
                                if (w < 0)
                                        _exit(0);
                                o += w;
                        }
                }
        }
        close(p[1]);
        *ret_fd = p[0];
        *ret_pid = pid;
        return 0;
}

void term_stdin_relay_end(pid_t pid)
{
        if (pid <= 0)
                return;
        kill(pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
}
