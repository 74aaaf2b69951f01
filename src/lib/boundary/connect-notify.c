/* SPDX-License-Identifier: Apache-2.0 */
/* Transparent mode, the sandbox's side (spawn step 2, netns.c): the gate's
 * name server socket on 127.0.0.1:53, and a seccomp filter that turns every
 * connect() into a notification for the supervisor
 * (supervisor/connect-notify.c). It is installed on pid 1 while it sets
 * up, so every process of the sandbox inherits it; the command's own filter
 * (seccomp.c) stacks on top and still decides the rest. Neither is what
 * keeps the sandbox in: its network namespace has only loopback, so a
 * sandbox whose kernel refuses the notification, or whose notification is
 * never answered, reaches nothing. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "spawn-internal.h"
#include "util.h"

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "transparent mode: add this architecture's AUDIT_ARCH"
#endif

/* The low 32 bits of argument i (both architectures are little-endian). */
#define ARG_LO(i) ((uint32_t)offsetof(struct seccomp_data, args[i]))

/* The notification listener, or -errno. Other ABIs are left to the main
 * filter, which kills them. */
static int install_connect_notify(void)
{
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
            /* TCP Fast Open connects with no connect(): sendto, sendmsg,
             * sendmmsg with MSG_FASTOPEN are refused (the flags are in a
             * register, so this reads no memory the caller can change). */
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_sendto, 3, 0),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_sendmmsg, 2, 0),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_sendmsg, 3, 0),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(3)),
            BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MSG_FASTOPEN, 3, 2),
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),
            BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MSG_FASTOPEN, 1, 0),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EOPNOTSUPP & SECCOMP_RET_DATA)),
        };
        struct sock_fprog prog = {.len = (unsigned short)ARRAY_SIZE(f), .filter = f};
        long fd =
            syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
        return fd < 0 ? -errno : (int)fd;
}

/* The gate's relay listener: TCP on 127.0.0.1, a port of the kernel's
 * choosing. The supervisor connects a caught socket here (from the host,
 * on the sandbox's own socket) when the connection goes through the relay. */
static int relay_listener(void)
{
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0)
                return -errno;
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 256) < 0) {
                int r = -errno;
                close(s);
                return r;
        }
        return s;
}

static int dns_socket(void)
{
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (s < 0)
                return -errno;
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons(53),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int r = -errno;
                close(s);
                return r;
        }
        return s;
}

void spawn_transparent_setup(struct child_ctx *ctx)
{
        struct al_error err = {0};
        int fds[3];
        fds[0] = dns_socket();
        if (fds[0] < 0) {
                al_error_set(&err, fds[0], "transparent mode: listening on 127.0.0.1:53/udp");
                spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        }
        fds[1] = relay_listener();
        if (fds[1] < 0) {
                al_error_set(&err, fds[1], "transparent mode: the relay's listener on 127.0.0.1");
                spawn_child_fail(ctx->sync, SPAWN_FAILED_SETUP, &err, 125);
        }
        /* A kernel without the notification (or a sandbox nested in one
         * that already has a listener) runs with the proxy listeners only:
         * its connect() to anything but loopback finds no route. */
        fds[2] = install_connect_notify();
        int r = spawn_send_fds(ctx->sync, SYNC_NOTIFY, fds, fds[2] < 0 ? 2 : 3);
        close(fds[0]);
        close(fds[1]);
        if (fds[2] >= 0)
                close(fds[2]);
        if (r < 0)
                _exit(125);
}
