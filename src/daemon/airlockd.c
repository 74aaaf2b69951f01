/* SPDX-License-Identifier: Apache-2.0 */
/* airlockd's main(): the options, the setup (state directory, store, audit
 * log, listeners, the API server, re-attach, the pool, the housekeeping),
 * and the event loop until a signal. Nothing calls into this file: what the
 * modules share lives in modules with headers (docs/internals/daemon.md). */
#include <event2/http.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "latency.h"
#include "trace.h"
#include "health-sandbox.h"
#include "sandbox.h"
#include "policy/hardware.h"
#include "pool.h"
#include "gc.h"
#include "../cli/help.h"
#include "audit.h"
#include "daemon.h"
#include "httpguard.h"
#include "server.h"
#include "log.h"
#include "prune.h"
#include "jobs.h"
#include "secrets.h"
#include "store.h"
#include "paths.h"
#include "util.h"

struct daemon_options {
        const char *socket_path; /* NULL: the default for the uid */
        const char *listen;      /* "127.0.0.1:7070"; NULL: no TCP */
        const char *state_dir;
        const char *run_dir;
        const char *audit_path;
        const char *audit_rotate; /* SIZE[:KEEP] (audit_parse_rotate); NULL: the defaults */
        const char *airlock_bin;
        const char *secrets_path; /* GIT_TOKEN for clones and pushes; route secrets */
        const char *tools_path;   /* tool definitions for every sandbox */
        const char *hardware_path; /* the hardware section for every sandbox */
        char **git_hosts;         /* the hosts repositories may be cloned from */
        bool git_helper;          /* ask the git credential helper */
        uint64_t max_sandboxes; /* 0: no daemon-wide maximum */
        uint64_t ready_timeout_ms;
        uint64_t gc_interval_ms;
        uint64_t retain_ms; /* ended records and reviewed changes are kept this long */
        struct pool_spec pools[DAEMON_POOL_CLASSES];
        size_t n_pools;
};

static const char usage_text[] =
        "Usage: airlockd [OPTIONS]\n"
        "\n"
        "Serve Airlock's HTTP API (docs/api.md): sandboxes that outlive the request that made\n"
        "them, each owned by its own supervisor, behind bearer-token grants\n"
        "('airlock grant create').\n"
        "\n"
        "Examples:\n"
        "  airlockd\n"
        "  airlockd --listen 127.0.0.1:7070 --pool small=4\n"
        "  systemctl enable --now airlockd.socket\n"
        "\n"
        "Options:\n"
        "      --socket PATH        the API's unix socket (default: /run/airlock/airlockd.sock\n"
        "                           for root, $XDG_RUNTIME_DIR/airlock/airlockd.sock otherwise)\n"
        "      --listen HOST:PORT   also serve on TCP, e.g. 127.0.0.1:7070\n"
        "      --state-dir DIR      the database and daemon-made workspaces (default:\n"
        "                           /var/lib/airlock/daemon, or ~/.local/state/airlock/daemon)\n"
        "      --pool CLASS=N       keep N sandboxes of CLASS started ahead of need (repeatable)\n"
        "      --secrets FILE       host-side secrets (mode 0600): the routes' secrets, and\n"
        "                           GIT_TOKEN (GIT_USERNAME) for clones and pushes\n"
        "  -h, --help               show this help\n"
        "\n"
        "More options:\n"
        "      --run-dir DIR        the supervisors' control sockets (default:\n"
        "                           /run/airlock/sandboxes, or $XDG_RUNTIME_DIR/airlock/sandboxes)\n"
        "      --audit FILE         the audit log (default: as 'airlock run')\n"
        "      --audit-rotate SIZE[:KEEP]  rotate it at SIZE keeping KEEP older files, for the\n"
        "                           daemon and its supervisors (default 64M:8; never)\n"
        "      --airlock PATH       the airlock binary that supervises sandboxes (default: the\n"
        "                           one next to airlockd)\n"
        "      --max-sandboxes N    live sandboxes at most, pooled ones included (default: 1000;\n"
        "                           0: no maximum)\n"
        "      --ready-timeout SEC  how long a sandbox may take to start (default: 30)\n"
        "      --tools FILE         host tool definitions, {\"define\": {...}}, for every\n"
        "                           sandbox; a grant names the tools its sandboxes may be\n"
        "                           given (airlock grant create --tool NAME; docs/tools.md)\n"
        "      --hardware FILE      a device every sandbox drives through the hardware gate,\n"
        "                           {\"hardware\": {...}} (docs/hardware.md)\n"
        "      --gc-interval SEC    how often TTLs and idle timeouts are checked (default: 1)\n"
        "      --retain DURATION    keep records of ended sandboxes and reviewed changes this\n"
        "                           long, e.g. 7d, 12h, 30m (default: 7d)\n"
        "      --git-host HOST      repositories may be cloned from HOST, which gets the\n"
        "                           daemon's git credentials (repeatable; without it only\n"
        "                           local repositories can be named)\n"
        "      --no-git-helper      do not ask the git credential helper\n"
        "      --request-timeout SEC  a request's head and body must arrive within SEC of\n"
        "                           its first byte (default: 30)\n"
        "      --max-connections N  API connections open at once (default: 4096)\n"
        "      --max-peer-connections N  per uid on the unix socket, per address on TCP\n"
        "                           (default: 512)\n";

/* Connections the kernel queues before airlockd accepts them; the kernel
 * caps it at net.core.somaxconn. */
#define LISTEN_BACKLOG 512


/* A DNS name: letters, digits, '-' and '.', at most 253 characters. */
static bool git_host_valid(const char *h)
{
        size_t n = strlen(h);
        return n > 0 && n <= 253 && strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                              "0123456789-.") == n && h[0] != '-' && h[0] != '.';
}

/* NAME in the directory of path. */
static char *sibling_path(const char *path, const char *name)
{
        const char *slash = strrchr(path, '/');
        return slash ? xasprintf("%.*s/%s", (int)(slash - path), path, name) : xstrdup(name);
}

/* libevent's own warnings (a failed accept, a failed allocation) come in
 * floods when they come: one line a second at most. */
static void on_libevent_log(int severity, const char *msg)
{
        static struct log_limit limit;
        if (severity >= EVENT_LOG_WARN)
                daemon_log_limited(NULL, &limit, 1000, "libevent: %s", msg);
}

static int parse_pool(const char *arg, struct pool_spec *ret)
{
        const char *eq = strchr(arg, '=');
        if (!eq || (size_t)(eq - arg) >= sizeof(ret->class_name))
                return -EINVAL;
        char cls[sizeof(ret->class_name)];
        memcpy(cls, arg, (size_t)(eq - arg));
        cls[eq - arg] = '\0';
        if (!policy_class_find(cls))
                return -EINVAL;
        uint64_t n;
        if (safe_atou64(eq + 1, &n) < 0 || n > 1000)
                return -ERANGE;
        memcpy(ret->class_name, cls, sizeof(cls));
        ret->size = (unsigned)n;
        return 0;
}

static int parse_seconds_ms(const char *s, uint64_t *ret)
{
        uint64_t ms;
        if (parse_duration_ms(s, &ms) < 0 || ms == 0)
                return -EINVAL;
        *ret = ms;
        return 0;
}

/* The airlock binary: next to airlockd when installed, in the build tree's
 * src/cli/ when run from there. */
static char *find_airlock(void)
{
        char *c = paths_beside_self("airlock");
        if (!c)
                return NULL;
        if (access(c, X_OK) == 0)
                return c;
        free(c);
        c = paths_beside_self("../cli/airlock");
        if (!c)
                return NULL;
        if (access(c, X_OK) == 0) {
                char real[PATH_MAX];
                if (realpath(c, real)) {
                        free(c);
                        return xstrdup(real);
                }
                return c;
        }
        free(c);
        return NULL;
}

/* Started by airlockd.socket: the service manager made the socket and
 * passes it as fd 3 (LISTEN_PID, LISTEN_FDS=1; sd_listen_fds(3)). Returns
 * the fd, -1 when not activated, or -errno when what was passed is not one
 * listening unix stream socket. */
static bool socket_activated;

static int activated_fd(void)
{
        const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
        char self[32];
        snprintf(self, sizeof(self), "%ld", (long)getpid());
        if (!pid || !fds || strcmp(pid, self) != 0)
                return -1;
        unsetenv("LISTEN_PID");
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_FDNAMES");
        int dom = 0, acc = 0;
        socklen_t len = sizeof(int);
        if (strcmp(fds, "1") != 0 || getsockopt(3, SOL_SOCKET, SO_DOMAIN, &dom, &len) < 0 ||
            dom != AF_UNIX || getsockopt(3, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len) < 0 || !acc)
                return -EINVAL;
        int fl = fcntl(3, F_GETFL);
        if (fl < 0 || fcntl(3, F_SETFD, FD_CLOEXEC) < 0 || fcntl(3, F_SETFL, fl | O_NONBLOCK) < 0)
                return -errno;
        socket_activated = true;
        return 3;
}

static int listen_unix(struct daemon *d, const char *path, struct evconnlistener **ret,
                       struct al_error *err)
{
        int afd = activated_fd();
        if (afd == -EINVAL)
                return al_error_set(err, EINVAL, "LISTEN_FDS: expected one listening unix socket");
        if (afd < -1)
                return al_error_set(err, -afd, "the socket passed by the service manager");
        if (afd == 3) {
                *ret = evconnlistener_new(d->base, NULL, NULL,
                                          LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, afd);
                return *ret ? 0 : al_error_set(err, ENOMEM, "listening on fd 3");
        }
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof(sa.sun_path))
                return al_error_set(err, ENAMETOOLONG, "socket %s", path);
        memcpy(sa.sun_path, path, strlen(path) + 1);

        _cleanup_free_ char *dir = xstrdup(path);
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = '\0';
                int r = mkdir_p(dir, 0755, geteuid() == 0 ? 0755 : 0700);
                if (r < 0)
                        return al_error_set(err, r, "creating %s", dir);
        }

        _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return al_error_set(err, errno, "socket");
        struct stat st;
        if (lstat(path, &st) == 0) {
                if (!S_ISSOCK(st.st_mode))
                        return al_error_set(err, EEXIST, "%s exists and is not a socket", path);
                _cleanup_close_ int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0)
                        return al_error_set(err, EADDRINUSE, "another airlockd listens on %s", path);
                unlink(path);
        }
        mode_t old = umask(0117);
        int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (r < 0)
                return al_error_set(err, errno, "binding %s", path);
        if (chmod(path, 0660) < 0)
                return al_error_set(err, errno, "chmod %s", path);
        if (listen(fd, LISTEN_BACKLOG) < 0)
                return al_error_set(err, errno, "listening on %s", path);
        /* A backlog of 0 tells libevent the socket already listens; -1
         * would have it call listen(fd, 128) again and shrink the queue. */
        *ret = evconnlistener_new(d->base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
                                  0, fd);
        if (!*ret)
                return al_error_set(err, ENOMEM, "listening on %s", path);
        TAKE_FD(fd);
        return 0;
}

static int listen_tcp(struct daemon *d, const char *addr, struct evconnlistener **ret,
                      struct al_error *err)
{
        struct sockaddr_storage ss;
        int len = sizeof(ss);
        if (evutil_parse_sockaddr_port(addr, (struct sockaddr *)&ss, &len) < 0 ||
            (ss.ss_family == AF_INET && ((struct sockaddr_in *)&ss)->sin_port == 0) ||
            (ss.ss_family == AF_INET6 && ((struct sockaddr_in6 *)&ss)->sin6_port == 0))
                return al_error_set(err, 0, "--listen \"%s\": expected HOST:PORT, e.g. 127.0.0.1:7070",
                                    addr);
        _cleanup_close_ int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return al_error_set(err, errno, "socket");
        int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&ss, (socklen_t)len) < 0)
                return al_error_set(err, errno, "binding %s", addr);
        if (listen(fd, LISTEN_BACKLOG) < 0)
                return al_error_set(err, errno, "listening on %s", addr);
        /* A backlog of 0 tells libevent the socket already listens; -1
         * would have it call listen(fd, 128) again and shrink the queue. */
        *ret = evconnlistener_new(d->base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
                                  0, fd);
        if (!*ret)
                return al_error_set(err, ENOMEM, "listening on %s", addr);
        TAKE_FD(fd);
        return 0;
}

/* The kernel silently caps a listen backlog at net.core.somaxconn: say so
 * when that makes it smaller than the one asked for. */
static void check_somaxconn(struct daemon *d)
{
        _cleanup_close_ int fd = open("/proc/sys/net/core/somaxconn", O_RDONLY | O_CLOEXEC);
        char buf[32];
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
        if (n <= 0)
                return;
        buf[n] = '\0';
        buf[strcspn(buf, "\n")] = '\0';
        uint64_t v;
        if (safe_atou64(buf, &v) == 0 && v < LISTEN_BACKLOG)
                daemon_log(d, "net.core.somaxconn is %" PRIu64 ": the listen backlog is %" PRIu64
                              ", not %d; raise it with sysctl for bursts of connections",
                           v, v, LISTEN_BACKLOG);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
        struct daemon *d = arg;
        if (sig == SIGCHLD) {
                /* Supervisors' ends are seen through their pidfds; this
                 * reaps the jobs and the workers that remove workspaces. */
                jobs_reap(d);
                return;
        }
        daemon_log(d, "stopping on signal %d; sandboxes keep running", (int)sig);
        d->shutting_down = true;
        event_base_loopexit(d->base, NULL);
}

static void raise_nofile(void)
{
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
                (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
}

int main(int argc, char **argv)
{
        enum { OPT_SOCKET = 256, OPT_LISTEN, OPT_STATE_DIR, OPT_RUN_DIR, OPT_AUDIT, OPT_AIRLOCK,
               OPT_POOL, OPT_MAX, OPT_READY, OPT_GC, OPT_QUIET, OPT_SECRETS, OPT_TOOLS, OPT_HARDWARE, OPT_GIT_HOST,
               OPT_NO_GIT_HELPER, OPT_AUDIT_ROTATE, OPT_REQUEST_TIMEOUT, OPT_MAX_CONNECTIONS,
               OPT_MAX_PEER, OPT_RETAIN };
        static const struct option opts[] = {
                {"socket", required_argument, NULL, OPT_SOCKET},
                {"listen", required_argument, NULL, OPT_LISTEN},
                {"state-dir", required_argument, NULL, OPT_STATE_DIR},
                {"run-dir", required_argument, NULL, OPT_RUN_DIR},
                {"audit", required_argument, NULL, OPT_AUDIT},
                {"audit-rotate", required_argument, NULL, OPT_AUDIT_ROTATE},
                {"airlock", required_argument, NULL, OPT_AIRLOCK},
                {"pool", required_argument, NULL, OPT_POOL},
                {"max-sandboxes", required_argument, NULL, OPT_MAX},
                {"ready-timeout", required_argument, NULL, OPT_READY},
                {"gc-interval", required_argument, NULL, OPT_GC},
                {"quiet", no_argument, NULL, OPT_QUIET},
                {"secrets", required_argument, NULL, OPT_SECRETS},
                {"tools", required_argument, NULL, OPT_TOOLS},
                {"hardware", required_argument, NULL, OPT_HARDWARE},
                {"git-host", required_argument, NULL, OPT_GIT_HOST},
                {"no-git-helper", no_argument, NULL, OPT_NO_GIT_HELPER},
                {"request-timeout", required_argument, NULL, OPT_REQUEST_TIMEOUT},
                {"max-connections", required_argument, NULL, OPT_MAX_CONNECTIONS},
                {"max-peer-connections", required_argument, NULL, OPT_MAX_PEER},
                {"retain", required_argument, NULL, OPT_RETAIN},
                {"help", no_argument, NULL, 'h'},
                {NULL, 0, NULL, 0},
        };
        struct daemon_options o = {.max_sandboxes = 1000, .ready_timeout_ms = 30000,
                                   .gc_interval_ms = 1000, .git_helper = true,
                                   .retain_ms = PRUNE_RETAIN_DEFAULT_MS};
        struct http_limits hl = {.request_timeout_ms = HTTP_REQUEST_TIMEOUT_MS,
                                 .max_connections = HTTP_MAX_CONNECTIONS,
                                 .max_peer_connections = HTTP_MAX_PEER_CONNECTIONS};
        size_t n_git_hosts = 0;
        _cleanup_strv_ char **git_hosts = NULL;
        int c;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case OPT_SOCKET:
                        o.socket_path = optarg;
                        break;
                case OPT_LISTEN:
                        o.listen = optarg;
                        break;
                case OPT_STATE_DIR:
                        o.state_dir = optarg;
                        break;
                case OPT_RUN_DIR:
                        o.run_dir = optarg;
                        break;
                case OPT_AUDIT:
                        o.audit_path = optarg;
                        break;
                case OPT_AUDIT_ROTATE: {
                        struct audit_options check = {0};
                        if (audit_parse_rotate(optarg, &check) < 0) {
                                fprintf(stderr, "airlockd: --audit-rotate \"%s\": expected SIZE[:KEEP], e.g. 64M:8, or never\n",
                                        optarg);
                                return 2;
                        }
                        o.audit_rotate = optarg;
                        break;
                }
                case OPT_AIRLOCK:
                        o.airlock_bin = optarg;
                        break;
                case OPT_POOL:
                        if (o.n_pools >= DAEMON_POOL_CLASSES ||
                            parse_pool(optarg, &o.pools[o.n_pools]) < 0) {
                                fprintf(stderr, "airlockd: --pool \"%s\": expected CLASS=N with CLASS one "
                                                "of small, medium, large, xlarge and N up to 1000\n",
                                        optarg);
                                return 2;
                        }
                        o.n_pools++;
                        break;
                case OPT_MAX:
                        if (safe_atou64(optarg, &o.max_sandboxes) < 0) {
                                fprintf(stderr, "airlockd: --max-sandboxes \"%s\": expected a number\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case OPT_READY:
                        if (parse_seconds_ms(optarg, &o.ready_timeout_ms) < 0) {
                                fprintf(stderr, "airlockd: --ready-timeout \"%s\": expected seconds\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case OPT_GC:
                        if (parse_seconds_ms(optarg, &o.gc_interval_ms) < 0) {
                                fprintf(stderr, "airlockd: --gc-interval \"%s\": expected seconds\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case OPT_QUIET:
                        daemon_log_quiet(true);
                        break;
                case OPT_RETAIN:
                        if (prune_parse_retain(optarg, &o.retain_ms) < 0 || o.retain_ms == 0) {
                                fprintf(stderr, "airlockd: --retain \"%s\": expected a duration such "
                                                "as 7d, 12h or 30m\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case OPT_SECRETS:
                        o.secrets_path = optarg;
                        break;
                case OPT_TOOLS:
                        o.tools_path = optarg;
                        break;
                case OPT_HARDWARE:
                        o.hardware_path = optarg;
                        break;
                case OPT_GIT_HOST:
                        if (!git_host_valid(optarg)) {
                                fprintf(stderr, "airlockd: --git-host \"%s\": expected a host name "
                                                "such as git.example.com\n", optarg);
                                return 2;
                        }
                        git_hosts = strv_append(git_hosts, &n_git_hosts, optarg);
                        break;
                case OPT_NO_GIT_HELPER:
                        o.git_helper = false;
                        break;
                case OPT_REQUEST_TIMEOUT:
                        if (parse_seconds_ms(optarg, &hl.request_timeout_ms) < 0 ||
                            hl.request_timeout_ms > 3600 * 1000) {
                                fprintf(stderr, "airlockd: --request-timeout \"%s\": expected "
                                                "seconds, more than 0 and up to 3600\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case OPT_MAX_CONNECTIONS:
                case OPT_MAX_PEER: {
                        uint64_t *v = c == OPT_MAX_CONNECTIONS ? &hl.max_connections
                                                               : &hl.max_peer_connections;
                        if (safe_atou64(optarg, v) < 0 || *v > 1000000) {
                                fprintf(stderr, "airlockd: --%s \"%s\": expected a number up to "
                                                "1000000 (0: no maximum)\n",
                                        c == OPT_MAX_CONNECTIONS ? "max-connections"
                                                                 : "max-peer-connections",
                                        optarg);
                                return 2;
                        }
                        break;
                }
                case 'h':
                        help_print(stdout, usage_text, "airlockd");
                        return 0;
                default:
                        fprintf(stderr, "airlockd: unknown or incomplete option \"%s\" (see --help)\n",
                                argv[optind - 1]);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "airlockd: unexpected argument \"%s\" (see --help)\n", argv[optind]);
                return 2;
        }

        bool root = geteuid() == 0;
        const char *home = getenv("HOME");
        if (!home || home[0] != '/') {
                struct passwd *pw = getpwuid(geteuid());
                home = pw ? pw->pw_dir : "/";
        }
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        if (!root && (!xdg || xdg[0] != '/') && (!o.socket_path || !o.run_dir)) {
                fprintf(stderr, "airlockd: XDG_RUNTIME_DIR is not set; give --socket and --run-dir\n");
                return 2;
        }

        struct daemon d = {.pool_lost = pool_refill};
        d.home = xstrdup(home);
        d.socket_path =
            o.socket_path ? xstrdup(o.socket_path) : paths_daemon_socket(geteuid(), xdg);
        d.state_dir = o.state_dir ? xstrdup(o.state_dir) : paths_daemon_state_dir(geteuid(), home);
        d.run_dir = o.run_dir ? xstrdup(o.run_dir) : paths_sandbox_run_dir(geteuid(), xdg);
        d.audit_path = o.audit_path ? xstrdup(o.audit_path) : audit_default_path(geteuid(), home);
        d.audit_rotate = o.audit_rotate ? xstrdup(o.audit_rotate) : NULL;
        d.airlock_bin = o.airlock_bin ? xstrdup(o.airlock_bin) : find_airlock();
        d.keep_dir = xasprintf("%s/kept", d.state_dir);
        d.git_bin = d.airlock_bin ? sibling_path(d.airlock_bin, "airlock-git") : NULL;
        d.git_hosts = TAKE_PTR(git_hosts);
        d.git_helper = o.git_helper;
        d.max_sandboxes = o.max_sandboxes;
        d.ready_timeout_ms = o.ready_timeout_ms;
        d.gc_interval_ms = o.gc_interval_ms;
        d.retain_ms = o.retain_ms;
        memcpy(d.pools, o.pools, sizeof(d.pools));
        d.n_pools = o.n_pools;

        struct al_error err = {0};
        struct evconnlistener *lu = NULL, *lt = NULL;
        _cleanup_free_ char *db = NULL;
        int r = 0;
        if (!d.airlock_bin || access(d.airlock_bin, X_OK) < 0) {
                r = al_error_set(&err, ENOENT, "the airlock binary %s (give --airlock PATH)",
                                 d.airlock_bin ? d.airlock_bin : "next to airlockd");
                goto out;
        }
        if (o.secrets_path) {
                /* Checked now, so a bad file is one clear error at start
                 * rather than one per sandbox. */
                struct secrets *sec = NULL;
                d.secrets_path = realpath(o.secrets_path, NULL);
                r = d.secrets_path ? secrets_load_file(d.secrets_path, &sec, &err)
                                   : al_error_set(&err, errno, "--secrets %s", o.secrets_path);
                secrets_free(sec);
                if (r < 0)
                        goto out;
        }
        if (o.tools_path) {
                /* The same: a bad definition is one error at start. */
                struct policy *tp = policy_new();
                d.tools_path = realpath(o.tools_path, NULL);
                r = d.tools_path ? policy_tools_load_file(tp, d.tools_path, &err)
                                 : al_error_set(&err, errno, "--tools %s", o.tools_path);
                policy_free(tp);
                if (r < 0)
                        goto out;
        }
        if (o.hardware_path) {
                struct policy *hp = policy_new();
                d.hardware_path = realpath(o.hardware_path, NULL);
                r = d.hardware_path ? policy_hardware_load_file(hp, d.hardware_path, &err)
                                    : al_error_set(&err, errno, "--hardware %s", o.hardware_path);
                policy_free(hp);
                if (r < 0)
                        goto out;
        }
        if (d.state_dir[0] != '/' || d.run_dir[0] != '/') {
                r = al_error_set(&err, EINVAL, "--state-dir and --run-dir must be absolute paths");
                goto out;
        }
        if (strlen(d.run_dir) + sizeof("/0123456789abcdef/control.sock") >
            sizeof(((struct sockaddr_un *)0)->sun_path)) {
                r = al_error_set(&err, ENAMETOOLONG, "--run-dir %s: too long for the control sockets",
                                 d.run_dir);
                goto out;
        }
        static const char *const subdirs[] = {"", "/sandboxes", "/workspaces", "/kept"};
        for (size_t i = 0; i < ARRAY_SIZE(subdirs) && r >= 0; i++) {
                _cleanup_free_ char *p = xasprintf("%s%s", d.state_dir, subdirs[i]);
                r = mkdir_p(p, 0755, 0700);
                if (r < 0)
                        al_error_set(&err, r, "creating %s", p);
        }
        /* Workspaces are reached by the sandbox's unprivileged host uid
         * through idmapped mounts, and by nobody else. */
        if (r >= 0)
                r = mkdir_p(d.run_dir, 0755, 0700);
        if (r < 0) {
                if (!err.msg[0])
                        al_error_set(&err, r, "creating %s", d.run_dir);
                goto out;
        }
        db = xasprintf("%s/%s", d.state_dir, STORE_FILE);
        r = store_open(db, &d.store, &err);
        if (r < 0)
                goto out;
        if (d.audit_path) {
                struct audit_options ao = {.sync = AUDIT_SYNC_BATCH, .batch_ms = AUDIT_BATCH_MS};
                if (o.audit_rotate)
                        (void)audit_parse_rotate(o.audit_rotate, &ao); /* checked with the flags */
                r = audit_open(d.audit_path, &ao, &d.audit, &err);
                if (r < 0)
                        goto out;
                /* The batch's periodic sync runs in the log's helper
                 * process, never on the loop: a slow disk under the log
                 * would hold every client up for it. Forked here, before
                 * the daemon has any thread. */
                r = audit_background_sync_now(d.audit);
                if (r < 0) {
                        al_error_set(&err, r, "starting the audit log's sync helper");
                        goto out;
                }
        }

        signal(SIGPIPE, SIG_IGN);
        raise_nofile();
        (void)al_sched_prefer_latency(); /* a hint only (latency.h) */
        al_trace_on();
        d.base = event_base_new();
        if (!d.base) {
                r = al_error_set(&err, ENOMEM, "creating the event loop");
                goto out;
        }
        static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGCHLD};
        for (size_t i = 0; i < ARRAY_SIZE(sigs); i++) {
                d.sig_events[i] = evsignal_new(d.base, sigs[i], on_signal, &d);
                event_add(d.sig_events[i], NULL);
        }
        event_set_log_callback(on_libevent_log);
        r = api_setup(&d, &err);
        if (r >= 0)
                r = http_guard_setup(&d, &hl, &err);
        if (r >= 0)
                r = listen_unix(&d, d.socket_path, &lu, &err);
        if (r >= 0 && lu && !evhttp_bind_listener(d.http, lu))
                r = al_error_set(&err, ENOMEM, "serving %s", d.socket_path);
        if (r >= 0 && lu)
                http_guard_listener(lu);
        if (r >= 0 && o.listen) {
                d.listen_addr = o.listen;
                r = listen_tcp(&d, o.listen, &lt, &err);
                if (r >= 0 && !evhttp_bind_listener(d.http, lt))
                        r = al_error_set(&err, ENOMEM, "serving %s", o.listen);
                if (r >= 0)
                        http_guard_listener(lt);
        }
        if (r < 0)
                goto out;

        check_somaxconn(&d);
        r = sandbox_reattach_all(&d);
        if (r < 0) {
                al_error_set(&err, r, "reading the sandbox records");
                goto out;
        }
        pool_refill(&d);
        gc_start(&d);
        sandbox_health_start(&d);
        daemon_log(&d, "listening on %s%s%s", d.socket_path, o.listen ? " and " : "",
                   o.listen ? o.listen : "");
        event_base_dispatch(d.base);
        r = 0;

out:
        d.shutting_down = true;
        jobs_shutdown(&d);
        api_shutdown(&d);
        sandbox_health_stop();
        /* Left running: the next airlockd re-attaches them. */
        sandbox_shutdown_all(&d);
        if (d.http)
                evhttp_free(d.http);
        http_guard_shutdown();
        if (lu && !socket_activated)
                unlink(d.socket_path);
        if (d.gc_timer)
                event_free(d.gc_timer);
        if (d.audit_timer)
                event_free(d.audit_timer);
        if (d.pool_timer)
                event_free(d.pool_timer);
        if (d.store_sync_timer)
                event_free(d.store_sync_timer);
        if (d.store)
                (void)store_sync(d.store);
        d.audit = audit_close(d.audit);
        for (size_t i = 0; i < ARRAY_SIZE(d.sig_events); i++)
                if (d.sig_events[i])
                        event_free(d.sig_events[i]);
        if (d.base)
                event_base_free(d.base);
        d.store = store_close(d.store);
        if (r < 0)
                fprintf(stderr, "airlockd: %s\n", err.msg);
        free(d.home);
        free(d.socket_path);
        free(d.state_dir);
        free(d.run_dir);
        free(d.audit_path);
        free(d.audit_rotate);
        free(d.airlock_bin);
        free(d.git_bin);
        free(d.keep_dir);
        free(d.secrets_path);
        free(d.tools_path);
        free(d.hardware_path);
        strv_free(d.git_hosts);
        return r < 0 ? 1 : 0;
}
