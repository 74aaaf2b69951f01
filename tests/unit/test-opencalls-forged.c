/* SPDX-License-Identifier: Apache-2.0 */
/* The calls under way are the calls the gateway started, whatever callId
 * the sandbox gives them (supervisor/opencalls.c). Before, a call's end
 * dropped the first call kept under the same callId: a refused request
 * (an unknown tool) sent with a running call's callId erased that call, so
 * a supervisor killed next left a tool.started with no end; and of two
 * running calls sharing a callId, the first to end dropped the other's
 * entry, so the closing line named the wrong tool and arguments. */
#pragma GCC diagnostic ignored "-Wunused-function" /* the shared helpers */
#include "opencalls.h"
#include "toolgate-test-util.h"

#define Q(s) "{\"runId\": \"" RUN_ID "\", " s "}\n"

static const char tools[] =
    "{\"allow\": [\"q.*\"], \"define\": {"
    "  \"q.sleep\": {\"args\": {\"type\": \"object\", \"properties\": {"
    "    \"m\": {\"type\": \"string\", \"pattern\": \"^[0-9.]+$\"}}, \"required\": [\"m\"]},"
    "   \"command\": [\"/usr/bin/python3\", \"%S\", \"sleep\", \"${args.m}\"],"
    "   \"concurrency\": 4, \"timeout\": \"10s\"}"
    "}}";

static char rundir[] = "/tmp/oc-forged-XXXXXX";
static struct open_calls *oc;

/* What the supervisor does (supervisor/core.c). */
static void sv_recorder(void *ud, const struct toolgate_record *rec)
{
        tg_recorder(ud, rec);
        open_calls_end(oc, rec->seq);
}

static int sv_ahead(void *ud, const struct toolgate_record *rec)
{
        int r = open_calls_start(oc, rec->seq, rec->call_id, rec->tool, rec->args_digest, rec->rule,
                                 1000);
        return r < 0 ? r : tg_ahead(ud, rec);
}

static void setup(void)
{
        cr_assert_not_null(mkdtemp(rundir));
        oc = open_calls_new(rundir);
        cr_assert_not_null(oc);
        tg_setup(tools);
        T.tg->recorder = sv_recorder;
        T.tg->ahead = sv_ahead;
}

static void fini(void)
{
        tg_teardown();
        oc = open_calls_free(oc);
        char path[256];
        snprintf(path, sizeof(path), "%s/%s", rundir, OPEN_CALLS_FILE);
        unlink(path);
        rmdir(rundir);
}

TestSuite(opencalls_forged, .init = setup, .fini = fini, .timeout = 30);

static json_t *left(void)
{
        json_t *calls = NULL;
        cr_assert_eq(open_calls_closing(rundir, NULL, NULL, 2000, "test", &calls), 0);
        return calls;
}

static void wait_started(size_t n)
{
        for (int i = 0; i < 400 && json_array_size(T.ahead) < n; i++) {
                tg_spin();
                usleep(5000);
        }
        cr_assert_eq(json_array_size(T.ahead), n, "the calls did not start");
}

Test(opencalls_forged, refusal_with_a_running_calls_id_does_not_erase_it)
{
        int a = tg_connect();
        tg_send(a, Q("\"callId\": \"x\", \"tool\": \"q.sleep\", \"args\": {\"m\": \"3\"}"));
        wait_started(1);
        int b = tg_connect();
        json_t *r = tg_call(b, Q("\"callId\": \"x\", \"tool\": \"q.none\", \"args\": {}"));
        assert_error(r, "policy_denied");
        json_decref(r);
        json_t *calls = left();
        cr_assert_eq(json_array_size(calls), 1,
                     "a refused request erased the running call of the same callId");
        cr_assert_str_eq(str_of(json_array_get(calls, 0), "tool"), "q.sleep");
        json_decref(calls);
        close(a);
        close(b);
}

Test(opencalls_forged, calls_sharing_an_id_end_as_themselves)
{
        int a = tg_connect();
        tg_send(a, Q("\"callId\": \"x\", \"tool\": \"q.sleep\", \"args\": {\"m\": \"3\"}"));
        wait_started(1);
        char slow[65];
        snprintf(slow, sizeof(slow), "%s", str_of(json_array_get(T.ahead, 0), "argsDigest"));
        int b = tg_connect();
        json_t *r =
            tg_call(b, Q("\"callId\": \"x\", \"tool\": \"q.sleep\", \"args\": {\"m\": \"0\"}"));
        cr_assert(json_is_true(json_object_get(r, "ok")), "%s", str_of(r, "safeMessage"));
        json_decref(r);
        json_t *calls = left();
        cr_assert_eq(json_array_size(calls), 1);
        cr_assert_str_eq(str_of(json_array_get(calls, 0), "argsDigest"), slow,
                         "the ended call's twin was dropped in its place");
        json_decref(calls);
        close(a);
        close(b);
}
