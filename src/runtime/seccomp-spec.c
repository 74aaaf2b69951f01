/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "seccomp-spec.h"
#include "util.h"

#define SECCOMP_PROG_MAX 4096 /* instructions, the kernel's own bound */

static int parse_action(const char *name, json_t *errno_ret, uint32_t *ret, struct al_error *err)
{
        int e = EPERM;
        if (errno_ret && json_is_integer(errno_ret) && json_integer_value(errno_ret) > 0 &&
            json_integer_value(errno_ret) < 4096)
                e = (int)json_integer_value(errno_ret);
        if (STREQ(name, "SCMP_ACT_ALLOW"))
                *ret = SCMP_ACT_ALLOW;
        else if (STREQ(name, "SCMP_ACT_ERRNO"))
                *ret = SCMP_ACT_ERRNO(e);
        else if (STREQ(name, "SCMP_ACT_KILL") || STREQ(name, "SCMP_ACT_KILL_THREAD"))
                *ret = SCMP_ACT_KILL;
        else if (STREQ(name, "SCMP_ACT_KILL_PROCESS"))
                *ret = SCMP_ACT_KILL_PROCESS;
        else if (STREQ(name, "SCMP_ACT_TRAP"))
                *ret = SCMP_ACT_TRAP;
        else if (STREQ(name, "SCMP_ACT_LOG"))
                *ret = SCMP_ACT_LOG;
        else
                return al_error_set_message(err, EINVAL,
                                            "linux.seccomp: action %s is not supported", name);
        return 0;
}

static int parse_op(const char *name, enum scmp_compare *ret)
{
        static const struct {
                const char *n;
                enum scmp_compare op;
        } ops[] = {
            {"SCMP_CMP_NE", SCMP_CMP_NE},
            {"SCMP_CMP_LT", SCMP_CMP_LT},
            {"SCMP_CMP_LE", SCMP_CMP_LE},
            {"SCMP_CMP_EQ", SCMP_CMP_EQ},
            {"SCMP_CMP_GE", SCMP_CMP_GE},
            {"SCMP_CMP_GT", SCMP_CMP_GT},
            {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ},
        };
        for (size_t i = 0; i < ARRAY_SIZE(ops); i++)
                if (STREQ(name, ops[i].n)) {
                        *ret = ops[i].op;
                        return 0;
                }
        return -EINVAL;
}

static int add_rule(scmp_filter_ctx ctx, json_t *rule, size_t idx, struct al_error *err)
{
        const char *k;
        json_t *v;
        json_object_foreach(rule, k, v)
        {
                if (!STREQ(k, "names") && !STREQ(k, "action") && !STREQ(k, "errnoRet") &&
                    !STREQ(k, "args") && !STREQ(k, "comment") && !STREQ(k, "includes") &&
                    !STREQ(k, "excludes"))
                        return al_error_set_message(
                            err, EINVAL, "linux.seccomp.syscalls[%zu].%s: not supported", idx, k);
        }
        json_t *names = json_object_get(rule, "names");
        json_t *act = json_object_get(rule, "action");
        if (!json_is_array(names) || !json_is_string(act))
                return al_error_set_message(
                    err, EINVAL, "linux.seccomp.syscalls[%zu]: needs names and action", idx);
        uint32_t action;
        int r =
            parse_action(json_string_value(act), json_object_get(rule, "errnoRet"), &action, err);
        if (r < 0)
                return r;
        struct scmp_arg_cmp cmp[6];
        unsigned n_cmp = 0;
        json_t *args = json_object_get(rule, "args");
        if (args && !json_is_null(args)) {
                if (!json_is_array(args) || json_array_size(args) > 6)
                        return al_error_set_message(
                            err, EINVAL, "linux.seccomp.syscalls[%zu].args: at most 6", idx);
                size_t i;
                json_t *a;
                json_array_foreach(args, i, a)
                {
                        json_t *index = json_object_get(a, "index"),
                               *val = json_object_get(a, "value"),
                               *val2 = json_object_get(a, "valueTwo"),
                               *op = json_object_get(a, "op");
                        enum scmp_compare o;
                        if (!json_is_integer(index) || json_integer_value(index) < 0 ||
                            json_integer_value(index) > 5 || !json_is_integer(val) ||
                            !json_is_string(op) || parse_op(json_string_value(op), &o) < 0)
                                return al_error_set_message(
                                    err, EINVAL,
                                    "linux.seccomp.syscalls[%zu].args[%zu]: needs index 0-5, "
                                    "value and a known op",
                                    idx, i);
                        cmp[n_cmp++] = (struct scmp_arg_cmp){
                            .arg = (unsigned)json_integer_value(index),
                            .op = o,
                            .datum_a = (scmp_datum_t)json_integer_value(val),
                            .datum_b =
                                json_is_integer(val2) ? (scmp_datum_t)json_integer_value(val2) : 0,
                        };
                }
        }
        size_t i;
        json_t *n;
        json_array_foreach(names, i, n)
        {
                if (!json_is_string(n))
                        return al_error_set_message(
                            err, EINVAL, "linux.seccomp.syscalls[%zu].names: strings", idx);
                int nr = seccomp_syscall_resolve_name(json_string_value(n));
                if (nr == __NR_SCMP_ERROR)
                        continue; /* not on this architecture or kernel */
                r = seccomp_rule_add_array(ctx, action, nr, n_cmp, cmp);
                /* The same action as the default is no rule at all. */
                if (r < 0 && r != -EACCES && r != -EEXIST)
                        return al_error_set(err, -r, "linux.seccomp: rule for %s",
                                            json_string_value(n));
        }
        return 0;
}

int rt_seccomp_compile(const char *json, struct sock_fprog *ret, struct al_error *err)
{
        json_t *o = json_loads(json, JSON_REJECT_DUPLICATES, NULL);
        int r = 0;
        scmp_filter_ctx ctx = NULL;
        int mfd = -1;
        if (!o || !json_is_object(o)) {
                r = al_error_set_message(err, EINVAL, "linux.seccomp: must be an object");
                goto out;
        }
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v)
        {
                if (STREQ(k, "defaultAction") || STREQ(k, "defaultErrnoRet") ||
                    STREQ(k, "architectures") || STREQ(k, "syscalls"))
                        continue;
                if ((STREQ(k, "flags") || STREQ(k, "listenerPath") ||
                     STREQ(k, "listenerMetadata")) &&
                    (json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0) ||
                     (json_is_string(v) && json_string_length(v) == 0)))
                        continue;
                r = al_error_set_message(err, EINVAL, "linux.seccomp.%s: not supported", k);
                goto out;
        }
        json_t *def = json_object_get(o, "defaultAction");
        if (!json_is_string(def)) {
                r = al_error_set_message(err, EINVAL, "linux.seccomp.defaultAction: missing");
                goto out;
        }
        uint32_t def_action;
        r = parse_action(json_string_value(def), json_object_get(o, "defaultErrnoRet"), &def_action,
                         err);
        if (r < 0)
                goto out;
        ctx = seccomp_init(def_action);
        if (!ctx) {
                r = al_error_set(err, ENOMEM, "linux.seccomp");
                goto out;
        }
        /* Other ABIs are killed by Airlock's own filter already. */
        json_t *rules = json_object_get(o, "syscalls");
        if (rules && !json_is_null(rules)) {
                if (!json_is_array(rules)) {
                        r = al_error_set_message(err, EINVAL,
                                                 "linux.seccomp.syscalls: must be an array");
                        goto out;
                }
                size_t i;
                json_t *rule;
                json_array_foreach(rules, i, rule)
                {
                        if (!json_is_object(rule)) {
                                r = al_error_set_message(err, EINVAL, "linux.seccomp.syscalls[%zu]",
                                                         i);
                                goto out;
                        }
                        r = add_rule(ctx, rule, i, err);
                        if (r < 0)
                                goto out;
                }
        }
        mfd = memfd_create("seccomp", MFD_CLOEXEC);
        if (mfd < 0) {
                r = al_error_set(err, errno, "linux.seccomp: memfd");
                goto out;
        }
        r = seccomp_export_bpf(ctx, mfd);
        if (r < 0) {
                r = al_error_set(err, -r, "linux.seccomp: compiling");
                goto out;
        }
        off_t len = lseek(mfd, 0, SEEK_END);
        if (len <= 0 || (size_t)len % sizeof(struct sock_filter) ||
            (size_t)len / sizeof(struct sock_filter) > SECCOMP_PROG_MAX) {
                r = al_error_set_message(err, E2BIG,
                                         "linux.seccomp: the compiled filter is too "
                                         "large");
                goto out;
        }
        struct sock_filter *f = xcalloc(1, (size_t)len);
        if (pread(mfd, f, (size_t)len, 0) != len) {
                free(f);
                r = al_error_set(err, EIO, "linux.seccomp: reading the filter");
                goto out;
        }
        ret->len = (unsigned short)((size_t)len / sizeof(struct sock_filter));
        ret->filter = f;
out:
        if (mfd >= 0)
                close(mfd);
        if (ctx)
                seccomp_release(ctx);
        json_decref(o);
        return r;
}
