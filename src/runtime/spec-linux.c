/* SPDX-License-Identifier: Apache-2.0 */
/* config.json's "linux" object: namespaces, resources, devices. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "spec-internal.h"
#include "spec.h"
#include "util.h"

static int parse_namespaces(json_t *a, struct oci_spec *s, struct al_error *err)
{
        /* Airlock always makes new user, mount, pid, network, ipc, uts and
         * cgroup namespaces: sharing the host's is refused, and so is
         * joining another's (not supported yet). */
        static const char *const needed[] = {"pid", "network", "mount", "ipc", "uts", NULL};
        static const char *const known[] = {"pid", "network", "mount",  "ipc",
                                            "uts", "user",    "cgroup", NULL};
        if (!json_is_array(a))
                return al_error_set_message(err, EINVAL, "linux.namespaces: must be an array");
        bool seen[8] = {0};
        size_t i;
        json_t *e;
        json_array_foreach(a, i, e)
        {
                static const char *const keys[] = {"type", "path", NULL};
                if (!json_is_object(e))
                        return al_error_set_message(err, EINVAL,
                                                    "linux.namespaces[%zu]: must be an object", i);
                int r = spec_check_keys(e, "linux.namespaces[]", keys, err);
                const char *type, *path;
                if (r >= 0)
                        r = spec_get_string(e, "type", "linux.namespaces[]", true, &type, err);
                if (r >= 0)
                        r = spec_get_string(e, "path", "linux.namespaces[]", false, &path, err);
                if (r < 0)
                        return r;
                size_t k;
                for (k = 0; known[k]; k++)
                        if (STREQ(type, known[k]))
                                break;
                if (!known[k])
                        return al_error_set_message(
                            err, EINVAL, "linux.namespaces[%zu]: unknown type \"%s\"", i, type);
                if (path && *path) {
                        /* A pod's network, ipc and uts namespaces are shared
                         * by its containers; joining any other kind would
                         * give up part of the boundary. */
                        char **slot = STREQ(type, "network") ? &s->join_net
                                      : STREQ(type, "ipc")   ? &s->join_ipc
                                      : STREQ(type, "uts")   ? &s->join_uts
                                                             : NULL;
                        if (!slot)
                                return al_error_set_message(
                                    err, EINVAL,
                                    "linux.namespaces[%zu]: joining the %s namespace at %s is "
                                    "not supported (network, ipc and uts can be joined)",
                                    i, type, path);
                        if (path[0] != '/')
                                return al_error_set_message(
                                    err, EINVAL, "linux.namespaces[%zu].path: must be absolute", i);
                        if (*slot)
                                return al_error_set_message(
                                    err, EINVAL, "linux.namespaces: %s given twice", type);
                        *slot = xstrdup(path);
                }
                seen[k] = true;
        }
        for (size_t k = 0; needed[k]; k++)
                if (!seen[k])
                        return al_error_set_message(
                            err, EINVAL,
                            "linux.namespaces: no \"%s\" namespace asks to share the host's, "
                            "which Airlock refuses; add {\"type\": \"%s\"}",
                            needed[k], needed[k]);
        return 0;
}

static int parse_devices(json_t *a, struct al_error *err)
{
        /* Airlock's /dev holds a fixed set of nodes bound from the host and a
         * user namespace cannot make others: an allow rule for anything else
         * could not be honoured. */
        static const struct {
                int64_t major, minor;
        } std[] = {{1, 3}, {1, 5}, {1, 7}, {1, 8}, {1, 9}, {5, 0}, {5, 1}, {5, 2}, {136, -1}};
        if (!a || json_is_null(a))
                return 0;
        if (!json_is_array(a))
                return al_error_set_message(err, EINVAL,
                                            "linux.resources.devices: must be an array");
        size_t i;
        json_t *e;
        json_array_foreach(a, i, e)
        {
                static const char *const keys[] = {"allow", "type",   "major",
                                                   "minor", "access", NULL};
                if (!json_is_object(e))
                        return al_error_set_message(err, EINVAL, "linux.resources.devices[%zu]", i);
                int r = spec_check_keys(e, "linux.resources.devices[]", keys, err);
                if (r < 0)
                        return r;
                if (!json_is_true(json_object_get(e, "allow")))
                        continue;
                json_t *ma = json_object_get(e, "major"), *mi = json_object_get(e, "minor");
                bool ok = false;
                for (size_t k = 0; k < ARRAY_SIZE(std) && json_is_integer(ma); k++)
                        ok = ok || (json_integer_value(ma) == std[k].major &&
                                    (std[k].minor < 0 || (json_is_integer(mi) &&
                                                          json_integer_value(mi) == std[k].minor)));
                if (!ok)
                        return al_error_set_message(
                            err, EINVAL,
                            "linux.resources.devices[%zu]: only the standard devices (null, "
                            "zero, full, random, urandom, tty, ptmx) can be allowed",
                            i);
        }
        return 0;
}

static int parse_resources(json_t *o, struct oci_spec *s, struct al_error *err)
{
        if (!o || json_is_null(o))
                return 0;
        static const char *const keys[] = {"devices",        "memory",  "cpu",     "pids",
                                           "hugepageLimits", "blockIO", "network", "rdma",
                                           "unified",        NULL};
        if (!json_is_object(o))
                return al_error_set_message(err, EINVAL, "linux.resources: must be an object");
        int r = spec_check_keys(o, "linux.resources", keys, err);
        const char *const unsupported[] = {"hugepageLimits", "blockIO", "network", "rdma",
                                           "unified"};
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(unsupported); i++)
                r = spec_refuse_nonempty(o, unsupported[i], "linux.resources",
                                         "not supported; remove it", err);
        if (r >= 0)
                r = parse_devices(json_object_get(o, "devices"), err);
        if (r < 0)
                return r;
        bool set;
        json_t *m = json_object_get(o, "memory");
        if (m && !json_is_null(m)) {
                static const char *const mk[] = {"limit", "swap", NULL};
                uint64_t swap = 0;
                bool swap_set;
                r = json_is_object(m)
                        ? spec_check_keys(m, "linux.resources.memory", mk, err)
                        : al_error_set_message(err, EINVAL, "linux.resources.memory: object");
                if (r >= 0)
                        r = spec_get_u64(m, "limit", "linux.resources.memory", UINT64_MAX >> 1,
                                         &set, &s->memory, err);
                if (r >= 0)
                        r = spec_get_u64(m, "swap", "linux.resources.memory", UINT64_MAX >> 1,
                                         &swap_set, &swap, err);
                if (r < 0)
                        return r;
                /* swap is memory+swap in the spec: equal means none, which is
                 * all Airlock gives. */
                if (swap_set && swap != s->memory)
                        return al_error_set_message(err, EINVAL,
                                                    "linux.resources.memory.swap: swap is never "
                                                    "given; set it equal to limit or remove it");
        }
        json_t *p = json_object_get(o, "pids");
        if (p && !json_is_null(p)) {
                static const char *const pk[] = {"limit", NULL};
                r = json_is_object(p)
                        ? spec_check_keys(p, "linux.resources.pids", pk, err)
                        : al_error_set_message(err, EINVAL, "linux.resources.pids: object");
                if (r >= 0)
                        r = spec_get_u64(p, "limit", "linux.resources.pids", 1u << 22, &set,
                                         &s->pids, err);
                if (r < 0)
                        return r;
        }
        json_t *c = json_object_get(o, "cpu");
        if (c && !json_is_null(c)) {
                static const char *const ck[] = {"quota", "period", "shares", NULL};
                uint64_t quota = 0, period = 0;
                bool qs, ps;
                r = json_is_object(c)
                        ? spec_check_keys(c, "linux.resources.cpu", ck, err)
                        : al_error_set_message(err, EINVAL, "linux.resources.cpu: object");
                if (r >= 0)
                        r = spec_get_u64(c, "quota", "linux.resources.cpu", 1ull << 40, &qs, &quota,
                                         err);
                if (r >= 0)
                        r = spec_get_u64(c, "period", "linux.resources.cpu", 1000000, &ps, &period,
                                         err);
                if (r < 0)
                        return r;
                uint64_t shares = 0;
                bool ss;
                if (r >= 0)
                        r = spec_get_u64(c, "shares", "linux.resources.cpu", 1u << 20, &ss, &shares,
                                         err);
                if (r < 0)
                        return r;
                if (ss && (shares < 2 || shares > 262144))
                        return al_error_set_message(err, EINVAL,
                                                    "linux.resources.cpu.shares: from 2 to 262144");
                if (ss)
                        s->cpu_shares = shares;
                if (qs && quota > 0) {
                        if (!ps || period < 1000)
                                return al_error_set_message(
                                    err, EINVAL, "linux.resources.cpu: quota needs a period");
                        s->cpus_milli = quota * 1000 / period;
                        if (s->cpus_milli == 0)
                                s->cpus_milli = 1;
                }
        }
        return 0;
}

int oci_resources_parse(const char *json, struct oci_spec *ret, struct al_error *err)
{
        json_error_t je;
        json_t *o = json_loads(json, JSON_REJECT_DUPLICATES, &je);
        if (!o)
                return al_error_set_message(err, EINVAL, "resources: line %d: %s", je.line,
                                            je.text);
        int r = parse_resources(o, ret, err);
        json_decref(o);
        return r;
}

int spec_parse_linux(json_t *o, struct oci_spec *s, struct al_error *err)
{
        static const char *const keys[] = {
            "namespaces",  "uidMappings", "gidMappings",       "resources",
            "cgroupsPath", "seccomp",     "maskedPaths",       "readonlyPaths",
            "devices",     "sysctl",      "rootfsPropagation", "mountLabel",
            "intelRdt",    "personality", "timeOffsets",       NULL};
        if (!o || !json_is_object(o))
                return al_error_set_message(err, EINVAL, "linux: missing or not an object");
        int r = spec_check_keys(o, "linux", keys, err);
        static const struct {
                const char *key, *why;
        } refuse[] = {
            {"uidMappings", "Airlock maps the container's user itself; remove it"},
            {"gidMappings", "Airlock maps the container's group itself; remove it"},
            {"sysctl", "not supported; remove it"},
            {"mountLabel", "not supported; remove it"},
            {"intelRdt", "not supported; remove it"},
            {"personality", "not supported; remove it"},
            {"timeOffsets", "not supported; remove it"},
        };
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(refuse); i++)
                r = spec_refuse_nonempty(o, refuse[i].key, "linux", refuse[i].why, err);
        if (r < 0)
                return r;
        json_t *sc = json_object_get(o, "seccomp");
        if (sc && !json_is_null(sc))
                s->seccomp_json = json_dumps(sc, JSON_COMPACT);
        r = parse_namespaces(json_object_get(o, "namespaces"), s, err);
        if (r >= 0)
                r = parse_resources(json_object_get(o, "resources"), s, err);
        if (r < 0)
                return r;
        const char *cg, *prop;
        r = spec_get_string(o, "cgroupsPath", "linux", false, &cg, err);
        if (r >= 0)
                r = spec_get_string(o, "rootfsPropagation", "linux", false, &prop, err);
        if (r < 0)
                return r;
        if (cg) {
                if (strstr(cg, "..") || strchr(cg, ':'))
                        return al_error_set_message(
                            err, EINVAL,
                            "linux.cgroupsPath: \"%s\" must be a path without \"..\" (systemd "
                            "slice:prefix:name paths are not supported)",
                            cg);
                s->cgroups_path = xstrdup(cg);
        }
        if (prop && *prop && !STREQ(prop, "private") && !STREQ(prop, "rprivate") &&
            !STREQ(prop, "slave") && !STREQ(prop, "rslave"))
                return al_error_set_message(
                    err, EINVAL, "linux.rootfsPropagation: \"%s\" is not supported", prop);
        json_t *devs = json_object_get(o, "devices");
        if (devs && !json_is_null(devs)) {
                if (!json_is_array(devs))
                        return al_error_set_message(err, EINVAL, "linux.devices: array");
                static const char *const std[] = {
                    "/dev/null",    "/dev/zero", "/dev/full", "/dev/random",
                    "/dev/urandom", "/dev/tty",  "/dev/ptmx", NULL};
                size_t i;
                json_t *d;
                json_array_foreach(devs, i, d)
                {
                        const char *path;
                        r = json_is_object(d)
                                ? spec_get_string(d, "path", "linux.devices[]", true, &path, err)
                                : al_error_set_message(err, EINVAL, "linux.devices[%zu]", i);
                        if (r < 0)
                                return r;
                        bool ok = false;
                        for (size_t k = 0; std[k]; k++)
                                ok = ok || STREQ(path, std[k]);
                        if (!ok)
                                return al_error_set_message(
                                    err, EINVAL,
                                    "linux.devices[%zu]: %s is not supported (only the standard "
                                    "devices, which Airlock's /dev always holds)",
                                    i, path);
                }
        }
        return 0;
}
