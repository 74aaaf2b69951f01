/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "policy.h"
#include "policy-test-util.h"
#include "util.h"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)


/* The load must fail with exactly `msg` and leave the policy as it was. */
static void load_fails(const char *json, const char *msg)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        char *before = policy_to_json(p);
        int r = policy_load_string(p, json, "policy.json", &e);
        cr_assert_eq(r, -EINVAL, "loading %s: got %d (%s)", json, r, e.msg);
        cr_assert_str_eq(e.msg, msg, "loading %s", json);
        char *after = policy_to_json(p);
        cr_assert_str_eq(after, before, "a failed load changed the policy");
        free(before);
        free(after);
        policy_free(p);
}

/* The load must fail with a message that contains `part`. */
static void load_fails_with(const char *json, const char *part)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        int r = policy_load_string(p, json, "policy.json", &e);
        cr_assert_eq(r, -EINVAL, "loading %s: got %d (%s)", json, r, e.msg);
        cr_assert(strstr(e.msg, part), "loading %s: message \"%s\" lacks \"%s\"", json, e.msg,
                  part);
        policy_free(p);
}

static void finalize_fails(struct policy *p, const char *base, const char *home, const char *msg)
{
        struct al_error e = {0};
        char *before = policy_to_json(p);
        int r = policy_finalize(p, base, home, &e);
        cr_assert_eq(r, -EINVAL, "finalize: got %d (%s)", r, e.msg);
        cr_assert_str_eq(e.msg, msg);
        char *after = policy_to_json(p);
        cr_assert_str_eq(after, before, "a failed finalize changed the policy");
        free(before);
        free(after);
}

/* Defaults, classes, constants */

Test(policy, defaults)
{
        struct policy *p = policy_new();

        cr_assert_null(p->workspace);
        cr_assert_eq(p->workspace_mode, POLICY_WORKSPACE_RW);
        cr_assert(p->protect_git);
        cr_assert_eq(p->read, POLICY_READ_SYSTEM);
        cr_assert_eq(p->n_deny_read, 0);
        cr_assert_eq(p->n_allow_write, 0);
        cr_assert_eq(p->n_mounts, 0);
        cr_assert_eq(p->net_mode, POLICY_NET_NONE);
        cr_assert_not(p->net_mode_set);
        cr_assert_eq(p->n_net_allow + p->n_net_deny + p->n_net_allow_private, 0);
        cr_assert_eq(p->n_net_hosts + p->n_routes, 0);
        cr_assert_eq(p->budget.requests, 0);
        cr_assert_eq(p->budget.bytes, 0);
        cr_assert_eq(p->budget.rate, 0);
        cr_assert_str_eq(p->class_name, "medium");
        cr_assert_eq(p->limits_set, 0);
        cr_assert_eq(p->limits.memory, 512 * MiB);
        cr_assert_eq(p->limits.cpus_milli, 1000);
        cr_assert_eq(p->limits.timeout_ms, 15 * 60 * 1000);
        cr_assert_eq(p->limits.pids, 256);
        cr_assert_eq(p->limits.disk, GiB);
        cr_assert_eq(p->limits.open_files, 1024);
        cr_assert_eq(p->limits.file_size, GiB);
        cr_assert_eq(p->limits.output, 16 * MiB);
        cr_assert_eq(p->limits.cpu_time_s, 0);
        cr_assert_eq(p->n_env, 0);
        cr_assert_eq(p->uid, 1000);
        cr_assert_eq(p->gid, 1000);
        cr_assert_eq(p->n_tools_allow, 0);
        cr_assert_null(policy_free(p));
}

Test(policy, free_accepts_null)
{
        cr_assert_null(policy_free(NULL));
}

Test(policy, defaults_finalize)
{
        struct policy *p = finalize_ok("{}");
        cr_assert_eq(p->net_mode, POLICY_NET_NONE);
        cr_assert_not(p->net_mode_set);
        cr_assert_eq(p->limits.memory, 512 * MiB);
        cr_assert_eq(p->limits.file_size, GiB);
        cr_assert_null(p->workspace);
        policy_free(p);
}

Test(policy, classes)
{
        static const struct {
                const char *name;
                uint64_t memory, cpus_milli, timeout_ms;
        } want[] = {
            {"small", 256 * MiB, 500, 5 * 60000},
            {"medium", 512 * MiB, 1000, 15 * 60000},
            {"large", GiB, 2000, 30 * 60000},
            {"xlarge", 4 * GiB, 4000, 60 * 60000},
        };
        for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
                const struct policy_class *c = policy_class_find(want[i].name);
                cr_assert_not_null(c, "%s", want[i].name);
                cr_assert_str_eq(c->name, want[i].name);
                cr_assert_eq(c->memory, want[i].memory, "%s", want[i].name);
                cr_assert_eq(c->cpus_milli, want[i].cpus_milli, "%s", want[i].name);
                cr_assert_eq(c->timeout_ms, want[i].timeout_ms, "%s", want[i].name);
        }
        cr_assert_null(policy_class_find("huge"));
        cr_assert_null(policy_class_find("Small"));
        cr_assert_null(policy_class_find(""));
        cr_assert_null(policy_class_find(NULL));
}

Test(policy, mandatory_deny)
{
        static const char *const want[] = {
            "~/.ssh",      "~/.aws",       "~/.gnupg",       "~/.config/gh",
            "~/.netrc",    "~/.docker",    "~/.kube",        "~/.git-credentials",
            "/etc/shadow", "/etc/gshadow", "/etc/ssh/*_key",
        };
        size_t n = 0;
        while (policy_mandatory_deny[n])
                n++;
        cr_assert_eq(n, ARRAY_SIZE(want));
        for (size_t i = 0; i < n; i++)
                cr_assert_str_eq(policy_mandatory_deny[i], want[i]);
}

/* Every key */

Test(policy, every_key)
{
        struct policy *p = load_ok(
            "{\"workspace\": {\"path\": \"proj\", \"mode\": \"overlay\", \"protectGit\": false},"
            " \"filesystem\": {\"read\": \"host\", \"denyRead\": [\"~/secret\", \"/srv/x\"],"
            "   \"allowWrite\": [\"/workspace\", \"/tmp\"],"
            "   \"mounts\": [{\"source\": \"./fixtures\", \"target\": \"/fixtures\","
            "                 \"readonly\": false}, {\"source\": \"/d\", \"target\": \"/d\"}]},"
            " \"network\": {\"mode\": \"gated\", \"allow\": [\"api.example.com\","
            "   \"*.github.com\", \"pypi.org:443\"], \"deny\": [\"evil.example\"],"
            "   \"allowPrivate\": [\"10.0.0.0/8\", \"fd00::/8\"],"
            "   \"hosts\": {\"upstream.test\": \"10.200.0.2\", \"v6.test\": \"::1\"},"
            "   \"routes\": [{\"name\": \"anthropic\", \"upstream\": \"https://api.example.com\","
            "     \"inject\": {\"x-api-key\": \"${secret:API_KEY}\"},"
            "     \"strip\": [\"x-api-key\", \"x-litellm-*\"], \"record\": [\"request-id\"],"
            "     \"caFile\": \"/etc/ca.pem\"}],"
            "   \"budget\": {\"requests\": 1000, \"bytes\": \"1G\", \"rate\": \"10M\"}},"
            " \"limits\": {\"timeout\": 300, \"cpuTime\": 60, \"memory\": \"768M\","
            "   \"pids\": 128, \"cpus\": 1.5, \"disk\": \"2G\", \"openFiles\": 2048,"
            "   \"fileSize\": \"100M\", \"output\": 4096},"
            " \"class\": \"large\", \"env\": {\"NODE_ENV\": \"development\", \"_X1\": \"\"},"
            " \"tools\": {\"allow\": [\"core.time\"]}, \"uid\": 0, \"gid\": 100}");

        cr_assert_str_eq(p->workspace, "proj");
        cr_assert_eq(p->workspace_mode, POLICY_WORKSPACE_OVERLAY);
        cr_assert_not(p->protect_git);

        cr_assert_eq(p->read, POLICY_READ_HOST);
        cr_assert_eq(p->n_deny_read, 2);
        cr_assert_str_eq(p->deny_read[0], "~/secret");
        cr_assert_str_eq(p->deny_read[1], "/srv/x");
        cr_assert_null(p->deny_read[2], "string lists are NULL-terminated");
        cr_assert_eq(p->n_allow_write, 2);
        cr_assert_str_eq(p->allow_write[1], "/tmp");
        cr_assert_eq(p->n_mounts, 2);
        cr_assert_str_eq(p->mounts[0].source, "./fixtures");
        cr_assert_str_eq(p->mounts[0].target, "/fixtures");
        cr_assert_not(p->mounts[0].readonly);
        cr_assert(p->mounts[1].readonly, "mounts are read-only unless they say otherwise");

        cr_assert_eq(p->net_mode, POLICY_NET_GATED);
        cr_assert(p->net_mode_set);
        cr_assert_eq(p->n_net_allow, 3);
        cr_assert_str_eq(p->net_allow[1], "*.github.com");
        cr_assert_str_eq(p->net_allow[2], "pypi.org:443");
        cr_assert_eq(p->n_net_deny, 1);
        cr_assert_str_eq(p->net_deny[0], "evil.example");
        cr_assert_eq(p->n_net_allow_private, 2);
        cr_assert_str_eq(p->net_allow_private[1], "fd00::/8");
        cr_assert_eq(p->n_net_hosts, 2);
        cr_assert_str_eq(p->net_hosts[0].key, "upstream.test");
        cr_assert_str_eq(p->net_hosts[0].value, "10.200.0.2");
        cr_assert_str_eq(p->net_hosts[1].value, "::1");

        cr_assert_eq(p->n_routes, 1);
        const struct policy_route *r = &p->routes[0];
        cr_assert_str_eq(r->name, "anthropic");
        cr_assert_str_eq(r->upstream, "https://api.example.com");
        cr_assert_eq(r->n_inject, 1);
        cr_assert_str_eq(r->inject[0].key, "x-api-key");
        cr_assert_str_eq(r->inject[0].value, "${secret:API_KEY}", "templates stay verbatim");
        cr_assert_eq(r->n_strip, 2);
        cr_assert_str_eq(r->strip[1], "x-litellm-*");
        cr_assert_eq(r->n_record, 1);
        cr_assert_str_eq(r->record[0], "request-id");
        cr_assert_str_eq(r->ca_file, "/etc/ca.pem");
        cr_assert_eq(p->budget.requests, 1000);
        cr_assert_eq(p->budget.bytes, GiB);
        cr_assert_eq(p->budget.rate, 10 * MiB);

        cr_assert_eq(p->limits.timeout_ms, 300000);
        cr_assert_eq(p->limits.cpu_time_s, 60);
        cr_assert_eq(p->limits.memory, 768 * MiB);
        cr_assert_eq(p->limits.pids, 128);
        cr_assert_eq(p->limits.cpus_milli, 1500);
        cr_assert_eq(p->limits.disk, 2 * GiB);
        cr_assert_eq(p->limits.open_files, 2048);
        cr_assert_eq(p->limits.file_size, 100 * MiB);
        cr_assert_eq(p->limits.output, 4096);
        cr_assert_eq(p->limits_set,
                     POLICY_LIMIT_TIMEOUT | POLICY_LIMIT_CPU_TIME | POLICY_LIMIT_MEMORY |
                         POLICY_LIMIT_PIDS | POLICY_LIMIT_CPUS | POLICY_LIMIT_DISK |
                         POLICY_LIMIT_OPEN_FILES | POLICY_LIMIT_FILE_SIZE | POLICY_LIMIT_OUTPUT);

        cr_assert_str_eq(p->class_name, "large");
        cr_assert_eq(p->n_env, 2);
        cr_assert_str_eq(p->env[0].key, "NODE_ENV");
        cr_assert_str_eq(p->env[0].value, "development");
        cr_assert_str_eq(p->env[1].key, "_X1");
        cr_assert_str_eq(p->env[1].value, "");
        cr_assert_eq(p->n_tools_allow, 1);
        cr_assert_str_eq(p->tools_allow[0], "core.time");
        cr_assert_eq(p->uid, 0);
        cr_assert_eq(p->gid, 100);

        /* Everything explicit: the class changes nothing but its name. */
        struct al_error e = {0};
        cr_assert_eq(policy_finalize(p, "/base", "/home/u", &e), 0, "%s", e.msg);
        cr_assert_eq(p->limits.memory, 768 * MiB);
        cr_assert_eq(p->limits.cpus_milli, 1500);
        cr_assert_eq(p->limits.timeout_ms, 300000);
        cr_assert_eq(p->limits.file_size, 100 * MiB);
        cr_assert_str_eq(p->workspace, "/base/proj");
        cr_assert_str_eq(p->mounts[0].source, "/base/fixtures");
        cr_assert_str_eq(p->deny_read[0], "/home/u/secret");
        policy_free(p);
}

Test(policy, enum_values)
{
        static const struct {
                const char *json;
                enum policy_workspace_mode mode;
        } ws[] = {
            {"{\"workspace\": {\"mode\": \"rw\"}}", POLICY_WORKSPACE_RW},
            {"{\"workspace\": {\"mode\": \"ro\"}}", POLICY_WORKSPACE_RO},
            {"{\"workspace\": {\"mode\": \"overlay\"}}", POLICY_WORKSPACE_OVERLAY},
        };
        for (size_t i = 0; i < ARRAY_SIZE(ws); i++) {
                struct policy *p = policy_new();
                p->workspace_mode = POLICY_WORKSPACE_OVERLAY + 1 - ws[i].mode;
                struct al_error e = {0};
                cr_assert_eq(policy_load_string(p, ws[i].json, "x", &e), 0, "%s", e.msg);
                cr_assert_eq(p->workspace_mode, ws[i].mode, "%s", ws[i].json);
                policy_free(p);
        }

        struct policy *p = load_ok("{\"filesystem\": {\"read\": \"host\"}}");
        cr_assert_eq(p->read, POLICY_READ_HOST);
        policy_free(p);
        p = load_ok("{\"filesystem\": {\"read\": \"system\"}}");
        cr_assert_eq(p->read, POLICY_READ_SYSTEM);
        policy_free(p);
        p = load_ok("{\"network\": {\"mode\": \"none\"}}");
        cr_assert_eq(p->net_mode, POLICY_NET_NONE);
        cr_assert(p->net_mode_set);
        policy_free(p);
        p = load_ok("{\"workspace\": {\"path\": \"/w\", \"protectGit\": true}}");
        cr_assert(p->protect_git);
        cr_assert_str_eq(p->workspace, "/w");
        policy_free(p);
}

/* Limits, classes and explicit values */

Test(policy, class_applies_to_unset_limits)
{
        struct policy *p = finalize_ok("{\"class\": \"small\"}");
        cr_assert_eq(p->limits.memory, 256 * MiB);
        cr_assert_eq(p->limits.cpus_milli, 500);
        cr_assert_eq(p->limits.timeout_ms, 5 * 60000);
        cr_assert_eq(p->limits.pids, 256, "the class leaves other limits alone");
        policy_free(p);

        p = finalize_ok("{\"class\": \"xlarge\"}");
        cr_assert_eq(p->limits.memory, 4 * GiB);
        cr_assert_eq(p->limits.cpus_milli, 4000);
        cr_assert_eq(p->limits.timeout_ms, 60 * 60000);
        policy_free(p);
}

Test(policy, explicit_limits_beat_class)
{
        struct policy *p =
            finalize_ok("{\"class\": \"large\", \"limits\": {\"memory\": \"300M\"}}");
        cr_assert_eq(p->limits.memory, 300 * MiB);
        cr_assert_eq(p->limits.cpus_milli, 2000);
        cr_assert_eq(p->limits.timeout_ms, 30 * 60000);
        policy_free(p);

        p = finalize_ok("{\"class\": \"small\", \"limits\": {\"cpus\": 3, \"timeout\": 0}}");
        cr_assert_eq(p->limits.memory, 256 * MiB);
        cr_assert_eq(p->limits.cpus_milli, 3000);
        cr_assert_eq(p->limits.timeout_ms, 0, "an explicit 0 means no timeout");
        policy_free(p);
}

Test(policy, cli_setters_beat_class)
{
        struct policy *p = load_ok("{\"class\": \"small\"}");
        struct al_error e = {0};

        cr_assert_eq(policy_set_class(p, "large", &e), 0);
        cr_assert_eq(policy_set_limit(p, "memory", "3G", &e), 0, "%s", e.msg);
        cr_assert(p->limits_set & POLICY_LIMIT_MEMORY);
        cr_assert_eq(policy_finalize(p, "/", NULL, &e), 0, "%s", e.msg);
        cr_assert_str_eq(p->class_name, "large");
        cr_assert_eq(p->limits.memory, 3 * GiB);
        cr_assert_eq(p->limits.cpus_milli, 2000);
        policy_free(p);
}

Test(policy, set_class_rejects)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        cr_assert_eq(policy_set_class(p, "huge", &e), -EINVAL);
        cr_assert_str_eq(e.msg, "unknown class \"huge\" (one of small, medium, large, xlarge)");
        cr_assert_str_eq(p->class_name, "medium");
        cr_assert_eq(policy_set_class(p, NULL, &e), -EINVAL);
        policy_free(p);
}

Test(policy, set_limit)
{
        struct policy *p = policy_new();
        struct al_error e = {0};

        cr_assert_eq(policy_set_limit(p, "timeout", "5m", &e), 0, "%s", e.msg);
        cr_assert_eq(p->limits.timeout_ms, 300000);
        cr_assert_eq(policy_set_limit(p, "cpuTime", "1.2", &e), 0, "%s", e.msg);
        cr_assert_eq(p->limits.cpu_time_s, 2, "CPU seconds round up");
        cr_assert_eq(policy_set_limit(p, "cpus", "0.25", &e), 0, "%s", e.msg);
        cr_assert_eq(p->limits.cpus_milli, 250);
        cr_assert_eq(policy_set_limit(p, "pids", "64", &e), 0, "%s", e.msg);
        cr_assert_eq(p->limits.pids, 64);
        cr_assert_eq(policy_set_limit(p, "output", "1k", &e), 0, "%s", e.msg);
        cr_assert_eq(p->limits.output, 1024);
        cr_assert_eq(p->limits_set, POLICY_LIMIT_TIMEOUT | POLICY_LIMIT_CPU_TIME |
                                        POLICY_LIMIT_CPUS | POLICY_LIMIT_PIDS |
                                        POLICY_LIMIT_OUTPUT);

        cr_assert_eq(policy_set_limit(p, "memroy", "1G", &e), -EINVAL);
        cr_assert_str_eq(e.msg, "unknown limit \"memroy\"");
        cr_assert_eq(policy_set_limit(p, "memory", "12X", &e), -EINVAL);
        cr_assert_str_eq(e.msg, "\"limits.memory\" must be a size in bytes, or a string such as "
                                "\"512M\" (got \"12X\")");
        cr_assert_eq(policy_set_limit(p, "memory", "0", &e), -EINVAL);
        cr_assert_str_eq(e.msg, "\"limits.memory\" must be greater than 0");
        cr_assert_eq(policy_set_limit(p, "pids", "-1", &e), -EINVAL);
        cr_assert_str_eq(e.msg, "\"limits.pids\" must be a positive integer (got \"-1\")");
        cr_assert_eq(policy_set_limit(p, "pids", "0", &e), -EINVAL);
        cr_assert_str_eq(e.msg, "\"limits.pids\" must be a positive integer");
        cr_assert_eq(policy_set_limit(p, "cpus", "2k", &e), -EINVAL);
        cr_assert_eq(policy_set_limit(p, "cpus", "1025", &e), -EINVAL);
        cr_assert_str_eq(e.msg, "\"limits.cpus\" must be a number greater than 0 and at most 1024");
        cr_assert_eq(policy_set_limit(p, "timeout", "0.0001", &e), -EINVAL);
        cr_assert_str_eq(e.msg, "\"limits.timeout\" must be 0 or at least 1ms (got \"0.0001\")");
        cr_assert_eq(policy_set_limit(p, "memory", NULL, &e), -EINVAL);
        cr_assert_eq(p->limits.memory, 512 * MiB, "failures leave the limit alone");
        cr_assert_not(p->limits_set & POLICY_LIMIT_MEMORY);
        policy_free(p);
}

Test(policy, file_size_follows_disk)
{
        struct policy *p = finalize_ok("{\"limits\": {\"disk\": \"4G\"}}");
        cr_assert_eq(p->limits.disk, 4 * GiB);
        cr_assert_eq(p->limits.file_size, 4 * GiB);
        policy_free(p);

        p = finalize_ok("{\"limits\": {\"disk\": \"4G\", \"fileSize\": \"10M\"}}");
        cr_assert_eq(p->limits.file_size, 10 * MiB);
        policy_free(p);
}

Test(policy, durations)
{
        static const struct {
                const char *value;
                uint64_t ms;
        } cases[] = {
            {"30", 30000},      {"1.5", 1500},      {"0.001", 1},        {"0", 0},
            {"\"30s\"", 30000}, {"\"5m\"", 300000}, {"\"1h\"", 3600000}, {"\"250ms\"", 250},
            {"\"2.5\"", 2500},  {"\"0\"", 0},
        };
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                char *json = xasprintf("{\"limits\": {\"timeout\": %s}}", cases[i].value);
                struct policy *p = load_ok(json);
                cr_assert_eq(p->limits.timeout_ms, cases[i].ms, "%s", cases[i].value);
                policy_free(p);
                free(json);
        }

        struct policy *p = load_ok("{\"limits\": {\"cpuTime\": 0.2}}");
        cr_assert_eq(p->limits.cpu_time_s, 1, "a fraction of a CPU second rounds up, not to none");
        policy_free(p);
        p = load_ok("{\"limits\": {\"cpuTime\": \"2m\"}}");
        cr_assert_eq(p->limits.cpu_time_s, 120);
        policy_free(p);
}

Test(policy, duration_rejects)
{
        load_fails("{\"limits\": {\"timeout\": -1}}",
                   "policy.json: \"limits.timeout\" must be a duration in seconds, or a string "
                   "such as \"30s\" or \"5m\"");
        load_fails("{\"limits\": {\"timeout\": \"5d\"}}",
                   "policy.json: \"limits.timeout\" must be a duration in seconds, or a string "
                   "such as \"30s\" or \"5m\" (got \"5d\")");
        load_fails("{\"limits\": {\"cpuTime\": true}}",
                   "policy.json: \"limits.cpuTime\" must be a duration in seconds, or a string "
                   "such as \"30s\" or \"5m\"");
        load_fails("{\"limits\": {\"timeout\": 0.0001}}",
                   "policy.json: \"limits.timeout\" must be 0 or at least 1ms");
        load_fails("{\"limits\": {\"timeout\": \"0.0001s\"}}",
                   "policy.json: \"limits.timeout\" must be 0 or at least 1ms (got \"0.0001s\")");
        load_fails("{\"limits\": {\"timeout\": 1e300}}",
                   "policy.json: \"limits.timeout\" is too large");
        load_fails("{\"limits\": {\"timeout\": 9223372036854775807}}",
                   "policy.json: \"limits.timeout\" is too large");
        load_fails("{\"limits\": {\"timeout\": \"99999999999999999999\"}}",
                   "policy.json: \"limits.timeout\" is too large");
}

Test(policy, sizes)
{
        struct policy *p = load_ok("{\"limits\": {\"memory\": 1048576, \"disk\": \"1.5G\","
                                   " \"output\": \"64k\", \"fileSize\": \"2MiB\"}}");
        cr_assert_eq(p->limits.memory, MiB);
        cr_assert_eq(p->limits.disk, 3 * GiB / 2);
        cr_assert_eq(p->limits.output, 64 * 1024);
        cr_assert_eq(p->limits.file_size, 2 * MiB);
        policy_free(p);

        p = load_ok(
            "{\"network\": {\"budget\": {\"requests\": 0, \"bytes\": 0, \"rate\": \"0\"}}}");
        cr_assert_eq(p->budget.requests + p->budget.bytes + p->budget.rate, 0);
        policy_free(p);
}

Test(policy, size_rejects)
{
        load_fails("{\"limits\": {\"memory\": \"12X\"}}",
                   "policy.json: \"limits.memory\" must be a size in bytes, or a string such as "
                   "\"512M\" (got \"12X\")");
        load_fails("{\"limits\": {\"memory\": -5}}",
                   "policy.json: \"limits.memory\" must be a size in bytes, or a string such as "
                   "\"512M\"");
        load_fails("{\"limits\": {\"memory\": 1.5}}",
                   "policy.json: \"limits.memory\" must be a size in bytes, or a string such as "
                   "\"512M\"");
        load_fails("{\"limits\": {\"memory\": 0}}",
                   "policy.json: \"limits.memory\" must be greater than 0");
        load_fails("{\"limits\": {\"disk\": \"0M\"}}",
                   "policy.json: \"limits.disk\" must be greater than 0");
        load_fails("{\"limits\": {\"output\": \"16E\"}}",
                   "policy.json: \"limits.output\" must be a size in bytes, or a string such as "
                   "\"512M\" (got \"16E\")");
        load_fails("{\"limits\": {\"fileSize\": \"17179869184G\"}}",
                   "policy.json: \"limits.fileSize\" is too large");
        load_fails("{\"limits\": {\"fileSize\": \"9000000000G\"}}",
                   "policy.json: \"limits.fileSize\" is too large");
        load_fails("{\"network\": {\"budget\": {\"bytes\": \"lots\"}}}",
                   "policy.json: \"network.budget.bytes\" must be a size in bytes, or a string "
                   "such as \"512M\" (got \"lots\")");
        load_fails("{\"network\": {\"budget\": {\"requests\": -1}}}",
                   "policy.json: \"network.budget.requests\" must be a non-negative integer");
        load_fails("{\"network\": {\"budget\": {\"requests\": \"5\"}}}",
                   "policy.json: \"network.budget.requests\" must be a non-negative integer");
}

Test(policy, counts)
{
        struct policy *p = load_ok("{\"limits\": {\"pids\": 4194304, \"openFiles\": 8}}");
        cr_assert_eq(p->limits.pids, 4194304);
        cr_assert_eq(p->limits.open_files, 8);
        policy_free(p);

        load_fails("{\"limits\": {\"pids\": \"128\"}}",
                   "policy.json: \"limits.pids\" must be a positive integer");
        load_fails("{\"limits\": {\"pids\": 0}}",
                   "policy.json: \"limits.pids\" must be a positive integer");
        load_fails("{\"limits\": {\"pids\": -3}}",
                   "policy.json: \"limits.pids\" must be a positive integer");
        load_fails("{\"limits\": {\"pids\": 12.0}}",
                   "policy.json: \"limits.pids\" must be a positive integer");
        load_fails("{\"limits\": {\"pids\": 4194305}}",
                   "policy.json: \"limits.pids\" must be at most 4194304");
        load_fails("{\"limits\": {\"openFiles\": 1048577}}",
                   "policy.json: \"limits.openFiles\" must be at most 1048576");
        load_fails("{\"limits\": {\"openFiles\": null}}",
                   "policy.json: \"limits.openFiles\" must be a positive integer");
}

Test(policy, cpus)
{
        struct policy *p = load_ok("{\"limits\": {\"cpus\": 0.5}}");
        cr_assert_eq(p->limits.cpus_milli, 500);
        policy_free(p);
        p = load_ok("{\"limits\": {\"cpus\": 1024}}");
        cr_assert_eq(p->limits.cpus_milli, 1024000);
        policy_free(p);
        p = load_ok("{\"limits\": {\"cpus\": 0.01}}");
        cr_assert_eq(p->limits.cpus_milli, 10);
        policy_free(p);

        static const char why[] =
            "policy.json: \"limits.cpus\" must be a number greater than 0 and at most 1024";
        load_fails("{\"limits\": {\"cpus\": 0}}", why);
        load_fails("{\"limits\": {\"cpus\": 0.0001}}", why);
        load_fails("{\"limits\": {\"cpus\": 1024.5}}", why);
        load_fails("{\"limits\": {\"cpus\": 1025}}", why);
        load_fails("{\"limits\": {\"cpus\": -1}}", why);
        load_fails("{\"limits\": {\"cpus\": \"2\"}}", why);
        load_fails("{\"limits\": {\"cpus\": 1e300}}", why);
}

Test(policy, uid_gid)
{
        struct policy *p = load_ok("{\"uid\": 0}");
        cr_assert_eq(p->uid, 0);
        cr_assert_eq(p->gid, 0, "gid follows uid");
        policy_free(p);
        p = load_ok("{\"gid\": 5, \"uid\": 7}");
        cr_assert_eq(p->uid, 7);
        cr_assert_eq(p->gid, 5, "an explicit gid wins, whatever the key order");
        policy_free(p);
        p = load_ok("{\"gid\": 65535}");
        cr_assert_eq(p->uid, 1000);
        cr_assert_eq(p->gid, 65535);
        policy_free(p);

        load_fails("{\"uid\": 65536}", "policy.json: \"uid\" must be an integer from 0 to 65535");
        load_fails("{\"uid\": -1}", "policy.json: \"uid\" must be an integer from 0 to 65535");
        load_fails("{\"uid\": \"1000\"}",
                   "policy.json: \"uid\" must be an integer from 0 to 65535");
        load_fails("{\"gid\": 1.0}", "policy.json: \"gid\" must be an integer from 0 to 65535");
}

/* Rejections */

Test(policy, unknown_keys)
{
        load_fails("{\"workspaces\": {}}", "policy.json: unknown key \"workspaces\"");
        load_fails("{\"limits\": {\"memroy\": \"1G\"}}",
                   "policy.json: unknown key \"limits.memroy\"");
        load_fails("{\"workspace\": {\"protect_git\": true}}",
                   "policy.json: unknown key \"workspace.protect_git\"");
        load_fails("{\"filesystem\": {\"denyread\": []}}",
                   "policy.json: unknown key \"filesystem.denyread\"");
        load_fails("{\"network\": {\"budget\": {\"reqests\": 1}}}",
                   "policy.json: unknown key \"network.budget.reqests\"");
        load_fails("{\"network\": {\"mode\": \"gated\", \"routes\": [{\"name\": \"a\","
                   " \"upstream\": \"https://a.test\", \"nmae\": \"b\"}]}}",
                   "policy.json: unknown key \"network.routes[0].nmae\"");
        load_fails("{\"filesystem\": {\"mounts\": [{\"source\": \"/a\", \"target\": \"/a\"},"
                   " {\"source\": \"/b\", \"target\": \"/b\", \"readOnly\": true}]}}",
                   "policy.json: unknown key \"filesystem.mounts[1].readOnly\"");
        load_fails("{\"tools\": {\"deny\": []}}", "policy.json: unknown key \"tools.deny\"");
        load_fails("{\"limits\": {\"x\\u0001y\": 1}}", "policy.json: unknown key \"limits.x?y\"");
}

Test(policy, wrong_types)
{
        load_fails("{\"workspace\": \"/w\"}", "policy.json: \"workspace\" must be an object");
        load_fails("{\"workspace\": {\"path\": 5}}",
                   "policy.json: \"workspace.path\" must be a string or null");
        load_fails("{\"workspace\": {\"protectGit\": \"yes\"}}",
                   "policy.json: \"workspace.protectGit\" must be true or false");
        load_fails("{\"workspace\": {\"mode\": 1}}",
                   "policy.json: \"workspace.mode\" must be one of rw, ro, overlay");
        load_fails("{\"filesystem\": []}", "policy.json: \"filesystem\" must be an object");
        load_fails("{\"filesystem\": {\"denyRead\": \"~/.x\"}}",
                   "policy.json: \"filesystem.denyRead\" must be an array of strings");
        load_fails("{\"filesystem\": {\"mounts\": {}}}",
                   "policy.json: \"filesystem.mounts\" must be an array");
        load_fails("{\"filesystem\": {\"mounts\": [\"/a:/a\"]}}",
                   "policy.json: \"filesystem.mounts[0]\" must be an object");
        load_fails("{\"filesystem\": {\"mounts\": [{\"source\": \"/a\", \"target\": \"/a\","
                   " \"readonly\": 1}]}}",
                   "policy.json: \"filesystem.mounts[0].readonly\" must be true or false");
        load_fails("{\"network\": {\"allow\": [\"a.test\", 443]}}",
                   "policy.json: \"network.allow[1]\" must be a string");
        load_fails("{\"network\": {\"hosts\": [\"a.test\"]}}",
                   "policy.json: \"network.hosts\" must be an object");
        load_fails("{\"network\": {\"hosts\": {\"a.test\": 1}}}",
                   "policy.json: \"network.hosts.a.test\" must be a string");
        load_fails("{\"network\": {\"routes\": {\"name\": \"a\"}}}",
                   "policy.json: \"network.routes\" must be an array");
        load_fails("{\"network\": {\"routes\": [{\"name\": \"a\", \"upstream\": \"http://a\","
                   " \"strip\": [null]}]}}",
                   "policy.json: \"network.routes[0].strip[0]\" must be a string");
        load_fails("{\"network\": {\"routes\": [{\"name\": \"a\", \"upstream\": \"http://a\","
                   " \"inject\": {\"x-a\": false}}]}}",
                   "policy.json: \"network.routes[0].inject.x-a\" must be a string");
        load_fails("{\"network\": {\"routes\": [{\"name\": \"a\", \"upstream\": \"http://a\","
                   " \"caFile\": []}]}}",
                   "policy.json: \"network.routes[0].caFile\" must be a string or null");
        load_fails("{\"network\": {\"budget\": 5}}",
                   "policy.json: \"network.budget\" must be an object");
        load_fails("{\"limits\": [1]}", "policy.json: \"limits\" must be an object");
        load_fails("{\"class\": 2}", "policy.json: \"class\" must be a string");
        load_fails("{\"env\": {\"A\": 1}}", "policy.json: \"env.A\" must be a string");
        load_fails("{\"env\": [\"A=1\"]}", "policy.json: \"env\" must be an object");
        load_fails("{\"tools\": {\"allow\": \"core.time\"}}",
                   "policy.json: \"tools.allow\" must be an array of strings");
}

Test(policy, bad_enum_values)
{
        load_fails("{\"workspace\": {\"mode\": \"rx\"}}",
                   "policy.json: \"workspace.mode\" must be one of rw, ro, overlay (got \"rx\")");
        load_fails("{\"filesystem\": {\"read\": \"all\"}}",
                   "policy.json: \"filesystem.read\" must be one of system, host (got \"all\")");
        load_fails("{\"network\": {\"mode\": \"open\"}}",
                   "policy.json: \"network.mode\" must be one of none, gated (got \"open\")");
        load_fails("{\"class\": \"huge\"}",
                   "policy.json: \"class\" must be one of small, medium, large, xlarge (got "
                   "\"huge\")");
        load_fails("{\"class\": \"Medium\"}",
                   "policy.json: \"class\" must be one of small, medium, large, xlarge (got "
                   "\"Medium\")");
}

Test(policy, json_syntax)
{
        struct policy *p = policy_new();
        struct al_error e = {0};

        cr_assert_eq(
            policy_load_string(p, "{\n  \"class\": \"small\",\n  \"uid\" 5\n}", "p.json", &e),
            -EINVAL);
        cr_assert(strncmp(e.msg, "p.json:3:9: ", 12) == 0, "no file:line:column in \"%s\"", e.msg);
        cr_assert_str_eq(p->class_name, "medium");

        cr_assert_eq(policy_load_string(p, "{\"a\": 1,}", "p.json", &e), -EINVAL);
        cr_assert(strncmp(e.msg, "p.json:1:", 9) == 0, "%s", e.msg);
        cr_assert_eq(policy_load_string(p, "", "p.json", &e), -EINVAL);
        cr_assert(strncmp(e.msg, "p.json:", 7) == 0, "%s", e.msg);
        cr_assert_eq(policy_load_string(p, "{} {}", "p.json", &e), -EINVAL);
        cr_assert(strncmp(e.msg, "p.json:1:", 9) == 0, "%s", e.msg);
        policy_free(p);

        load_fails("[]", "policy.json: the document must be a JSON object");
        load_fails_with("{\"class\": \"small\", \"class\": \"large\"}", "duplicate");
        load_fails_with("{\"env\": {\"A\": \"x\\u0000y\"}}", "policy.json:1:");
        load_fails_with("{\"class\": \"\xff\"}", "policy.json:1:");
}

Test(policy, origin_defaults)
{
        struct policy *p = policy_new();
        struct al_error e = {0};
        cr_assert_eq(policy_load_string(p, "{\"x\": 1}", NULL, &e), -EINVAL);
        cr_assert_str_eq(e.msg, "policy: unknown key \"x\"");
        cr_assert_eq(policy_load_string(p, NULL, NULL, &e), -EINVAL);
        policy_free(p);
}

Test(policy, oversized_string)
{
        size_t n = (1 << 20) + 16;
        char *big = xcalloc(n + 1, 1);
        memset(big, ' ', n);
        big[0] = '{';
        big[n - 1] = '}';
        struct policy *p = policy_new();
        struct al_error e = {0};
        cr_assert_eq(policy_load_string(p, big, "big.json", &e), -EFBIG);
        cr_assert_str_eq(e.msg, "big.json: larger than 1 MiB, refused");
        policy_free(p);
        free(big);
}

Test(policy, load_file)
{
        char path[] = "/tmp/test-policy-XXXXXX";
        int fd = mkstemp(path);
        cr_assert_geq(fd, 0);
        static const char doc[] = "{\"class\": \"large\", \"limits\": {\"pids\": 32}}";
        cr_assert_eq(write_full(fd, doc, strlen(doc)), 0);

        struct policy *p = policy_new();
        struct al_error e = {0};
        cr_assert_eq(policy_load_file(p, path, &e), 0, "%s", e.msg);
        cr_assert_str_eq(p->class_name, "large");
        cr_assert_eq(p->limits.pids, 32);

        /* Messages name the file. */
        cr_assert_eq(ftruncate(fd, 0), 0);
        cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
        static const char bad[] = "{\"limits\": {\"pids\": \"many\"}}";
        cr_assert_eq(write_full(fd, bad, strlen(bad)), 0);
        cr_assert_eq(policy_load_file(p, path, &e), -EINVAL);
        char *want = xasprintf("%s: \"limits.pids\" must be a positive integer", path);
        cr_assert_str_eq(e.msg, want);
        free(want);

        /* One byte over 1 MiB is refused; exactly 1 MiB is read. */
        char *big = xcalloc(1 << 20, 1);
        memset(big, ' ', 1 << 20);
        big[0] = '{';
        big[(1 << 20) - 1] = '}';
        cr_assert_eq(ftruncate(fd, 0), 0);
        cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
        cr_assert_eq(write_full(fd, big, 1 << 20), 0);
        cr_assert_eq(policy_load_file(p, path, &e), 0, "%s", e.msg);
        cr_assert_eq(write_full(fd, " ", 1), 0);
        cr_assert_eq(policy_load_file(p, path, &e), -EFBIG);
        want = xasprintf("%s: larger than 1 MiB, refused", path);
        cr_assert_str_eq(e.msg, want);
        free(want);
        free(big);

        close(fd);
        unlink(path);
        cr_assert_eq(policy_load_file(p, path, &e), -ENOENT);
        want = xasprintf("reading policy \"%s\": %s", path, strerror(ENOENT));
        cr_assert_str_eq(e.msg, want);
        free(want);
        cr_assert_eq(p->limits.pids, 32);
        policy_free(p);
}

Test(policy, load_overlays_and_replaces)
{
        struct policy *p = load_ok("{\"class\": \"small\", \"network\": {\"allow\": [\"a.test\","
                                   " \"b.test\"]}, \"env\": {\"A\": \"1\", \"B\": \"2\"}}");
        struct al_error e = {0};
        cr_assert_eq(policy_load_string(p,
                                        "{\"network\": {\"allow\": [\"c.test\"]},"
                                        " \"env\": {\"C\": \"3\"}}",
                                        "second.json", &e),
                     0, "%s", e.msg);
        cr_assert_str_eq(p->class_name, "small", "keys absent from a document are kept");
        cr_assert_eq(p->n_net_allow, 1, "a list in a document replaces the list");
        cr_assert_str_eq(p->net_allow[0], "c.test");
        cr_assert_eq(p->n_env, 1, "a map in a document replaces the map");
        cr_assert_str_eq(p->env[0].key, "C");
        policy_free(p);
}

Test(policy, failed_load_keeps_policy)
{
        struct policy *p = load_ok("{\"env\": {\"A\": \"1\"}, \"filesystem\": {\"mounts\":"
                                   " [{\"source\": \"/a\", \"target\": \"/a\"}]}}");
        char *before = policy_to_json(p);
        struct al_error e = {0};
        cr_assert_eq(policy_load_string(p,
                                        "{\"env\": {\"B\": \"2\"}, \"filesystem\": {\"mounts\":"
                                        " [{\"source\": \"/b\", \"target\": \"/proc\"}]}}",
                                        "x", &e),
                     -EINVAL);
        char *after = policy_to_json(p);
        cr_assert_str_eq(after, before);
        cr_assert_str_eq(p->env[0].key, "A");
        free(before);
        free(after);
        policy_free(p);
}

Test(policy, mount_targets)
{
        static const char *const bad[][2] = {
            {"fixtures", "must be an absolute path"},
            {"", "must be an absolute path"},
            {"/a/../etc", "must not contain \"..\""},
            {"/..", "must not contain \"..\""},
            {"/", "must not be \"/\""},
            {"//", "must not be \"/\""},
            {"/./", "must not be \"/\""},
            {"/proc", "must not be /proc, /dev or a path under them"},
            {"/proc/sys", "must not be /proc, /dev or a path under them"},
            {"/dev", "must not be /proc, /dev or a path under them"},
            {"/dev/", "must not be /proc, /dev or a path under them"},
            {"//dev//shm", "must not be /proc, /dev or a path under them"},
            {"/./proc", "must not be /proc, /dev or a path under them"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char *json = xasprintf("{\"filesystem\": {\"mounts\": [{\"source\": \"/s\","
                                       " \"target\": \"%s\"}]}}",
                                       bad[i][0]);
                char *msg =
                    xasprintf("policy.json: \"filesystem.mounts[0].target\" %s (got \"%s\")",
                              bad[i][1], bad[i][0]);
                load_fails(json, msg);
                free(json);
                free(msg);
        }

        struct policy *p = load_ok("{\"filesystem\": {\"mounts\": ["
                                   "{\"source\": \"/s\", \"target\": \"/procfs\"},"
                                   "{\"source\": \"/s\", \"target\": \"/data/dev\"},"
                                   "{\"source\": \"/s\", \"target\": \"/a..b/...\"}]}}");
        cr_assert_eq(p->n_mounts, 3);
        policy_free(p);

        load_fails("{\"filesystem\": {\"mounts\": [{\"source\": \"/s\"}]}}",
                   "policy.json: \"filesystem.mounts[0].target\" is required");
        load_fails("{\"filesystem\": {\"mounts\": [{\"target\": \"/t\"}]}}",
                   "policy.json: \"filesystem.mounts[0].source\" is required");
        load_fails("{\"filesystem\": {\"mounts\": [{\"source\": \"\", \"target\": \"/t\"}]}}",
                   "policy.json: \"filesystem.mounts[0].source\" must not be empty (got \"\")");
}

Test(policy, host_and_sandbox_paths)
{
        load_fails("{\"filesystem\": {\"allowWrite\": [\"/tmp\", \"tmp\"]}}",
                   "policy.json: \"filesystem.allowWrite[1]\" must be an absolute path (got "
                   "\"tmp\")");
        load_fails("{\"filesystem\": {\"allowWrite\": [\"/w/../etc\"]}}",
                   "policy.json: \"filesystem.allowWrite[0]\" must not contain \"..\" (got "
                   "\"/w/../etc\")");
        load_fails("{\"filesystem\": {\"denyRead\": [\"~root/.ssh\"]}}",
                   "policy.json: \"filesystem.denyRead[0]\" must be absolute, relative, or start "
                   "with \"~/\" (\"~user\" is not supported) (got \"~root/.ssh\")");
        load_fails("{\"filesystem\": {\"denyRead\": [\"\"]}}",
                   "policy.json: \"filesystem.denyRead[0]\" must not be empty (got \"\")");
        load_fails("{\"workspace\": {\"path\": \"\"}}",
                   "policy.json: \"workspace.path\" must not be empty (got \"\")");
        load_fails("{\"network\": {\"routes\": [{\"name\": \"a\", \"upstream\": \"http://a\","
                   " \"caFile\": \"\"}]}}",
                   "policy.json: \"network.routes[0].caFile\" must not be empty (got \"\")");
}

Test(policy, routes)
{
        struct policy *p =
            load_ok("{\"network\": {\"routes\": ["
                    "{\"name\": \"a-b_9\", \"upstream\": \"http://10.0.0.1:8080/v1\"},"
                    "{\"name\": \"b\", \"upstream\": \"https://[::1]:443\","
                    " \"caFile\": null}]}}");
        cr_assert_eq(p->n_routes, 2);
        cr_assert_null(p->routes[1].ca_file);
        cr_assert_eq(p->routes[0].n_inject, 0);
        policy_free(p);

        static const char name_why[] = "must be 1 to 64 of a-z, 0-9, _ and -";
        static const char *const bad_names[] = {
            "Api", "",    "a/b",
            "a.b", "a b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad_names); i++) {
                char *json = xasprintf("{\"network\": {\"routes\": [{\"name\": \"%s\","
                                       " \"upstream\": \"https://a.test\"}]}}",
                                       bad_names[i]);
                char *msg = xasprintf("policy.json: \"network.routes[0].name\" %s (got \"%s\")",
                                      name_why, bad_names[i]);
                load_fails(json, msg);
                free(json);
                free(msg);
        }
        char *ok64 = xasprintf("{\"network\": {\"routes\": [{\"name\": \"%.64s\","
                               " \"upstream\": \"https://a.test\"}]}}",
                               bad_names[5]);
        policy_free(load_ok(ok64));
        free(ok64);

        load_fails("{\"network\": {\"routes\": [{\"name\": \"a\", \"upstream\": \"http://x\"},"
                   " {\"name\": \"b\", \"upstream\": \"http://x\"},"
                   " {\"name\": \"a\", \"upstream\": \"http://y\"}]}}",
                   "policy.json: \"network.routes[2].name\" \"a\" is already used by routes[0]");
        load_fails("{\"network\": {\"routes\": [{\"upstream\": \"http://x\"}]}}",
                   "policy.json: \"network.routes[0].name\" is required");
        load_fails("{\"network\": {\"routes\": [{\"name\": \"a\"}]}}",
                   "policy.json: \"network.routes[0].upstream\" is required");

        static const char up_why[] = "must be an http:// or https:// URL with a host and no user "
                                     "info, query or fragment";
        static const char *const bad_upstreams[] = {
            "ftp://a.test",       "a.test",
            "https://",           "https:///x",
            "http://:80",         "https://a.test/x?key=1",
            "https://a.test/#f",  "https://u:p@a.test",
            "https://a.test/a b", "HTTPS://a.test",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad_upstreams); i++) {
                char *json = xasprintf("{\"network\": {\"routes\": [{\"name\": \"a\","
                                       " \"upstream\": \"%s\"}]}}",
                                       bad_upstreams[i]);
                char *msg = xasprintf("policy.json: \"network.routes[0].upstream\" %s (got \"%s\")",
                                      up_why, bad_upstreams[i]);
                load_fails(json, msg);
                free(json);
                free(msg);
        }
        /* An @ after the authority is part of the path, not user info. */
        policy_free(load_ok("{\"network\": {\"routes\": [{\"name\": \"a\","
                            " \"upstream\": \"https://a.test/@scope\"}]}}"));
}

Test(policy, route_headers)
{
        load_fails("{\"network\": {\"routes\": [{\"name\": \"a\", \"upstream\": \"http://x\","
                   " \"inject\": {\"x api\": \"v\"}}]}}",
                   "policy.json: \"network.routes[0].inject\" keys must be an HTTP header name "
                   "(got \"x api\")");
        load_fails("{\"network\": {\"routes\": [{\"name\": \"a\", \"upstream\": \"http://x\","
                   " \"inject\": {\"Content-Length\": \"5\"}}]}}",
                   "policy.json: \"network.routes[0].inject\" keys must not be a hop-by-hop or "
                   "framing header (got \"Content-Length\")");
        load_fails("{\"network\": {\"routes\": [{\"name\": \"a\", \"upstream\": \"http://x\","
                   " \"inject\": {\"host\": \"evil\"}}]}}",
                   "policy.json: \"network.routes[0].inject\" keys must not be a hop-by-hop or "
                   "framing header (got \"host\")");
        load_fails("{\"network\": {\"routes\": [{\"name\": \"a\", \"upstream\": \"http://x\","
                   " \"inject\": {\"x-a\": \"v\\r\\nx-b: w\"}}]}}",
                   "policy.json: \"network.routes[0].inject.x-a\" must not contain control "
                   "characters (got \"v??x-b: w\")");
        load_fails("{\"network\": {\"routes\": [{\"name\": \"a\", \"upstream\": \"http://x\","
                   " \"inject\": {\"x-a\": \"Bearer ${secret:a-b}\"}}]}}",
                   "policy.json: \"network.routes[0].inject.x-a\" must write secret references "
                   "as ${secret:NAME}, NAME of letters, digits and _ (got \"Bearer "
                   "${secret:a-b}\")");
        load_fails("{\"network\": {\"routes\": [{\"name\": \"a\", \"upstream\": \"http://x\","
                   " \"strip\": [\"x-ok\", \"x:bad\"]}]}}",
                   "policy.json: \"network.routes[0].strip[1]\" must be an HTTP header name, \"*\" "
                   "allowed (got \"x:bad\")");
        load_fails("{\"network\": {\"routes\": [{\"name\": \"a\", \"upstream\": \"http://x\","
                   " \"record\": [\"\"]}]}}",
                   "policy.json: \"network.routes[0].record[0]\" must be an HTTP header name (got "
                   "\"\")");

        struct policy *p = load_ok("{\"network\": {\"routes\": [{\"name\": \"a\","
                                   " \"upstream\": \"http://x\", \"inject\": {\"authorization\":"
                                   " \"Bearer ${secret:TOKEN}\\t${run_id}\"},"
                                   " \"strip\": [\"x-litellm-*\", \"*\"]}]}}");
        cr_assert_str_eq(p->routes[0].inject[0].value, "Bearer ${secret:TOKEN}\t${run_id}");
        policy_free(p);
}

Test(policy, env)
{
        struct policy *p = load_ok("{\"env\": {\"TOKEN\": \"${secret:GH_TOKEN}\","
                                   " \"PS1\": \"${HOME} $ \", \"_\": \"x=y\\n\"}}");
        cr_assert_str_eq(p->env[0].value, "${secret:GH_TOKEN}");
        cr_assert_str_eq(p->env[1].value, "${HOME} $ ");
        cr_assert_str_eq(p->env[2].value, "x=y\n");
        policy_free(p);

        static const char key_why[] = "policy.json: \"env\" keys must be names of letters, "
                                      "digits and _, not starting with a digit";
        static const char *const bad_keys[] = {"1X", "A=B", "A B", "", "A-B", "\\u00e9"};
        for (size_t i = 0; i < ARRAY_SIZE(bad_keys); i++) {
                char *json = xasprintf("{\"env\": {\"%s\": \"v\"}}", bad_keys[i]);
                load_fails_with(json, key_why);
                free(json);
        }
        load_fails("{\"env\": {\"A=B\": \"v\"}}",
                   "policy.json: \"env\" keys must be names of "
                   "letters, digits and _, not starting with a digit "
                   "(got \"A=B\")");

        static const char *const bad_templates[] = {
            "${secret:}",     "${secret:A-B}", "${secret:A",
            "x ${secret:1A}", "${secret: A}",  "${secret:OK} ${secret:}",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad_templates); i++) {
                char *json = xasprintf("{\"env\": {\"V\": \"%s\"}}", bad_templates[i]);
                char *msg = xasprintf("policy.json: \"env.V\" must write secret references as "
                                      "${secret:NAME}, NAME of letters, digits and _ (got \"%s\")",
                                      bad_templates[i]);
                load_fails(json, msg);
                free(json);
                free(msg);
        }
}

Test(policy, add_env_replaces)
{
        struct policy *p = load_ok("{\"env\": {\"A\": \"1\"}}");
        policy_add_env(p, "B", "2");
        policy_add_env(p, "A", "3");
        cr_assert_eq(p->n_env, 2);
        cr_assert_str_eq(p->env[0].value, "3");
        cr_assert_str_eq(p->env[1].key, "B");
        cr_assert_str_eq(p->env[1].value, "2");

        policy_add_env(p, "BAD=KEY", "x");
        finalize_fails(p, "/", NULL,
                       "policy: \"env\" keys must be names of letters, digits and _, not starting "
                       "with a digit (got \"BAD=KEY\")");
        policy_free(p);
}

Test(policy, cidrs)
{
        struct policy *p = load_ok("{\"network\": {\"allowPrivate\": [\"10.0.0.0/8\","
                                   " \"192.168.1.7\", \"0.0.0.0/0\", \"fd00::/8\", \"::1\","
                                   " \"::ffff:10.0.0.0/104\", \"::/0\", \"10.1.2.3/32\"]}}");
        cr_assert_eq(p->n_net_allow_private, 8);
        policy_free(p);

        static const char *const bad[] = {
            "10.0.0.0/33",
            "fd00::/129",
            "10.0.0/8",
            "10.0.0.0/",
            "10.0.0.0/08",
            "10.0.0.0/-1",
            "host.test",
            "/8",
            "",
            "10.0.0.0/8/8",
            "10.0.0.0 /8",
            "fe80::1%lo",
            "10.0.0.256",
            "10.0.0.0/1000",
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char *json = xasprintf("{\"network\": {\"allowPrivate\": [\"%s\"]}}", bad[i]);
                char *msg = xasprintf("policy.json: \"network.allowPrivate[0]\" must be an IP "
                                      "address or a CIDR range such as \"10.0.0.0/8\" or "
                                      "\"fd00::/8\" (got \"%s\")",
                                      bad[i]);
                load_fails(json, msg);
                free(json);
                free(msg);
        }
}

Test(policy, hosts)
{
        struct policy *p = load_ok("{\"network\": {\"hosts\": {\"a.test\": \"10.0.0.1\","
                                   " \"b-1.internal.\": \"fd00::2\"}}}");
        cr_assert_eq(p->n_net_hosts, 2);
        policy_free(p);

        static const char *const bad_ips[] = {"10.0.0.300", "example.com",  "[::1]", "10.0.0.1/32",
                                              "",           "fe80::1%eth0", "1.2.3"};
        for (size_t i = 0; i < ARRAY_SIZE(bad_ips); i++) {
                char *json =
                    xasprintf("{\"network\": {\"hosts\": {\"a.test\": \"%s\"}}}", bad_ips[i]);
                char *msg = xasprintf("policy.json: \"network.hosts.a.test\" must be an IPv4 or "
                                      "IPv6 address (got \"%s\")",
                                      bad_ips[i]);
                load_fails(json, msg);
                free(json);
                free(msg);
        }
        load_fails("{\"network\": {\"hosts\": {\"bad name\": \"10.0.0.1\"}}}",
                   "policy.json: \"network.hosts\" keys must be host names (got \"bad name\")");
        load_fails("{\"network\": {\"hosts\": {\"*.a.test\": \"10.0.0.1\"}}}",
                   "policy.json: \"network.hosts\" keys must be host names (got \"*.a.test\")");
        load_fails("{\"network\": {\"hosts\": {\"a..test\": \"10.0.0.1\"}}}",
                   "policy.json: \"network.hosts\" keys must be host names (got \"a..test\")");
}

Test(policy, net_rules)
{
        struct policy *p =
            load_ok("{\"network\": {\"allow\": [\"a.test\", \"*.github.com\", \"pypi.org:443\","
                    " \"10.0.0.1\", \"10.0.0.1:8080\", \"[::1]:443\", \"fd00::1\", \"[fd00::1]\","
                    " \"trailing.dot.\"], \"deny\": [\"*.evil.test:80\"]}}");
        cr_assert_eq(p->n_net_allow, 9);
        cr_assert_eq(p->n_net_deny, 1);
        policy_free(p);

        static const char why[] = "must be a host name, \"*.\" and a domain, or an IP address, "
                                  "optionally with \":port\"";
        static const char *const bad[][2] = {
            {"", why},
            {"*", why},
            {"a b.test", why},
            {"a.*.test", why},
            {"**.test", why},
            {"a..test", why},
            {"[::1", why},
            {"[::1]x", why},
            {"[nope]:80", why},
            {"a.test/path", why},
            {"user@a.test", why},
            {"gg::zz", why},
            /* the gate's host-name grammar: letters, digits and hyphens */
            {"under_score.test", why},
            {"https://a.test", "must be a host name or host:port, not a URL"},
            {"a.test:0", "must have a port from 1 to 65535"},
            {"a.test:65536", "must have a port from 1 to 65535"},
            {"a.test:", "must have a port from 1 to 65535"},
            {"a.test:http", "must have a port from 1 to 65535"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                char *json = xasprintf("{\"network\": {\"deny\": [\"%s\"]}}", bad[i][0]);
                char *msg = xasprintf("policy.json: \"network.deny[0]\" %s (got \"%s\")", bad[i][1],
                                      bad[i][0]);
                load_fails(json, msg);
                free(json);
                free(msg);
        }
}

Test(policy, tools)
{
        struct policy *p = load_ok("{\"tools\": {\"allow\": [\"core.time\", \"git:status\","
                                   " \"fs.*\", \"a_b-c\"]}}");
        cr_assert_eq(p->n_tools_allow, 4);
        policy_free(p);
        load_fails("{\"tools\": {\"allow\": [\"core time\"]}}",
                   "policy.json: \"tools.allow[0]\" must be 1 to 128 of letters, digits, and . _ "
                   ": * - (got \"core time\")");
        load_fails("{\"tools\": {\"allow\": [\"\"]}}",
                   "policy.json: \"tools.allow[0]\" must be 1 to 128 of letters, digits, and . _ "
                   ": * - (got \"\")");
}

/* Network mode */

Test(policy, mode_none_with_allow)
{
        load_fails("{\"network\": {\"mode\": \"none\", \"allow\": [\"a.test\"]}}",
                   "policy.json: \"network.mode\" is \"none\" but \"network.allow\" has 1 rule(s); "
                   "remove them or use mode \"gated\"");
        load_fails("{\"network\": {\"mode\": \"none\", \"routes\": [{\"name\": \"a\","
                   " \"upstream\": \"http://x\"}]}}",
                   "policy.json: \"network.mode\" is \"none\" but \"network.routes\" has 1 "
                   "route(s); remove them or use mode \"gated\"");

        /* Set from the CLI after loading: caught at finalize. */
        struct policy *p = load_ok("{\"network\": {\"allow\": [\"a.test\", \"b.test\"]}}");
        p->net_mode = POLICY_NET_NONE;
        p->net_mode_set = true;
        finalize_fails(p, "/", NULL,
                       "policy: \"network.mode\" is \"none\" but \"network.allow\" has 2 rule(s); "
                       "remove them or use mode \"gated\"");
        policy_free(p);
}

Test(policy, implicit_net_mode)
{
        struct policy *p = finalize_ok("{\"network\": {\"allow\": [\"a.test\"]}}");
        cr_assert_eq(p->net_mode, POLICY_NET_GATED);
        cr_assert_not(p->net_mode_set);
        policy_free(p);

        p = finalize_ok(
            "{\"network\": {\"routes\": [{\"name\": \"a\", \"upstream\": \"http://x\"}]}}");
        cr_assert_eq(p->net_mode, POLICY_NET_GATED);
        policy_free(p);

        p = finalize_ok("{\"network\": {\"deny\": [\"a.test\"], \"allowPrivate\": [\"10.0.0.0/8\"],"
                        " \"hosts\": {\"a.test\": \"10.0.0.1\"}}}");
        cr_assert_eq(p->net_mode, POLICY_NET_NONE, "deny rules and hosts alone allow nothing");
        policy_free(p);

        p = finalize_ok("{\"network\": {\"mode\": \"gated\"}}");
        cr_assert_eq(p->net_mode, POLICY_NET_GATED, "explicit gated without rules stays gated");
        policy_free(p);

        p = finalize_ok("{\"network\": {\"mode\": \"none\", \"deny\": [\"a.test\"]}}");
        cr_assert_eq(p->net_mode, POLICY_NET_NONE);
        policy_free(p);
}

/* Paths */

Test(policy, tilde_expansion)
{
        struct policy *p = load_ok("{\"workspace\": {\"path\": \"~\"}, \"filesystem\": {"
                                   " \"denyRead\": [\"~/.config/x\", \"~/\", \"/abs/~/x\"],"
                                   " \"mounts\": [{\"source\": \"~/data\", \"target\": \"/d\"}]},"
                                   " \"network\": {\"routes\": [{\"name\": \"a\","
                                   " \"upstream\": \"http://x\", \"caFile\": \"~/ca.pem\"}]}}");
        struct al_error e = {0};
        cr_assert_eq(policy_finalize(p, "/base", "/home/agent/", &e), 0, "%s", e.msg);
        cr_assert_str_eq(p->workspace, "/home/agent");
        cr_assert_str_eq(p->deny_read[0], "/home/agent/.config/x");
        cr_assert_str_eq(p->deny_read[1], "/home/agent");
        cr_assert_str_eq(p->deny_read[2], "/abs/~/x");
        cr_assert_str_eq(p->mounts[0].source, "/home/agent/data");
        cr_assert_str_eq(p->routes[0].ca_file, "/home/agent/ca.pem");
        policy_free(p);
}

Test(policy, tilde_needs_home)
{
        struct policy *p = load_ok("{\"filesystem\": {\"denyRead\": [\"/x\", \"~/.y\"]}}");
        finalize_fails(p, "/base", NULL,
                       "policy: \"filesystem.denyRead[1]\" starts with \"~\" but no home directory "
                       "is known");
        finalize_fails(p, "/base", "home", "policy: home directory \"home\" is not absolute");
        policy_free(p);
}

Test(policy, relative_paths)
{
        struct policy *p =
            load_ok("{\"workspace\": {\"path\": \".\"}, \"filesystem\": {"
                    " \"denyRead\": [\"secrets/\", \"a//b/./c\", \"../up\","
                    " \"/x/./y//\", \"*.key\"],"
                    " \"mounts\": [{\"source\": \"./fixtures\", \"target\": \"/f\"}]},"
                    " \"network\": {\"routes\": [{\"name\": \"a\","
                    " \"upstream\": \"http://x\", \"caFile\": \"ca.pem\"}]}}");
        struct al_error e = {0};
        cr_assert_eq(policy_finalize(p, "/srv/proj/", "/home/u", &e), 0, "%s", e.msg);
        cr_assert_str_eq(p->workspace, "/srv/proj");
        cr_assert_str_eq(p->deny_read[0], "/srv/proj/secrets");
        cr_assert_str_eq(p->deny_read[1], "/srv/proj/a/b/c");
        cr_assert_str_eq(p->deny_read[2], "/srv/proj/../up", "\"..\" is left to the kernel");
        cr_assert_str_eq(p->deny_read[3], "/x/y");
        cr_assert_str_eq(p->deny_read[4], "/srv/proj/*.key");
        cr_assert_str_eq(p->mounts[0].source, "/srv/proj/fixtures");
        cr_assert_str_eq(p->mounts[0].target, "/f");
        cr_assert_str_eq(p->routes[0].ca_file, "/srv/proj/ca.pem");

        /* Finalizing again changes nothing. */
        char *once = policy_to_json(p);
        cr_assert_eq(policy_finalize(p, "/elsewhere", "/home/v", &e), 0, "%s", e.msg);
        char *twice = policy_to_json(p);
        cr_assert_str_eq(twice, once);
        free(once);
        free(twice);
        policy_free(p);

        p = load_ok("{\"workspace\": {\"path\": \"w\"}}");
        finalize_fails(p, "rel", NULL, "policy: base directory \"rel\" is not absolute");
        policy_free(p);
}

Test(policy, base_dir_defaults_to_cwd)
{
        char *cwd = get_current_dir_name();
        cr_assert_not_null(cwd);
        struct policy *p = load_ok("{\"workspace\": {\"path\": \"sub\"}}");
        struct al_error e = {0};
        cr_assert_eq(policy_finalize(p, NULL, NULL, &e), 0, "%s", e.msg);
        char *want = xasprintf("%s/sub", STREQ(cwd, "/") ? "" : cwd);
        cr_assert_str_eq(p->workspace, want);
        free(want);
        free(cwd);
        policy_free(p);
}

Test(policy, cli_additions_validated_at_finalize)
{
        struct policy *p = policy_new();
        policy_add_mount(p, "data", "/data", false);
        policy_add_deny_read(p, "~/.private");
        struct al_error e = {0};
        cr_assert_eq(policy_finalize(p, "/b", "/h", &e), 0, "%s", e.msg);
        cr_assert_eq(p->n_mounts, 1);
        cr_assert_str_eq(p->mounts[0].source, "/b/data");
        cr_assert_not(p->mounts[0].readonly);
        cr_assert_str_eq(p->deny_read[0], "/h/.private");
        cr_assert_null(p->deny_read[1]);

        policy_add_mount(p, "/x", "/dev/shm", true);
        finalize_fails(p, "/b", "/h",
                       "policy: \"filesystem.mounts[1].target\" must not be /proc, /dev or a path "
                       "under them (got \"/dev/shm\")");
        policy_free(p);

        p = policy_new();
        p->uid = 70000;
        finalize_fails(p, "/", NULL, "policy: \"uid\" must be an integer from 0 to 65535");
        p->uid = 0;
        p->limits.pids = 0;
        finalize_fails(p, "/", NULL, "policy: \"limits.pids\" must be a positive integer");
        p->limits.pids = 1;
        free(p->class_name);
        p->class_name = xstrdup("tiny");
        finalize_fails(p, "/", NULL,
                       "policy: \"class\" must be one of small, medium, large, xlarge (got "
                       "\"tiny\")");
        policy_free(p);
}

Test(policy, messages_are_sanitized)
{
        load_fails("{\"workspace\": {\"mode\": \"\\u001b[31mred\"}}",
                   "policy.json: \"workspace.mode\" must be one of rw, ro, overlay (got "
                   "\"?[31mred\")");
        char *long_value = xcalloc(301, 1);
        memset(long_value, 'x', 300);
        char *json = xasprintf("{\"class\": \"%s\"}", long_value);
        struct policy *p = policy_new();
        struct al_error e = {0};
        cr_assert_eq(policy_load_string(p, json, "policy.json", &e), -EINVAL);
        cr_assert(strstr(e.msg, "xxx...\")"), "long values are cut short: %s", e.msg);
        cr_assert_lt(strlen(e.msg), 200);
        policy_free(p);
        free(json);
        free(long_value);
}

/* Canonical JSON */

Test(policy, to_json_defaults)
{
        struct policy *p = finalize_ok("{}");
        char *s = policy_to_json(p);
        cr_assert_str_eq(
            s, "{\"class\":\"medium\",\"env\":{},\"filesystem\":{\"allowWrite\":[],"
               "\"denyRead\":[],\"mounts\":[],\"read\":\"system\"},\"gid\":1000,"
               "\"limits\":{\"cpuTime\":60,\"cpus\":1,\"disk\":1073741824,"
               "\"fileSize\":1073741824,\"io\":{\"readBps\":0,\"readIops\":0,"
               "\"writeBps\":0,\"writeIops\":0},\"memory\":536870912,\"openFiles\":1024,"
               "\"output\":16777216,\"pids\":256,\"timeout\":900,\"workspaceDisk\":0},\"network\":{\"allow\":[],"
               "\"allowPrivate\":[],\"budget\":{\"bytes\":0,\"rate\":10000000,\"refusals\":1000,\"requests\":0},"
               "\"deny\":[],\"hosts\":{},\"mode\":\"none\",\"routes\":[]},"
               "\"tools\":{\"allow\":[]},\"uid\":1000,\"workspace\":{\"mode\":\"rw\","
               "\"path\":null,\"protectGit\":true}}");
        free(s);
        policy_free(p);
}

Test(policy, to_json_fractions)
{
        struct policy *p = finalize_ok("{\"limits\": {\"cpus\": 0.1, \"timeout\": 1.5}}");
        char *s = policy_to_json(p);
        cr_assert(strstr(s, "\"cpus\":0.1,"), "%s", s);
        cr_assert(strstr(s, "\"timeout\":1.5,"), "%s", s);
        free(s);
        policy_free(p);
}

static const char full_a[] =
    "{\"class\": \"small\", \"env\": {\"B\": \"2\", \"A\": \"1\"},"
    " \"network\": {\"allow\": [\"a.test\"], \"hosts\": {\"z.test\": \"10.0.0.2\","
    "  \"a.test\": \"10.0.0.1\"}, \"routes\": [{\"upstream\": \"https://u.test\", \"name\": \"r\","
    "  \"inject\": {\"x-b\": \"2\", \"x-a\": \"1\"}, \"record\": [\"x-id\"]}],"
    "  \"budget\": {\"rate\": \"1M\", \"requests\": 10}},"
    " \"limits\": {\"pids\": 64, \"timeout\": \"90s\"},"
    " \"filesystem\": {\"mounts\": [{\"target\": \"/m\", \"source\": \"m\"}]},"
    " \"workspace\": {\"path\": \"w\", \"mode\": \"ro\"}, \"tools\": {\"allow\": [\"core.time\"]}}";
static const char full_b[] =
    "{\"tools\": {\"allow\": [\"core.time\"]}, \"workspace\": {\"mode\": \"ro\", \"path\": \"./w/\"},"
    " \"filesystem\": {\"mounts\": [{\"source\": \"./m\", \"target\": \"/m\","
    "  \"readonly\": true}]},"
    " \"limits\": {\"timeout\": 90, \"pids\": 64},"
    " \"network\": {\"budget\": {\"requests\": 10, \"rate\": 1048576},"
    "  \"routes\": [{\"name\": \"r\", \"inject\": {\"x-a\": \"1\", \"x-b\": \"2\"},"
    "  \"record\": [\"x-id\"], \"upstream\": \"https://u.test\"}],"
    "  \"hosts\": {\"a.test\": \"10.0.0.1\", \"z.test\": \"10.0.0.2\"}, \"allow\": [\"a.test\"]},"
    " \"env\": {\"A\": \"1\", \"B\": \"2\"}, \"class\": \"small\"}";

Test(policy, to_json_deterministic)
{
        struct policy *a = finalize_ok(full_a), *b = finalize_ok(full_b);
        char *sa = policy_to_json(a), *sb = policy_to_json(b), *sa2 = policy_to_json(a);
        cr_assert_str_eq(sa, sb, "the same policy written two ways gives one JSON");
        cr_assert_str_eq(sa, sa2);
        cr_assert_null(strchr(sa, ' '), "compact: %s", sa);
        cr_assert_null(strchr(sa, '\n'));
        cr_assert(strstr(sa, "\"env\":{\"A\":\"1\",\"B\":\"2\"}"), "keys sorted: %s", sa);
        cr_assert(strstr(sa, "\"inject\":{\"x-a\":\"1\",\"x-b\":\"2\"}"), "%s", sa);
        cr_assert(strstr(sa, "\"workspace\":{\"mode\":\"ro\",\"path\":\"/base/w\""), "%s", sa);
        cr_assert(strstr(sa, "\"mode\":\"gated\""), "%s", sa);

        /* A difference anywhere shows. */
        policy_add_env(b, "C", "3");
        char *sc = policy_to_json(b);
        cr_assert_str_neq(sa, sc);
        free(sa);
        free(sb);
        free(sa2);
        free(sc);
        policy_free(a);
        policy_free(b);
}

Test(policy, to_json_round_trip)
{
        struct policy *a = finalize_ok(full_a);
        a->limits.cpus_milli = 1250;
        char *sa = policy_to_json(a);
        struct policy *b = finalize_ok(sa);
        char *sb = policy_to_json(b);
        cr_assert_str_eq(sb, sa, "the canonical JSON loads back to the same policy");
        free(sa);
        free(sb);
        policy_free(a);
        policy_free(b);
}

/* The example in docs/policy.md. */
Test(policy, docs_example)
{
        struct policy *p = load_ok(
            "{\"workspace\": {\"path\": \".\", \"mode\": \"rw\"},"
            " \"filesystem\": {\"read\": \"system\","
            "  \"denyRead\": [\"~/.config/private\", \"./secrets\"],"
            "  \"allowWrite\": [\"/workspace\", \"/tmp\"],"
            "  \"mounts\": [{\"source\": \"./fixtures\", \"target\": \"/fixtures\","
            "   \"readonly\": true}]},"
            " \"network\": {"
            "  \"allow\": [\"api.example.com\", \"*.pkg.example.org\", "
            "\"registry.example.net:443\"],"
            "  \"deny\": [\"uploads.pkg.example.org\"], \"allowPrivate\": [\"10.200.0.0/24\"],"
            "  \"hosts\": {\"upstream.test\": \"10.200.0.2\"},"
            "  \"routes\": [{\"name\": \"llm\", \"upstream\": \"https://api.example.com\","
            "   \"inject\": {\"authorization\": \"Bearer ${secret:LLM_API_KEY}\"},"
            "   \"strip\": [\"authorization\", \"x-upstream-*\"], \"record\": [\"request-id\"]}],"
            "  \"budget\": {\"requests\": 1000, \"bytes\": \"1G\", \"rate\": \"10M\"}},"
            " \"limits\": {\"timeout\": \"10m\", \"cpuTime\": 600, \"memory\": \"768M\","
            "  \"pids\": 128, \"disk\": \"2G\", \"output\": \"16M\"},"
            " \"class\": \"small\", \"env\": {\"NODE_ENV\": \"development\"},"
            " \"tools\": {\"allow\": [\"core.time\"]}}");
        struct al_error e = {0};
        cr_assert_eq(policy_finalize(p, "/srv/proj", "/home/u", &e), 0, "%s", e.msg);
        cr_assert_eq(p->net_mode, POLICY_NET_GATED);
        cr_assert_eq(p->limits.cpus_milli, 500);
        cr_assert_eq(p->limits.memory, 768 * MiB);
        cr_assert_eq(p->limits.timeout_ms, 600000);
        cr_assert_eq(p->limits.file_size, 2 * GiB);
        cr_assert_str_eq(p->workspace, "/srv/proj");
        cr_assert_str_eq(p->deny_read[1], "/srv/proj/secrets");
        policy_free(p);
}
