/* SPDX-License-Identifier: Apache-2.0 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "help.h"
#include "commands.h"
#include "gitguard.h"
#include "jsonout.h"
#include "policy.h"
#include "review.h"
#include "util.h"

#define EXIT_BAD   1
#define EXIT_USAGE 2

static const char state_root_help[] =
    "      --state-root DIR   where sandboxes are kept (default: /var/lib/airlock\n"
    "                         as root, else ~/.local/state/airlock)\n"
    "  -h, --help             show this help\n";

static const char diff_usage[] =
    "Usage: airlock diff [OPTIONS] ID\n"
    "\n"
    "Show what review sandbox ID changed, as a unified diff of the workspace as\n"
    "it is now (a/) against the result of accepting (b/). ID may be a unique\n"
    "prefix of at least 4 characters.\n"
    "\n"
    "Examples:\n"
    "  airlock diff 3f2a\n"
    "  airlock diff 3f2a | less\n"
    "  airlock diff --state-root /srv/review 3f2a\n"
    "\n"
    "Options:\n"
    "      --json             on failure, print {\"error\", \"message\"} as one JSON\n"
    "                         line on stdout instead of a message on stderr\n";

static const char accept_usage[] =
    "Usage: airlock accept [OPTIONS] ID [PATH...]\n"
    "\n"
    "Apply the changes of review sandbox ID to its workspace: all, or those at or\n"
    "beneath each PATH (relative to the workspace), each file renamed into place.\n"
    "Nothing is applied if a file it replaces or removes changed since the start.\n"
    "\n"
    "Examples:\n"
    "  airlock accept 3f2a\n"
    "  airlock accept 3f2a src/ README.md\n"
    "  airlock accept --json 3f2a\n"
    "\n"
    "Options:\n"
    "      --json             print one JSON line on stdout: {\"sandbox\", \"written\",\n"
    "                         \"removed\", \"dirs\", \"bytes\", \"remaining\", \"complete\"},\n"
    "                         or on failure {\"error\", \"message\"}, error being\n"
    "                         conflict, already, not_found, bad_path, not_kept or\n"
    "                         failed\n";

static const char discard_usage[] =
    "Usage: airlock discard [OPTIONS] ID [PATH...]\n"
    "\n"
    "Drop the changes of review sandbox ID; the workspace stays as it is.\n"
    "With PATHs, drop only the changes at and beneath them; the rest stays\n"
    "pending for 'airlock accept'.\n"
    "\n"
    "Examples:\n"
    "  airlock discard 3f2a\n"
    "  airlock discard 3f2a build/ notes.txt\n"
    "  airlock discard --json --state-root /srv/review 3f2a\n"
    "\n"
    "Options:\n"
    "      --json             print one JSON line on stdout: {\"sandbox\", \"state\"}\n"
    "                         (and \"remaining\" while changes stay pending), or on\n"
    "                         failure {\"error\", \"message\"}, error being already,\n"
    "                         not_found, bad_path, conflict or failed\n";

static const char exit_help[] = "\nExit status: 0 on success, 1 when refused or failed, 2 on usage "
                                "errors or an unknown ID.\n";

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int usage_error(const char *cmd, const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "airlock: %s: ", cmd);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\nTry `airlock %s --help`.\n", cmd);
        return EXIT_USAGE;
}

/* Report a failure: {"error": code, "message": msg} on stdout with --json,
 * else a line on stderr. Returns status. */
static void put_message(FILE *f, const char *msg);

static int fail(const char *cmd, bool json, const char *code, const char *msg, int status)
{
        if (json)
                json_line(json_pack("{s:s, s:o}", "error", code, "message", json_text(msg)));
        else {
                /* Messages name workspace entries, whose names the
                 * workspace's owner chose: one line, controls shown. */
                fprintf(stderr, "airlock: %s: ", cmd);
                put_message(stderr, msg);
                putc('\n', stderr);
        }
        return status;
}

/* Parse the options every review command shares. Returns the index of the
 * first operand, or -1 - the exit code when the command is done. */
static int parse_common(const char *cmd, const char *usage, int argc, char **argv, char **ret_root,
                        bool *ret_json)
{
        enum { OPT_STATE_ROOT = 256, OPT_JSON };
        static const struct option options[] = {
            {"state-root", required_argument, NULL, OPT_STATE_ROOT},
            {"json", no_argument, NULL, OPT_JSON},
            {"help", no_argument, NULL, 'h'},
            {},
        };
        int c;

        optind = 0;
        while ((c = getopt_long(argc, argv, "+:h", options, NULL)) != -1) {
                switch (c) {
                case 'h': {
                        _cleanup_free_ char *t =
                            xasprintf("%s%s%s", usage, state_root_help, exit_help);
                        help_print(stdout, t, cmd);
                }
                        return -1;
                case OPT_STATE_ROOT:
                        free(*ret_root);
                        *ret_root = xstrdup(optarg);
                        break;
                case OPT_JSON:
                        *ret_json = true;
                        break;
                case ':':
                        return -1 - usage_error(cmd, "option \"%s\" needs an argument",
                                                argv[optind - 1]);
                default:
                        if (optopt)
                                return -1 - usage_error(cmd, "unknown option \"-%c\"", optopt);
                        return -1 - usage_error(cmd, "unknown option \"%s\"", argv[optind - 1]);
                }
        }
        if (!*ret_root) {
                *ret_root = review_state_root(geteuid(), getenv("HOME"));
                if (!*ret_root) {
                        if (*ret_json)
                                return -1 - fail(cmd, true, "failed",
                                                 "HOME is not set; give --state-root", EXIT_USAGE);
                        return -1 - usage_error(cmd, "HOME is not set; give --state-root");
                }
        }
        return optind;
}

/* A wrong number of operands: text, or with --json the error line. */
static int operand_error(const char *cmd, bool json, const char *msg)
{
        if (json)
                return fail(cmd, true, "failed", msg, EXIT_USAGE);
        return usage_error(cmd, "%s", msg);
}

/* Resolve id to its state directory; ret_id points at the full id in it.
 * An id that names no one sandbox, being unknown, malformed or an
 * ambiguous prefix, is "not_found". Returns 0 or the exit code. */
static int find_sandbox(const char *cmd, bool json, const char *root, const char *id,
                        char **ret_dir, const char **ret_id)
{
        struct al_error err = {0};
        if (review_find(root, id, ret_dir, &err) < 0)
                return fail(cmd, json, "not_found", err.msg, EXIT_USAGE);
        const char *slash = strrchr(*ret_dir, '/');
        *ret_id = slash ? slash + 1 : *ret_dir;
        return 0;
}

/* The diff holds the agent's bytes. On a terminal, C0 control characters
 * are shown in caret notation (^M, ^[) so that a carriage return or an
 * escape sequence cannot hide a line from the reviewer or drive the
 * terminal; C1 control characters (U+0080 to U+009F: U+009B is CSI) and
 * code points that reorder text (CVE-2021-42574) or draw nothing as
 * <U+XXXX>; and bytes that are not UTF-8, which a terminal may take for C1
 * controls too (0x9b), as \xNN. */
struct caret {
        FILE *f;
        unsigned char pend[4]; /* a UTF-8 sequence being read */
        size_t n, want;
};

static void caret_put(FILE *f, unsigned char c)
{
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
                putc('^', f);
                putc(c ^ 0x40, f);
        } else if (c >= 0x80)
                fprintf(f, "\\x%02x", c);
        else
                putc(c, f);
}

static bool caret_shown_as_number(uint32_t cp)
{
        return (cp >= 0x80 && cp <= 0x9f) || cp == 0x061c || (cp >= 0x200b && cp <= 0x200f) ||
               (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2069) || cp == 0xfeff ||
               (cp >= 0xfff9 && cp <= 0xfffb) || (cp >= 0xe0000 && cp <= 0xe007f);
}

/* Whether b may follow the bytes pending, as UTF-8 (no overlong forms, no
 * surrogates, nothing past U+10FFFF). */
static bool caret_continues(const struct caret *c, unsigned char b)
{
        if ((b & 0xc0) != 0x80)
                return false;
        if (c->n != 1)
                return true;
        switch (c->pend[0]) {
        case 0xe0:
                return b >= 0xa0;
        case 0xed:
                return b <= 0x9f;
        case 0xf0:
                return b >= 0x90;
        case 0xf4:
                return b <= 0x8f;
        default:
                return true;
        }
}

static void caret_feed(struct caret *c, unsigned char b)
{
        if (c->n == 0) {
                if (b >= 0xc2 && b <= 0xdf)
                        c->want = 2;
                else if (b >= 0xe0 && b <= 0xef)
                        c->want = 3;
                else if (b >= 0xf0 && b <= 0xf4)
                        c->want = 4;
                else {
                        caret_put(c->f, b);
                        return;
                }
                c->pend[c->n++] = b;
                return;
        }
        if (!caret_continues(c, b)) {
                for (size_t i = 0; i < c->n; i++)
                        caret_put(c->f, c->pend[i]);
                c->n = 0;
                caret_feed(c, b);
                return;
        }
        c->pend[c->n++] = b;
        if (c->n < c->want)
                return;
        uint32_t cp = c->pend[0] & (0x7f >> c->want);
        for (size_t i = 1; i < c->n; i++)
                cp = cp << 6 | (c->pend[i] & 0x3f);
        if (caret_shown_as_number(cp))
                fprintf(c->f, "<U+%04X>", (unsigned)cp);
        else
                fwrite(c->pend, 1, c->n, c->f);
        c->n = 0;
}

static ssize_t caret_write(void *cookie, const char *buf, size_t size)
{
        struct caret *c = cookie;
        for (size_t i = 0; i < size; i++)
                caret_feed(c, (unsigned char)buf[i]);
        return ferror(c->f) ? -1 : (ssize_t)size;
}

static int caret_close(void *cookie)
{
        struct caret *c = cookie;
        for (size_t i = 0; i < c->n; i++)
                caret_put(c->f, c->pend[i]);
        c->n = 0;
        return ferror(c->f) ? EOF : 0;
}

/* A message of one line: as the diff on a terminal, newlines and tabs
 * too in caret notation. */
static void put_message(FILE *f, const char *msg)
{
        struct caret c = {.f = f};
        for (const char *s = msg; *s; s++) {
                if (*s == '\n' || *s == '\t') {
                        caret_close(&c);
                        putc('^', f);
                        putc(*s ^ 0x40, f);
                } else
                        caret_feed(&c, (unsigned char)*s);
        }
        caret_close(&c);
}

/* With --json, a failure's line follows whatever part of the diff was
 * written; this notes whether that part ended a line. */
struct tail {
        FILE *f;
        bool open_line;
};

static ssize_t tail_write(void *cookie, const char *buf, size_t size)
{
        struct tail *t = cookie;
        if (size > 0)
                t->open_line = buf[size - 1] != '\n';
        return fwrite(buf, 1, size, t->f) == size ? (ssize_t)size : -1;
}

int cmd_diff(int argc, char **argv)
{
        _cleanup_free_ char *root = NULL, *dir = NULL;
        bool json = false;
        const char *id;
        int first = parse_common("diff", diff_usage, argc, argv, &root, &json);
        if (first < 0)
                return -1 - first;
        if (argc - first != 1)
                return operand_error("diff", json, "expected exactly one sandbox ID");
        int r = find_sandbox("diff", json, root, argv[first], &dir, &id);
        if (r)
                return r;

        FILE *out = stdout, *filter = NULL, *tailf = NULL;
        struct caret caret = {.f = stdout};
        struct tail tail = {.f = stdout};
        if (isatty(STDOUT_FILENO)) {
                filter = fopencookie(
                    &caret, "w",
                    (cookie_io_functions_t){.write = caret_write, .close = caret_close});
                if (filter)
                        out = filter;
        }
        if (json) {
                tail.f = out;
                tailf = fopencookie(&tail, "w", (cookie_io_functions_t){.write = tail_write});
                if (tailf)
                        out = tailf;
        }
        struct al_error err = {0};
        r = review_diff(dir, out, &err);
        if (tailf && fclose(tailf) != 0 && r >= 0)
                r = -EIO;
        if (filter && fclose(filter) != 0 && r >= 0)
                r = -EIO;
        if (fflush(stdout) != 0 && r >= 0)
                r = -EIO;
        if (r < 0) {
                if (tail.open_line)
                        putchar('\n');
                return fail("diff", json, "failed", err.msg[0] ? err.msg : strerror(-r), EXIT_BAD);
        }
        return 0;
}

static const char *plural(uint64_t n, const char *one, const char *many)
{
        return n == 1 ? one : many;
}

/* The --json error code of review_accept's and review_discard's errors. */
static const char *error_code(int r)
{
        switch (r) {
        case -EBUSY:
                return "conflict";
        case -EALREADY:
                return "already";
        case -ENOENT:
                return "not_found";
        case -EINVAL:
                return "bad_path";
        case -ENODATA:
                return "not_kept";
        default:
                return "failed";
        }
}

static void warn_line(const char *line, void *userdata)
{
        put_message(stderr, line);
        putc('\n', stderr);
}

int cmd_accept(int argc, char **argv)
{
        _cleanup_free_ char *root = NULL, *dir = NULL;
        bool json = false;
        const char *full_id;
        int first = parse_common("accept", accept_usage, argc, argv, &root, &json);
        if (first < 0)
                return -1 - first;
        if (argc - first < 1)
                return operand_error("accept", json, "no sandbox ID given");
        const char *id = argv[first];
        int r = find_sandbox("accept", json, root, id, &dir, &full_id);
        if (r)
                return r;

        struct al_error err = {0};
        struct review_report rep;
        /* What accept writes into the workspace is the agent's: anything in
         * it that would make host git run code (a nested repository's
         * fsmonitor, a hook, a commondir) is moved aside afterwards, as at
         * the end of a run on a read-write workspace. */
        _cleanup_free_ char *ws = NULL;
        struct gitguard *gg = NULL;
        if (review_workspace(dir, &ws, &err) >= 0) {
                struct policy gp = {
                    .workspace = ws, .workspace_mode = POLICY_WORKSPACE_RW, .protect_git = true};
                gg = gitguard_begin(&gp);
        }
        r = review_accept(dir, argv + first + 1, (size_t)(argc - first - 1), &rep, &err);
        gitguard_finish(gg, NULL, full_id, warn_line, NULL);
        if (r < 0) {
                /* The library's messages about paths start with "accept: ". */
                const char *msg = err.msg[0] ? err.msg : strerror(-r);
                if (strncmp(msg, "accept: ", 8) == 0)
                        msg += 8;
                return fail("accept", json, error_code(r), msg,
                            r == -ENOENT || r == -EINVAL ? EXIT_USAGE : EXIT_BAD);
        }
        if (json) {
                json_t *o =
                    json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:b}", "sandbox", full_id, "written",
                              (json_int_t)rep.written, "removed", (json_int_t)rep.removed, "dirs",
                              (json_int_t)rep.dirs, "bytes", (json_int_t)rep.bytes, "remaining",
                              (json_int_t)rep.remaining, "complete", rep.complete);
                /* Only when there are some, so that the usual line stays as it was. */
                if (o && rep.held)
                        json_object_set_new(o, "held", json_integer((json_int_t)rep.held));
                json_line(o);
                return 0;
        }
        printf("accept: %" PRIu64 " %s written, %" PRIu64 " removed, %" PRIu64 " %s", rep.written,
               plural(rep.written, "file", "files"), rep.removed, rep.dirs,
               plural(rep.dirs, "directory", "directories"));
        if (rep.complete)
                printf("; sandbox %s accepted\n", id);
        else
                printf("; %" PRIu64 " %s left (airlock diff %s)\n", rep.remaining,
                       plural(rep.remaining, "change", "changes"), id);
        if (rep.held)
                printf("accept: %" PRIu64 " %s not taken: %s hidden characters; name each "
                       "one to take it, e.g. airlock accept %s $'name\\u200b'\n",
                       rep.held, plural(rep.held, "change was", "changes were"),
                       plural(rep.held, "its name holds", "their names hold"), id);
        return 0;
}

int cmd_discard(int argc, char **argv)
{
        _cleanup_free_ char *root = NULL, *dir = NULL;
        bool json = false;
        const char *full_id;
        int first = parse_common("discard", discard_usage, argc, argv, &root, &json);
        if (first < 0)
                return -1 - first;
        if (argc - first < 1)
                return operand_error("discard", json, "expected a sandbox ID, then any paths");
        int r = find_sandbox("discard", json, root, argv[first], &dir, &full_id);
        if (r)
                return r;
        /* Paths taken by an earlier partial accept stay in the workspace. */
        _cleanup_free_ char *meta = xasprintf("%s/meta.json", dir);
        json_t *m = json_load_file(meta, 0, NULL);
        size_t taken = json_array_size(json_object_get(m, "accepted"));
        json_decref(m);
        struct al_error err = {0};
        size_t remaining = 0;
        size_t n_paths = (size_t)(argc - first - 1);
        r = review_discard(dir, argv + first + 1, n_paths, &remaining, &err);
        if (r < 0) {
                const char *msg = err.msg[0] ? err.msg : strerror(-r);
                if (strncmp(msg, "discard: ", 9) == 0)
                        msg += 9;
                return fail("discard", json, error_code(r), msg,
                            n_paths && (r == -ENOENT || r == -EINVAL) ? EXIT_USAGE : EXIT_BAD);
        }
        if (remaining) {
                if (json)
                        json_line(json_pack("{s:s, s:s, s:I}", "sandbox", full_id, "state",
                                            "pending", "remaining", (json_int_t)remaining));
                else
                        printf("discard: %zu %s dropped; %zu %s left (airlock diff %s)\n", n_paths,
                               plural(n_paths, "path", "paths"), remaining,
                               plural(remaining, "change", "changes"), argv[first]);
                return 0;
        }
        if (json) {
                json_line(json_pack("{s:s, s:s}", "sandbox", full_id, "state", "discarded"));
                return 0;
        }
        if (taken)
                printf("discard: the remaining changes of sandbox %s are gone; the %zu %s taken "
                       "by an earlier 'airlock accept' stay in the workspace\n",
                       argv[first], taken, taken == 1 ? "path" : "paths");
        else
                printf("discard: the changes of sandbox %s are gone; the workspace is as it was\n",
                       argv[first]);
        return 0;
}

/* airlock review ls */

static const char review_usage[] =
    "Usage: airlock review ls [OPTIONS]\n"
    "\n"
    "List the review sandboxes whose changes are pending, newest first, with\n"
    "what accepting them now would do: files added to the workspace, files\n"
    "modified, entries deleted (as 'airlock diff' shows them).\n"
    "\n"
    "Examples:\n"
    "  airlock review ls\n"
    "  airlock review ls --json\n"
    "  airlock review ls --state-root /srv/review\n"
    "\n"
    "Options:\n"
    "      --json             one JSON object per sandbox\n";

static void print_started(uint64_t ns, char *buf, size_t size)
{
        time_t t = (time_t)(ns / 1000000000ULL);
        struct tm tm;
        if (!gmtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                snprintf(buf, size, "-");
}

int cmd_review(int argc, char **argv)
{
        if (argc >= 2 && (STREQ(argv[1], "-h") || STREQ(argv[1], "--help"))) {
                _cleanup_free_ char *t = xasprintf("%s%s", review_usage, state_root_help);
                help_print(stdout, t, "review");
                return 0;
        }
        if (argc < 2 || !STREQ(argv[1], "ls"))
                return usage_error("review", "expected \"ls\" (see 'airlock review --help'); "
                                             "diff, accept and discard are commands of their own");
        _cleanup_free_ char *root = NULL;
        bool json = false;
        int first = parse_common("review ls", review_usage, argc - 1, argv + 1, &root, &json);
        if (first < 0)
                return -1 - first;
        if (argc - 1 - first != 0)
                return operand_error("review ls", json, "expected no operands");
        struct review_pending *v = NULL;
        size_t n = 0;
        struct al_error err = {0};
        if (review_list_pending(root, &v, &n, &err) < 0)
                return fail("review ls", json, "failed", err.msg, EXIT_BAD);
        if (!json)
                printf("%-16s  %-20s  %6s  %8s  %7s  %s\n", "ID", "STARTED", "ADDED", "MODIFIED",
                       "DELETED", "WORKSPACE");
        for (size_t i = 0; i < n; i++) {
                char started[32];
                print_started(v[i].started_ns, started, sizeof(started));
                if (json) {
                        bool c = !v[i].error; /* counted */
                        json_t *o = json_pack(
                            "{s:s, s:s, s:o, s:o, s:o}", "sandbox", v[i].id, "startedAt", started,
                            "added", c ? json_integer((json_int_t)v[i].added) : json_null(),
                            "modified", c ? json_integer((json_int_t)v[i].modified) : json_null(),
                            "deleted", c ? json_integer((json_int_t)v[i].deleted) : json_null());
                        json_object_set_new(o, "workspace",
                                            v[i].workspace ? json_text(v[i].workspace)
                                                           : json_null());
                        if (v[i].error)
                                json_object_set_new(o, "error", json_text(v[i].error));
                        json_line(o);
                } else if (v[i].error) {
                        printf("%-16s  %-20s  %6s  %8s  %7s  (%s)\n", v[i].id,
                               v[i].started_ns ? started : "-", "-", "-", "-", v[i].error);
                } else {
                        printf("%-16s  %-20s  %6" PRIu64 "  %8" PRIu64 "  %7" PRIu64 "  %s\n",
                               v[i].id, started, v[i].added, v[i].modified, v[i].deleted,
                               v[i].workspace);
                }
        }
        review_pending_free(v, n);
        return 0;
}
