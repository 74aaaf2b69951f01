/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "help.h"
#include "commands.h"
#include "prune.h"
#include "review.h"
#include "store.h"
#include "paths.h"
#include "util.h"

static const char gc_usage[] =
    "Usage: airlock gc [--state-dir DIR] [--state-root DIR] [--retain DURATION]\n"
    "\n"
    "Remove what ended longer ago than the retention period: the records of\n"
    "destroyed and failed sandboxes in a daemon's database, and the kept changes\n"
    "of review sandboxes that were accepted or discarded (changes still waiting\n"
    "for review are kept). airlockd does the same on its own (--retain).\n"
    "It also removes the empty cgroups of sandboxes whose owner died, in every\n"
    "hierarchy it may write to.\n"
    "\n"
    "Examples:\n"
    "  airlock gc\n"
    "  airlock gc --retain 1d\n"
    "  airlock gc --state-dir /var/lib/airlock/daemon --retain 0\n"
    "\n"
    "Options:\n"
    "      --state-dir DIR     a daemon's state directory: its records and its kept\n"
    "                          changes (default: /var/lib/airlock/daemon for root,\n"
    "                          ~/.local/state/airlock/daemon otherwise, if it exists)\n"
    "      --state-root DIR    where 'airlock run --review' keeps changes (default:\n"
    "                          /var/lib/airlock for root, ~/.local/state/airlock)\n"
    "      --retain DURATION   keep what ended less than this long ago, e.g. 7d, 12h,\n"
    "                          30m, 0 for nothing (default: 7d)\n";

static char *home_dir(void)
{
        const char *home = getenv("HOME");
        if (home && home[0] == '/')
                return xstrdup(home);
        struct passwd *pw = getpwuid(geteuid());
        return pw && pw->pw_dir ? xstrdup(pw->pw_dir) : NULL;
}

/* A sandbox whose record says it may still run keeps its changes. */
static bool recorded_live(const char *id, void *ud)
{
        struct store *s = ud;
        struct store_sandbox *r = NULL;
        if (!s || store_sandbox_get(s, id, &r) < 0)
                return false;
        bool live = !STREQ(r->state, "destroyed") && !STREQ(r->state, "failed");
        store_sandbox_free(r);
        return live;
}

static int gc_daemon_dir(const char *dir, bool explicit, uint64_t cutoff)
{
        struct stat st;
        if (stat(dir, &st) < 0) {
                if (!explicit && errno == ENOENT)
                        return 0;
                fprintf(stderr, "airlock: gc: %s: %s\n", dir, strerror(errno));
                return -errno;
        }
        _cleanup_free_ char *db = xasprintf("%s/%s", dir, STORE_FILE);
        struct store *s = NULL;
        uint64_t records = 0, reviews = 0;
        int r = 0;
        if (access(db, F_OK) == 0) {
                struct al_error err = {0};
                r = store_open(db, &s, &err);
                if (r < 0) {
                        fprintf(stderr, "airlock: gc: %s\n", err.msg);
                        return r;
                }
                r = prune_records(s, cutoff, &records);
                if (r < 0)
                        fprintf(stderr, "airlock: gc: %s: %s\n", db, store_last_error(s));
                else
                        (void)store_checkpoint(s);
        }
        _cleanup_free_ char *kept = xasprintf("%s/kept", dir);
        int k = prune_review_state(kept, cutoff, recorded_live, s, &reviews);
        if (k < 0)
                fprintf(stderr, "airlock: gc: %s: %s\n", kept, strerror(-k));
        store_close(s);
        printf("%s: %" PRIu64 " record(s), %" PRIu64 " change set(s) removed\n", dir, records,
               reviews);
        return r < 0 ? r : k;
}

static int gc_state_root(const char *root, uint64_t cutoff)
{
        uint64_t n = 0;
        int r = prune_review_state(root, cutoff, NULL, NULL, &n);
        if (r < 0) {
                fprintf(stderr, "airlock: gc: %s: %s\n", root, strerror(-r));
                return r;
        }
        printf("%s: %" PRIu64 " change set(s) removed\n", root, n);
        return 0;
}

int cmd_gc(int argc, char **argv)
{
        enum { O_STATE_DIR = 256, O_STATE_ROOT, O_RETAIN };
        static const struct option opts[] = {
            {"state-dir", required_argument, NULL, O_STATE_DIR},
            {"state-root", required_argument, NULL, O_STATE_ROOT},
            {"retain", required_argument, NULL, O_RETAIN},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        const char *state_dir = NULL, *state_root = NULL;
        uint64_t retain = PRUNE_RETAIN_DEFAULT_MS;
        int c;
        optind = 1;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case O_STATE_DIR:
                        state_dir = optarg;
                        break;
                case O_STATE_ROOT:
                        state_root = optarg;
                        break;
                case O_RETAIN:
                        if (!STREQ(optarg, "0") && prune_parse_retain(optarg, &retain) < 0) {
                                fprintf(stderr,
                                        "airlock: gc: --retain \"%s\": expected a duration "
                                        "such as 7d, 12h or 30m\n",
                                        optarg);
                                return 2;
                        }
                        if (STREQ(optarg, "0"))
                                retain = 0;
                        break;
                case 'h':
                        help_print(stdout, gc_usage, "gc");
                        return 0;
                default:
                        fprintf(stderr,
                                "airlock: gc: unknown or incomplete option \"%s\" (see --help)\n",
                                argv[optind - 1]);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "airlock: gc: unexpected argument \"%s\" (see --help)\n",
                        argv[optind]);
                return 2;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
        uint64_t cutoff = now > retain ? now - retain : 0;
        if (retain == 0)
                cutoff = now + 1;

        _cleanup_free_ char *home = home_dir();
        int r = 0;
        if (state_dir || !state_root) {
                _cleanup_free_ char *dflt =
                    state_dir ? NULL : paths_daemon_state_dir(geteuid(), home);
                if (state_dir || dflt)
                        r = gc_daemon_dir(state_dir ? state_dir : dflt, state_dir != NULL, cutoff);
        }
        if (state_root || !state_dir) {
                _cleanup_free_ char *dflt = state_root ? NULL : review_state_root(geteuid(), home);
                if (!state_root && !dflt) {
                        fprintf(stderr, "airlock: gc: HOME is not set; give --state-root\n");
                        return 2;
                }
                int k = gc_state_root(state_root ? state_root : dflt, cutoff);
                if (r >= 0)
                        r = k;
        }
        printf("%d cgroup(s) of dead sandboxes removed\n",
               cgroup_sweep_all(CGROUP_SWEEP_MIN_AGE_S));
        return r < 0 ? 1 : 0;
}
