/* SPDX-License-Identifier: Apache-2.0 */
/* Attacks on the tool gateway from its review: a secret the tool prints in
 * a form the byte scrubber does not see (JSON escapes) or cut by the
 * message's length limit must still never reach the sandbox, and a sandbox
 * that never reads its answers cannot make the gateway hold more than its
 * per-sandbox bound. */
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
                 "   \"env\": {\"TOKEN\": \"${secret:TG_TEST_SECRET}\"}}"
                 "}}",
                 attack_script, attack_script);
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
