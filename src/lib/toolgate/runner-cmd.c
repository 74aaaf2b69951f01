/* SPDX-License-Identifier: Apache-2.0 */
/* Command tools: the definition's argv template filled with the checked
 * arguments (each one whole element, never split or interpreted), run on
 * the host as the supervisor's own user with a clean environment, the
 * arguments' JSON on stdin, cwd "/". The tool is pid 1 of a new pid
 * namespace (in a new user namespace mapping only the caller's own ids
 * when the caller is not root), so that killing it at the timeout or at
 * toolgate_free ends its whole tree: the kernel kills every process of a
 * namespace whose pid 1 dies, a grandchild that called setsid or
 * double-forked included, and the reaped pid 1 means they are all gone.
 *
 * base/child.c's child_spawn cannot make namespaces or wait for the user
 * namespace's maps to be written before the exec, hence contain_spawn here
 * (the same order: signals blocked across the clone, descriptors placed,
 * everything else close-on-exec, the exec's errno back over a pipe). */
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "policy.h"
#include "secrets.h"
#include "toolgate-internal.h"
#include "utf8.h"
#include "util.h"

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define STDERR_KEPT 4096
#define TOOL_PATH   "/usr/local/bin:/usr/bin:/bin"

struct cmd {
        struct tg_call *call;
        pid_t pid;
        int pidfd;
        int in_fd, out_fd, err_fd;
        struct event *ev_in, *ev_out, *ev_err, *ev_exit, *timer;
        char *in_buf;
        size_t in_len, in_off;
        char *out;
        size_t out_len, out_total;
        char err[STDERR_KEPT];
        size_t err_len;
        bool err_cut; /* it wrote more than err holds */
        bool exited;
        int status;
        /* Set when the gateway killed it: what the answer says. */
        const char *kill_code, *kill_rule;
        char kill_msg[160];
};

/* Spawning */

static _Noreturn void child_fail(int errfd)
{
        int e = errno;
        ssize_t k;
        do
                k = write(errfd, &e, sizeof(e));
        while (k < 0 && errno == EINTR);
        _exit(127);
}

/* In the child, between clone and exec: async-signal-safe calls only. */
static _Noreturn void contain_child(const char *path, char *const *argv, char *const *envp,
                                    const int fds[3], int sync_fd, int errfd)
{
        int src[3];
        char go;

        for (int sig = 1; sig < NSIG; sig++)
                (void)signal(sig, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* Our death (the supervisor's) ends the namespace too. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
                child_fail(errfd);
        /* Wait until the parent has written the id maps; EOF: it is gone. */
        ssize_t k;
        do
                k = read(sync_fd, &go, 1);
        while (k < 0 && errno == EINTR);
        if (k != 1)
                _exit(127);
        errfd = fcntl(errfd, F_DUPFD_CLOEXEC, 10);
        if (errfd < 0)
                _exit(127);
        for (int i = 0; i < 3; i++)
                if ((src[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 10)) < 0)
                        child_fail(errfd);
        for (int i = 0; i < 3; i++)
                if (dup2(src[i], i) < 0)
                        child_fail(errfd);
        if (syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
                for (int fd = 3; fd < 4096; fd++)
                        if (fd != errfd)
                                (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
        if (chdir("/") < 0)
                child_fail(errfd);
        execve(path, argv, envp);
        child_fail(errfd);
}

static int write_map(pid_t pid, const char *file, const char *text)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
        return write_file_at(AT_FDCWD, path, text);
}

/* Start path as pid 1 of a new pid namespace, with fds[0..2] as its stdio;
 * *ret_pid and *ret_pidfd once the exec has succeeded, else -errno (the
 * child reaped). */
static int contain_spawn(const char *path, char *const *argv, char *const *envp, const int fds[3],
                         pid_t *ret_pid, int *ret_pidfd)
{
        int sp[2], ep[2];
        bool userns = geteuid() != 0;

        if (pipe2(sp, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int sync_rd = sp[0];
        _cleanup_close_ int sync_wr = sp[1];
        if (pipe2(ep, O_CLOEXEC) < 0)
                return -errno;
        _cleanup_close_ int err_rd = ep[0];
        _cleanup_close_ int err_wr = ep[1];

        sigset_t all, old;
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, &old);
        int pidfd = -1;
        struct clone_args ca = {
            .flags = CLONE_PIDFD | CLONE_NEWPID | (userns ? CLONE_NEWUSER : 0),
            .pidfd = (uint64_t)(uintptr_t)&pidfd,
            /* No signal at exit: a waitpid(-1) reaper elsewhere in the
             * process does not take it; it is reaped here, with __WALL. */
            .exit_signal = 0,
        };
        pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
        if (pid == 0) {
                close(sync_wr);
                close(err_rd);
                contain_child(path, argv, envp, fds, sync_rd, err_wr);
        }
        int e = errno;
        sigprocmask(SIG_SETMASK, &old, NULL);
        if (pid < 0)
                return -e;
        closep(&err_wr);

        int r = 0;
        if (userns) {
                char map[64];
                r = write_map(pid, "setgroups", "deny");
                snprintf(map, sizeof(map), "%u %u 1", (unsigned)geteuid(), (unsigned)geteuid());
                if (r >= 0)
                        r = write_map(pid, "uid_map", map);
                snprintf(map, sizeof(map), "%u %u 1", (unsigned)getegid(), (unsigned)getegid());
                if (r >= 0)
                        r = write_map(pid, "gid_map", map);
        }
        if (r >= 0 && write(sync_wr, "x", 1) != 1)
                r = -errno;
        closep(&sync_wr);
        sync_wr = -1;

        int child_errno = 0;
        ssize_t k = 0;
        if (r >= 0) {
                do
                        k = read(err_rd, &child_errno, sizeof(child_errno));
                while (k < 0 && errno == EINTR);
        }
        if (r < 0 || (k == (ssize_t)sizeof(child_errno) && child_errno > 0)) {
                syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
                        ;
                close(pidfd);
                return r < 0 ? r : -child_errno;
        }
        *ret_pid = pid;
        *ret_pidfd = pidfd;
        return 0;
}

/* The argv and environment */

/* One argument as the text of one argv element; NULL with why on refusal. */
static char *arg_text(const json_t *v, bool options_ended, const char *name, char *why,
                      size_t why_size)
{
        char *s;
        if (json_is_string(v)) {
                if (strlen(json_string_value(v)) != json_string_length(v)) {
                        snprintf(why, why_size, "argument \"%s\" holds a NUL character", name);
                        return NULL;
                }
                s = xstrdup(json_string_value(v));
        } else if (json_is_integer(v))
                s = xasprintf("%" JSON_INTEGER_FORMAT, json_integer_value(v));
        else if (json_is_real(v))
                s = xasprintf("%.17g", json_real_value(v));
        else if (json_is_boolean(v))
                s = xstrdup(json_is_true(v) ? "true" : "false");
        else {
                snprintf(why, why_size, "argument \"%s\" is not a scalar", name);
                return NULL;
        }
        /* A value the program would read as an option it was not given:
         * "-rf", "--output=/etc/x", even "-5". Refused unless the template
         * ends the options with a literal "--" before it. */
        if (s[0] == '-' && !options_ended) {
                snprintf(why, why_size,
                         "argument \"%s\" begins with '-', which this tool would read as an "
                         "option",
                         name);
                free(s);
                return NULL;
        }
        return s;
}

static char **build_argv(struct tg_call *c, char *why, size_t why_size)
{
        const struct policy_tool *d = c->tool->def;
        char **argv = xcalloc(d->n_argv + 1, sizeof(char *));
        bool options_ended = false;

        for (size_t i = 0; i < d->n_argv; i++) {
                const char *el = d->argv[i];
                size_t len = strlen(el);
                if (i > 0 && strncmp(el, "${args.", 7) == 0 && len > 8 && el[len - 1] == '}') {
                        char name[160];
                        snprintf(name, sizeof(name), "%.*s", (int)(len - 8), el + 7);
                        const json_t *v = json_object_get(c->args, name);
                        argv[i] = v ? arg_text(v, options_ended, name, why, why_size) : NULL;
                        if (!v)
                                snprintf(why, why_size, "argument \"%s\" is missing", name);
                        if (!argv[i]) {
                                strv_free(argv);
                                return NULL;
                        }
                        continue;
                }
                if (i > 0 && STREQ(el, "--"))
                        options_ended = true;
                argv[i] = xstrdup(el);
        }
        return argv;
}

static char **build_env(struct tg_call *c, char *why, size_t why_size)
{
        const struct policy_tool *d = c->tool->def;
        struct toolgate *t = c->t;
        const char *home = getenv("HOME");
        char **envp = xcalloc(d->n_env + 4, sizeof(char *));
        size_t n = 0;

        envp[n++] = xstrdup("PATH=" TOOL_PATH);
        envp[n++] = xasprintf("HOME=%s", home && home[0] == '/' ? home : "/");
        envp[n++] = xstrdup("LANG=C.UTF-8");
        struct secrets_vars vars = {
            .run_id = t->run_id, .sandbox_id = t->sandbox, .account = t->account};
        for (size_t i = 0; i < d->n_env; i++) {
                char *value = NULL;
                struct al_error err = {0};
                int r = secrets_expand(t->secrets, d->env[i].value, &vars, &value, &err);
                if (r < 0) {
                        snprintf(why, why_size,
                                 "the tool's environment variable %s could not be set (a secret "
                                 "or variable it names is not available)",
                                 d->env[i].key);
                        strv_free(envp);
                        return NULL;
                }
                envp[n++] = xasprintf("%s=%s", d->env[i].key, value);
                explicit_bzero(value, strlen(value));
                free(value);
        }
        return envp;
}

/* Running */

static void cmd_free(struct cmd *m)
{
        if (m->ev_in)
                event_free(m->ev_in);
        if (m->ev_out)
                event_free(m->ev_out);
        if (m->ev_err)
                event_free(m->ev_err);
        if (m->ev_exit)
                event_free(m->ev_exit);
        if (m->timer)
                event_free(m->timer);
        closep(&m->in_fd);
        closep(&m->out_fd);
        closep(&m->err_fd);
        closep(&m->pidfd);
        free(m->in_buf);
        free(m->out);
        free(m);
}

static void cmd_kill(struct cmd *m)
{
        if (!m->exited && m->pidfd >= 0)
                syscall(SYS_pidfd_send_signal, m->pidfd, SIGKILL, NULL, 0);
}

/* A string value: the bytes as UTF-8, anything else as U+FFFD. */
static json_t *text_value(const char *s, size_t len)
{
        char *buf = xcalloc(len * 3 + 1, 1);
        size_t n = 0;
        for (size_t i = 0; i < len;) {
                uint32_t cp;
                int k = utf8_decode_char((const unsigned char *)s + i, len - i, &cp);
                if (k > 0 && cp != 0) {
                        memcpy(buf + n, s + i, (size_t)k);
                        n += (size_t)k;
                        i += (size_t)k;
                } else {
                        memcpy(buf + n, "\xEF\xBF\xBD", 3);
                        n += 3;
                        i++;
                }
        }
        json_t *v = json_stringn(buf, n);
        free(buf);
        return v;
}

/* The first line of what the tool wrote to stderr, scrubbed, then cut and
 * made printable. Scrubbed before the cut: a secret straddling the cut
 * would leave its first bytes, which the redactor no longer recognises.
 * A line longer than what was kept goes through the redactor's stream
 * without its end, so that a secret cut there is withheld whole. */
static void stderr_line(const struct cmd *m, const struct redactor *r, char *buf, size_t size)
{
        size_t len = 0, n = 0;
        while (len < m->err_len && m->err[len] != '\n')
                len++;
        bool whole = len < m->err_len || !m->err_cut;
        char *a = NULL, *b = NULL;
        size_t a_len = 0, b_len = 0;
        struct redactor_stream *st = redactor_stream_new(r);
        int k = redactor_stream_feed(st, m->err, len, &a, &a_len);
        if (k >= 0 && whole)
                k = redactor_stream_finish(st, &b, &b_len);
        redactor_stream_free(st);
        for (size_t i = 0; k >= 0 && i < a_len + b_len && n + 1 < size && n < 160; i++) {
                char ch = i < a_len ? a[i] : b[i - a_len];
                buf[n++] = (unsigned char)ch < 0x20 || ch == 0x7f ? '?' : ch;
        }
        buf[n] = '\0';
        if (a)
                explicit_bzero(a, a_len);
        if (b)
                explicit_bzero(b, b_len);
        free(a);
        free(b);
}

static void cmd_complete(struct cmd *m)
{
        struct tg_call *c = m->call;
        const char *name = c->tool->def->name;
        char msg[512], line[192];

        c->runner = NULL;
        c->cancel = NULL;
        c->revoke = NULL;
        if (m->kill_code) {
                const char *code = m->kill_code, *rule = m->kill_rule;
                snprintf(msg, sizeof(msg), "%s", m->kill_msg);
                uint64_t total = m->out_total;
                int status = m->status;
                cmd_free(m);
                toolgate_call_finish(c, NULL, code, rule, msg, status, total);
                return;
        }
        if (!WIFEXITED(m->status) || WEXITSTATUS(m->status) != 0) {
                stderr_line(m, toolgate_redactor(c->t), line, sizeof(line));
                if (WIFSIGNALED(m->status))
                        snprintf(msg, sizeof(msg), "tool \"%s\" was killed by signal %d%s%s", name,
                                 WTERMSIG(m->status), line[0] ? ": " : "", line);
                else
                        snprintf(msg, sizeof(msg), "tool \"%s\" failed with exit status %d%s%s",
                                 name, WEXITSTATUS(m->status), line[0] ? ": " : "", line);
                uint64_t total = m->out_total;
                int status = m->status;
                cmd_free(m);
                toolgate_call_finish(c, NULL, "tool_failed", "exit", msg, status, total);
                return;
        }
        /* Every byte passes the redactor before it is parsed or sent. */
        char *red = NULL;
        size_t red_len = 0;
        json_t *value = NULL;
        if (redactor_apply(toolgate_redactor(c->t), m->out ? m->out : "", m->out_len, &red,
                           &red_len) >= 0) {
                value = json_loadb(red, red_len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL);
                if (value) {
                        /* Parsing decodes escapes the byte redactor does
                         * not know ("\u00e4"): scrub what it decoded. */
                        json_t *parsed = value;
                        value = toolgate_redact_json(toolgate_redactor(c->t), parsed);
                        json_decref(parsed);
                } else {
                        size_t n = red_len;
                        if (n > 0 && red[n - 1] == '\n')
                                n--;
                        value = text_value(red, n);
                }
                free(red);
        }
        uint64_t total = m->out_total;
        int status = m->status;
        cmd_free(m);
        if (!value)
                toolgate_call_finish(c, NULL, "internal", "output",
                                     "the tool's output could not be scrubbed", status, total);
        else
                toolgate_call_finish(c, value, NULL, NULL, NULL, status, total);
}

static void cmd_maybe_complete(struct cmd *m)
{
        if (m->exited && m->out_fd < 0 && m->err_fd < 0)
                cmd_complete(m);
}

static void kill_for(struct cmd *m, const char *code, const char *rule, const char *msg)
{
        if (!m->kill_code) {
                m->kill_code = code;
                m->kill_rule = rule;
                snprintf(m->kill_msg, sizeof(m->kill_msg), "%s", msg);
        }
        cmd_kill(m);
}

static void cmd_revoke(struct tg_call *c, const char *msg)
{
        kill_for(c->runner, "policy_denied", "tools.allow", msg);
}

static void on_stdout(evutil_socket_t fd, short what, void *ud)
{
        struct cmd *m = ud;
        char buf[65536];
        ssize_t k = read(fd, buf, sizeof(buf));
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (k <= 0) {
                event_del(m->ev_out);
                closep(&m->out_fd);
                m->out_fd = -1;
                cmd_maybe_complete(m);
                return;
        }
        m->out_total += (uint64_t)k;
        if (m->out_total > m->call->tool->def->output_max) {
                char msg[160];
                snprintf(msg, sizeof(msg),
                         "tool \"%s\" printed more than its %" PRIu64 " bytes of output",
                         m->call->tool->def->name, m->call->tool->def->output_max);
                kill_for(m, "tool_failed", "outputMax", msg);
                return;
        }
        m->out = xrealloc(m->out, m->out_len + (size_t)k + 1, 1);
        memcpy(m->out + m->out_len, buf, (size_t)k);
        m->out_len += (size_t)k;
}

static void on_stderr(evutil_socket_t fd, short what, void *ud)
{
        struct cmd *m = ud;
        char buf[4096];
        ssize_t k = read(fd, buf, sizeof(buf));
        if (k < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (k <= 0) {
                event_del(m->ev_err);
                closep(&m->err_fd);
                m->err_fd = -1;
                cmd_maybe_complete(m);
                return;
        }
        size_t room = sizeof(m->err) - m->err_len;
        size_t n = (size_t)k < room ? (size_t)k : room;
        if (n < (size_t)k)
                m->err_cut = true;
        memcpy(m->err + m->err_len, buf, n);
        m->err_len += n;
}

static void on_stdin(evutil_socket_t fd, short what, void *ud)
{
        struct cmd *m = ud;
        while (m->in_off < m->in_len) {
                ssize_t k = send(fd, m->in_buf + m->in_off, m->in_len - m->in_off,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0 && errno == EAGAIN)
                        return;
                if (k <= 0)
                        break; /* it does not read its stdin: fine */
                m->in_off += (size_t)k;
        }
        event_del(m->ev_in);
        closep(&m->in_fd);
        m->in_fd = -1;
}

static void on_exit_cb(evutil_socket_t fd, short what, void *ud)
{
        struct cmd *m = ud;
        int status;
        pid_t r = waitpid(m->pid, &status, __WALL | WNOHANG);
        if (r == 0 || (r < 0 && errno == EINTR))
                return;
        m->exited = true;
        m->status = r == m->pid ? status : 0;
        event_del(m->ev_exit);
        /* The timer keeps running until the output ends too (on_timeout). */
        cmd_maybe_complete(m);
}

static void on_timeout(evutil_socket_t fd, short what, void *ud)
{
        struct cmd *m = ud;
        char msg[160];
        snprintf(msg, sizeof(msg), "tool \"%s\" ran longer than its %u ms and was stopped",
                 m->call->tool->def->name, m->call->tool->def->timeout_ms);
        kill_for(m, "timeout", "timeout", msg);
        if (!m->exited)
                return;
        /* Its tree is gone, yet its output is still open: a process
         * outside the namespace holds it (the tool handed it to a host
         * service). Stop waiting for its end. */
        if (m->out_fd >= 0) {
                event_del(m->ev_out);
                closep(&m->out_fd);
                m->out_fd = -1;
        }
        if (m->err_fd >= 0) {
                event_del(m->ev_err);
                closep(&m->err_fd);
                m->err_fd = -1;
        }
        cmd_maybe_complete(m);
}

/* toolgate_free: kill the tree, reap pid 1 (the namespace is then empty),
 * finish the call unanswered. */
static void cmd_cancel(struct tg_call *c)
{
        struct cmd *m = c->runner;
        cmd_kill(m);
        if (!m->exited) {
                int status = 0;
                while (waitpid(m->pid, &status, __WALL) < 0 && errno == EINTR)
                        ;
                m->exited = true;
                m->status = status;
        }
        c->runner = NULL;
        c->cancel = NULL;
        c->revoke = NULL;
        int status = m->status;
        uint64_t total = m->out_total;
        cmd_free(m);
        toolgate_call_finish(c, NULL, "internal", "shutdown", "the sandbox is stopping", status,
                             total);
}

void toolgate_cmd_start(struct tg_call *c)
{
        const struct policy_tool *d = c->tool->def;
        char why[256];
        int in[2], out[2], err[2];

        _cleanup_strv_ char **argv = build_argv(c, why, sizeof(why));
        if (!argv) {
                toolgate_call_finish(c, NULL, "bad_args", "argv", why, -1, 0);
                return;
        }
        _cleanup_strv_ char **envp = build_env(c, why, sizeof(why));
        if (!envp) {
                toolgate_call_finish(c, NULL, "internal", "env", why, -1, 0);
                return;
        }
        struct cmd *m = xcalloc(1, sizeof(*m));
        m->call = c;
        m->in_fd = m->out_fd = m->err_fd = m->pidfd = -1;
        m->in_buf = json_dumps(c->args, JSON_COMPACT);
        m->in_len = m->in_buf ? strlen(m->in_buf) : 0;
        int r = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in);
        if (r == 0 && pipe2(out, O_CLOEXEC) < 0) {
                close(in[0]), close(in[1]);
                r = -1;
        }
        if (r == 0 && pipe2(err, O_CLOEXEC) < 0) {
                close(in[0]), close(in[1]), close(out[0]), close(out[1]);
                r = -1;
        }
        if (r < 0) {
                cmd_free(m);
                toolgate_call_finish(c, NULL, "internal", "spawn", "the tool could not be started",
                                     -1, 0);
                return;
        }
        int fds[3] = {in[1], out[1], err[1]};
        r = contain_spawn(d->argv[0], argv, envp, fds, &m->pid, &m->pidfd);
        close(in[1]);
        close(out[1]);
        close(err[1]);
        m->in_fd = in[0];
        m->out_fd = out[0];
        m->err_fd = err[0];
        if (r < 0) {
                snprintf(why, sizeof(why), "tool \"%s\" could not be started: %s", d->name,
                         strerror(-r));
                cmd_free(m);
                toolgate_call_finish(c, NULL, "internal", "spawn", why, -1, 0);
                return;
        }
        struct event_base *base = c->t->base;
        (void)fcntl(m->in_fd, F_SETFL, O_NONBLOCK);
        (void)fcntl(m->out_fd, F_SETFL, O_NONBLOCK);
        (void)fcntl(m->err_fd, F_SETFL, O_NONBLOCK);
        m->ev_in = event_new(base, m->in_fd, EV_WRITE | EV_PERSIST, on_stdin, m);
        m->ev_out = event_new(base, m->out_fd, EV_READ | EV_PERSIST, on_stdout, m);
        m->ev_err = event_new(base, m->err_fd, EV_READ | EV_PERSIST, on_stderr, m);
        m->ev_exit = event_new(base, m->pidfd, EV_READ | EV_PERSIST, on_exit_cb, m);
        m->timer = evtimer_new(base, on_timeout, m);
        struct timeval tv = {d->timeout_ms / 1000, (d->timeout_ms % 1000) * 1000};
        c->runner = m;
        c->cancel = cmd_cancel;
        c->revoke = cmd_revoke;
        if (!m->ev_in || !m->ev_out || !m->ev_err || !m->ev_exit || !m->timer ||
            event_add(m->ev_in, NULL) < 0 || event_add(m->ev_out, NULL) < 0 ||
            event_add(m->ev_err, NULL) < 0 || event_add(m->ev_exit, NULL) < 0 ||
            evtimer_add(m->timer, &tv) < 0)
                cmd_cancel(c);
}
