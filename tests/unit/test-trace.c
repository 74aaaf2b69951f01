/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace.h"

TestSuite(trace, .timeout = 10);

/* Criterion runs each test in its own process, so each test decides
 * AIRLOCK_TRACE afresh. */

Test(trace, off_without_the_variable)
{
        unsetenv("AIRLOCK_TRACE");
        cr_assert_not(al_trace_on());
        al_trace_mark("nothing"); /* must not crash or write */
}

Test(trace, marks_go_to_the_named_file_parent_and_child)
{
        char path[] = "/tmp/airlock-trace-test-XXXXXX";
        int fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        close(fd);
        setenv("AIRLOCK_TRACE", path, 1);
        cr_assert(al_trace_on());
        al_trace_mark("first");
        pid_t pid = fork();
        if (pid == 0) {
                al_trace_mark("child.step");
                _exit(0);
        }
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        al_trace_mark("second");

        char buf[1024] = {0};
        fd = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        unlink(path);
        cr_assert_gt(n, 0);
        cr_assert(strstr(buf, " step=first +"), "%s", buf);
        cr_assert(strstr(buf, " step=child.step +"), "%s", buf);
        cr_assert(strstr(buf, " step=second +"), "%s", buf);
        cr_assert(strstr(buf, "airlock-trace pid="), "%s", buf);
        /* Three lines, each ending in "us". */
        int lines = 0;
        for (char *p = buf; (p = strstr(p, "us\n")); p += 3)
                lines++;
        cr_assert_eq(lines, 3, "%s", buf);
}

static int count_inheritable(void)
{
        int found = 0;
        for (int fd = 3; fd < 256; fd++) {
                int fl = fcntl(fd, F_GETFD);
                if (fl >= 0 && !(fl & FD_CLOEXEC))
                        found++;
        }
        return found;
}

static int count_open(void)
{
        int found = 0;
        for (int fd = 3; fd < 256; fd++)
                if (fcntl(fd, F_GETFD) >= 0)
                        found++;
        return found;
}

Test(trace, the_descriptor_is_close_on_exec)
{
        int inheritable = count_inheritable(), open_before = count_open();
        setenv("AIRLOCK_TRACE", "1", 1);
        cr_assert(al_trace_on());
        cr_assert_eq(count_open(), open_before + 1);
        cr_assert_eq(count_inheritable(), inheritable);
}
