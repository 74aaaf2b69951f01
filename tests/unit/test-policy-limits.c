/* SPDX-License-Identifier: Apache-2.0 */
/* The resource classes (the design's table) and limits.io's validation. */
#include <criterion/criterion.h>
#include <string.h>

#include "policy.h"
#include "policy-test-util.h"
#include "util.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)


static void load_fails_with(const char *json, const char *part)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        int r = policy_load_string(p, json, "policy.json", &e);
        cr_assert_lt(r, 0, "loading %s succeeded", json);
        cr_assert(strstr(e.msg, part), "loading %s: \"%s\" lacks \"%s\"", json, e.msg, part);
        policy_free(p);
}

/* name, memory, CPU seconds, network bytes/s, timeout ms */
static const struct {
        const char *name;
        uint64_t memory, cpu_s, rate, timeout_ms;
} table[] = {
    {"small", 256 * MiB, 30, 1000000, 5 * 60 * 1000},
    {"medium", 512 * MiB, 60, 10000000, 15 * 60 * 1000},
    {"large", 1 * GiB, 120, 50000000, 30 * 60 * 1000},
    {"xlarge", 4 * GiB, 300, 100000000, 60 * 60 * 1000},
};

Test(policy_classes, as_the_design_table)
{
        for (size_t i = 0; i < ARRAY_SIZE(table); i++) {
                char json[64];
                snprintf(json, sizeof(json), "{\"class\": \"%s\"}", table[i].name);
                struct policy *p = finalize_ok(json);
                cr_expect_eq(p->limits.memory, table[i].memory, "%s", table[i].name);
                cr_expect_eq(p->limits.cpu_time_s, table[i].cpu_s, "%s", table[i].name);
                cr_expect_eq(p->budget.rate, table[i].rate, "%s", table[i].name);
                cr_expect_eq(p->limits.timeout_ms, table[i].timeout_ms, "%s", table[i].name);
                const struct policy_class *c = policy_class_find(table[i].name);
                cr_assert_not_null(c);
                cr_expect_eq(c->cpus_milli, p->limits.cpus_milli);
                policy_free(p);
        }
        /* The default class is medium. */
        struct policy *p = finalize_ok("{}");
        cr_expect_eq(p->limits.cpu_time_s, 60);
        cr_expect_eq(p->budget.rate, 10000000);
        policy_free(p);
}

Test(policy_classes, explicit_values_win)
{
        struct policy *p = finalize_ok("{\"class\": \"small\", \"limits\": {\"cpuTime\": 0}, "
                                       "\"network\": {\"budget\": {\"rate\": 0}}}");
        cr_expect_eq(p->limits.cpu_time_s, 0);
        cr_expect_eq(p->budget.rate, 0);
        cr_expect_eq(p->limits.memory, 256 * MiB);
        policy_free(p);

        p = policy_new();
        struct al_error e = {0};
        cr_assert_eq(policy_set_class(p, "xlarge", &e), 0);
        cr_assert_eq(policy_set_limit(p, "cpuTime", "10s", &e), 0, "%s", e.msg);
        cr_assert_eq(policy_finalize(p, "/base", NULL, &e), 0, "%s", e.msg);
        cr_expect_eq(p->limits.cpu_time_s, 10);
        cr_expect_eq(p->budget.rate, 100000000);
        policy_free(p);
}

Test(policy_io, loads_and_round_trips)
{
        struct policy *p = finalize_ok("{\"limits\": {\"io\": {\"readBps\": \"10M\", "
                                       "\"writeBps\": 5242880, \"readIops\": 100, "
                                       "\"writeIops\": 50}}}");
        cr_expect_eq(p->limits.io.read_bps, 10 * MiB);
        cr_expect_eq(p->limits.io.write_bps, 5 * MiB);
        cr_expect_eq(p->limits.io.read_iops, 100);
        cr_expect_eq(p->limits.io.write_iops, 50);
        char *s = policy_to_json(p);
        cr_expect(strstr(s, "\"io\":{\"readBps\":10485760,\"readIops\":100,\"writeBps\":5242880,"
                            "\"writeIops\":50}"),
                  "%s", s);
        struct policy *q = policy_new();
        struct al_error e = {0};
        cr_assert_eq(policy_load_string(q, s, "canonical", &e), 0, "%s", e.msg);
        cr_expect_eq(q->limits.io.write_bps, 5 * MiB);
        free(s);
        policy_free(q);
        policy_free(p);
}

Test(policy_io, bad_values_name_the_field)
{
        load_fails_with("{\"limits\": {\"io\": {\"writeBps\": -1}}}", "\"limits.io.writeBps\"");
        load_fails_with("{\"limits\": {\"io\": {\"readBps\": \"fast\"}}}", "\"limits.io.readBps\"");
        load_fails_with("{\"limits\": {\"io\": {\"readIops\": 4294967295}}}",
                        "\"limits.io.readIops\" must be at most 4294967294");
        load_fails_with("{\"limits\": {\"io\": {\"writeIops\": 1.5}}}", "\"limits.io.writeIops\"");
        load_fails_with("{\"limits\": {\"io\": {\"bps\": 1}}}", "unknown key \"limits.io.bps\"");
        load_fails_with("{\"limits\": {\"io\": 5}}", "\"limits.io\" must be an object");
}

Test(policy_io, set_limit_from_flags)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        cr_assert_eq(policy_set_limit(p, "io.writeBps", "5M", &e), 0, "%s", e.msg);
        cr_expect_eq(p->limits.io.write_bps, 5 * MiB);
        cr_assert_lt(policy_set_limit(p, "io.readIops", "x", &e), 0);
        cr_expect(strstr(e.msg, "\"limits.io.readIops\""), "%s", e.msg);
        cr_assert_lt(policy_set_limit(p, "io.nope", "1", &e), 0);
        cr_expect(strstr(e.msg, "unknown limit"), "%s", e.msg);
        policy_free(p);
}
