/* SPDX-License-Identifier: Apache-2.0 */
/* pid 1 wipes the host's command line and environment it inherited from
 * the supervisor (init_wipe_host_identity(), init.c) before the command
 * starts. It knows their extent from where the kernel put them (argv[0] up
 * to AT_EXECFN), without reading /proc/self/cmdline at every start; and a
 * variable taken out of `environ` since the start (its string still on the
 * first stack, where /proc/PID/environ reads) is wiped too. The wipe runs in
 * a forked child: the test runner keeps its own. openat is interposed to
 * count the opens of /proc/self/cmdline. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util.h"
#include "spawn-internal.h"
#include "init-internal.h"

static int cmdline_opens;

int openat(int dirfd, const char *path, int flags, ...)
{
        mode_t mode = 0;
        if (flags & (O_CREAT | O_TMPFILE)) {
                va_list ap;
                va_start(ap, flags);
                mode = (mode_t)va_arg(ap, int);
                va_end(ap);
        }
        if (strcmp(path, "/proc/self/cmdline") == 0)
                cmdline_opens++;
        return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

/* All of /proc/self/FILE, read with raw system calls (not counted). */
static size_t read_proc(const char *file, char *buf, size_t cap)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/self/%s", file);
        int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return 0;
        size_t len = 0;
        ssize_t n;
        while (len < cap && (n = read(fd, buf + len, cap - len)) > 0)
                len += (size_t)n;
        close(fd);
        return len;
}

/* In a child: 0 when the wipe left nothing but "airlock-init" in the
 * command line and nothing at all in the environment, without opening
 * /proc/self/cmdline; else a code saying what was left. */
static int wipe_and_check(void)
{
        static char buf[1 << 20];
        extern char **environ;
        /* Taken out of environ: its string stays where the kernel put it. */
        if (!environ || !environ[0])
                return 10;
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)strcspn(environ[0], "="), environ[0]);
        unsetenv(name);
        /* Put there since: on the heap. */
        setenv("AIRLOCK_TEST_INIT_IDENTITY", "host-secret", 1);

        init_wipe_host_identity();
        if (cmdline_opens != 0)
                return 11;
        size_t len = read_proc("cmdline", buf, sizeof(buf));
        if (len < 13 || memcmp(buf, "airlock-init", 13) != 0)
                return 12;
        for (size_t i = 13; i < len; i++)
                if (buf[i])
                        return 13;
        len = read_proc("environ", buf, sizeof(buf));
        for (size_t i = 0; i < len; i++)
                if (buf[i])
                        return 14;
        for (char **e = environ; e && *e; e++)
                if (**e)
                        return 15;
        return 0;
}

Test(init_identity, wiped_from_where_the_kernel_put_it_without_proc)
{
        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0)
                _exit(wipe_and_check());
        int st = 0;
        cr_assert(waitpid(pid, &st, 0) == pid);
        cr_assert(WIFEXITED(st), "the child died: status %d", st);
        cr_assert_eq(WEXITSTATUS(st), 0,
                     "left behind: %d (11: /proc/self/cmdline read, 12-13: the command "
                     "line, 14: /proc/self/environ, 15: environ)",
                     WEXITSTATUS(st));
}
