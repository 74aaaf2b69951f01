/* SPDX-License-Identifier: Apache-2.0 */
/* A job's exit status is never lost to the daemon's SIGCHLD reaper
 * (daemon/jobs.c). The reaper collects the jobs that ended, then reaps
 * every other child (the workers that remove workspaces) with
 * waitpid(-1). A job that ended between the two was reaped by the second
 * with its status dropped: the job then found no child (ECHILD), counted
 * as a failure, and an `airlock diff` that had succeeded was answered 409
 * (once in 24 diffs asked at once under ASan). Here waitpid() is wrapped
 * (-Wl,--wrap=waitpid): the job's own check does not see its end once,
 * as when it ends just after that check. */
#include <criterion/criterion.h>
#include <event2/event.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "daemon.h"
#include "jobs.h"

static pid_t hidden = -1; /* the pid whose end a WNOHANG check misses, once */

pid_t __real_waitpid(pid_t pid, int *status, int options);
pid_t __wrap_waitpid(pid_t pid, int *status, int options);
pid_t __wrap_waitpid(pid_t pid, int *status, int options)
{
        if (pid > 0 && pid == hidden && (options & WNOHANG)) {
                hidden = -1;
                return 0;
        }
        return __real_waitpid(pid, status, options);
}

struct outcome {
        bool done;
        int exit_code;
};

static void on_done(const struct job_result *res, void *userdata)
{
        struct outcome *o = userdata;
        o->done = true;
        o->exit_code = res->exit_code;
}

Test(jobs_reap, a_job_that_ends_during_the_reap_keeps_its_status)
{
        struct daemon d = {.home = (char *)"/tmp"};
        d.base = event_base_new();
        cr_assert_not_null(d.base);
        struct outcome o = {0};
        char *argv[] = {"/bin/sh", "-c", "exit 3", NULL};
        struct al_error err = {0};
        cr_assert_eq(job_start(&d, argv, 4096, on_done, &o, &err), 0, "%s", err.msg);

        /* Its end is there to be reaped, unseen by the job's own check. */
        siginfo_t si = {0};
        cr_assert_eq(waitid(P_ALL, 0, &si, WEXITED | WNOWAIT), 0);
        hidden = si.si_pid;
        jobs_reap(&d);
        cr_assert_eq(hidden, -1, "the job's own check was not made");

        for (int i = 0; i < 1000 && !o.done; i++)
                event_base_loop(d.base, EVLOOP_ONCE);
        cr_assert(o.done);
        cr_assert_eq(o.exit_code, 3, "the job's status was lost: it ended %d", o.exit_code);
        event_base_free(d.base);
}
