/* SPDX-License-Identifier: Apache-2.0 */
/* The microvm tier (microvm.h): QEMU with its own guest kernel, run inside
 * Airlock's sandbox in place of the command. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "microvm.h"
#include "seccomp-bpf.h"
#include "probe.h"
#include "util.h"
#include "../../vm/vmnet.h"

/* The guest's pid 1 (src/vm/init.c), linked in by vm-init-blob.S. */
extern const unsigned char tier_vm_init_blob[];
extern const unsigned char tier_vm_init_blob_end[];

#define VM_MODULES_MAX    32
#define VM_MODULE_MAX     (16u << 20)
#define VM_SPEC_MAX       (1u << 20)
#define VM_SPEC_STRS_MAX  4095 /* arguments, and variables: the guest's init keeps this many */
#define VM_MEM_DEFAULT_MB 512
#define VM_MEM_MIN_MB     128
/* QEMU's own memory beside the guest's RAM, within the cgroup's limit;
 * emulated, its translation cache (bounded by VM_TCG_TB_MB) adds to it. */
#define VM_OVERHEAD_MB  96
#define VM_TCG_EXTRA_MB 96
#define VM_TCG_TB_MB    32
#define VM_CPUS_MAX     16
#define VM_CONSOLE_TAIL 2048
#define VM_CMDLINE      "console=ttyS0 quiet panic=-1 pci=off rdinit=/init"

static enum tier_vm_accel chosen_accel;

int tier_refuse(char *why, size_t n, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
        return -EOPNOTSUPP;
}

int tier_microvm_kvm(char *why, size_t n)
{
        int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
        if (fd < 0) {
                int e = errno;
                if (e == ENOENT)
                        return tier_refuse(
                            why, n,
                            "no usable /dev/kvm: this host has none (enable hardware "
                            "virtualization, or nested virtualization in a VM, and "
                            "load kvm_intel or kvm_amd)");
                return tier_refuse(why, n,
                                   "no usable /dev/kvm: it cannot be opened (%s); give the user "
                                   "access to it (usermod -aG kvm USER)",
                                   strerror(e));
        }
        close(fd);
        /* A paravirtual KVM (kvm_pvm, on hosts that are themselves guests
         * without hardware virtualization) creates VMs, but runs only
         * kernels built as its guests: a stock kernel hangs at boot. */
        struct stat st;
        if (stat("/sys/module/kvm_pvm", &st) == 0)
                return tier_refuse(why, n,
                                   "no usable /dev/kvm: it is the paravirtual kvm_pvm, which boots "
                                   "only kernels built for it, not Debian's stock guest kernel (a "
                                   "host with hardware virtualization has a usable one)");
        /* A root caller's sandbox runs as nobody on the host (spawn.h):
         * QEMU there opens /dev/kvm only if everyone may. */
        struct stat kst;
        if (geteuid() == 0 && stat("/dev/kvm", &kst) == 0 && (kst.st_mode & 0006) != 0006)
                return tier_refuse(
                    why, n,
                    "no usable /dev/kvm: a root caller's sandbox runs as nobody, and "
                    "/dev/kvm is mode %03o; make it 0666 (systemd's own rule does: "
                    "chmod 0666 /dev/kvm)",
                    (unsigned)(kst.st_mode & 0777));
        return 0;
}

void tier_microvm_probe(struct probe_check *c, size_t *n)
{
        struct probe_check *k = &c[(*n)++];
        *k = (struct probe_check){.name = "kvm-guest"};
        char why[PROBE_TEXT_MAX];
        const char *a_env = getenv(TIER_MICROVM_ACCEL_ENV);
        bool tcg = a_env && STREQ(a_env, "tcg");
        if (tier_microvm_kvm(why, sizeof(why)) == 0) {
                k->ok = true;
                snprintf(k->detail, sizeof(k->detail), "KVM can run the stock guest kernel");
        } else if (tcg) {
                /* Consented to: the tier runs, emulated. */
                k->ok = true;
                snprintf(k->detail, sizeof(k->detail), "%.300s; QEMU emulates instead (%s=tcg)",
                         why, TIER_MICROVM_ACCEL_ENV);
        } else {
                snprintf(k->detail, sizeof(k->detail), "%s", why);
                snprintf(k->fix, sizeof(k->fix),
                         "as said, or %s=tcg for QEMU's software emulation (slower, the same "
                         "isolation)",
                         TIER_MICROVM_ACCEL_ENV);
        }

        struct probe_check *q = &c[(*n)++];
        *q = (struct probe_check){.name = "qemu"};
        q->ok = access(TIER_QEMU_PATH, X_OK) == 0;
        snprintf(q->detail, sizeof(q->detail), "%s %s", TIER_QEMU_PATH,
                 q->ok ? "is installed" : "is missing");
        if (!q->ok)
                snprintf(q->fix, sizeof(q->fix), "apt install qemu-system-x86");

        struct probe_check *g = &c[(*n)++];
        *g = (struct probe_check){.name = "guest-kernel"};
        _cleanup_free_ char *pkg = NULL;
        g->ok = access(AIRLOCK_VM_DIR "/vmlinuz", R_OK) == 0 &&
                access(AIRLOCK_VM_DIR "/modules/order", R_OK) == 0;
        if (g->ok && read_file_at(AT_FDCWD, AIRLOCK_VM_DIR "/package", 256, &pkg, NULL) >= 0)
                pkg[strcspn(pkg, "\n")] = '\0';
        snprintf(g->detail, sizeof(g->detail), "%s in %s",
                 g->ok ? (pkg ? pkg : "a kernel") : "no kernel", AIRLOCK_VM_DIR);
        if (!g->ok)
                snprintf(g->fix, sizeof(g->fix),
                         "make deps (as root), or src/vm/guest-kernel.sh %s", AIRLOCK_VM_DIR);

        struct probe_check *a = &c[(*n)++];
        *a = (struct probe_check){.name = "accel"};
        enum tier_vm_accel accel;
        a->ok = tier_microvm_host(&accel, why, sizeof(why)) == 0;
        snprintf(a->detail, sizeof(a->detail), "%s",
                 !a->ok                       ? "none: no usable KVM and no consent to emulation"
                 : accel == TIER_VM_ACCEL_KVM ? "KVM"
                                              : "QEMU's software emulation (" TIER_MICROVM_ACCEL_ENV
                                                "=tcg)");
        if (!a->ok)
                snprintf(a->fix, sizeof(a->fix), "%s", why);
}

int tier_microvm_host(enum tier_vm_accel *ret_accel, char *why, size_t n)
{
        *ret_accel = TIER_VM_ACCEL_NONE;
        if (access(TIER_QEMU_PATH, X_OK) < 0)
                return tier_refuse(why, n,
                                   "the microvm tier needs QEMU, and %s is missing (install "
                                   "qemu-system-x86)",
                                   TIER_QEMU_PATH);
        if (access(AIRLOCK_VM_DIR "/vmlinuz", R_OK) < 0 ||
            access(AIRLOCK_VM_DIR "/modules/order", R_OK) < 0)
                return tier_refuse(why, n,
                                   "the microvm tier needs its guest kernel in %s, which is "
                                   "missing (run 'make deps' as root)",
                                   AIRLOCK_VM_DIR);
        char kvm_why[256];
        if (tier_microvm_kvm(kvm_why, sizeof(kvm_why)) == 0) {
                *ret_accel = TIER_VM_ACCEL_KVM;
                return 0;
        }
        const char *a = getenv(TIER_MICROVM_ACCEL_ENV);
        if (a && STREQ(a, "tcg")) {
                *ret_accel = TIER_VM_ACCEL_TCG;
                return 0;
        }
        return tier_refuse(why, n,
                           "%s; or allow QEMU's software emulation (slower, the same isolation) "
                           "with %s=tcg",
                           kvm_why, TIER_MICROVM_ACCEL_ENV);
}

int tier_microvm_prepare(const struct policy *p, struct al_error *err)
{
        char why[512];
        enum tier_vm_accel accel;

        if (tier_microvm_host(&accel, why, sizeof(why)) < 0)
                return al_error_set_message(err, EOPNOTSUPP, "tier microvm: %s", why);
        if (p->image)
                return al_error_set_message(err, EOPNOTSUPP,
                                            "tier microvm: an image root is not supported yet "
                                            "(the guest's root is the namespace tier's); drop "
                                            "--image or use --tier container");
        uint64_t overhead = VM_OVERHEAD_MB + (accel == TIER_VM_ACCEL_TCG ? VM_TCG_EXTRA_MB : 0);
        if (p->limits.memory && p->limits.memory / (1024 * 1024) < VM_MEM_MIN_MB + overhead)
                return al_error_set_message(err, EINVAL,
                                            "tier microvm: limits.memory must leave %d MiB for "
                                            "the guest and %" PRIu64
                                            " MiB for QEMU; raise --memory",
                                            VM_MEM_MIN_MB, overhead);
        chosen_accel = accel;
        return 0;
}

bool tier_microvm_wants_kvm(void)
{
        return chosen_accel == TIER_VM_ACCEL_KVM;
}

/* cpio "newc", the initramfs format. */
static int cpio_entry(int fd, const char *name, mode_t mode, const void *data, size_t len)
{
        static unsigned ino = 1;
        size_t nlen = strlen(name) + 1;
        char hdr[128];
        int h = snprintf(hdr, sizeof(hdr),
                         "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X", ino++,
                         (unsigned)mode, 0u, 0u, 1u, 0u, len, 0u, 0u, 0u, 0u, nlen, 0u);
        static const char zero[4];
        int r;
        if ((r = write_full(fd, hdr, (size_t)h)) < 0 || (r = write_full(fd, name, nlen)) < 0 ||
            (r = write_full(fd, zero, (4 - ((size_t)h + nlen) % 4) % 4)) < 0)
                return r;
        if (len && (r = write_full(fd, data, len)) < 0)
                return r;
        return write_full(fd, zero, (4 - len % 4) % 4);
}

static void spec_add(char **buf, size_t *len, const char *key, const char *val)
{
        size_t k = strlen(key), v = strlen(val);
        *buf = xrealloc(*buf, *len + k + v + 2, 1);
        memcpy(*buf + *len, key, k);
        (*buf)[*len + k] = '=';
        memcpy(*buf + *len + k + 1, val, v + 1);
        *len += k + v + 2;
}

static int write_initrd(int fd, const struct tier_vm_run *run, const uint16_t *ports,
                        size_t n_ports, struct al_error *err)
{
        static const char *const dirs[] = {"dev", "proc", "sys", "newroot", "modules"};
        int r;

        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
                if ((r = cpio_entry(fd, dirs[i], S_IFDIR | 0755, NULL, 0)) < 0)
                        return al_error_set(err, r, "writing the initramfs");
        r = cpio_entry(fd, "init", S_IFREG | 0755, tier_vm_init_blob,
                       (size_t)(tier_vm_init_blob_end - tier_vm_init_blob));
        if (r < 0)
                return al_error_set(err, r, "writing the initramfs");

        _cleanup_free_ char *order = NULL;
        size_t olen = 0;
        r = read_file_at(AT_FDCWD, AIRLOCK_VM_DIR "/modules/order", 4096, &order, &olen);
        if (r < 0)
                return al_error_set(err, r, "reading %s/modules/order", AIRLOCK_VM_DIR);
        r = cpio_entry(fd, "modules/order", S_IFREG | 0644, order, olen);
        if (r < 0)
                return al_error_set(err, r, "writing the initramfs");
        size_t count = 0;
        for (char *line = order, *next; *line; line = next) {
                next = line + strcspn(line, "\n");
                if (*next)
                        *next++ = '\0';
                if (!*line)
                        continue;
                if (++count > VM_MODULES_MAX || strchr(line, '/') || line[0] == '.')
                        return al_error_set(err, EINVAL, "%s/modules/order: bad entry %s",
                                            AIRLOCK_VM_DIR, line);
                _cleanup_free_ char *path = xasprintf("%s/modules/%s", AIRLOCK_VM_DIR, line);
                _cleanup_free_ char *data = NULL;
                size_t dlen = 0;
                r = read_file_at(AT_FDCWD, path, VM_MODULE_MAX, &data, &dlen);
                if (r < 0)
                        return al_error_set(err, r, "reading %s", path);
                _cleanup_free_ char *name = xasprintf("modules/%s", line);
                if ((r = cpio_entry(fd, name, S_IFREG | 0644, data, dlen)) < 0)
                        return al_error_set(err, r, "writing the initramfs");
        }

        /* The namespace tier's seccomp filter, which the guest's init puts
         * on the command: the guest kernel's surfaces (io_uring, keyrings,
         * user namespaces, other ABIs, TIOCSTI...) closed as the host's are. */
        r = cpio_entry(fd, "seccomp.bpf", S_IFREG | 0644, seccomp_bpf, sizeof(seccomp_bpf));
        if (r < 0)
                return al_error_set(err, r, "writing the initramfs");

        /* The run: its command, environment, directory and user. */
        _cleanup_free_ char *spec = NULL;
        size_t slen = 0, na = 0, ne = 0;
        char num[32];
        for (char *const *a = run->argv; *a; a++)
                na++;
        for (char *const *e = run->envp; e && *e; e++)
                ne++;
        if (na > VM_SPEC_STRS_MAX || ne > VM_SPEC_STRS_MAX)
                return al_error_set_message(err, E2BIG,
                                            "tier microvm: the command has %zu arguments and %zu "
                                            "environment variables; the guest takes at most %d "
                                            "of each",
                                            na, ne, VM_SPEC_STRS_MAX);
        for (char *const *a = run->argv; *a; a++)
                spec_add(&spec, &slen, "arg", *a);
        const char *home = NULL;
        for (char *const *e = run->envp; e && *e; e++) {
                spec_add(&spec, &slen, "env", *e);
                if (strncmp(*e, "HOME=", 5) == 0)
                        home = *e + 5;
        }
        if (run->cwd)
                spec_add(&spec, &slen, "cwd", run->cwd);
        if (home)
                spec_add(&spec, &slen, "home", home);
        snprintf(num, sizeof(num), "%u", (unsigned)run->uid);
        spec_add(&spec, &slen, "uid", num);
        snprintf(num, sizeof(num), "%u", (unsigned)run->gid);
        spec_add(&spec, &slen, "gid", num);
        spec_add(&spec, &slen, "ws", run->policy->workspace ? "1" : "0");
        /* The per-process limits the guest puts on the command (not on
         * QEMU: confine.c). */
        if (run->policy->limits.file_size) {
                snprintf(num, sizeof(num), "%" PRIu64, run->policy->limits.file_size);
                spec_add(&spec, &slen, "fsize", num);
        }
        if (run->policy->limits.open_files) {
                snprintf(num, sizeof(num), "%" PRIu64, run->policy->limits.open_files);
                spec_add(&spec, &slen, "nofile", num);
        }
        for (size_t i = 0; i < n_ports; i++) {
                snprintf(num, sizeof(num), "%u", (unsigned)ports[i]);
                spec_add(&spec, &slen, "port", num);
        }
        if (slen > VM_SPEC_MAX)
                return al_error_set(err, E2BIG, "the command and its environment exceed %u bytes",
                                    VM_SPEC_MAX);
        if ((r = cpio_entry(fd, "spec", S_IFREG | 0600, spec, slen)) < 0 ||
            (r = cpio_entry(fd, "TRAILER!!!", 0, NULL, 0)) < 0)
                return al_error_set(err, r, "writing the initramfs");
        return 0;
}

static volatile sig_atomic_t qemu_pid;
static volatile sig_atomic_t got_signal;

static void forward(int sig)
{
        got_signal = sig;
        if (qemu_pid > 0)
                kill((pid_t)qemu_pid, SIGTERM);
}

static void add(char **v, size_t *k, char *s)
{
        v[(*k)++] = s;
}

static void console_tail(int fd)
{
        off_t end = lseek(fd, 0, SEEK_END);
        off_t from = end > VM_CONSOLE_TAIL ? end - VM_CONSOLE_TAIL : 0;
        char buf[VM_CONSOLE_TAIL];
        ssize_t n = pread(fd, buf, sizeof(buf), from);
        if (n > 0)
                (void)!write(2, buf, (size_t)n);
}

/* The host's TSC rate in kHz from /proc/cpuinfo's "cpu MHz", 0 if unknown. */
static unsigned long host_tsc_khz(void)
{
        _cleanup_free_ char *info = NULL;
        if (read_file_at(AT_FDCWD, "/proc/cpuinfo", 1 << 20, &info, NULL) < 0)
                return 0;
        char *line = strstr(info, "\ncpu MHz");
        double mhz;
        if (!line || !(line = strchr(line, ':')) || sscanf(line + 1, "%lf", &mhz) != 1 ||
            mhz < 100 || mhz > 100000)
                return 0;
        return (unsigned long)(mhz * 1000);
}

enum { IO_OUT = 1, IO_ERR = 2, IO_STATUS = 3 };
#define IO_HDR       3
#define IO_FRAME_MAX 16384

/* Frames from the guest's init on airlock.io: its command's output and
 * then its status, read as hostile (the guest's kernel may not be the one
 * it booted with). The status, or -1 at a bad frame or none. */
struct io_reader {
        unsigned char buf[IO_HDR + IO_FRAME_MAX];
        size_t len;
        int status;
};

static int io_read(struct io_reader *rd, int fd)
{
        ssize_t n = read(fd, rd->buf + rd->len, sizeof(rd->buf) - rd->len);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
                return 0;
        if (n <= 0)
                return -1;
        rd->len += (size_t)n;
        size_t off = 0;
        while (rd->len - off >= IO_HDR) {
                const unsigned char *h = rd->buf + off;
                size_t len = (size_t)h[1] << 8 | h[2];
                if (len > IO_FRAME_MAX || h[0] < IO_OUT || h[0] > IO_STATUS ||
                    (h[0] == IO_STATUS && len != 1))
                        return -1;
                if (rd->len - off < IO_HDR + len)
                        break;
                if (h[0] == IO_STATUS) {
                        rd->status = h[IO_HDR];
                        return 1;
                }
                /* A reader that went away loses the rest, as it would
                 * with the command's own descriptors. */
                (void)write_full(h[0], h + IO_HDR, len);
                off += IO_HDR + len;
        }
        memmove(rd->buf, rd->buf + off, rd->len - off);
        rd->len -= off;
        return 0;
}

/* Serves the guest until it reports its command's status, which ends QEMU
 * (all the output came before it on the same port), or until QEMU ends
 * (the link closes). Also serves the guest's network link (`link`, -1 for
 * none): each channel it opens is connected to the gate's listener on its
 * port. The status, or -1. */
static int relay(int io, int link, const uint16_t *ports, size_t n_ports, pid_t qemu)
{
        static struct io_reader rd;
        static struct vmnet net;
        bool net_on = false;
        if (link >= 0) {
                fcntl(link, F_SETFL, O_NONBLOCK);
                net_on = vmnet_init(&net, link, false, ports, n_ports) == 0;
        }
        rd.status = -1;
        struct pollfd pfd[1 + 1 + VMNET_PORTS_MAX + VMNET_CHANS];
        for (;;) {
                pfd[0] = (struct pollfd){.fd = io, .events = POLLIN};
                size_t n = 1 + (net_on ? vmnet_pollfds(&net, pfd + 1) : 0);
                if (poll(pfd, n, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                if (pfd[0].revents) {
                        int r = io_read(&rd, io);
                        if (r != 0) {
                                kill(qemu, SIGKILL);
                                break;
                        }
                }
                /* The link ends with the guest, or at the first frame
                 * that breaks the protocol: the channels close with it. */
                if (net_on && vmnet_step(&net, pfd + 1, n - 1) < 0)
                        net_on = false;
        }
        if (net_on)
                vmnet_close(&net);
        if (link >= 0)
                close(link);
        close(io);
        return rd.status;
}

/* The gate's listeners in the sandbox's network namespace (TCP, listening
 * on 127.0.0.1): the ports the guest gets on its own loopback. */
static int gate_ports(uint16_t *ports, size_t *n, struct al_error *err)
{
        _cleanup_free_ char *tcp = NULL;
        int r = read_file_at(AT_FDCWD, "/proc/net/tcp", 1 << 20, &tcp, NULL);
        if (r < 0)
                return al_error_set(err, r, "reading /proc/net/tcp for the gate's listeners");
        *n = 0;
        for (char *line = strchr(tcp, '\n'); line && *++line; line = strchr(line, '\n')) {
                unsigned addr, port, state;
                if (sscanf(line, " %*u: %8X:%4X %*8X:%*4X %2X", &addr, &port, &state) != 3)
                        continue;
                /* 0A: listening; 0100007F: 127.0.0.1 as the kernel prints it. */
                if (state != 0x0A || addr != 0x0100007F || port == 0)
                        continue;
                if (*n == VMNET_PORTS_MAX)
                        return al_error_set(err, E2BIG, "more than %d gate listeners",
                                            VMNET_PORTS_MAX);
                ports[(*n)++] = (uint16_t)port;
        }
        if (*n == 0)
                return al_error_set(err, ENOENT, "the network gate has no listener here");
        return 0;
}

int tier_microvm_exec(const struct tier_vm_run *run, int *ret_exec_errno, struct al_error *err)
{
        const struct policy *p = run->policy;
        int r;

        *ret_exec_errno = 0;
        if (run->ctty)
                return al_error_set_message(err, EOPNOTSUPP,
                                            "tier microvm: the guest gives the command no "
                                            "terminal (its stdin is /dev/null, its output "
                                            "pipes); drop -t");
        uint16_t ports[VMNET_PORTS_MAX];
        size_t n_ports = 0;
        int net[2] = {-1, -1};
        if (p->net_mode != POLICY_NET_NONE) {
                if ((r = gate_ports(ports, &n_ports, err)) < 0)
                        return r;
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, net) < 0)
                        return al_error_set(err, errno, "socketpair");
        }
        /* The initramfs (the command's spec and environment, the modules)
         * and QEMU's console: unnamed files in the sandbox's /tmp, handed
         * to QEMU as /proc/self/fd/N. Nothing is left behind however the
         * run ends (each exec of a daemon's sandbox is one, and a killed
         * exec ends without cleaning up), and no other process of the
         * sandbox can open them. */
        _cleanup_close_ int initrd_fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (initrd_fd < 0)
                return al_error_set(err, errno, "creating the initramfs in /tmp");
        if ((r = write_initrd(initrd_fd, run, ports, n_ports, err)) < 0)
                return r;
        _cleanup_close_ int console_fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (console_fd < 0)
                return al_error_set(err, errno, "creating the console file in /tmp");
        _cleanup_free_ char *initrd = xasprintf("/proc/self/fd/%d", initrd_fd);

        uint64_t mem_mb = VM_MEM_DEFAULT_MB;
        if (p->limits.memory)
                mem_mb = p->limits.memory / (1024 * 1024) - VM_OVERHEAD_MB -
                         (chosen_accel == TIER_VM_ACCEL_KVM ? 0 : VM_TCG_EXTRA_MB);
        uint64_t cpus = p->limits.cpus_milli ? (p->limits.cpus_milli + 999) / 1000 : 1;
        if (cpus > VM_CPUS_MAX)
                cpus = VM_CPUS_MAX;
        char mem[32], smp[32], tcg_accel[32];
        snprintf(tcg_accel, sizeof(tcg_accel), "tcg,tb-size=%d", VM_TCG_TB_MB);
        snprintf(mem, sizeof(mem), "%" PRIu64, mem_mb);
        snprintf(smp, sizeof(smp), "%" PRIu64, cpus);
        _cleanup_free_ char *kernel = xstrdup(AIRLOCK_VM_DIR "/vmlinuz");
        _cleanup_free_ char *serial = xasprintf("file:/proc/self/fd/%d", console_fd);
        bool kvm = chosen_accel == TIER_VM_ACCEL_KVM;
        /* Emulated, the guest's calibration of its TSC against the PIT
         * races the host's load and can fail, leaving it without a clock
         * (a hang at boot): it is told the host's rate instead. */
        char cmdline[256];
        unsigned long khz = kvm ? 0 : host_tsc_khz();
        if (khz)
                snprintf(cmdline, sizeof(cmdline), "%s tsc_early_khz=%lu", VM_CMDLINE, khz);
        else
                snprintf(cmdline, sizeof(cmdline), "%s", VM_CMDLINE);
        /* The command's output and then its status come in frames on one
         * port (in order), over a socket QEMU is handed. */
        int io[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, io) < 0)
                return al_error_set(err, errno, "socketpair");
        _cleanup_free_ char *io_dev = xasprintf("socket,id=io,fd=%d", io[1]);

        char *v[64];
        size_t k = 0;
        add(v, &k, TIER_QEMU_PATH);
        add(v, &k, "-M");
        add(v, &k, "microvm,x-option-roms=off,isa-serial=on");
        add(v, &k, "-accel");
        add(v, &k, kvm ? "kvm" : tcg_accel);
        add(v, &k, "-cpu");
        add(v, &k, kvm ? "host" : "max");
        add(v, &k, "-m");
        add(v, &k, mem);
        add(v, &k, "-smp");
        add(v, &k, smp);
        /* No default devices, no configuration files, no display, no
         * network device; a reboot of the guest ends QEMU. */
        add(v, &k, "-nodefaults");
        add(v, &k, "-no-user-config");
        add(v, &k, "-nographic");
        add(v, &k, "-no-reboot");
        /* QEMU's own filter on itself: no exec, no set-id, no old calls. */
        add(v, &k, "-sandbox");
        add(v, &k, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
        add(v, &k, "-kernel");
        add(v, &k, kernel);
        add(v, &k, "-initrd");
        add(v, &k, initrd);
        add(v, &k, "-append");
        add(v, &k, cmdline);
        add(v, &k, "-serial");
        add(v, &k, serial);
        add(v, &k, "-device");
        add(v, &k, "virtio-serial-device");
        add(v, &k, "-chardev");
        add(v, &k, io_dev);
        add(v, &k, "-device");
        add(v, &k, "virtserialport,chardev=io,name=airlock.io");
        /* The sandbox's own root, read-only: what the namespace tier shows. */
        add(v, &k, "-fsdev");
        add(v, &k, "local,id=root,path=/,security_model=none,readonly=on,multidevs=remap");
        add(v, &k, "-device");
        add(v, &k, "virtio-9p-device,fsdev=root,mount_tag=airlock.root");
        _cleanup_free_ char *net_dev = NULL;
        if (net[1] >= 0) {
                net_dev = xasprintf("socket,id=net,fd=%d", net[1]);
                add(v, &k, "-chardev");
                add(v, &k, net_dev);
                add(v, &k, "-device");
                add(v, &k, "virtserialport,chardev=net,name=airlock.net");
        }
        if (p->workspace) {
                add(v, &k, "-fsdev");
                add(v, &k,
                    p->workspace_mode == POLICY_WORKSPACE_RO
                        ? "local,id=ws,path=/"
                          "workspace,security_model=none,readonly=on,multidevs=remap"
                        : "local,id=ws,path=/workspace,security_model=none,multidevs=remap");
                add(v, &k, "-device");
                add(v, &k, "virtio-9p-device,fsdev=ws,mount_tag=airlock.ws");
        }
        v[k] = NULL;

        int sync[2];
        if (pipe2(sync, O_CLOEXEC) < 0)
                return al_error_set(err, errno, "pipe");
        struct sigaction sa = {.sa_handler = forward};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        pid_t pid = fork();
        if (pid < 0) {
                close(sync[0]);
                close(sync[1]);
                return al_error_set(err, errno, "fork");
        }
        if (pid == 0) {
                close(sync[0]);
                signal(SIGTERM, SIG_DFL);
                signal(SIGINT, SIG_DFL);
                signal(SIGHUP, SIG_DFL);
                int fl;
                if ((fl = fcntl(io[1], F_GETFD)) < 0 || fcntl(io[1], F_SETFD, fl & ~FD_CLOEXEC) < 0)
                        _exit(127);
                if (net[1] >= 0 && ((fl = fcntl(net[1], F_GETFD)) < 0 ||
                                    fcntl(net[1], F_SETFD, fl & ~FD_CLOEXEC) < 0))
                        _exit(127);
                if ((fl = fcntl(initrd_fd, F_GETFD)) < 0 ||
                    fcntl(initrd_fd, F_SETFD, fl & ~FD_CLOEXEC) < 0 ||
                    (fl = fcntl(console_fd, F_GETFD)) < 0 ||
                    fcntl(console_fd, F_SETFD, fl & ~FD_CLOEXEC) < 0)
                        _exit(127);
                execv(v[0], v);
                int e = errno;
                (void)!write(sync[1], &e, sizeof(e));
                _exit(127);
        }
        qemu_pid = pid;
        close(sync[1]);
        int e = 0;
        ssize_t n;
        do
                n = read(sync[0], &e, sizeof(e));
        while (n < 0 && errno == EINTR);
        close(sync[0]);
        if (n == (ssize_t)sizeof(e)) {
                waitpid(pid, NULL, 0);
                *ret_exec_errno = e;
                return al_error_set(err, e, "%s", TIER_QEMU_PATH);
        }
        /* QEMU runs: the spawn's error channel closes as an execve would. */
        if (run->errfd >= 0)
                close(run->errfd);

        close(io[1]);
        if (net[1] >= 0)
                close(net[1]);
        int code = relay(io[0], net[0], ports, n_ports, pid);
        int wst = 0;
        while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
                ;
        if (code < 0) {
                if (got_signal)
                        _exit(128 + got_signal);
                char msg[256];
                int m = snprintf(msg, sizeof(msg),
                                 "airlock: tier microvm: the guest ended without reporting "
                                 "the command's status (QEMU %s %d); its console:\n",
                                 WIFEXITED(wst) ? "exited" : "killed by signal",
                                 WIFEXITED(wst) ? WEXITSTATUS(wst) : WTERMSIG(wst));
                if (m > 0)
                        (void)!write(2, msg, (size_t)m);
                console_tail(console_fd);
                _exit(125);
        }
        _exit(code);
}
