/* SPDX-License-Identifier: Apache-2.0 */
/* A create's host workspace, read in a child with a time limit
 * (hostws.h), off the daemon's loop. */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hostws.h"
#include "policy/repo.h"
#include "trusted.h"
#include "util.h"

/* The child's one message: a kind byte, then the file or a message. */
enum {
        HOSTWS_NONE = 'N',   /* a directory, no configuration */
        HOSTWS_CONFIG = 'C', /* a directory; the file's bytes follow */
        HOSTWS_NOTDIR = 'X', /* not an existing directory */
        HOSTWS_ERROR = 'E',  /* the file cannot be read; the message follows */
        HOSTWS_UNSAFE = 'U', /* another user could swap it (trusted.h); the message follows */
};
#define HOSTWS_MSG_MAX (64 * 1024 + 1024)

static void child(int fd, const char *ws)
{
        struct stat st;
        char kind = HOSTWS_NONE;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        struct al_error err = {0};
        char real[PATH_MAX];
        int tfd = geteuid() == 0 ? trusted_open(ws, trusted_caller(), false, real, "workspace", &err)
                                 : -1;
        if (tfd == -EPERM) {
                kind = HOSTWS_UNSAFE;
                text = xstrdup(err.msg);
                len = strlen(text);
        } else if (stat(ws, &st) < 0 || !S_ISDIR(st.st_mode))
                kind = HOSTWS_NOTDIR;
        else if (repo_config_read(ws, &text, &len, &err) < 0) {
                kind = HOSTWS_ERROR;
                text = xstrdup(err.msg);
                len = strlen(text);
        } else if (text)
                kind = HOSTWS_CONFIG;
        if (write_full(fd, &kind, 1) < 0 || (len && write_full(fd, text, len) < 0))
                _exit(1);
        _exit(0);
}

struct hostws {
        struct event *ev, *timer;
        int pidfd; /* the child, killed through it (its pid may be reaped and reused) */
        int fd;
        char *ws;
        char *buf;
        size_t len;
        int error; /* 0, -ETIMEDOUT, or another -errno of reading the answer */
        hostws_fn done;
        void *ud;
};

void hostws_free(struct hostws *h)
{
        if (!h)
                return;
        if (h->ev)
                event_free(h->ev);
        if (h->timer)
                event_free(h->timer);
        if (h->pidfd >= 0) {
                /* A child stuck in a file system that does not answer dies
                 * of SIGKILL (a FUSE wait is killable); the daemon's
                 * SIGCHLD reaper takes it. One that has answered is gone
                 * or going: the signal changes nothing. */
                (void)syscall(SYS_pidfd_send_signal, h->pidfd, SIGKILL, NULL, 0);
                close(h->pidfd);
        }
        if (h->fd >= 0)
                close(h->fd);
        free(h->buf);
        free(h->ws);
        free(h);
}

static void finish(struct hostws *h, int error)
{
        h->error = error;
        event_del(h->ev);
        event_del(h->timer);
        h->done(h, h->ud);
}

static void on_timeout(evutil_socket_t fd, short what, void *ud)
{
        finish(ud, -ETIMEDOUT);
}

/* The child's message as it comes; its end (EOF) is the answer. */
static void on_answer(evutil_socket_t fd, short what, void *ud)
{
        struct hostws *h = ud;
        if (h->len == HOSTWS_MSG_MAX) {
                finish(h, -EMSGSIZE);
                return;
        }
        ssize_t r = read(fd, h->buf + h->len, HOSTWS_MSG_MAX - h->len);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
                return;
        if (r < 0) {
                finish(h, -errno);
                return;
        }
        if (r == 0) {
                finish(h, 0);
                return;
        }
        h->len += (size_t)r;
}

int hostws_start(struct event_base *base, const char *ws, hostws_fn done, void *ud,
                 struct al_error *err)
{
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC | O_NONBLOCK) < 0)
                return al_error_set(err, errno, "reading the workspace %s", ws);
        pid_t parent = getpid(), pid = fork();
        if (pid < 0) {
                int e = errno;
                close(pfd[0]);
                close(pfd[1]);
                return al_error_set(err, e, "reading the workspace %s", ws);
        }
        if (pid == 0) {
                /* A daemon that dies takes its reader along: a child stuck
                 * in a hung file system must not outlive it. */
                if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
                        _exit(1);
                /* Nothing of the daemon's but its pipe: a reader stuck in
                 * a hung file system must not hold the daemon's sockets
                 * (the audit log's helper waits for its end of one). */
                if (pfd[1] > 3)
                        (void)syscall(SYS_close_range, 3, (unsigned)pfd[1] - 1, 0);
                (void)syscall(SYS_close_range, (unsigned)pfd[1] + 1, ~0U, 0);
                int fl = fcntl(pfd[1], F_GETFL);
                if (fl >= 0)
                        (void)fcntl(pfd[1], F_SETFL, fl & ~O_NONBLOCK);
                child(pfd[1], ws);
        }
        close(pfd[1]);
        struct hostws *h = xcalloc(1, sizeof(*h));
        /* Not reaped before this: the reaper runs on the loop. */
        h->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        h->fd = pfd[0];
        h->ws = xstrdup(ws);
        h->buf = xcalloc(1, HOSTWS_MSG_MAX);
        h->done = done;
        h->ud = ud;
        h->ev = event_new(base, h->fd, EV_READ | EV_PERSIST, on_answer, h);
        h->timer = evtimer_new(base, on_timeout, h);
        struct timeval tv = {.tv_sec = HOSTWS_TIMEOUT_MS / 1000,
                             .tv_usec = (HOSTWS_TIMEOUT_MS % 1000) * 1000};
        if (h->pidfd < 0 || !h->ev || !h->timer || event_add(h->ev, NULL) < 0 ||
            evtimer_add(h->timer, &tv) < 0) {
                if (h->pidfd < 0)
                        (void)kill(pid, SIGKILL); /* not reaped yet: still ours */
                hostws_free(h);
                return al_error_set_message(err, EAGAIN, "reading the workspace %s: no event", ws);
        }
        return 0;
}

int hostws_apply_answer(const struct hostws *h, struct policy *p, const char *home,
                        struct al_error *err)
{
        const char *ws = h->ws, *buf = h->buf;
        size_t len = h->len;
        int r = h->error;
        if (r == -ETIMEDOUT)
                return al_error_set_message(err, ETIMEDOUT,
                                            "the workspace %s did not answer within %d ms (a file "
                                            "system that hangs?)",
                                            ws, HOSTWS_TIMEOUT_MS);
        if (r < 0)
                return al_error_set(err, -r, "reading the workspace %s", ws);
        if (len == 0)
                return al_error_set_message(err, EIO, "reading the workspace %s: no answer", ws);
        switch (buf[0]) {
        case HOSTWS_NONE:
                return 0;
        case HOSTWS_NOTDIR:
                return al_error_set_message(err, ENOTDIR, "%s is not an existing directory", ws);
        case HOSTWS_ERROR:
                return al_error_set_message(err, EINVAL, "%.*s", (int)(len - 1), buf + 1);
        case HOSTWS_UNSAFE:
                return al_error_set_message(err, EACCES, "%.*s", (int)(len - 1), buf + 1);
        case HOSTWS_CONFIG: {
                struct repo_config *rc = NULL;
                r = repo_config_parse(buf + 1, len - 1, &rc, err);
                if (r < 0)
                        return r;
                r = repo_config_apply_loaded(p, ws, home, rc, err);
                repo_config_free(rc);
                return r;
        }
        default:
                return al_error_set_message(err, EIO, "reading the workspace %s: a bad answer", ws);
        }
}
