/* SPDX-License-Identifier: Apache-2.0 */
/* airlock-runtime's config.json parser: what it accepts, what it turns into
 * a policy, and the keys it refuses by name. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "policy.h"
#include "seccomp-spec.h"
#include "spec.h"
#include "util.h"

#define NS                                                                                         \
        "\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"network\"},{\"type\":\"mount\"},"          \
        "{\"type\":\"ipc\"},{\"type\":\"uts\"}]"
#define PROC "\"process\":{\"args\":[\"/bin/sh\"],\"cwd\":\"/\",\"env\":[\"PATH=/bin\"]}"

static char *doc(const char *top, const char *proc, const char *linux_extra)
{
        return xasprintf("{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\"},%s,"
                         "\"linux\":{" NS "%s}%s}",
                         proc ? proc : PROC, linux_extra ? linux_extra : "", top ? top : "");
}

static void refused(const char *json, const char *needle)
{
        struct oci_spec *s = NULL;
        struct al_error e = {0};
        int r = oci_spec_parse(json, "/b", &s, &e);
        cr_assert_lt(r, 0, "accepted: %s", json);
        cr_assert_null(s);
        cr_assert(strstr(e.msg, needle), "message \"%s\" lacks \"%s\"", e.msg, needle);
}

Test(oci_spec, minimal)
{
        _cleanup_free_ char *j = doc(NULL, NULL, NULL);
        struct oci_spec *s = NULL;
        struct al_error e = {0};
        cr_assert_eq(oci_spec_parse(j, "/b", &s, &e), 0, "%s", e.msg);
        cr_assert_str_eq(s->root, "/b/rootfs");
        cr_assert_not(s->root_readonly);
        cr_assert_str_eq(s->process.argv[0], "/bin/sh");
        cr_assert_null(s->process.argv[1]);
        cr_assert_str_eq(s->process.env[0], "PATH=/bin");
        cr_assert_str_eq(s->process.cwd, "/");
        oci_spec_free(s);
}

Test(oci_spec, resources_user_rlimits_mounts_to_policy)
{
        _cleanup_free_ char *j = doc(
            ",\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\"},"
            "{\"destination\":\"/data\",\"type\":\"bind\",\"source\":\"/srv/data\","
            "\"options\":[\"rbind\",\"ro\"]},"
            "{\"destination\":\"/run\",\"type\":\"tmpfs\",\"source\":\"tmpfs\","
            "\"options\":[\"nosuid\",\"size=64k\"]}],"
            "\"annotations\":{\"io.kubernetes.pod.name\":\"p\"}",
            "\"process\":{\"args\":[\"/bin/sh\"],\"cwd\":\"/w\",\"user\":{\"uid\":1000,"
            "\"gid\":1000,\"additionalGids\":[1000]},\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\","
            "\"hard\":512,\"soft\":256}]}",
            ",\"cgroupsPath\":\"/default/x\",\"resources\":{\"memory\":{\"limit\":67108864},"
            "\"pids\":{\"limit\":64},\"cpu\":{\"quota\":50000,\"period\":100000,\"shares\":1024},"
            "\"devices\":[{\"allow\":false,\"access\":\"rwm\"},{\"allow\":true,\"type\":\"c\","
            "\"major\":1,\"minor\":3,\"access\":\"rwm\"}]}");
        struct oci_spec *s = NULL;
        struct al_error e = {0};
        cr_assert_eq(oci_spec_parse(j, "/b", &s, &e), 0, "%s", e.msg);
        cr_assert_eq(s->memory, 64u << 20);
        cr_assert_eq(s->pids, 64);
        cr_assert_eq(s->cpus_milli, 500);
        cr_assert_eq(s->process.uid, 1000);
        cr_assert_eq(s->process.nofile, 256);
        cr_assert_eq(s->n_binds, 1);
        cr_assert_str_eq(s->binds[0].target, "/data");
        cr_assert(s->binds[0].readonly);
        cr_assert_eq(s->n_tmpfs, 1);
        cr_assert_str_eq(s->tmpfs[0], "/run");
        cr_assert_eq(s->tmpfs_sizes[0], 64 * 1024);
        cr_assert_str_eq(oci_spec_annotation(s, "io.kubernetes.pod.name"), "p");

        struct policy *p = NULL;
        cr_assert_eq(oci_spec_policy(s, "/nonexistent", &p, &e), 0, "%s", e.msg);
        cr_assert_eq(p->uid, 1000);
        cr_assert_eq(p->limits.memory, 64u << 20);
        cr_assert_eq(p->limits.pids, 64);
        cr_assert_eq(p->limits.open_files, 256);
        cr_assert_eq(p->n_mounts, 1);
        policy_free(p);
        oci_spec_free(s);
}

Test(oci_spec, annotation_policy_never_loosened_by_spec)
{
        /* The policy's memory limit is lower than the spec's: it stays. */
        _cleanup_free_ char *j =
            doc(",\"annotations\":{\"airlock.io/policy\":\"{\\\"limits\\\":{\\\"memory\\\":"
                "\\\"32M\\\",\\\"pids\\\":50}}\"}",
                NULL, ",\"resources\":{\"memory\":{\"limit\":1073741824},\"pids\":{\"limit\":10}}");
        struct oci_spec *s = NULL;
        struct al_error e = {0};
        cr_assert_eq(oci_spec_parse(j, "/b", &s, &e), 0, "%s", e.msg);
        struct policy *p = NULL;
        cr_assert_eq(oci_spec_policy(s, "/nonexistent", &p, &e), 0, "%s", e.msg);
        cr_assert_eq(p->limits.memory, 32u << 20);
        cr_assert_eq(p->limits.pids, 10);
        policy_free(p);
        oci_spec_free(s);
}

Test(oci_spec, bad_annotation_policy_refused)
{
        _cleanup_free_ char *j =
            doc(",\"annotations\":{\"airlock.io/policy\":\"{\\\"nope\\\":1}\"}", NULL, NULL);
        struct oci_spec *s = NULL;
        struct al_error e = {0};
        cr_assert_eq(oci_spec_parse(j, "/b", &s, &e), 0, "%s", e.msg);
        struct policy *p = NULL;
        cr_assert_lt(oci_spec_policy(s, "/nonexistent", &p, &e), 0);
        cr_assert(strstr(e.msg, "nope"), "%s", e.msg);
        oci_spec_free(s);
}

Test(oci_spec, refusals)
{
        refused("[]", "object");
        refused("{", "config.json");
        refused("{\"ociVersion\":\"2.0.0\"}", "1.x");
        _cleanup_free_ char *a = doc(",\"bogus\":1", NULL, NULL);
        refused(a, "bogus");
        _cleanup_free_ char *b = doc(",\"hooks\":{\"prestart\":[{\"path\":\"/x\"}]}", NULL, NULL);
        refused(b, "hooks");
        _cleanup_free_ char *c =
            doc(NULL, NULL, ",\"seccomp\":{\"defaultAction\":\"SCMP_ACT_ALLOW\"}");
        struct oci_spec *s = NULL;
        struct al_error e = {0};
        cr_assert_eq(oci_spec_parse(c, "/b", &s, &e), 0, "%s", e.msg);
        cr_assert_not_null(s->seccomp_json);
        oci_spec_free(s);
        _cleanup_free_ char *d = doc(NULL, NULL, ",\"uidMappings\":[{\"containerID\":0}]");
        refused(d, "uidMappings");
        _cleanup_free_ char *f =
            doc(NULL,
                "\"process\":{\"args\":[\"/bin/sh\"],\"cwd\":\"/\",\"user\":{\"uid\":0,\"gid\":0,"
                "\"additionalGids\":[10]}}",
                NULL);
        refused(f, "additionalGids");
        _cleanup_free_ char *g = doc(NULL, "\"process\":{\"args\":[],\"cwd\":\"/\"}", NULL);
        refused(g, "process.args");
        _cleanup_free_ char *h = doc(NULL, "\"process\":{\"args\":[\"x\"],\"cwd\":\"rel\"}", NULL);
        refused(h, "absolute");
        _cleanup_free_ char *i =
            doc(NULL,
                "\"process\":{\"args\":[\"x\"],\"cwd\":\"/\",\"rlimits\":[{\"type\":"
                "\"RLIMIT_MEMLOCK\",\"hard\":1,\"soft\":1}]}",
                NULL);
        refused(i, "RLIMIT_MEMLOCK");
        _cleanup_free_ char *k = doc(NULL, NULL, ",\"cgroupsPath\":\"system.slice:x:y\"");
        refused(k, "cgroupsPath");
        _cleanup_free_ char *l = doc(NULL, NULL, ",\"cgroupsPath\":\"/a/../../b\"");
        refused(l, "cgroupsPath");
        _cleanup_free_ char *m = doc(NULL, NULL,
                                     ",\"resources\":{\"devices\":[{\"allow\":true,\"type\":\"b\","
                                     "\"major\":8,\"minor\":0}]}");
        refused(m, "standard devices");
        _cleanup_free_ char *n = doc(NULL, NULL, ",\"devices\":[{\"path\":\"/dev/sda\"}]");
        refused(n, "/dev/sda");
        _cleanup_free_ char *o = doc(",\"hostname\":\"-web\"", NULL, NULL);
        refused(o, "hostname");
        _cleanup_free_ char *o2 = xasprintf(
            "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"rootfs\"},\"hostname\":\"web\","
            "%s,\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"network\"},"
            "{\"type\":\"mount\"},{\"type\":\"ipc\"},"
            "{\"type\":\"uts\",\"path\":\"/proc/1/ns/uts\"}]}}",
            PROC);
        refused(o2, "uts namespace");
        _cleanup_free_ char *q = doc(NULL, NULL, ",\"resources\":{\"cpu\":{\"shares\":1}}");
        refused(q, "shares");
        _cleanup_free_ char *t =
            doc(",\"mounts\":[{\"destination\":\"/d\",\"type\":\"bind\",\"source\":\"rel\"}]", NULL,
                NULL);
        refused(t, "absolute");
}

Test(oci_spec, host_namespace_refused)
{
        const char *j = "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"r\"}," PROC
                        ",\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"mount\"},"
                        "{\"type\":\"ipc\"},{\"type\":\"uts\"}]}}";
        refused(j, "\"network\"");
        const char *k = "{\"ociVersion\":\"1.0.2\",\"root\":{\"path\":\"r\"}," PROC
                        ",\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"mount\"},"
                        "{\"type\":\"ipc\"},{\"type\":\"uts\"},{\"type\":\"network\"},"
                        "{\"type\":\"pid\",\"path\":\"/proc/1/ns/pid\"}]}}";
        refused(k, "joining the pid");
}

Test(oci_spec, process_document)
{
        struct oci_process p = {0};
        struct al_error e = {0};
        cr_assert_eq(
            oci_process_parse("{\"args\":[\"id\"],\"cwd\":\"/\",\"env\":[\"A=1\"]}", &p, &e), 0,
            "%s", e.msg);
        cr_assert_str_eq(p.argv[0], "id");
        oci_process_clear(&p);
        cr_assert_lt(
            oci_process_parse("{\"args\":[\"id\"],\"cwd\":\"/\",\"env\":[\"=1\"]}", &p, &e), 0);
        cr_assert_eq(oci_process_parse("{\"args\":[\"id\"],\"cwd\":\"/\",\"terminal\":true,"
                                       "\"consoleSize\":{\"height\":24,\"width\":80}}",
                                       &p, &e),
                     0, "%s", e.msg);
        cr_assert(p.terminal);
        cr_assert_eq(p.rows, 24);
        cr_assert_eq(p.cols, 80);
        oci_process_clear(&p);
        cr_assert_lt(oci_process_parse("{\"args\":[\"id\"],\"cwd\":\"/\",\"terminal\":1}", &p, &e),
                     0);
}

Test(oci_spec, seccomp_profile)
{
        struct sock_fprog f = {0};
        struct al_error e = {0};
        cr_assert_eq(rt_seccomp_compile("{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[{"
                                        "\"names\":[\"read\",\"no_such_call\"],\"action\":"
                                        "\"SCMP_ACT_ALLOW\"}]}",
                                        &f, &e),
                     0, "%s", e.msg);
        cr_assert_gt(f.len, 0);
        free(f.filter);
        cr_assert_lt(rt_seccomp_compile("{\"defaultAction\":\"SCMP_ACT_NOTIFY\"}", &f, &e), 0);
        cr_assert(strstr(e.msg, "SCMP_ACT_NOTIFY"), "%s", e.msg);
        cr_assert_lt(rt_seccomp_compile("{\"defaultAction\":\"SCMP_ACT_ALLOW\","
                                        "\"listenerPath\":\"/run/x\"}",
                                        &f, &e),
                     0);
        cr_assert(strstr(e.msg, "listenerPath"), "%s", e.msg);
        cr_assert_lt(rt_seccomp_compile("{\"syscalls\":[]}", &f, &e), 0);
        cr_assert_lt(rt_seccomp_compile("{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{"
                                        "\"names\":[\"read\"],\"action\":\"SCMP_ACT_ERRNO\","
                                        "\"args\":[{\"index\":0,\"value\":1,\"op\":\"BOGUS\"}]}]}",
                                        &f, &e),
                     0);
}

Test(oci_spec, policy_by_name)
{
        char dir[] = "/tmp/oci-pol-XXXXXX";
        cr_assert_not_null(mkdtemp(dir));
        _cleanup_free_ char *path = xasprintf("%s/agents.json", dir);
        FILE *f = fopen(path, "w");
        fputs("{\"limits\":{\"pids\":40}}", f);
        fclose(f);
        _cleanup_free_ char *j =
            doc(",\"annotations\":{\"airlock.io/policy\":\"agents\"}", NULL, NULL);
        struct oci_spec *s = NULL;
        struct al_error e = {0};
        cr_assert_eq(oci_spec_parse(j, "/b", &s, &e), 0, "%s", e.msg);
        struct policy *p = NULL;
        cr_assert_eq(oci_spec_policy(s, dir, &p, &e), 0, "%s", e.msg);
        cr_assert_eq(p->limits.pids, 40);
        policy_free(p);
        oci_spec_free(s);
        _cleanup_free_ char *k =
            doc(",\"annotations\":{\"airlock.io/policy\":\"../etc/x\"}", NULL, NULL);
        cr_assert_eq(oci_spec_parse(k, "/b", &s, &e), 0, "%s", e.msg);
        cr_assert_lt(oci_spec_policy(s, dir, &p, &e), 0);
        cr_assert(strstr(e.msg, "policy name"), "%s", e.msg);
        oci_spec_free(s);
        _cleanup_free_ char *m =
            doc(",\"annotations\":{\"airlock.io/policy\":\"missing\"}", NULL, NULL);
        cr_assert_eq(oci_spec_parse(m, "/b", &s, &e), 0, "%s", e.msg);
        cr_assert_lt(oci_spec_policy(s, dir, &p, &e), 0);
        cr_assert(strstr(e.msg, "missing"), "%s", e.msg);
        oci_spec_free(s);
        unlink(path);
        rmdir(dir);
}
