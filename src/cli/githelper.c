/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "child.h"
#include "githelper.h"
#include "paths.h"
#include "util.h"

int githelper_exec(const char *name, int argc, char **argv)
{
        _cleanup_free_ char *path = paths_beside_self("airlock-git");
        if (!path) {
                fprintf(stderr, "airlock: %s: cannot find airlock-git\n", name);
                return 2;
        }
        char **av = xcalloc((size_t)argc + 2, sizeof(char *));
        av[0] = path;
        for (int i = 0; i < argc; i++)
                av[i + 1] = argv[i];
        execv(path, av);
        fprintf(stderr, "airlock: %s: running %s: %s\n", name, path, strerror(errno));
        free(av);
        return 2;
}

int githelper_capture(const char *prog, char *const *args, size_t cap, bool stdin_null,
                      char **ret_out, int *ret_status)
{
        _cleanup_free_ char *path = paths_beside_self(prog);
        if (!path)
                return -ENOENT;
        int pipefd[2];
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return -errno;
        size_t n = strv_length(args);
        _cleanup_free_ char **av = xcalloc(n + 2, sizeof(char *));
        av[0] = path;
        for (size_t i = 0; i < n; i++)
                av[i + 1] = args[i];
        /* Its environment and its stderr are ours. */
        struct child_spawn cs = {
            .path = path,
            .argv = av,
            .envp = environ,
            .fds = {stdin_null ? CHILD_FD_NULL : CHILD_FD_INHERIT, pipefd[1], CHILD_FD_INHERIT},
            .n_fds = 3};
        pid_t pid;
        int r = child_spawn(&cs, &pid, NULL);
        close(pipefd[1]);
        if (r < 0) {
                close(pipefd[0]);
                return r;
        }
        /* Read to the end, so the helper never blocks on a full pipe; what
         * is past `cap` is dropped. */
        size_t len = 0;
        char *out = xcalloc(1, 1);
        char buf[65536];
        ssize_t k;
        while ((k = read(pipefd[0], buf, sizeof(buf))) > 0 || (k < 0 && errno == EINTR)) {
                if (k < 0 || len + (size_t)k > cap)
                        continue;
                out = xrealloc(out, len + (size_t)k + 1, 1);
                memcpy(out + len, buf, (size_t)k);
                len += (size_t)k;
                out[len] = '\0';
        }
        close(pipefd[0]);
        int st = child_wait(pid);
        *ret_out = out;
        *ret_status = st < 0 ? 255 : st; /* a wait that failed is a failure */
        return 0;
}

int githelper_clone(const char *repo, const char *rev, const char *secrets_file, const char *audit,
                    struct githelper_clone *ret, char *msg, size_t msglen)
{
        char *args[12];
        size_t n = 0;
        args[n++] = "git-clone";
        args[n++] = "--repo";
        args[n++] = (char *)repo;
        if (rev) {
                args[n++] = "--rev";
                args[n++] = (char *)rev;
        }
        if (secrets_file) {
                args[n++] = "--secrets";
                args[n++] = (char *)secrets_file;
        }
        if (audit) {
                args[n++] = "--audit";
                args[n++] = (char *)audit;
        }
        args[n] = NULL;
        _cleanup_free_ char *out = NULL;
        int st;
        int r = githelper_capture("airlock-git", args, 64 * 1024, false, &out, &st);
        if (r < 0) {
                snprintf(msg, msglen, "run: --repo: running airlock-git: %s", strerror(-r));
                return r;
        }
        json_t *o = out ? json_loads(out, 0, NULL) : NULL;
        const char *error = json_string_value(json_object_get(o, "error"));
        const char *id = json_string_value(json_object_get(o, "id"));
        const char *ws = json_string_value(json_object_get(o, "workspace"));
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !id || !ws || strlen(id) != 16) {
                snprintf(msg, msglen, "%s", error ? error : "run: --repo: the clone failed");
                json_decref(o);
                return -EIO;
        }
        memcpy(ret->id, id, 17);
        ret->workspace = xstrdup(ws);
        json_decref(o);
        return 0;
}

void githelper_report(const char *id, bool quiet)
{
        if (quiet)
                return;
        char *args[] = {"git-report", (char *)id, NULL};
        _cleanup_free_ char *out = NULL;
        int st;
        (void)githelper_capture("airlock-git", args, 64 * 1024, false, &out, &st);
}

void githelper_clone_done(struct githelper_clone *c)
{
        free(c->workspace);
        memset(c, 0, sizeof(*c));
}
