/* SPDX-License-Identifier: Apache-2.0 */
/* airlock-vm-init: pid 1 of the microvm tier's guest (docs/tiers.md).
 *
 * Built static and carried in the initramfs Airlock writes for each run
 * (src/lib/tier/microvm.c), with the guest kernel's modules and /spec, the
 * run's command. It loads the modules, mounts the sandbox's root (9p tag
 * airlock.root, read-only) and the workspace (airlock.ws) as the guest's
 * root, runs the command without privileges and sends its output, then
 * its exit status, in frames on the virtio port airlock.io; the host ends
 * QEMU when it has the status.
 *
 * Any failure is said on the console and ends the guest without a status:
 * the host side then refuses the run (exit 125) with the console's tail. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vmnet.h"

#define ROOT      "/newroot"
#define SPEC_MAX  (1 << 20)
#define MAX_STRS  4096
#define PORT_WAIT 5000 /* ms */

static int console = 2;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if ((size_t)n > sizeof(buf) - 2)
                n = sizeof(buf) - 2;
        buf[n++] = '\n';
        if (write(console, "airlock-vm-init: ", 17) < 0 || write(console, buf, (size_t)n) < 0)
                return;
}

static _Noreturn void end_guest(void)
{
        sync();
        reboot(RB_AUTOBOOT);
        for (;;)
                pause();
}

static _Noreturn void die(const char *what)
{
        say("%s: %s", what, strerror(errno));
        end_guest();
}

static void must_mount(const char *src, const char *dst, const char *type, unsigned long fl,
                       const char *data)
{
        if (mount(src, dst, type, fl, data) < 0) {
                char what[PATH_MAX + 64];
                snprintf(what, sizeof(what), "mounting %s on %s", type, dst);
                die(what);
        }
}

static void load_modules(void)
{
        /* /modules/order lists the files in dependency order. */
        int fd = open("/modules/order", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                die("opening /modules/order");
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n < 0)
                die("reading /modules/order");
        buf[n] = '\0';
        for (char *line = buf, *next; *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                else
                        next = line + strlen(line);
                if (!*line)
                        continue;
                char path[PATH_MAX + 16];
                snprintf(path, sizeof(path), "/modules/%s", line);
                int m = open(path, O_RDONLY | O_CLOEXEC);
                if (m < 0)
                        die(path);
                if (syscall(SYS_finit_module, m, "", 0) < 0 && errno != EEXIST)
                        die(path);
                close(m);
        }
}

/* The guest kernel's own surfaces, closed before the command runs: no
 * module loads after ours, no user namespaces, no ptrace, no unprivileged
 * BPF, no kernel addresses or log. A failure to set one ends the guest. */
static void harden(void)
{
        static const char *const knobs[][2] = {
            {"/proc/sys/user/max_user_namespaces", "0"},
            {"/proc/sys/kernel/yama/ptrace_scope", "3"},
            {"/proc/sys/kernel/unprivileged_bpf_disabled", "1"},
            {"/proc/sys/kernel/kptr_restrict", "2"},
            {"/proc/sys/kernel/dmesg_restrict", "1"},
            {"/proc/sys/kernel/perf_event_paranoid", "3"},
            {"/proc/sys/kernel/modules_disabled", "1"},
        };
        for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
                int fd = open(knobs[i][0], O_WRONLY | O_CLOEXEC);
                if (fd < 0 || write(fd, knobs[i][1], 1) != 1)
                        die(knobs[i][0]);
                close(fd);
        }
}

/* The virtio port named `name` (/sys/class/virtio-ports/vportXpY/name),
 * waiting for the console driver to probe it. */
static int open_port(const char *name, int flags)
{
        for (int waited = 0; waited < PORT_WAIT; waited += 10) {
                DIR *d = opendir("/sys/class/virtio-ports");
                struct dirent *de;
                while (d && (de = readdir(d))) {
                        if (de->d_name[0] == '.')
                                continue;
                        char path[PATH_MAX + 64], got[128] = "";
                        snprintf(path, sizeof(path), "/sys/class/virtio-ports/%s/name", de->d_name);
                        int fd = open(path, O_RDONLY | O_CLOEXEC);
                        if (fd < 0)
                                continue;
                        ssize_t n = read(fd, got, sizeof(got) - 1);
                        close(fd);
                        if (n <= 0)
                                continue;
                        got[n] = '\0';
                        got[strcspn(got, "\n")] = '\0';
                        if (strcmp(got, name) != 0)
                                continue;
                        snprintf(path, sizeof(path), "/dev/%s", de->d_name);
                        closedir(d);
                        int p = open(path, flags | O_CLOEXEC | O_NOCTTY);
                        if (p < 0)
                                die(path);
                        return p;
                }
                if (d)
                        closedir(d);
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        say("no virtio port %s", name);
        end_guest();
}

struct spec {
        char *argv[MAX_STRS];
        char *envp[MAX_STRS];
        const char *cwd, *home;
        uid_t uid;
        gid_t gid;
        bool ws;
        unsigned long fsize, nofile; /* the command's limits; 0 = none */
        uint16_t ports[VMNET_PORTS_MAX];
        size_t n_ports;
};

static unsigned long num(const char *s)
{
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (errno || end == s || *end) {
                say("bad number in /spec: %s", s);
                end_guest();
        }
        return v;
}

/* /spec: NUL-terminated "key=value" strings, written by the host side. */
static void read_spec(struct spec *s)
{
        static char buf[SPEC_MAX + 1];
        int fd = open("/spec", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                die("opening /spec");
        size_t len = 0;
        for (;;) {
                ssize_t n = read(fd, buf + len, SPEC_MAX - len);
                if (n < 0)
                        die("reading /spec");
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        close(fd);
        buf[len] = '\0';
        size_t na = 0, ne = 0;
        for (size_t i = 0, next; i < len; i = next) {
                char *kv = buf + i;
                next = i + strlen(kv) + 1;
                char *eq = strchr(kv, '=');
                if (!eq)
                        continue;
                *eq = '\0';
                char *v = eq + 1;
                if ((!strcmp(kv, "arg") && na == MAX_STRS - 1) ||
                    (!strcmp(kv, "env") && ne == MAX_STRS - 1)) {
                        /* Never a shorter command than the one asked for. */
                        say("/spec has more than %d arguments or variables", MAX_STRS - 1);
                        end_guest();
                }
                if (!strcmp(kv, "arg"))
                        s->argv[na++] = v;
                else if (!strcmp(kv, "env"))
                        s->envp[ne++] = v;
                else if (!strcmp(kv, "cwd"))
                        s->cwd = v;
                else if (!strcmp(kv, "home"))
                        s->home = v;
                else if (!strcmp(kv, "uid"))
                        s->uid = (uid_t)num(v);
                else if (!strcmp(kv, "gid"))
                        s->gid = (gid_t)num(v);
                else if (!strcmp(kv, "ws"))
                        s->ws = !strcmp(v, "1");
                else if (!strcmp(kv, "fsize"))
                        s->fsize = num(v);
                else if (!strcmp(kv, "nofile"))
                        s->nofile = num(v);
                else if (!strcmp(kv, "port") && s->n_ports < VMNET_PORTS_MAX) {
                        unsigned long port = num(v);
                        if (port == 0 || port > 65535) {
                                say("bad port in /spec: %s", v);
                                end_guest();
                        }
                        s->ports[s->n_ports++] = (uint16_t)port;
                }
        }
        if (na == 0) {
                say("/spec names no command");
                end_guest();
        }
}

static void build_root(const struct spec *s)
{
        const char *p9 = "trans=virtio,version=9p2000.L,msize=262144";
        char opts[256];

        mkdir(ROOT, 0755);
        snprintf(opts, sizeof(opts), "%s,cache=loose", p9);
        must_mount("airlock.root", ROOT, "9p", MS_RDONLY | MS_NOSUID | MS_NODEV, opts);
        if (s->ws) {
                snprintf(opts, sizeof(opts), "%s,cache=mmap", p9);
                must_mount("airlock.ws", ROOT "/workspace", "9p", MS_NOSUID | MS_NODEV, opts);
        }
        /* The guest's own instances over the sandbox's: its proc, devices,
         * and fresh temporary directories. */
        must_mount("proc", ROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
        /* A /dev of the few nodes the namespace tier has, not the guest's
         * whole device tree (its memory, ports, consoles). */
        must_mount("dev", ROOT "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k");
        static const struct {
                const char *name;
                unsigned maj, min;
        } nodes[] = {{"null", 1, 3},   {"zero", 1, 5},    {"full", 1, 7},
                     {"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0}};
        for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
                char path[64];
                snprintf(path, sizeof(path), ROOT "/dev/%s", nodes[i].name);
                if (mknod(path, S_IFCHR | 0666, makedev(nodes[i].maj, nodes[i].min)) < 0 ||
                    chmod(path, 0666) < 0)
                        die(path);
        }
        static const char *const links[][2] = {
            {"ptmx", "pts/ptmx"},          {"fd", "/proc/self/fd"},
            {"stdin", "/proc/self/fd/0"},  {"stdout", "/proc/self/fd/1"},
            {"stderr", "/proc/self/fd/2"},
        };
        for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
                char path[64];
                snprintf(path, sizeof(path), ROOT "/dev/%s", links[i][0]);
                if (symlink(links[i][1], path) < 0)
                        die(path);
        }
        mkdir(ROOT "/dev/pts", 0755);
        mkdir(ROOT "/dev/shm", 01777);
        must_mount("devpts", ROOT "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                   "ptmxmode=0666,mode=0620");
        must_mount("shm", ROOT "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
        must_mount("tmp", ROOT "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
        if (s->home && s->home[0] == '/' && strcmp(s->home, "/") != 0) {
                char path[PATH_MAX], data[64];
                snprintf(path, sizeof(path), ROOT "%s", s->home);
                snprintf(data, sizeof(data), "mode=0700,uid=%u,gid=%u", (unsigned)s->uid,
                         (unsigned)s->gid);
                struct stat st;
                if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
                        must_mount("home", path, "tmpfs", MS_NOSUID | MS_NODEV, data);
        }
        if (chdir(ROOT) < 0)
                die("entering the new root");
        if (mount(ROOT, "/", NULL, MS_MOVE, NULL) < 0)
                die("moving the new root");
        if (chroot(".") < 0 || chdir("/") < 0)
                die("changing root");
}

/* The network gate's ports on the guest's loopback, carried to the
 * sandbox's (vmnet.h) by a process of pid 1's that the command, without
 * privileges, cannot touch. Listening before the command starts, so that
 * nothing of the command's can take the ports first. */
static void start_net(const struct spec *s)
{
        int sk = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct ifreq ifr;
        memset(&ifr, 0, sizeof(ifr));
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (sk < 0 || ioctl(sk, SIOCGIFFLAGS, &ifr) < 0)
                die("reading lo's flags");
        ifr.ifr_flags |= IFF_UP;
        if (ioctl(sk, SIOCSIFFLAGS, &ifr) < 0)
                die("bringing lo up");
        close(sk);
        int link = open_port("airlock.net", O_RDWR | O_NONBLOCK);
        static struct vmnet v;
        int r = vmnet_init(&v, link, true, s->ports, s->n_ports);
        if (r < 0) {
                errno = -r;
                die("listening on the gate's ports");
        }
        pid_t pid = fork();
        if (pid < 0)
                die("fork");
        if (pid > 0) {
                vmnet_close(&v);
                close(link);
                return;
        }
        static struct pollfd p[1 + VMNET_PORTS_MAX + VMNET_CHANS];
        for (;;) {
                size_t n = vmnet_pollfds(&v, p);
                if (poll(p, n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        _exit(1);
                }
                if (vmnet_step(&v, p, n) < 0)
                        _exit(0);
        }
}

enum { IO_OUT = 1, IO_ERR = 2, IO_STATUS = 3 };
#define IO_FRAME_MAX 16384

static int send_io(int io, int type, const void *data, size_t len)
{
        unsigned char f[3 + IO_FRAME_MAX];
        f[0] = (unsigned char)type;
        f[1] = (unsigned char)(len >> 8);
        f[2] = (unsigned char)len;
        memcpy(f + 3, data, len);
        size_t off = 0;
        while (off < 3 + len) {
                ssize_t n = write(io, f + off, 3 + len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                off += (size_t)n;
        }
        return 0;
}

/* One read of the command's output into a frame: 1 sent, 0 nothing now,
 * -1 at its end (the descriptor is closed). */
static int pump(int io, int *fd, int type)
{
        unsigned char buf[IO_FRAME_MAX];
        if (*fd < 0)
                return -1;
        ssize_t n = read(*fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (n <= 0) {
                close(*fd);
                *fd = -1;
                return -1;
        }
        if (send_io(io, type, buf, (size_t)n) < 0)
                die("sending the command's output");
        return 1;
}

/* /seccomp.bpf: the namespace tier's filter (struct sock_filter[]),
 * written by the host side, read before the root changes and put on the
 * command as the last step before execve. */
static struct sock_filter filter[8192];
static struct sock_fprog filter_prog;

static void read_filter(void)
{
        int fd = open("/seccomp.bpf", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                die("opening /seccomp.bpf");
        ssize_t n = read(fd, filter, sizeof(filter));
        close(fd);
        if (n <= 0 || n % (ssize_t)sizeof(filter[0]) != 0 || n == (ssize_t)sizeof(filter)) {
                say("/seccomp.bpf is not a filter");
                end_guest();
        }
        filter_prog.len = (unsigned short)(n / (ssize_t)sizeof(filter[0]));
        filter_prog.filter = filter;
}

static int install_filter(void)
{
        return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &filter_prog);
}

static _Noreturn void run_command(const struct spec *s, int out, int err)
{
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
                _exit(125);
        console = 2;
        setsid();
        if (s->cwd && chdir(s->cwd) < 0) {
                say("changing to %s: %s", s->cwd, strerror(errno));
                _exit(125);
        }
        /* The bounding set goes while pid 1's CAP_SETPCAP is still held:
         * nothing can be regained, not even from a set-id file. */
        for (int cap = 0; cap <= 63; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) {
                        say("dropping capability %d: %s", cap, strerror(errno));
                        _exit(125);
                }
        /* The policy's per-process limits, on the command as in the
         * namespace tier (soft and hard alike: it cannot raise them). */
        struct rlimit fsize = {s->fsize, s->fsize}, nofile = {s->nofile, s->nofile};
        if ((s->fsize && setrlimit(RLIMIT_FSIZE, &fsize) < 0) ||
            (s->nofile && setrlimit(RLIMIT_NOFILE, &nofile) < 0)) {
                say("setting the command's limits: %s", strerror(errno));
                _exit(125);
        }
        if (setgroups(0, NULL) < 0 || setresgid(s->gid, s->gid, s->gid) < 0 ||
            setresuid(s->uid, s->uid, s->uid) < 0) {
                say("dropping to uid %u: %s", (unsigned)s->uid, strerror(errno));
                _exit(125);
        }
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[2];
        memset(data, 0, sizeof(data));
        if (syscall(SYS_capset, &hdr, data) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
                say("dropping privileges: %s", strerror(errno));
                _exit(125);
        }
        if (install_filter() < 0) {
                say("installing the seccomp filter: %s", strerror(errno));
                _exit(125);
        }
        extern char **environ;
        environ = (char **)s->envp;
        execvp(s->argv[0], s->argv);
        int e = errno;
        say("%s: %s", s->argv[0], e == ENOENT ? "command not found" : strerror(e));
        _exit(e == ENOENT ? 127 : 126);
}

int main(void)
{
        static struct spec s;

        mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, NULL);
        int c = open("/dev/console", O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (c >= 0)
                console = c;
        must_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
        must_mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
        read_spec(&s);
        read_filter();
        load_modules();
        harden();
        int io = open_port("airlock.io", O_WRONLY);
        /* Before the root changes: the ports are found in the guest's /sys. */
        if (s.n_ports)
                start_net(&s);
        build_root(&s);

        int po[2], pe[2];
        if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)
                die("pipe");
        pid_t pid = fork();
        if (pid < 0)
                die("fork");
        if (pid == 0)
                run_command(&s, po[1], pe[1]);
        close(po[1]);
        close(pe[1]);
        fcntl(po[0], F_SETFL, O_NONBLOCK);
        fcntl(pe[0], F_SETFL, O_NONBLOCK);
        /* pid 1 carries the command's output to the host in frames on one
         * port, in order, and reaps every orphan until the command itself
         * ends; then the rest of its output, then its status. */
        int fds[2] = {po[0], pe[0]};
        int code = -1;
        while (code < 0) {
                struct pollfd p[2] = {{.fd = fds[0], .events = POLLIN},
                                      {.fd = fds[1], .events = POLLIN}};
                if (poll(p, 2, 50) > 0)
                        for (int i = 0; i < 2; i++)
                                if (p[i].revents)
                                        pump(io, &fds[i], IO_OUT + i);
                int st;
                pid_t w;
                while ((w = waitpid(-1, &st, WNOHANG)) > 0)
                        if (w == pid)
                                code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        for (int i = 0; i < 2; i++)
                while (fds[i] >= 0 && pump(io, &fds[i], IO_OUT + i) > 0)
                        ;
        unsigned char st = (unsigned char)code;
        if (send_io(io, IO_STATUS, &st, 1) < 0)
                die("reporting the status");
        /* The host ends QEMU once it has the status, which comes after all
         * the output on the same port: the guest never outruns its output.
         * Should the host not, the guest ends itself. */
        sleep(30);
        end_guest();
}
