/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent-sandbox.h"
#include "agent/agent.h"
#include "child.h"
#include "control-proto.h"
#include "paths.h"
#include "policy.h"
#include "util.h"

int agent_sandbox_start(struct sandbox_proc *sb, const struct agent_sandbox_opts *a,
                        struct policy *p, const char *audit_path, char *msg, size_t msglen)
{
        _cleanup_free_ char *tmpl =
            xasprintf("%s/airlock-agent-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
        if (!mkdtemp(tmpl)) {
                snprintf(msg, msglen, "agent: making a private directory: %s", strerror(errno));
                return -errno;
        }
        snprintf(sb->dir, sizeof(sb->dir), "%s", tmpl);
        snprintf(sb->policy_path, sizeof(sb->policy_path), "%s/policy.json", sb->dir);
        snprintf(sb->run_dir, sizeof(sb->run_dir), "%s/run", sb->dir);
        const char *policy_path = sb->policy_path, *run_dir = sb->run_dir;
        _cleanup_free_ char *json = policy_to_json(p);
        _cleanup_close_ int pfd =
            open(policy_path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (pfd < 0 || write_full(pfd, json, strlen(json)) < 0 || mkdir(run_dir, 0700) < 0) {
                snprintf(msg, msglen, "agent: writing %s: %s", policy_path, strerror(errno));
                return -EIO;
        }
        snprintf(sb->sock, sizeof(sb->sock), "%s/%s/control.sock", run_dir, sb->id);
        _cleanup_free_ char *self = paths_beside_self("airlock");
        int pp[2];
        if (!self || pipe2(pp, O_CLOEXEC) < 0) {
                snprintf(msg, msglen, "agent: cannot find airlock beside this program");
                return -ENOENT;
        }
        char *argv[24] = {
            self,        "supervise",     "--id",       sb->id, "--policy", (char *)policy_path,
            "--run-dir", (char *)run_dir, "--ready-fd", "3",    "--audit",  (char *)audit_path};
        size_t n = 12;
        if (a->secrets) {
                argv[n++] = "--secrets";
                argv[n++] = (char *)a->secrets;
        }
        if (a->account) {
                argv[n++] = "--account";
                argv[n++] = (char *)a->account;
        }
        if (a->state_root) {
                argv[n++] = "--keep-root";
                argv[n++] = (char *)a->state_root;
        }
        if (a->audit_rotate) {
                argv[n++] = "--audit-rotate";
                argv[n++] = (char *)a->audit_rotate;
        }
        struct child_spawn cs = {.path = self,
                                 .argv = argv,
                                 .envp = environ,
                                 .fds = {CHILD_FD_NULL, CHILD_FD_NULL, CHILD_FD_INHERIT, pp[1]},
                                 .n_fds = 4};
        int r = child_spawn(&cs, &sb->pid, NULL);
        close(pp[1]);
        if (r < 0) {
                close(pp[0]);
                snprintf(msg, msglen, "agent: starting the supervisor: %s", strerror(-r));
                return r;
        }
        char line[1024];
        size_t len = 0;
        ssize_t k;
        while (len < sizeof(line) - 1 &&
               (k = read(pp[0], line + len, sizeof(line) - 1 - len)) != 0) {
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        break;
                len += (size_t)k;
                if (memchr(line, '\n', len))
                        break;
        }
        close(pp[0]);
        line[len] = '\0';
        line[strcspn(line, "\n")] = '\0';
        if (!STREQ(line, "ok")) {
                snprintf(msg, msglen, "agent: the sandbox could not be set up: %.900s",
                         line[0] ? line : "the supervisor exited before it was ready");
                return -EIO;
        }
        return 0;
}

static int ignore_line(void *ud, json_t *msg)
{
        return 0;
}

void agent_sandbox_stop(struct sandbox_proc *sb)
{
        if (sb->pid <= 0)
                return;
        json_t *req = json_pack("{s:s}", "op", CONTROL_OP_DESTROY);
        struct al_error err = {0};
        if (agent_ctl_call(sb->sock, req, 10000, ignore_line, NULL, &err) < 0)
                kill(sb->pid, SIGTERM);
        json_decref(req);
        child_wait(sb->pid);
        sb->pid = 0;
}

void agent_sandbox_remove_dir(struct sandbox_proc *sb)
{
        if (!sb->dir[0])
                return;
        _cleanup_free_ char *pol = xasprintf("%s/policy.json", sb->dir);
        _cleanup_free_ char *run = xasprintf("%s/run", sb->dir);
        unlink(pol);
        rmdir(run);
        rmdir(sb->dir);
}
