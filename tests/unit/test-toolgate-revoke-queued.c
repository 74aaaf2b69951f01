/* SPDX-License-Identifier: Apache-2.0 */
/* A tool revoked while the sandbox's calls of it wait their turn (its
 * concurrency spent): the calls that wait never run. Before, a call
 * queued under the grant ran on the host after the revoke, whenever the
 * running one ended; a sandbox could queue calls ahead to outlive one. */
#pragma GCC diagnostic ignored "-Wunused-function" /* the shared helpers */
#include "toolgate-test-util.h"

#define Q(s) "{\"runId\": \"" RUN_ID "\", " s "}\n"

static const char tools[] =
    "{\"allow\": [\"q.*\"], \"define\": {"
    "  \"q.sleep\": {\"args\": {\"type\": \"object\", \"properties\": {"
    "    \"m\": {\"type\": \"string\", \"pattern\": \"^[0-9.]+$\"}}, \"required\": [\"m\"]},"
    "   \"command\": [\"/usr/bin/python3\", \"%S\", \"sleep\", \"${args.m}\"],"
    "   \"concurrency\": 1, \"timeout\": \"10s\"}"
    "}}";

static bool revoked;

static bool live_allowed(void *ud, const char *name)
{
        return !revoked;
}

static void setup(void)
{
        revoked = false;
        tg_setup(tools);
        T.tg->allowed = live_allowed;
}

TestSuite(toolgate_revoke_queued, .init = setup, .fini = tg_teardown, .timeout = 30);

Test(toolgate_revoke_queued, waiting_calls_do_not_run_after_revoke)
{
        int fd = tg_connect();
        tg_send(fd, Q("\"callId\": \"first\", \"tool\": \"q.sleep\", \"args\": {\"m\": \"0.6\"}"));
        tg_send(fd, Q("\"callId\": \"queued\", \"tool\": \"q.sleep\", \"args\": {\"m\": \"0\"}"));
        /* Both admitted: the first runs, the second waits for it. */
        for (int i = 0; i < 400 && !T.tg->tools[0].queue_head; i++) {
                tg_spin();
                usleep(5000);
        }
        cr_assert_not_null(T.tg->tools[0].queue_head, "the second call is not waiting");
        cr_assert_eq(json_array_size(T.ahead), 1, "the first call did not start");
        revoked = true; /* the grant's operator revokes the tool */
        json_t *a = tg_read(fd, 8000), *b = tg_read(fd, 8000);
        cr_assert_not_null(a);
        cr_assert_not_null(b);
        json_t *queued = STREQ(str_of(a, "callId"), "queued") ? a : b;
        cr_assert(json_is_false(json_object_get(queued, "ok")),
                  "a call queued before the revoke ran after it");
        assert_error(queued, "policy_denied");
        cr_assert_eq(json_array_size(T.ahead), 1, "the revoked tool was started again");
        json_decref(a);
        json_decref(b);
        close(fd);
}

Test(toolgate_revoke_queued, running_call_stopped_by_revoke)
{
        int fd = tg_connect();
        tg_send(fd, Q("\"callId\": \"long\", \"tool\": \"q.sleep\", \"args\": {\"m\": \"8\"}"));
        for (int i = 0; i < 400 && !T.tg->running; i++) {
                tg_spin();
                usleep(5000);
        }
        cr_assert_not_null(T.tg->running, "the call did not start");
        uint64_t t0 = now_monotonic_us();
        revoked = true;
        toolgate_recheck(T.tg); /* what the supervisor does after a change */
        json_t *r = tg_read(fd, 5000);
        cr_assert_not_null(r);
        assert_error(r, "policy_denied");
        cr_assert(strstr(str_of(r, "safeMessage"), "revoked"), "%s", str_of(r, "safeMessage"));
        cr_assert_lt(now_monotonic_us() - t0, 4000000, "the revoked call ran on");
        json_t *last = last_record();
        cr_assert_str_eq(str_of(last, "errorCode"), "policy_denied");
        json_decref(r);
        close(fd);
}
