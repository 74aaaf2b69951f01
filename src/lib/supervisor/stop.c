/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "cgroup.h"
#include "control-proto.h"
#include "stop.h"
#include "util.h"

enum { STOP_ANSWER_MAX = 4096, STOP_RECLAIM_MS = 5000 };

bool sv_stop_id_ok(const char *s)
{
        return s && strlen(s) == 16 && strspn(s, "0123456789abcdef") == 16;
}

int sv_stop_list(const char *run_dir, size_t max, char ***ret)
{
        _cleanup_(closedirp) DIR *d = opendir(run_dir);
        if (!d)
                return errno == ENOENT ? (*ret = NULL, 0) : -errno;
        char **ids = NULL;
        size_t n = 0;
        struct dirent *de;
        while ((de = readdir(d)) && n < max)
                if (sv_stop_id_ok(de->d_name))
                        ids = strv_append(ids, &n, de->d_name);
        *ret = ids;
        return (int)n;
}

struct target {
        int fd;
        char buf[STOP_ANSWER_MAX];
        size_t len;
        bool done;
};

/* Connect and send the stop; -errno when nobody listens. */
static int ask(const char *run_dir, const char *id, const char *by, struct target *t)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s/control.sock", run_dir, id);
        if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -errno;
        json_t *o = json_pack("{s:s, s:s}", "op", CONTROL_OP_STOP, "by", by);
        char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!s)
                return -ENOMEM;
        _cleanup_free_ char *line = xasprintf("%s\n", s);
        free(s);
        int r = write_full(fd, line, strlen(line));
        if (r < 0)
                return r;
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return -errno;
        t->fd = TAKE_FD(fd);
        return 0;
}

/* The supervisor's answer line, once whole. */
static void take_answer(struct target *t, struct sv_stop_result *res)
{
        t->buf[t->len] = '\0';
        json_error_t jerr;
        json_t *o = json_loads(t->buf, 0, &jerr);
        const char *err = json_string_value(json_object_get(o, "error"));
        if (json_is_true(json_object_get(o, "ok"))) {
                res->how = SV_STOP_SUPERVISOR;
                res->frozen = json_is_true(json_object_get(o, "frozen"));
                snprintf(res->frozen_at, sizeof(res->frozen_at), "%s",
                         json_string_value(json_object_get(o, "frozenAt")) ?: "");
                json_int_t ms = json_integer_value(json_object_get(o, "freezeMs"));
                res->freeze_ms = ms > 0 ? (uint64_t)ms : 0;
                const char *fe = json_string_value(json_object_get(o, "freezeError"));
                if (fe)
                        snprintf(res->message, sizeof(res->message), "not frozen: %s", fe);
        } else if (err && STREQ(err, CONTROL_ERR_DESTROYED)) {
                /* Already being destroyed: the supervisor finishes it. */
                res->how = SV_STOP_SUPERVISOR;
                snprintf(res->message, sizeof(res->message), "already being destroyed");
        } else
                snprintf(res->message, sizeof(res->message), "the supervisor answered: %s",
                         err ?: "something that is not an answer");
        json_decref(o);
}

/* The supervisor's pid from its state file, when it is still the process
 * that wrote it (its command line names `supervise` and the id). */
static int supervisor_pidfd(const char *run_dir, const char *id)
{
        _cleanup_free_ char *path = xasprintf("%s/%s/supervisor.json", run_dir, id);
        _cleanup_free_ char *s = NULL;
        if (read_file_at(AT_FDCWD, path, 64 * 1024, &s, NULL) < 0)
                return -ENOENT;
        json_error_t jerr;
        json_t *o = json_loads(s, 0, &jerr);
        json_int_t pid = json_integer_value(json_object_get(o, "pid"));
        json_decref(o);
        if (pid <= 1 || pid > INT32_MAX)
                return -ENOENT;
        int pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
        if (pfd < 0)
                return -errno;
        _cleanup_free_ char *cpath = xasprintf("/proc/%d/cmdline", (int)pid);
        _cleanup_free_ char *cmd = NULL;
        size_t len = 0;
        bool ours = false, has_id = false;
        if (read_file_at(AT_FDCWD, cpath, 64 * 1024, &cmd, &len) >= 0)
                for (size_t i = 0; i < len; i += strlen(cmd + i) + 1) {
                        ours = ours || STREQ(cmd + i, "supervise");
                        has_id = has_id || STREQ(cmd + i, id);
                }
        if (!ours || !has_id) {
                close(pfd);
                return -ESRCH;
        }
        return pfd;
}

/* A supervisor that did not answer: freeze its sandbox's cgroup, kill the
 * supervisor (its pid 1 dies with it), kill and remove the cgroup. */
static void from_outside(const char *run_dir, struct sv_stop_result *res)
{
        _cleanup_free_ char *name = xasprintf("airlock-%s", res->id);
        res->frozen = cgroup_freeze_named(name) > 0;
        _cleanup_close_ int pfd = supervisor_pidfd(run_dir, res->id);
        if (pfd >= 0)
                (void)syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0);
        uint64_t end = now_monotonic_us() + STOP_RECLAIM_MS * 1000ull;
        int r;
        while ((r = cgroup_reclaim_named(name)) == -EBUSY && now_monotonic_us() < end)
                usleep(10000);
        res->how = r < 0 ? SV_STOP_FAILED : SV_STOP_CGROUP;
        size_t n = strlen(res->message);
        snprintf(res->message + n, sizeof(res->message) - n, "%s%s", n ? "; " : "",
                 r < 0 ? "processes were left in its cgroup"
                       : "stopped from outside: its cgroup frozen and killed, not recorded");
}

int sv_stop_many(const char *run_dir, char *const *ids, size_t n, const char *by,
                 uint64_t timeout_ms, struct sv_stop_result *res)
{
        struct target *t = xcalloc(n ? n : 1, sizeof(*t));
        struct pollfd *pf = xcalloc(n ? n : 1, sizeof(*pf));
        int failed = 0;
        for (size_t i = 0; i < n; i++) {
                memset(&res[i], 0, sizeof(res[i]));
                snprintf(res[i].id, sizeof(res[i].id), "%s", ids[i]);
                t[i].fd = -1;
                _cleanup_free_ char *dir = xasprintf("%s/%s", run_dir, ids[i]);
                struct stat st;
                if (!sv_stop_id_ok(ids[i]) || lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
                        res[i].how = SV_STOP_NOT_FOUND;
                        t[i].done = true;
                        continue;
                }
                res[i].how = SV_STOP_FAILED; /* until its supervisor says otherwise */
                int r = ask(run_dir, ids[i], by, &t[i]);
                if (r < 0) {
                        snprintf(res[i].message, sizeof(res[i].message),
                                 "its supervisor did not answer: %s", strerror(-r));
                        t[i].done = true;
                }
        }
        /* Every supervisor has been asked; now their answers. */
        uint64_t end = now_monotonic_us() + timeout_ms * 1000;
        for (;;) {
                size_t np = 0;
                for (size_t i = 0; i < n; i++)
                        if (!t[i].done)
                                pf[np++] = (struct pollfd){.fd = t[i].fd, .events = POLLIN};
                uint64_t now = now_monotonic_us();
                if (np == 0 || now >= end)
                        break;
                int pr = poll(pf, np, (int)((end - now) / 1000) + 1);
                if (pr < 0 && errno != EINTR)
                        break;
                for (size_t i = 0; i < n; i++) {
                        if (t[i].done)
                                continue;
                        ssize_t k =
                            read(t[i].fd, t[i].buf + t[i].len, sizeof(t[i].buf) - 1 - t[i].len);
                        if (k < 0 && (errno == EAGAIN || errno == EINTR))
                                continue;
                        if (k > 0)
                                t[i].len += (size_t)k;
                        char *nl = memchr(t[i].buf, '\n', t[i].len);
                        if (nl || k <= 0 || t[i].len == sizeof(t[i].buf) - 1) {
                                if (nl)
                                        t[i].len = (size_t)(nl - t[i].buf);
                                t[i].done = true;
                                if (nl)
                                        take_answer(&t[i], &res[i]);
                                else
                                        snprintf(res[i].message, sizeof(res[i].message),
                                                 "its supervisor closed without an answer");
                        }
                }
        }
        for (size_t i = 0; i < n; i++) {
                if (t[i].fd >= 0)
                        close(t[i].fd);
                if (res[i].how == SV_STOP_NOT_FOUND || res[i].how == SV_STOP_SUPERVISOR)
                        continue;
                if (!res[i].message[0])
                        snprintf(res[i].message, sizeof(res[i].message),
                                 "its supervisor did not answer within %llu ms",
                                 (unsigned long long)timeout_ms);
                from_outside(run_dir, &res[i]);
                if (res[i].how == SV_STOP_FAILED)
                        failed++;
        }
        free(t);
        free(pf);
        return failed;
}

const char *sv_stop_how_name(enum sv_stop_how h)
{
        switch (h) {
        case SV_STOP_SUPERVISOR:
                return "supervisor";
        case SV_STOP_CGROUP:
                return "cgroup";
        case SV_STOP_FAILED:
                return "failed";
        default:
                return "not_found";
        }
}
