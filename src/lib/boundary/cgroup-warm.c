/* SPDX-License-Identifier: Apache-2.0 */
/* Starting a cgroup v1 move's RCU grace period early (cgroup.h,
 * cgroup_warm()). Moving a process between cgroups takes the kernel's
 * threadgroup lock for writing, which waits for an RCU grace period unless
 * another move took it within the last one (or the hierarchy is mounted
 * with favordynmods). A helper process moves itself into the cgroup it is
 * already in: nothing changes, but the grace period starts then, while the
 * supervisor plans the mounts and the sandbox builds its root, instead of
 * when the sandbox is moved into its own cgroup. */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "util.h"
#include "vmchild.h"

static pid_t warm_pid = -1;
/* The helper shares our memory (vmchild.h): its stack, and the descriptor
 * it writes its pid to, set before it starts. */
static _Alignas(16) char warm_stack[16384];
static int warm_fd = -1;

static int warm_main(void *arg)
{
        (void)arg;
        char tmp[24], me[24];
        long pid = vmchild_syscall(SYS_getpid, 0, 0, 0);
        size_t n = 0;
        do {
                tmp[n++] = (char)('0' + pid % 10);
                pid /= 10;
        } while (pid > 0 && n < sizeof(tmp));
        for (size_t i = 0; i < n; i++)
                me[i] = tmp[n - 1 - i];
        (void)vmchild_syscall(SYS_write, warm_fd, (long)me, (long)n);
        return 0;
}

int cgroup_warm_path(const char *self_cgroup, const char *root, char *buf, size_t size)
{
        static const char *const ctrls[] = {"memory", "pids"};
        for (size_t c = 0; c < ARRAY_SIZE(ctrls); c++) {
                size_t clen = strlen(ctrls[c]);
                for (const char *line = self_cgroup; line && *line;) {
                        const char *nl = strchr(line, '\n');
                        size_t len = nl ? (size_t)(nl - line) : strlen(line);
                        const char *c1 = memchr(line, ':', len);
                        const char *c2 =
                            c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
                        /* "N:ctrl[,ctrl...]:/path", the controller list
                         * naming the hierarchy's mount directory. */
                        if (c1 && c2 && c2[1] == '/') {
                                const char *list = c1 + 1;
                                size_t llen = (size_t)(c2 - list);
                                bool has = false;
                                for (const char *t = list; t < c2;) {
                                        const char *comma = memchr(t, ',', (size_t)(c2 - t));
                                        size_t tlen =
                                            comma ? (size_t)(comma - t) : (size_t)(c2 - t);
                                        has = has || (tlen == clen && !strncmp(t, ctrls[c], clen));
                                        t += tlen + 1;
                                }
                                size_t plen = len - (size_t)(c2 + 1 - line);
                                const char *path = c2 + 1;
                                if (has) {
                                        bool top = plen == 1;
                                        int n =
                                            snprintf(buf, size, "%s/%.*s%.*s/tasks", root,
                                                     (int)llen, list, top ? 0 : (int)plen, path);
                                        return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
                                }
                        }
                        line = nl ? nl + 1 : NULL;
                }
        }
        return -ENOENT;
}

void cgroup_warm(void)
{
        static bool started;
        struct statfs sfs;
        if (started || statfs("/sys/fs/cgroup", &sfs) < 0 || sfs.f_type == CGROUP2_SUPER_MAGIC)
                return; /* v2 places the sandbox with CLONE_INTO_CGROUP: no move */
        started = true;
        char self[4096], tasks[512];
        int fd = open("/proc/self/cgroup", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return;
        ssize_t n = read(fd, self, sizeof(self) - 1);
        close(fd);
        if (n <= 0)
                return;
        self[n] = '\0';
        if (cgroup_warm_path(self, "/sys/fs/cgroup", tasks, sizeof(tasks)) < 0)
                return;
        /* A process of its own, not a thread: the sandbox is cloned with
         * raw clone3, whose child's C library still counts the thread:
         * its setresuid() (passed to every thread the library knows of)
         * or a lock the thread held at the clone would wait for it
         * forever. The helper moves itself, not the caller. */
        fd = open(tasks, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return; /* not ours to write (an ordinary user): nothing gained */
        /* Sharing our memory, it starts without a copy of it (0.15 ms and
         * more of a fork, vmchild.h). */
        warm_fd = fd;
        pid_t pid = vmchild_start(warm_main, NULL, warm_stack, sizeof(warm_stack), 0);
        if (pid < 0)
                pid = fork();
        if (pid == 0) {
                char me[24];
                int len = snprintf(me, sizeof(me), "%d", (int)getpid());
                ssize_t w = write(fd, me, (size_t)len);
                (void)w;
                _exit(0);
        }
        close(fd);
        if (pid > 0)
                warm_pid = pid;
}

void cgroup_warm_done(void)
{
        if (warm_pid <= 0)
                return;
        while (waitpid(warm_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        warm_pid = -1;
}
