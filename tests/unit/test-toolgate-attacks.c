/* SPDX-License-Identifier: Apache-2.0 */
/* Attacks on the tool gateway from its review: a secret the tool prints in
 * a form the byte scrubber does not see (JSON escapes) or cut by the
 * message's length limit must still never reach the sandbox, and a sandbox
 * that never reads its answers cannot make the gateway hold more than its
 * per-sandbox bound. */
#include <malloc.h>

#include "toolgate-test-util.h"

#define Q(s)   "{\"runId\": \"" RUN_ID "\", " s "}\n"
#define SECRET "s3cr3t-Value-7f2c91"
/* Not ASCII: a JSON encoder that escapes it (Python's json.dumps does by
 * default) spells it "p\\u00e4ss..." */
#define SECRET_U                                                                                   \
        "p\xc3\xa4sswort-\xc3\x9c"                                                                 \
        "n\xc3\xaf"                                                                                \
        "code-42"

static char attack_script[128];

static const char attack_py[] = "import sys, os, json\n"
                                "mode = sys.argv[1]\n"
                                "tok = os.environ.get('TOKEN', '')\n"
                                "if mode == 'escaped':\n"
                                "    print(json.dumps({'t': tok, tok: [tok]}))\n"
                                "elif mode == 'passfd':\n"
                                "    import socket\n"
                                "    s = socket.socket(socket.AF_UNIX)\n"
                                "    s.connect(sys.argv[2])\n"
                                "    socket.send_fds(s, [b'x'], [1, 2])\n"
                                "    sys.exit(0)\n"
                                "elif mode == 'cut':\n"
                                "    sys.stderr.write('x' * int(sys.argv[2]) + tok + '\\n')\n"
                                "    sys.exit(1)\n";

static void setup_attacks(void)
{
        setenv("TG_TEST_SECRET", SECRET, 1);
        setenv("TG_ATTACK_SECRET", SECRET_U, 1);
        snprintf(attack_script, sizeof(attack_script), "/tmp/tg-attack-%d.py", (int)getpid());
        FILE *f = fopen(attack_script, "w");
        cr_assert_not_null(f);
        fputs(attack_py, f);
        fclose(f);
        chmod(attack_script, 0755);
        char tools[4096];
        snprintf(tools, sizeof(tools),
                 "{\"allow\": [\"a.*\"], \"define\": {"
                 "  \"a.escaped\": {\"command\": [\"/usr/bin/python3\", \"%s\", \"escaped\"],"
                 "   \"env\": {\"TOKEN\": \"${secret:TG_ATTACK_SECRET}\"}},"
                 "  \"a.cut\": {\"args\": {\"type\": \"object\", \"properties\": {"
                 "    \"n\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 400}},"
                 "    \"required\": [\"n\"]},"
                 "   \"command\": [\"/usr/bin/python3\", \"%s\", \"cut\", \"${args.n}\"],"
                 "   \"env\": {\"TOKEN\": \"${secret:TG_TEST_SECRET}\"}},"
                 "  \"a.passfd\": {\"args\": {\"type\": \"object\", \"properties\": {"
                 "    \"p\": {\"type\": \"string\"}}, \"required\": [\"p\"]},"
                 "   \"command\": [\"/usr/bin/python3\", \"%s\", \"passfd\", \"${args.p}\"],"
                 "   \"timeout\": \"1s\"}"
                 "}}",
                 attack_script, attack_script, attack_script);
        tg_setup(tools);
}

static void teardown_attacks(void)
{
        tg_teardown();
        unlink(attack_script);
}

TestSuite(toolgate_attacks, .init = setup_attacks, .fini = teardown_attacks, .timeout = 60);

/* Neither the secret nor any 8-byte piece of it is in s. */
static void assert_no_piece(const char *secret, const char *what, const char *s)
{
        for (size_t i = 0; i + 8 <= strlen(secret); i++) {
                char piece[9];
                memcpy(piece, secret + i, 8);
                piece[8] = '\0';
                cr_assert_null(strstr(s, piece), "%s holds \"%s\" of the secret: %s", what, piece,
                               s);
        }
}

/* A tool whose JSON encoder escapes characters (\uXXXX, "\/"): the parsed
 * value holds the secret although the printed bytes do not. */
Test(toolgate_attacks, json_escaped_secret_scrubbed)
{
        int fd = tg_connect();
        json_t *r = tg_call(fd, Q("\"callId\": \"e\", \"tool\": \"a.escaped\""));
        cr_assert(json_is_true(json_object_get(r, "ok")), "%s", str_of(r, "safeMessage"));
        char *s = json_dumps(r, JSON_COMPACT);
        assert_no_piece(SECRET_U, "the answer", s);
        cr_assert(strstr(s, REDACTOR_MARK), "%s", s);
        free(s);
        json_decref(r);
        close(fd);
}

/* The secret straddles the point where the message's stderr line is cut:
 * the part before the cut must not be shown. */
Test(toolgate_attacks, stderr_secret_cut_not_shown)
{
        int fd = tg_connect();
        for (int n = 130; n <= 170; n += 2) {
                char line[256];
                snprintf(line, sizeof(line),
                         Q("\"callId\": \"c\", \"tool\": \"a.cut\", \"args\": {\"n\": %d}"), n);
                json_t *r = tg_call(fd, line);
                assert_error(r, "tool_failed");
                assert_no_piece(SECRET, "safeMessage", str_of(r, "safeMessage"));
                json_decref(r);
        }
        cr_assert_str_eq(str_of(last_record(), "errorCode"), "tool_failed");
        char *s = json_dumps(T.records, JSON_COMPACT);
        assert_no_piece(SECRET, "the records", s);
        free(s);
        close(fd);
}

/* A gateway whose one tool has a large schema, so that each "op": "list"
 * answer is large (a description is free text of any length). */
#define BIG_DESC 500000
static void setup_big_list(void)
{
        memset(&T, 0, sizeof(T));
        T.records = json_array();
        snprintf(T.dir, sizeof(T.dir), "/tmp/tg-attack-XXXXXX");
        cr_assert_not_null(mkdtemp(T.dir));
        snprintf(T.sock, sizeof(T.sock), "%s/tool.sock", T.dir);
        char *json = xcalloc(1, BIG_DESC + 1024);
        size_t n = (size_t)snprintf(
            json, 1024,
            "{\"tools\": {\"allow\": [\"b.list\"], \"define\": {\"b.list\": {\"args\": "
            "{\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"string\", "
            "\"description\": \"");
        memset(json + n, 'd', BIG_DESC);
        snprintf(json + n + BIG_DESC, 1024, "\"}}}, \"command\": [\"/usr/bin/true\"]}}}}");
        tg_start(json);
        free(json);
}

/* Every connection the sandbox may open asks for the list again and again
 * and never reads: what the gateway holds for the sandbox stays near its
 * per-sandbox bound (TOOLGATE_HELD_MAX), not a multiple of it per
 * connection. */
Test(toolgate_attacks_mem, unread_answers_bounded_per_sandbox, .init = setup_big_list,
     .fini = tg_teardown, .timeout = 60)
{
        enum { PER = 24 };
        int fds[TOOLGATE_CONNECTIONS_MAX];
        const char *list = Q("\"op\": \"list\"");
        size_t base = mallinfo2().uordblks, peak = base;
        for (int i = 0; i < TOOLGATE_CONNECTIONS_MAX; i++) {
                fds[i] = tg_connect();
                for (int k = 0; k < PER; k++)
                        cr_assert_eq(send(fds[i], list, strlen(list), MSG_NOSIGNAL),
                                     (ssize_t)strlen(list));
                for (int s = 0; s < 8; s++)
                        tg_spin();
                size_t now = mallinfo2().uordblks;
                peak = now > peak ? now : peak;
        }
        for (int s = 0; s < 200; s++) {
                tg_spin();
                size_t now = mallinfo2().uordblks;
                peak = now > peak ? now : peak;
        }
        size_t grown = peak > base ? peak - base : 0;
        cr_assert_lt(grown, (size_t)TOOLGATE_HELD_MAX + (24u << 20),
                     "the gateway holds %zu MiB for one sandbox that reads nothing", grown >> 20);
        for (int i = 0; i < TOOLGATE_CONNECTIONS_MAX; i++)
                close(fds[i]);
}

/* A tools policy with one command tool of argv template `argv` (a JSON
 * array's members) and a string argument "x": whether it loads. */
static int load_template(const char *argv, char *msg, size_t size)
{
        char json[2048];
        snprintf(json, sizeof(json),
                 "{\"tools\": {\"allow\": [\"i.t\"], \"define\": {\"i.t\": {\"args\": {\"type\": "
                 "\"object\", \"properties\": {\"x\": {\"type\": \"string\"}}, \"required\": "
                 "[\"x\"]}, \"command\": [%s]}}}}",
                 argv);
        struct policy *p = policy_new();
        struct al_error e = {0};
        int r = policy_load_string(p, json, "test", &e);
        if (r >= 0)
                r = policy_finalize(p, "/", "/root", &e);
        snprintf(msg, size, "%.400s", e.msg);
        policy_free(p);
        return r;
}

/* An interpreter's option that takes the next element as its value is not
 * the script: an argument after it would be the script (the code). */
Test(toolgate_attacks_load, interpreter_option_value_is_not_the_script)
{
        static const char *const refused[] = {
            "\"/usr/bin/python3\", \"-W\", \"ignore\", \"${args.x}\"",
            "\"/usr/bin/python3\", \"-X\", \"utf8\", \"${args.x}\"",
            "\"/usr/bin/awk\", \"-v\", \"n=1\", \"${args.x}\"",
            "\"/usr/bin/mawk\", \"-F\", \":\", \"${args.x}\"",
            "\"/usr/bin/jq\", \"--arg\", \"k\", \"v\", \"${args.x}\"",
            "\"/usr/bin/jq\", \"--indent\", \"2\", \"${args.x}\"",
            "\"/usr/bin/sed\", \"-l\", \"80\", \"${args.x}\"",
            "\"/usr/bin/perl\", \"-I\", \"/usr/share/perl5\", \"${args.x}\"",
            "\"/usr/bin/node\", \"--title\", \"t\", \"${args.x}\"",
        };
        static const char *const loaded[] = {
            "\"/usr/bin/python3\", \"-I\", \"/opt/t.py\", \"${args.x}\"",
            "\"/usr/bin/python3\", \"-W\", \"ignore\", \"/opt/t.py\", \"${args.x}\"",
            "\"/usr/bin/awk\", \"-v\", \"n=1\", \"{print}\", \"${args.x}\"",
            "\"/usr/bin/jq\", \"--arg\", \"k\", \"v\", \".\", \"${args.x}\"",
            "\"/usr/bin/python3\", \"-m\", \"json.tool\", \"${args.x}\"",
        };
        char msg[512];
        for (size_t i = 0; i < ARRAY_SIZE(refused); i++)
                cr_expect_lt(load_template(refused[i], msg, sizeof(msg)), 0, "loaded: [%s]",
                             refused[i]);
        for (size_t i = 0; i < ARRAY_SIZE(loaded); i++)
                cr_expect_geq(load_template(loaded[i], msg, sizeof(msg)), 0, "[%s]: %s", loaded[i],
                              msg);
}

/* PowerShell's -Command (any case, any prefix) runs the rest of its
 * argv as one command line: an argument after it is code. */
Test(toolgate_attacks_load, pwsh_command_is_a_code_option)
{
        static const char *const refused[] = {
            "\"/usr/bin/pwsh\", \"-Command\", \"Get-Date\", \"${args.x}\"",
            "\"/usr/bin/pwsh\", \"-NoProfile\", \"-command\", \"Get-Date\", \"${args.x}\"",
            "\"/usr/bin/pwsh\", \"-Comm\", \"Get-Date\", \"${args.x}\"",
            "\"/usr/bin/pwsh\", \"-cwa\", \"Get-Date\", \"${args.x}\"",
            "\"/usr/bin/pwsh\", \"-EncodedCommand\", \"ZQBjAGgAbwA=\", \"${args.x}\"",
        };
        char msg[512];
        for (size_t i = 0; i < ARRAY_SIZE(refused); i++)
                cr_expect_lt(load_template(refused[i], msg, sizeof(msg)), 0, "loaded: [%s]",
                             refused[i]);
        cr_expect_geq(load_template("\"/usr/bin/pwsh\", \"-NoProfile\", \"-File\", "
                                    "\"/opt/t.ps1\", \"${args.x}\"",
                                    msg, sizeof(msg)),
                      0, "%s", msg);
}

/* The audit refuses a line over 1 MiB (AUDIT_LINE_MAX), and a failed audit
 * stops the sandbox: a record must stay small whatever the arguments, or a
 * sandbox could make its calls go unrecorded (and grow the log by a
 * megabyte a refusal). The digest still pins the arguments. */
static void setup_records(void)
{
        tg_setup("{\"allow\": [\"r.*\"], \"define\": {"
                 "  \"r.nums\": {\"args\": {\"type\": \"object\", \"properties\": {"
                 "    \"a\": {\"type\": \"array\", \"items\": {\"type\": \"integer\", "
                 "\"maximum\": 1}}}},"
                 "   \"command\": [\"/usr/bin/true\"]}}}");
}

static size_t record_size(json_t *rec)
{
        char *s = json_dumps(rec, JSON_COMPACT);
        size_t n = s ? strlen(s) : 0;
        free(s);
        return n;
}

Test(toolgate_attacks_records, records_bounded, .init = setup_records, .fini = tg_teardown,
     .timeout = 60)
{
        enum { BIG = 900000 };
        int fd = tg_connect();
        /* Refused (unknown tool), its one argument control characters that
         * JSON spells six bytes each. */
        char *line = xcalloc(1, BIG + 256);
        size_t n = (size_t)snprintf(line, 256,
                                    "{\"runId\": \"" RUN_ID "\", \"callId\": \"big\", \"tool\": "
                                    "\"r.none\", \"args\": {\"s\": \"");
        for (size_t i = 0; i < BIG / 6; i++)
                memcpy(line + n + 6 * i, "\\u0001", 6);
        n += BIG / 6 * 6;
        memcpy(line + n, "\"}}\n", 5);
        json_t *r = tg_call(fd, line);
        assert_error(r, "policy_denied");
        json_decref(r);
        json_t *rec = last_record();
        cr_assert_lt(record_size(rec), 65536u, "a refusal's record is %zu bytes", record_size(rec));
        cr_assert_eq(strlen(str_of(rec, "argsDigest")), 64u);

        /* Allowed, every one of many numbers clamped. */
        n = (size_t)snprintf(line, 256,
                             "{\"runId\": \"" RUN_ID "\", \"callId\": \"nums\", \"tool\": "
                             "\"r.nums\", \"args\": {\"a\": [");
        for (size_t i = 0; i < 100000; i++)
                n += (size_t)snprintf(line + n, 16, "%s7", i ? "," : "");
        memcpy(line + n, "]}}\n", 5);
        r = tg_call(fd, line);
        cr_assert(json_is_true(json_object_get(r, "ok")), "%s", str_of(r, "safeMessage"));
        json_decref(r);
        rec = last_record();
        cr_assert_str_eq(str_of(rec, "callId"), "nums");
        cr_assert_lt(record_size(rec), 256u * 1024, "a call's record is %zu bytes",
                     record_size(rec));
        cr_assert_eq(strlen(str_of(rec, "argsDigest")), 64u);
        free(line);
        close(fd);
}

/* A tool hands its stdout and stderr to a process outside its namespace
 * (here the test, as a host service would hold them) and exits: the
 * namespace's death does not close them, so the call must still end at
 * its timeout rather than wait for an end of output that never comes. */
Test(toolgate_attacks, pipe_held_outside_ends_at_timeout)
{
        char path[100];
        snprintf(path, sizeof(path), "%s/holder.sock", T.dir);
        int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        cr_assert_eq(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(listen(l, 1), 0);
        int fd = tg_connect();
        char line[512];
        snprintf(line, sizeof(line),
                 Q("\"callId\": \"p\", \"tool\": \"a.passfd\", \"args\": {\"p\": \"%s\"}"), path);
        tg_send(fd, line);
        /* Take the descriptors and keep them while the gateway waits. */
        int held[2] = {-1, -1};
        uint64_t deadline = now_monotonic_us() + 10 * 1000000ull;
        int c = -1;
        while (c < 0 && now_monotonic_us() < deadline) {
                tg_spin();
                struct pollfd p = {.fd = l, .events = POLLIN};
                if (poll(&p, 1, 10) == 1)
                        c = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        }
        cr_assert_geq(c, 0, "the tool did not connect");
        char data;
        char cbuf[CMSG_SPACE(2 * sizeof(int))];
        struct iovec iov = {.iov_base = &data, .iov_len = 1};
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
        cr_assert_eq(recvmsg(c, &mh, MSG_CMSG_CLOEXEC), 1);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cr_assert_not_null(cm);
        memcpy(held, CMSG_DATA(cm), sizeof(held));
        json_t *r = tg_read(fd, 8000);
        assert_error(r, "timeout");
        json_decref(r);
        cr_assert_str_eq(str_of(last_record(), "errorCode"), "timeout");
        close(held[0]);
        close(held[1]);
        close(c);
        close(l);
        unlink(path);
        close(fd);
}
