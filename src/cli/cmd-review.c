/* SPDX-License-Identifier: Apache-2.0 */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
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
    "Options:\n";

static const char accept_usage[] =
    "Usage: airlock accept [OPTIONS] ID [PATH...]\n"
    "\n"
    "Apply the changes of review sandbox ID to its workspace: all of them, or\n"
    "only those at or beneath each PATH (relative to the workspace). Each file\n"
    "is written to a temporary name and renamed into place. Nothing is applied\n"
    "if a file to be replaced or removed changed on the host since the sandbox\n"
    "started.\n"
    "\n"
    "Options:\n";

static const char discard_usage[] =
    "Usage: airlock discard [OPTIONS] ID\n"
    "\n"
    "Drop the changes of review sandbox ID; the workspace stays as it is.\n"
    "\n"
    "Options:\n";

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

/* Parse the options every review command shares. Returns the index of the
 * first operand, or -1 - the exit code when the command is done. */
static int parse_common(const char *cmd, const char *usage, int argc, char **argv, char **ret_root)
{
        enum { OPT_STATE_ROOT = 256 };
        static const struct option options[] = {
            {"state-root", required_argument, NULL, OPT_STATE_ROOT},
            {"help", no_argument, NULL, 'h'},
            {},
        };
        int c;

        optind = 0;
        while ((c = getopt_long(argc, argv, "+:h", options, NULL)) != -1) {
                switch (c) {
                case 'h':
                        fputs(usage, stdout);
                        fputs(state_root_help, stdout);
                        fputs(exit_help, stdout);
                        return -1;
                case OPT_STATE_ROOT:
                        free(*ret_root);
                        *ret_root = xstrdup(optarg);
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
                if (!*ret_root)
                        return -1 - usage_error(cmd, "HOME is not set; give --state-root");
        }
        return optind;
}

static int find_sandbox(const char *cmd, const char *root, const char *id, char **ret_dir)
{
        struct al_error err = {0};
        if (review_find(root, id, ret_dir, &err) < 0) {
                fprintf(stderr, "airlock: %s: %s\n", cmd, err.msg);
                return EXIT_USAGE;
        }
        return 0;
}

/* The diff holds the agent's bytes. On a terminal, control characters are
 * shown in caret notation so that a carriage return or an escape sequence
 * cannot hide a line from the reviewer or drive the terminal, and
 * bidirectional formatting characters, which make code display in another
 * order than it compiles (CVE-2021-42574), as <U+XXXX>. */
struct caret {
        FILE *f;
        unsigned char pend[2]; /* the start of a UTF-8 sequence */
        size_t n;
};

static void caret_put(FILE *f, unsigned char c)
{
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
                putc('^', f);
                putc(c ^ 0x40, f);
        } else
                putc(c, f);
}

static void caret_feed(struct caret *c, unsigned char b)
{
        if (c->n == 0) {
                if (b == 0xd8 || b == 0xe2)
                        c->pend[c->n++] = b;
                else
                        caret_put(c->f, b);
                return;
        }
        uint32_t cp = 0;
        if (c->n == 1 && c->pend[0] == 0xd8 && b == 0x9c)
                cp = 0x061c;
        else if (c->n == 1 && c->pend[0] == 0xe2 && (b == 0x80 || b == 0x81)) {
                c->pend[c->n++] = b;
                return;
        } else if (c->n == 2) {
                uint32_t x = 0x2000 | (uint32_t)(c->pend[1] & 0x3f) << 6 | (b & 0x3f);
                if (x == 0x200e || x == 0x200f || (x >= 0x202a && x <= 0x202e) ||
                    (x >= 0x2066 && x <= 0x2069))
                        cp = x;
        }
        if (cp) {
                fprintf(c->f, "<U+%04X>", (unsigned)cp);
                c->n = 0;
                return;
        }
        for (size_t i = 0; i < c->n; i++)
                caret_put(c->f, c->pend[i]);
        c->n = 0;
        caret_feed(c, b);
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

int cmd_diff(int argc, char **argv)
{
        _cleanup_free_ char *root = NULL, *dir = NULL;
        int first = parse_common("diff", diff_usage, argc, argv, &root);
        if (first < 0)
                return -1 - first;
        if (argc - first != 1)
                return usage_error("diff", "expected exactly one sandbox ID");
        int r = find_sandbox("diff", root, argv[first], &dir);
        if (r)
                return r;

        FILE *out = stdout, *filter = NULL;
        struct caret caret = {.f = stdout};
        if (isatty(STDOUT_FILENO)) {
                filter = fopencookie(
                    &caret, "w",
                    (cookie_io_functions_t){.write = caret_write, .close = caret_close});
                if (filter)
                        out = filter;
        }
        struct al_error err = {0};
        r = review_diff(dir, out, &err);
        if (filter && fclose(filter) != 0 && r >= 0)
                r = -EIO;
        if (fflush(stdout) != 0 && r >= 0)
                r = -EIO;
        if (r < 0) {
                fprintf(stderr, "airlock: diff: %s\n", err.msg[0] ? err.msg : strerror(-r));
                return EXIT_BAD;
        }
        return 0;
}

static const char *plural(uint64_t n, const char *one, const char *many)
{
        return n == 1 ? one : many;
}

int cmd_accept(int argc, char **argv)
{
        _cleanup_free_ char *root = NULL, *dir = NULL;
        int first = parse_common("accept", accept_usage, argc, argv, &root);
        if (first < 0)
                return -1 - first;
        if (argc - first < 1)
                return usage_error("accept", "no sandbox ID given");
        const char *id = argv[first];
        int r = find_sandbox("accept", root, id, &dir);
        if (r)
                return r;

        struct al_error err = {0};
        struct review_report rep;
        r = review_accept(dir, argv + first + 1, (size_t)(argc - first - 1), &rep, &err);
        if (r < 0) {
                /* The library's messages about paths start with "accept: ". */
                const char *msg = err.msg[0] ? err.msg : strerror(-r);
                if (strncmp(msg, "accept: ", 8) == 0)
                        msg += 8;
                fprintf(stderr, "airlock: accept: %s\n", msg);
                return r == -ENOENT || r == -EINVAL ? EXIT_USAGE : EXIT_BAD;
        }
        printf("accept: %" PRIu64 " %s written, %" PRIu64 " removed, %" PRIu64 " %s", rep.written,
               plural(rep.written, "file", "files"), rep.removed, rep.dirs,
               plural(rep.dirs, "directory", "directories"));
        if (rep.complete)
                printf("; sandbox %s accepted\n", id);
        else
                printf("; %" PRIu64 " %s left (airlock diff %s)\n", rep.remaining,
                       plural(rep.remaining, "change", "changes"), id);
        return 0;
}

int cmd_discard(int argc, char **argv)
{
        _cleanup_free_ char *root = NULL, *dir = NULL;
        int first = parse_common("discard", discard_usage, argc, argv, &root);
        if (first < 0)
                return -1 - first;
        if (argc - first != 1)
                return usage_error("discard", "expected exactly one sandbox ID");
        int r = find_sandbox("discard", root, argv[first], &dir);
        if (r)
                return r;
        struct al_error err = {0};
        if (review_discard(dir, &err) < 0) {
                const char *msg = err.msg;
                if (strncmp(msg, "discard: ", 9) == 0)
                        msg += 9;
                fprintf(stderr, "airlock: discard: %s\n", msg);
                return EXIT_BAD;
        }
        printf("discard: the changes of sandbox %s are gone; the workspace is as it was\n",
               argv[first]);
        return 0;
}
