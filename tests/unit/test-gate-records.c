/* SPDX-License-Identifier: Apache-2.0 */
/* The gate's records on their way to the audit log (supervisor/core.c): a
 * record of something that has ended waits for the end of the loop turn
 * and goes out with the turn's others in one append; any other record, a
 * sync, freeing the core and closing the log write the queue first, so the
 * log keeps the order in which the gate recorded; the chain verifies. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "core.h"
#include "netgate/netgate.h"
#include "util.h"

static char dir[64];
static char logpath[128];
static struct policy *pol;
static struct sv_core core;
static int faults;
static bool freed;

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
        return remove(p);
}

static void on_fault(struct sv_core *c, void *driver)
{
        faults++;
}

/* The driver's recorder, as supervisor.c's: build the event, record it. */
static void recorder(void *ud, const struct netgate_record *rec)
{
        sv_core_record(ud, "net.decision", json_pack("{s:s}", "host", rec->host));
}

static void setup(void)
{
        struct al_error err = {0};
        snprintf(dir, sizeof(dir), "/tmp/airlock-test-gaterec-XXXXXX");
        cr_assert_not_null(mkdtemp(dir));
        snprintf(logpath, sizeof(logpath), "%s/audit.jsonl", dir);
        alarm(60);
        pol = policy_new();
        faults = 0;
        freed = false;
        sv_core_init(&core, pol, on_fault, NULL);
        cr_assert_eq(sv_core_set_id(&core, NULL, &err), 0, "%s", err.msg);
        cr_assert_eq(sv_core_loop_new(&core, &err), 0, "%s", err.msg);
        cr_assert_eq(sv_core_open_audit(&core, logpath, NULL, NULL, &err), 0, "%s", err.msg);
        sv_core_gate_records(&core, recorder, &core);
}

static void teardown(void)
{
        if (!freed)
                sv_core_free(&core);
        sv_core_close_audit(&core);
        pol = policy_free(pol);
        alarm(0);
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(gate_records, .init = setup, .fini = teardown);

static void gate_records(const char *host, bool ended)
{
        struct netgate_record r = {
            .protocol = "http", .host = host, .address = "", .decision = "allow", .ended = ended};
        sv_core_gate_record(&core, &r);
}

/* The hosts of the log's lines, in order, joined by spaces; and whether
 * the chain verifies. */
static char *hosts_in_log(void)
{
        static char out[1024];
        out[0] = '\0';
        FILE *f = fopen(logpath, "re");
        cr_assert_not_null(f);
        char line[4096];
        while (fgets(line, sizeof(line), f)) {
                json_t *o = json_loads(line, 0, NULL);
                cr_assert_not_null(o, "a line that is not JSON: %s", line);
                const char *h = json_string_value(json_object_get(o, "host"));
                size_t n = strlen(out);
                snprintf(out + n, sizeof(out) - n, "%s%s", n ? " " : "", h ? h : "-");
                json_decref(o);
        }
        fclose(f);
        struct audit_verify_result vr;
        struct al_error err = {0};
        const char *paths[] = {logpath};
        cr_assert_eq(audit_verify_files(paths, 1, NULL, &vr, &err), 0, "%s", err.msg);
        cr_assert(vr.ok, "the chain does not verify: %s", vr.reason);
        return out;
}

static void turn(void)
{
        cr_assert_geq(event_base_loop(core.base, EVLOOP_NONBLOCK), 0);
}

Test(gate_records, ended_records_go_out_together_at_the_end_of_the_turn)
{
        gate_records("a", true);
        gate_records("b", true);
        gate_records("c", true);
        cr_assert_str_eq(hosts_in_log(), "", "written before the turn ended");
        turn();
        cr_assert_str_eq(hosts_in_log(), "a b c");
        turn();
        cr_assert_str_eq(hosts_in_log(), "a b c", "written twice");
        cr_assert_eq(faults, 0);
}

Test(gate_records, a_record_that_comes_before_its_action_is_written_at_once_after_the_queue)
{
        gate_records("a", true);
        gate_records("b", true);
        gate_records("deny", false);
        cr_assert_str_eq(hosts_in_log(), "a b deny");
        gate_records("c", true);
        sv_core_record(&core, "process.ended", json_pack("{s:s}", "host", "other"));
        cr_assert_str_eq(hosts_in_log(), "a b deny c other");
        turn();
        cr_assert_str_eq(hosts_in_log(), "a b deny c other");
}

Test(gate_records, a_sync_and_the_end_write_the_queue)
{
        gate_records("a", true);
        cr_assert_eq(sv_core_commit(&core), 0);
        cr_assert_str_eq(hosts_in_log(), "a");
        gate_records("b", true);
        sv_core_free(&core); /* the loop is gone: nothing may stay queued */
        freed = true;
        cr_assert_str_eq(hosts_in_log(), "a b");
        gate_records("c", true); /* no loop: written at once */
        cr_assert_str_eq(hosts_in_log(), "a b c");
}

Test(gate_records, a_long_turn_is_written_in_bounded_batches)
{
        char h[16];
        for (int i = 0; i < 200; i++) {
                snprintf(h, sizeof(h), "h%d", i);
                gate_records(h, true);
        }
        /* At most 64 wait: the rest are in the log already. */
        char *got = hosts_in_log();
        cr_assert_not_null(strstr(got, "h127"), "%s", got);
        turn();
        got = hosts_in_log();
        cr_assert_not_null(strstr(got, "h198 h199"), "%s", got);
        size_t words = 1;
        for (const char *p = got; *p; p++)
                words += *p == ' ';
        cr_assert_eq(words, 200);
}
