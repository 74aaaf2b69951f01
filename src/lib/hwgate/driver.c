/* SPDX-License-Identifier: Apache-2.0 */
/* The connection to the host-side driver: a command the supervisor starts
 * (its stdin and stdout one end of a socketpair) or a unix socket it
 * connects to. Only the supervisor holds it; nothing of it is passed into
 * the sandbox (every descriptor is close-on-exec). What waits to be written
 * is kept whole-line, so that a stop can go ahead of it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hardware.h"
#include "hwgate-internal.h"
#include "policy.h"
#include "util.h"

static int set_nonblock(int fd)
{
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return -errno;
        return 0;
}

static int open_socket(struct hwgate_driver *d, const char *path, struct al_error *err)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof(sa.sun_path))
                return al_error_set_message(err, ENAMETOOLONG,
                                            "hardware driver socket \"%s\": path too long", path);
        memcpy(sa.sun_path, path, strlen(path) + 1);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return al_error_set(err, errno, "hardware driver: socket");
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int e = errno;
                close(fd);
                return al_error_set(err, e,
                                    "connecting to the hardware driver at \"%s\" (is it "
                                    "running?)",
                                    path);
        }
        d->fd = fd;
        return 0;
}

#define DRIVER_PATH "/usr/local/bin:/usr/bin:/bin"

/* argv[0] as the driver's own PATH finds it (not the supervisor's: the
 * driver's environment is clean, and so is what it is looked up in). */
static char *resolve(const char *name)
{
        if (strchr(name, '/'))
                return xstrdup(name);
        const char *p = DRIVER_PATH;
        while (*p) {
                size_t n = strcspn(p, ":");
                char *path = xasprintf("%.*s/%s", (int)n, p, name);
                if (access(path, X_OK) == 0)
                        return path;
                free(path);
                p += n + (p[n] == ':');
        }
        return NULL;
}

static int start_command(struct hwgate_driver *d, char *const *argv, struct al_error *err)
{
        _cleanup_free_ char *exe = resolve(argv[0]);
        if (!exe)
                return al_error_set_message(err, ENOENT,
                                            "starting the hardware driver: \"%s\" is not in "
                                            "%s (give a path in hardware.driver.command)",
                                            argv[0], DRIVER_PATH);
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
                return al_error_set(err, errno, "hardware driver: socketpair");
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t at;
        posix_spawn_file_actions_init(&fa);
        posix_spawnattr_init(&at);
        posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
        posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        sigset_t none, all;
        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawnattr_setsigdefault(&at, &all);
        /* Its own session: a terminal's ^C reaches the supervisor, which
         * stops the actuators, not the driver before it is told. */
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                          POSIX_SPAWN_SETSID);
        char *envp[] = {"PATH=" DRIVER_PATH, "LANG=C.UTF-8", NULL};
        pid_t pid;
        int r = posix_spawn(&pid, exe, &fa, &at, argv, envp);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&at);
        close(sv[1]);
        if (r != 0) {
                close(sv[0]);
                return al_error_set(err, r, "starting the hardware driver \"%s\"", argv[0]);
        }
        d->fd = sv[0];
        d->pid = pid;
        d->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
        return 0;
}

/* The real path of `path`, or of its directory joined with its last
 * component when it does not exist yet. */
static bool real_of(const char *path, char out[PATH_MAX])
{
        if (realpath(path, out))
                return true;
        _cleanup_free_ char *dir = xstrdup(path);
        char *slash = strrchr(dir, '/');
        const char *base = slash ? slash + 1 : path;
        if (slash == dir)
                dir[1] = '\0';
        else if (slash)
                *slash = '\0';
        char d[PATH_MAX];
        if (!realpath(slash ? dir : ".", d))
                return false;
        int n = snprintf(out, PATH_MAX, "%.*s/%s", STREQ(d, "/") ? 0 : PATH_MAX - 2, d, base);
        return n > 0 && n < PATH_MAX;
}

static bool under(const char *path, const char *dir)
{
        size_t n = strlen(dir);
        return STREQ(dir, "/") ||
               (strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/'));
}

/* The first of the agent's writable host trees that `path` lies in. */
static const char *writable_by_agent(const struct policy *p, const char *path)
{
        char real[PATH_MAX], w[PATH_MAX];
        if (!real_of(path, real))
                return NULL;
        if (p->workspace && p->workspace_mode != POLICY_WORKSPACE_RO && realpath(p->workspace, w) &&
            under(real, w))
                return p->workspace;
        for (size_t i = 0; i < p->n_mounts; i++)
                if (p->mounts[i].source && !p->mounts[i].readonly &&
                    realpath(p->mounts[i].source, w) && under(real, w))
                        return p->mounts[i].source;
        return NULL;
}

int hwgate_driver_check_reach(const struct policy_hardware *h, const struct policy *p,
                              struct al_error *err)
{
        if (!p)
                return 0;
        const char *in;
        /* A socket in the workspace is masked inside (a listening socket
         * found at start is hidden): the agent cannot reach or replace it. */
        if (h->socket)
                return 0;
        _cleanup_free_ char *exe = resolve(h->command[0]);
        if (exe && (in = writable_by_agent(p, exe)))
                return al_error_set_message(
                    err, EPERM,
                    "hardware.driver.command \"%s\" lies in %s, which the sandbox can write "
                    "(the workspace or a read-write mount): the agent could change what runs on "
                    "the host; install the driver outside the workspace",
                    exe, in);
        for (size_t i = 1; i < h->n_command; i++) {
                struct stat st;
                if (stat(h->command[i], &st) < 0)
                        continue; /* not a file: an option or a value */
                if ((in = writable_by_agent(p, h->command[i])))
                        return al_error_set_message(
                            err, EPERM,
                            "hardware.driver.command argument \"%s\" lies in %s, which the "
                            "sandbox can write (the workspace or a read-write mount): the "
                            "agent could change what the driver runs on the host; keep the "
                            "driver's files outside the workspace",
                            h->command[i], in);
        }
        return 0;
}

int hwgate_driver_open(struct hwgate_driver *d, const struct policy_hardware *h,
                       struct al_error *err)
{
        memset(d, 0, sizeof(*d));
        d->fd = -1;
        d->pid = -1;
        d->pidfd = -1;
        int r = h->socket ? open_socket(d, h->socket, err) : start_command(d, h->command, err);
        if (r < 0)
                return r;
        /* Little in flight in the kernel: what waits stays in d->out, where
         * a stop can drop it and go first. */
        int small = 4096;
        (void)setsockopt(d->fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
        r = set_nonblock(d->fd);
        if (r < 0) {
                hwgate_driver_close(d, 0);
                return al_error_set(err, -r, "hardware driver: nonblocking");
        }
        return 0;
}

int hwgate_driver_flush(struct hwgate_driver *d)
{
        while (d->out_len > 0) {
                if (d->fd < 0)
                        return -EPIPE;
                ssize_t n = send(d->fd, d->out, d->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN || errno == EWOULDBLOCK)
                                return 0;
                        return -errno;
                }
                /* Is what remains the rest of a line already begun? */
                d->out_line_end = 0;
                if (n > 0 && d->out[n - 1] != '\n') {
                        char *nl = memchr(d->out + n, '\n', d->out_len - (size_t)n);
                        d->out_line_end = nl ? (size_t)(nl - (d->out + n)) + 1 : 0;
                }
                memmove(d->out, d->out + n, d->out_len - (size_t)n);
                d->out_len -= (size_t)n;
        }
        return 0;
}

int hwgate_driver_send(struct hwgate_driver *d, const char *line, size_t len)
{
        if (d->fd < 0)
                return -EPIPE;
        if (d->out_len + len > HWGATE_OUT_MAX)
                return -ENOBUFS;
        if (d->out_len + len > d->out_cap) {
                size_t cap = d->out_cap ? d->out_cap : 4096;
                while (cap < d->out_len + len)
                        cap *= 2;
                d->out = xrealloc(d->out, cap, 1);
                d->out_cap = cap;
        }
        memcpy(d->out + d->out_len, line, len);
        d->out_len += len;
        return hwgate_driver_flush(d);
}

void hwgate_driver_drop_queued(struct hwgate_driver *d)
{
        d->out_len = d->out_line_end <= d->out_len ? d->out_line_end : 0;
}

int hwgate_driver_drain(struct hwgate_driver *d, int timeout_ms)
{
        uint64_t end = now_monotonic_us() / 1000 + (uint64_t)timeout_ms;
        for (;;) {
                int r = hwgate_driver_flush(d);
                if (r < 0 || d->out_len == 0)
                        return r;
                uint64_t now = now_monotonic_us() / 1000;
                if (now >= end)
                        return -ETIMEDOUT;
                struct pollfd p = {.fd = d->fd, .events = POLLOUT};
                if (poll(&p, 1, (int)(end - now)) < 0 && errno != EINTR)
                        return -errno;
        }
}

void hwgate_driver_close(struct hwgate_driver *d, int wait_ms)
{
        if (d->fd >= 0) {
                close(d->fd);
                d->fd = -1;
        }
        if (d->pid > 0) {
                bool gone = false;
                if (d->pidfd >= 0) {
                        struct pollfd p = {.fd = d->pidfd, .events = POLLIN};
                        uint64_t end = now_monotonic_us() / 1000 + (uint64_t)wait_ms;
                        for (;;) {
                                uint64_t now = now_monotonic_us() / 1000;
                                int left = now >= end ? 0 : (int)(end - now);
                                int r = poll(&p, 1, left);
                                if (r < 0 && errno == EINTR)
                                        continue;
                                gone = r > 0;
                                break;
                        }
                        if (!gone)
                                syscall(SYS_pidfd_send_signal, d->pidfd, SIGKILL, NULL, 0);
                } else if (wait_ms >= 0)
                        kill(d->pid, SIGKILL);
                while (waitpid(d->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                d->pid = -1;
        }
        if (d->pidfd >= 0) {
                close(d->pidfd);
                d->pidfd = -1;
        }
        free(d->out);
        d->out = NULL;
        d->out_len = d->out_cap = d->out_line_end = 0;
}
