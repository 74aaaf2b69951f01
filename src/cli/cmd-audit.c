/* SPDX-License-Identifier: Apache-2.0 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <string.h>

#include "help.h"
#include "audit.h"
#include "commands.h"
#include "util.h"

#define EXIT_BAD   1
#define EXIT_USAGE 2

static const char audit_usage[] =
    "Usage: airlock audit COMMAND ...\n"
    "\n"
    "Commands:\n"
    "  verify FILE...   check the hash chain of an audit log\n"
    "  show FILE        print the events of an audit log as a timeline\n"
    "\n"
    "Run `airlock audit COMMAND --help` for the options of each.\n"
    "\n"
    "Examples:\n"
    "  airlock audit verify /var/lib/airlock/audit/audit.jsonl\n"
    "  airlock audit show --sandbox 3f2a audit.jsonl\n"
    "  airlock audit show --kind 'net.*' --json audit.jsonl\n";

static const char verify_usage[] =
    "Usage: airlock audit verify [OPTIONS] FILE...\n"
    "\n"
    "Check that FILE (or the files of one rotated log, oldest first) hold an\n"
    "unbroken chain: no line edited, inserted, reordered, removed or cut short.\n"
    "One FILE is checked with its rotated files FILE.N ... FILE.1 before it; a\n"
    "rotated file missing between two others is reported. Lines removed from\n"
    "the end of the newest file, or a change to its last line, can only be\n"
    "caught against a seq and hash recorded elsewhere.\n"
    "\n"
    "Examples:\n"
    "  airlock audit verify /var/lib/airlock/audit/audit.jsonl\n"
    "  airlock audit verify --no-rotated audit.jsonl\n"
    "  airlock audit verify audit.jsonl.2 audit.jsonl.1 audit.jsonl\n"
    "\n"
    "Options:\n"
    "      --no-rotated           check FILE alone, not its rotated files\n"
    "      --json                 print the result as one JSON object: ok, lines,\n"
    "                             firstSeq, lastSeq (badSeq, torn, reason when\n"
    "                             broken; missingRotated)\n"
    "      --from-rotated         the chain may start after seq 1 (older files\n"
    "                             rotated away; implied when rotated files exist)\n"
    "  -h, --help                 show this help\n"
    "\n"
    "More options:\n"
    "      --expect-last SEQ[:SHA256]\n"
    "                             the chain must reach SEQ (and that line must\n"
    "                             have this hash)\n"
    "\n"
    "Exit status: 0 when the chain holds, 1 when it is broken, 2 on usage errors\n"
    "or unreadable files.\n";

static const char show_usage[] =
    "Usage: airlock audit show [OPTIONS] FILE\n"
    "\n"
    "Print one line per event: time, sandbox, kind and the event's fields, from\n"
    "FILE's rotated files (FILE.N ... FILE.1) first, then FILE.\n"
    "\n"
    "Examples:\n"
    "  airlock audit show audit.jsonl\n"
    "  airlock audit show --sandbox 3f2a audit.jsonl\n"
    "  airlock audit show --kind 'net.*' --json audit.jsonl\n"
    "\n"
    "Options:\n"
    "      --sandbox ID   only events of this sandbox (an id prefix is enough)\n"
    "      --kind KIND    only events of this kind (\"net.*\" matches a prefix)\n"
    "      --json         print the matching lines as they are stored\n"
    "  -h, --help         show this help\n";

static int usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* One line saying what is wrong, and where the help is. */
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

static int bad_option(const char *cmd, int c, char **argv)
{
        if (c == ':')
                return usage_error(cmd, "option \"%s\" needs an argument", argv[optind - 1]);
        if (optopt)
                return usage_error(cmd, "unknown option \"-%c\"", optopt);
        return usage_error(cmd, "unknown option \"%s\"", argv[optind - 1]);
}

static int verify_main(int argc, char **argv)
{
        enum { OPT_ROTATED = 256, OPT_NO_ROTATED, OPT_FROM_ROTATED, OPT_EXPECT_LAST, OPT_JSON };
        static const struct option options[] = {
            {"rotated", no_argument, NULL, OPT_ROTATED},
            {"no-rotated", no_argument, NULL, OPT_NO_ROTATED},
            {"from-rotated", no_argument, NULL, OPT_FROM_ROTATED},
            {"expect-last", required_argument, NULL, OPT_EXPECT_LAST},
            {"json", no_argument, NULL, OPT_JSON},
            {"help", no_argument, NULL, 'h'},
            {},
        };
        struct audit_verify_options vopt = {0};
        char expect_hash[AUDIT_HASH_HEX + 1];
        bool rotated = false, no_rotated = false, as_json = false;
        unsigned long missing = 0;
        int c;

        optind = 0;
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
                switch (c) {
                case 'h':
                        help_print(stdout, verify_usage, "audit");
                        return 0;
                case OPT_ROTATED:
                        rotated = true;
                        break;
                case OPT_NO_ROTATED:
                        no_rotated = true;
                        break;
                case OPT_FROM_ROTATED:
                        vopt.from_rotated = true;
                        break;
                case OPT_JSON:
                        as_json = true;
                        break;
                case OPT_EXPECT_LAST: {
                        _cleanup_free_ char *seq = xstrdup(optarg);
                        char *colon = strchr(seq, ':');
                        if (colon) {
                                *colon = '\0';
                                if (strlen(colon + 1) != AUDIT_HASH_HEX ||
                                    strspn(colon + 1, "0123456789abcdef") != AUDIT_HASH_HEX)
                                        return usage_error("audit verify",
                                                           "--expect-last: \"%s\" is not a "
                                                           "SHA-256 in lowercase hex",
                                                           colon + 1);
                                memcpy(expect_hash, colon + 1, sizeof(expect_hash));
                                vopt.expect_last_hash = expect_hash;
                        }
                        if (safe_atou64(seq, &vopt.expect_last_seq) < 0 ||
                            vopt.expect_last_seq == 0)
                                return usage_error("audit verify",
                                                   "--expect-last: \"%s\" is not a seq", optarg);
                        break;
                }
                default:
                        return bad_option("audit verify", c, argv);
                }
        }
        if (optind >= argc)
                return usage_error("audit verify", "no FILE given");
        if (rotated && argc - optind != 1)
                return usage_error("audit verify", "--rotated takes exactly one FILE");
        if (rotated && no_rotated)
                return usage_error("audit verify", "--rotated and --no-rotated exclude each other");

        _cleanup_strv_ char **paths = NULL;
        size_t n = 0;
        if (argc - optind == 1 && !no_rotated) {
                int r = audit_rotated_files(argv[optind], &paths, &n, &missing);
                if (r < 0) {
                        fprintf(stderr,
                                "airlock: audit verify: listing the rotated files of "
                                "\"%s\": %s\n",
                                argv[optind], strerror(-r));
                        return EXIT_USAGE;
                }
                if (missing && !as_json) {
                        printf("audit: %s.%lu: missing: rotated files older and newer than it "
                               "exist, so lines were removed from the middle of the log\n",
                               argv[optind], missing);
                        return EXIT_BAD;
                }
                /* The oldest rotated file may start mid-chain: older ones
                 * go when the log keeps its number of files. */
                if (n > 1)
                        vopt.from_rotated = true;
        } else
                for (int i = optind; i < argc; i++)
                        paths = strv_append(paths, &n, argv[i]);

        struct audit_verify_result res;
        struct al_error err = {0};
        int r = audit_verify_files((const char *const *)paths, n, &vopt, &res, &err);
        if (r < 0) {
                fprintf(stderr, "airlock: audit verify: %s\n", err.msg);
                return EXIT_USAGE;
        }
        if (as_json) {
                json_t *o = audit_verify_result_json(&res, missing);
                bool ok = json_is_true(json_object_get(o, "ok"));
                int w = json_dumpf(o, stdout, JSON_COMPACT);
                json_decref(o);
                if (w < 0 || putchar('\n') == EOF)
                        return EXIT_USAGE;
                return ok ? 0 : EXIT_BAD;
        }
        if (!res.ok) {
                if (res.bad_seq)
                        printf("audit: %s: line %" PRIu64 " (seq %" PRIu64 "): %s\n",
                               paths[res.bad_file], res.bad_line, res.bad_seq, res.reason);
                else
                        printf("audit: %s: line %" PRIu64 ": %s\n", paths[res.bad_file],
                               res.bad_line, res.reason);
                /* Several FILEs are one chain; separate logs look broken. */
                if (n > 1 && argc - optind > 1 && res.bad_file > 0)
                        printf("audit: the %zu FILEs were checked as one rotated log, oldest "
                               "first (FILE.N ... FILE.1 FILE); to check separate logs, run "
                               "'airlock audit verify FILE' once for each\n",
                               n);
                return EXIT_BAD;
        }
        printf("audit: %" PRIu64 " lines OK", res.lines);
        if (n > 1)
                printf(" in %zu files", n);
        if (res.lines > 0)
                printf(" (seq %" PRIu64 "..%" PRIu64 ", last hash %s)", res.first_seq, res.last_seq,
                       res.last_hash);
        putchar('\n');
        if (res.lines > 0 && res.first_seq > 1)
                printf("audit: the chain starts at seq %" PRIu64
                       ": older lines were rotated away\n",
                       res.first_seq);
        return 0;
}

struct show_ctx {
        const char *path;
        const char *sandbox;
        const char *kind;
        bool json;
        uint64_t bad;
};

/* Sandbox data can reach the log (host names, argv), so nothing is printed
 * raw: a stored escape sequence must not drive the reader's terminal. */
static void put_safe(const char *s, size_t max, bool ellipsis)
{
        size_t n = 0;
        for (; *s && n < max; s++, n++)
                putchar((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f ? *s : '?');
        if (*s && ellipsis)
                fputs("...", stdout);
}

static bool is_plain(const char *s)
{
        if (!*s)
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
                      (*s >= '0' && *s <= '9') || strchr("._:/@+-,", *s)))
                        return false;
        return true;
}

static void put_value(json_t *v)
{
        enum { VALUE_MAX = 80 };

        if (json_is_string(v) && is_plain(json_string_value(v))) {
                put_safe(json_string_value(v), VALUE_MAX, true);
                return;
        }
        _cleanup_free_ char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_ENSURE_ASCII);
        if (s)
                put_safe(s, VALUE_MAX, true);
}

static bool kind_matches(const char *pattern, const char *kind)
{
        size_t n = strlen(pattern);
        if (n > 0 && pattern[n - 1] == '*')
                return strncmp(pattern, kind, n - 1) == 0;
        return STREQ(pattern, kind);
}

static int show_line(const char *line, size_t len, uint64_t lineno, bool complete, void *userdata)
{
        struct show_ctx *ctx = userdata;
        /* A line of that sandbox names it: the cheap test first, the parse
         * decides (the daemon reads a sandbox's lines of a large log). */
        if (ctx->sandbox && complete && !memmem(line, len, ctx->sandbox, strlen(ctx->sandbox)))
                return 0;
        json_error_t jerr;
        json_t *o = json_loadb(line, len, 0, &jerr);
        const char *ts = json_string_value(json_object_get(o, "ts"));
        const char *sandbox = json_string_value(json_object_get(o, "sandbox"));
        const char *kind = json_string_value(json_object_get(o, "kind"));

        if (!complete || !json_is_object(o) || !ts || !sandbox || !kind) {
                fprintf(stderr,
                        "airlock: %s: line %" PRIu64
                        " is not an audit record%s; check the log with `airlock audit verify`\n",
                        ctx->path, lineno, complete ? "" : " (incomplete)");
                ctx->bad++;
                json_decref(o);
                return 0;
        }
        if ((ctx->sandbox && strncmp(sandbox, ctx->sandbox, strlen(ctx->sandbox)) != 0) ||
            (ctx->kind && !kind_matches(ctx->kind, kind))) {
                json_decref(o);
                return 0;
        }
        if (ctx->json) {
                fwrite(line, 1, len, stdout);
                putchar('\n');
                json_decref(o);
                return 0;
        }

        static const char *const skip[] = {"seq", "ts", "sandbox", "kind", "prev"};
        json_t *seq = json_object_get(o, "seq");
        printf("%6" PRIu64 "  ", json_is_integer(seq) ? (uint64_t)json_integer_value(seq) : 0);
        /* 2026-11-22T10:00:00.123456Z → 2026-11-22 10:00:00.123 */
        char when[24];
        snprintf(when, sizeof(when), "%.23s", ts);
        if (strlen(when) > 10 && when[10] == 'T')
                when[10] = ' ';
        put_safe(when, sizeof(when) - 1, false);
        fputs("  ", stdout);
        put_safe(sandbox, 8, false);
        printf("%*s  ", strlen(sandbox) < 8 ? (int)(8 - strlen(sandbox)) : 0, "");
        put_safe(kind, 24, true);
        printf("%*s", strlen(kind) < 16 ? (int)(16 - strlen(kind)) : 0, "");

        const char *key;
        json_t *val;
        json_object_foreach(o, key, val)
        {
                bool reserved = false;
                for (size_t i = 0; i < ARRAY_SIZE(skip); i++)
                        reserved = reserved || STREQ(key, skip[i]);
                if (reserved)
                        continue;
                putchar(' ');
                put_safe(key, 32, true);
                putchar('=');
                put_value(val);
        }
        putchar('\n');
        json_decref(o);
        return 0;
}

static int show_main(int argc, char **argv)
{
        enum { OPT_SANDBOX = 256, OPT_KIND, OPT_JSON };
        static const struct option options[] = {
            {"sandbox", required_argument, NULL, OPT_SANDBOX},
            {"kind", required_argument, NULL, OPT_KIND},
            {"json", no_argument, NULL, OPT_JSON},
            {"help", no_argument, NULL, 'h'},
            {},
        };
        struct show_ctx ctx = {0};
        int c;

        optind = 0;
        while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
                switch (c) {
                case 'h':
                        help_print(stdout, show_usage, "audit");
                        return 0;
                case OPT_SANDBOX:
                        ctx.sandbox = optarg;
                        break;
                case OPT_KIND:
                        ctx.kind = optarg;
                        break;
                case OPT_JSON:
                        ctx.json = true;
                        break;
                default:
                        return bad_option("audit show", c, argv);
                }
        }
        if (argc - optind != 1)
                return usage_error("audit show", "expected exactly one FILE");
        ctx.path = argv[optind];

        /* The rotated files first, oldest first: one timeline. */
        _cleanup_strv_ char **paths = NULL;
        size_t n = 0;
        struct al_error err = {0};
        int r = audit_rotated_paths(argv[optind], &paths, &n);
        if (r < 0) {
                fprintf(stderr, "airlock: audit show: listing the rotated files of \"%s\": %s\n",
                        argv[optind], strerror(-r));
                return EXIT_USAGE;
        }
        for (size_t i = 0; i < n && r >= 0; i++) {
                ctx.path = paths[i];
                r = audit_foreach_line(ctx.path, show_line, &ctx, &err);
        }
        fflush(stdout);
        if (r < 0) {
                fprintf(stderr, "airlock: audit show: %s\n", err.msg);
                return EXIT_USAGE;
        }
        return 0;
}

int cmd_audit(int argc, char **argv)
{
        if (argc < 2) {
                return usage_error("audit", "no command given (verify or show)");
        }
        if (STREQ(argv[1], "-h") || STREQ(argv[1], "--help") || STREQ(argv[1], "help")) {
                help_print(stdout, audit_usage, "audit");
                return 0;
        }
        if (STREQ(argv[1], "verify"))
                return verify_main(argc - 1, argv + 1);
        if (STREQ(argv[1], "show"))
                return show_main(argc - 1, argv + 1);
        return usage_error("audit", "unknown command \"%s\"", argv[1]);
}
