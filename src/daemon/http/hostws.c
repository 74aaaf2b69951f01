/* SPDX-License-Identifier: Apache-2.0 */
/* A create's host workspace, read in a child with a time limit
 * (hostws.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostws.h"
#include "policy/repo.h"
#include "util.h"

/* The child's one message: a kind byte, then the file or a message. */
enum {
        HOSTWS_NONE = 'N',   /* a directory, no configuration */
        HOSTWS_CONFIG = 'C', /* a directory; the file's bytes follow */
        HOSTWS_NOTDIR = 'X', /* not an existing directory */
        HOSTWS_ERROR = 'E',  /* the file cannot be read; the message follows */
};
#define HOSTWS_MSG_MAX (64 * 1024 + 1024)

static void child(int fd, const char *ws)
{
        struct stat st;
        char kind = HOSTWS_NONE;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        struct al_error err = {0};
        if (stat(ws, &st) < 0 || !S_ISDIR(st.st_mode))
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

/* The child's message, or -ETIMEDOUT when it did not come in time. */
static int collect(int fd, char *buf, size_t size, size_t *ret_len)
{
        uint64_t deadline = now_monotonic_us() + (uint64_t)HOSTWS_TIMEOUT_MS * 1000;
        size_t len = 0;
        for (;;) {
                uint64_t now = now_monotonic_us();
                if (now >= deadline)
                        return -ETIMEDOUT;
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                int n = poll(&pfd, 1, (int)((deadline - now + 999) / 1000));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -ETIMEDOUT;
                if (len == size)
                        return -EMSGSIZE;
                ssize_t r = read(fd, buf + len, size - len);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (r == 0)
                        break;
                len += (size_t)r;
        }
        *ret_len = len;
        return 0;
}

int hostws_apply(struct policy *p, const char *ws, const char *home, struct al_error *err)
{
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return al_error_set(err, errno, "reading the workspace %s", ws);
        pid_t pid = fork();
        if (pid < 0) {
                int e = errno;
                close(pfd[0]);
                close(pfd[1]);
                return al_error_set(err, e, "reading the workspace %s", ws);
        }
        if (pid == 0) {
                close(pfd[0]);
                child(pfd[1], ws);
        }
        close(pfd[1]);
        _cleanup_close_ int fd = pfd[0];
        _cleanup_free_ char *buf = xcalloc(1, HOSTWS_MSG_MAX);
        size_t len = 0;
        int r = collect(fd, buf, HOSTWS_MSG_MAX, &len);
        /* A child stuck in a file system that does not answer dies of
         * SIGKILL (a FUSE wait is killable); the daemon's SIGCHLD reaper
         * takes it if it is not gone at once. */
        if (r < 0)
                (void)kill(pid, SIGKILL);
        for (int i = 0; i < 20 && waitpid(pid, NULL, WNOHANG) == 0; i++)
                usleep(1000);
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
