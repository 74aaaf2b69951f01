/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "spec-internal.h"
#include "spec.h"
#include "util.h"

/* Every key of an object must be one of `known`: what Airlock does not know
 * it cannot honour. */
int spec_check_keys(json_t *o, const char *where, const char *const *known, struct al_error *err)
{
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v)
        {
                bool ok = false;
                for (size_t i = 0; known[i]; i++)
                        ok = ok || STREQ(k, known[i]);
                if (!ok)
                        return al_error_set_message(
                            err, EINVAL, "%s%s%s: not supported by airlock-runtime; remove it",
                            where, *where ? "." : "", k);
        }
        return 0;
}

/* A key whose only accepted value is "absent or empty". */
int spec_refuse_nonempty(json_t *o, const char *key, const char *where, const char *why,
                         struct al_error *err)
{
        json_t *v = json_object_get(o, key);
        if (!v || json_is_null(v))
                return 0;
        bool empty = (json_is_string(v) && json_string_length(v) == 0) ||
                     (json_is_array(v) && json_array_size(v) == 0) ||
                     (json_is_object(v) && json_object_size(v) == 0);
        if (empty)
                return 0;
        return al_error_set_message(err, EINVAL, "%s.%s: %s", where, key, why);
}

int spec_get_string(json_t *o, const char *key, const char *where, bool required, const char **ret,
                    struct al_error *err)
{
        json_t *v = json_object_get(o, key);
        if (!v) {
                if (required)
                        return al_error_set_message(err, EINVAL, "%s.%s: missing", where, key);
                *ret = NULL;
                return 0;
        }
        if (!json_is_string(v) || json_string_length(v) > SPEC_STR_MAX ||
            strlen(json_string_value(v)) != json_string_length(v))
                return al_error_set_message(err, EINVAL, "%s.%s: must be a string", where, key);
        *ret = json_string_value(v);
        return 0;
}

int spec_get_u64(json_t *o, const char *key, const char *where, uint64_t max, bool *ret_set,
                 uint64_t *ret, struct al_error *err)
{
        json_t *v = json_object_get(o, key);
        *ret_set = false;
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (uint64_t)json_integer_value(v) > max)
                return al_error_set_message(
                    err, EINVAL, "%s.%s: must be an integer from 0 to %" PRIu64, where, key, max);
        *ret = (uint64_t)json_integer_value(v);
        *ret_set = true;
        return 0;
}

int spec_get_strv(json_t *o, const char *key, const char *where, char ***ret, struct al_error *err)
{
        json_t *a = json_object_get(o, key);
        *ret = NULL;
        if (!a || json_is_null(a))
                return 0;
        if (!json_is_array(a) || json_array_size(a) > SPEC_STRV_MAX)
                return al_error_set_message(err, EINVAL, "%s.%s: must be an array of strings",
                                            where, key);
        char **v = xcalloc(json_array_size(a) + 1, sizeof(char *));
        size_t i;
        json_t *e;
        json_array_foreach(a, i, e)
        {
                if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e)) {
                        strv_free(v);
                        return al_error_set_message(err, EINVAL, "%s.%s[%zu]: must be a string",
                                                    where, key, i);
                }
                v[i] = xstrdup(json_string_value(e));
        }
        *ret = v;
        return 0;
}

void oci_process_clear(struct oci_process *p)
{
        strv_free(p->argv);
        strv_free(p->env);
        free(p->cwd);
        memset(p, 0, sizeof(*p));
}

struct oci_spec *oci_spec_free(struct oci_spec *s)
{
        if (!s)
                return NULL;
        free(s->oci_version);
        free(s->root);
        oci_process_clear(&s->process);
        free(s->cgroups_path);
        free(s->hostname);
        for (size_t i = 0; i < s->n_annotations; i++) {
                free(s->annotations[i].key);
                free(s->annotations[i].value);
        }
        free(s->annotations);
        for (size_t i = 0; i < s->n_binds; i++) {
                free(s->binds[i].source);
                free(s->binds[i].target);
        }
        free(s->binds);
        strv_free(s->tmpfs);
        free(s->seccomp_json);
        free(s->join_net);
        free(s->join_ipc);
        free(s->join_uts);
        free(s->tmpfs_sizes);
        free(s);
        return NULL;
}

const char *oci_spec_annotation(const struct oci_spec *s, const char *key)
{
        for (size_t i = 0; i < s->n_annotations; i++)
                if (STREQ(s->annotations[i].key, key))
                        return s->annotations[i].value;
        return NULL;
}

static int parse_rlimits(json_t *a, struct oci_process *p, struct al_error *err)
{
        if (!a || json_is_null(a))
                return 0;
        if (!json_is_array(a))
                return al_error_set_message(err, EINVAL, "process.rlimits: must be an array");
        size_t i;
        json_t *e;
        json_array_foreach(a, i, e)
        {
                static const char *const keys[] = {"type", "hard", "soft", NULL};
                if (!json_is_object(e))
                        return al_error_set_message(err, EINVAL,
                                                    "process.rlimits[%zu]: must be an object", i);
                int r = spec_check_keys(e, "process.rlimits[]", keys, err);
                const char *type = NULL;
                uint64_t hard = 0, soft = 0;
                bool hs, ss;
                if (r >= 0)
                        r = spec_get_string(e, "type", "process.rlimits[]", true, &type, err);
                if (r >= 0)
                        r = spec_get_u64(e, "hard", "process.rlimits[]", UINT64_MAX >> 1, &hs,
                                         &hard, err);
                if (r >= 0)
                        r = spec_get_u64(e, "soft", "process.rlimits[]", UINT64_MAX >> 1, &ss,
                                         &soft, err);
                if (r < 0)
                        return r;
                if (!hs || !ss || soft > hard)
                        return al_error_set_message(
                            err, EINVAL, "process.rlimits[%zu]: needs hard and soft, soft <= hard",
                            i);
                /* Airlock sets one value for both: the lower, the soft one. */
                if (STREQ(type, "RLIMIT_NOFILE"))
                        p->nofile = soft;
                else if (STREQ(type, "RLIMIT_FSIZE"))
                        p->fsize = soft;
                else if (STREQ(type, "RLIMIT_CPU"))
                        p->cpu = soft;
                else
                        return al_error_set_message(err, EINVAL,
                                                    "process.rlimits: %s is not supported "
                                                    "(RLIMIT_NOFILE, RLIMIT_FSIZE, RLIMIT_CPU are)",
                                                    type);
                if (soft == 0)
                        return al_error_set_message(err, EINVAL, "process.rlimits: %s of 0", type);
        }
        return 0;
}

static int parse_process(json_t *o, struct oci_process *p, struct al_error *err)
{
        static const char *const keys[] = {"terminal",
                                           "consoleSize",
                                           "user",
                                           "args",
                                           "env",
                                           "cwd",
                                           "capabilities",
                                           "rlimits",
                                           "noNewPrivileges",
                                           "oomScoreAdj",
                                           "apparmorProfile",
                                           "selinuxLabel",
                                           NULL};
        if (!json_is_object(o))
                return al_error_set_message(err, EINVAL, "process: must be an object");
        int r = spec_check_keys(o, "process", keys, err);
        if (r < 0)
                return r;
        r = spec_refuse_nonempty(o, "apparmorProfile", "process", "not supported; remove it", err);
        if (r >= 0)
                r = spec_refuse_nonempty(o, "selinuxLabel", "process", "not supported; remove it",
                                         err);
        if (r < 0)
                return r;
        json_t *t = json_object_get(o, "terminal");
        if (t && !json_is_boolean(t))
                return al_error_set_message(err, EINVAL, "process.terminal: must be a boolean");
        p->terminal = t && json_is_true(t);
        json_t *cs = json_object_get(o, "consoleSize");
        if (cs && !json_is_null(cs)) {
                static const char *const ckeys[] = {"height", "width", NULL};
                uint64_t h = 0, w = 0;
                bool set;
                r = json_is_object(cs)
                        ? spec_check_keys(cs, "process.consoleSize", ckeys, err)
                        : al_error_set_message(err, EINVAL, "process.consoleSize: object");
                if (r >= 0)
                        r = spec_get_u64(cs, "height", "process.consoleSize", 65535, &set, &h, err);
                if (r >= 0)
                        r = spec_get_u64(cs, "width", "process.consoleSize", 65535, &set, &w, err);
                if (r < 0)
                        return r;
                p->rows = (uint16_t)h;
                p->cols = (uint16_t)w;
        }
        json_t *nnp = json_object_get(o, "noNewPrivileges");
        if (nnp && !json_is_boolean(nnp))
                return al_error_set_message(err, EINVAL,
                                            "process.noNewPrivileges: must be a boolean");
        json_t *oom = json_object_get(o, "oomScoreAdj");
        if (oom && !json_is_null(oom)) {
                if (!json_is_integer(oom) || json_integer_value(oom) < -1000 ||
                    json_integer_value(oom) > 1000)
                        return al_error_set_message(
                            err, EINVAL, "process.oomScoreAdj: an integer from -1000 to 1000");
                p->oom_score_adj_set = true;
                p->oom_score_adj = (int)json_integer_value(oom);
        }

        r = spec_get_strv(o, "args", "process", &p->argv, err);
        if (r < 0)
                return r;
        if (!p->argv || !p->argv[0] || !*p->argv[0])
                return al_error_set_message(err, EINVAL, "process.args: must name a command");
        r = spec_get_strv(o, "env", "process", &p->env, err);
        if (r < 0)
                return r;
        if (!p->env)
                p->env = xcalloc(1, sizeof(char *));
        for (size_t i = 0; p->env[i]; i++)
                if (!strchr(p->env[i], '=') || p->env[i][0] == '=')
                        return al_error_set_message(err, EINVAL,
                                                    "process.env[%zu]: must be KEY=VALUE", i);
        const char *cwd;
        r = spec_get_string(o, "cwd", "process", true, &cwd, err);
        if (r < 0)
                return r;
        if (cwd[0] != '/')
                return al_error_set_message(err, EINVAL, "process.cwd: must be absolute");
        p->cwd = xstrdup(cwd);

        json_t *u = json_object_get(o, "user");
        if (u) {
                static const char *const ukeys[] = {"uid",   "gid",      "additionalGids",
                                                    "umask", "username", NULL};
                if (!json_is_object(u))
                        return al_error_set_message(err, EINVAL, "process.user: must be an object");
                r = spec_check_keys(u, "process.user", ukeys, err);
                if (r < 0)
                        return r;
                r = spec_refuse_nonempty(u, "username", "process.user", "Windows only; remove it",
                                         err);
                if (r < 0)
                        return r;
                uint64_t uid = 0, gid = 0, umask = 0;
                bool set;
                r = spec_get_u64(u, "uid", "process.user", 65535, &set, &uid, err);
                if (r >= 0)
                        r = spec_get_u64(u, "gid", "process.user", 65535, &set, &gid, err);
                if (r >= 0)
                        r = spec_get_u64(u, "umask", "process.user", 0777, &set, &umask, err);
                if (r < 0)
                        return r;
                if (set && umask != 022)
                        return al_error_set_message(err, EINVAL,
                                                    "process.user.umask: only 0022 is supported");
                p->uid = (uint32_t)uid;
                p->gid = (uint32_t)gid;
                json_t *ag = json_object_get(u, "additionalGids");
                if (ag && !json_is_null(ag)) {
                        if (!json_is_array(ag))
                                return al_error_set_message(
                                    err, EINVAL, "process.user.additionalGids: must be an array");
                        size_t i;
                        json_t *e;
                        /* The sandbox's user namespace maps one group:
                         * another group cannot be given. */
                        json_array_foreach(ag, i, e)
                        {
                                if (!json_is_integer(e) || json_integer_value(e) != (json_int_t)gid)
                                        return al_error_set_message(
                                            err, EINVAL,
                                            "process.user.additionalGids: only the primary group "
                                            "(%" PRIu64 ") is supported",
                                            gid);
                        }
                }
        }
        return parse_rlimits(json_object_get(o, "rlimits"), p, err);
}

int oci_process_parse(const char *json, struct oci_process *ret, struct al_error *err)
{
        json_error_t je;
        json_t *o = json_loads(json, JSON_REJECT_DUPLICATES, &je);
        if (!o)
                return al_error_set_message(err, EINVAL, "process: line %d: %s", je.line, je.text);
        struct oci_process p = {0};
        int r = parse_process(o, &p, err);
        json_decref(o);
        if (r < 0) {
                oci_process_clear(&p);
                return r;
        }
        *ret = p;
        return 0;
}

/* The mounts a container's runtime usually asks for, which Airlock's own
 * root already provides in its own way (its /proc, /dev, /dev/pts,
 * /dev/shm) or never shows (/sys, /dev/mqueue, cgroupfs). */
static bool provided_mount(const char *type, const char *dest)
{
        static const struct {
                const char *type, *dest;
        } known[] = {
            {"proc", "/proc"},
            {"tmpfs", "/dev"},
            {"devpts", "/dev/pts"},
            {"tmpfs", "/dev/shm"},
            {"mqueue", "/dev/mqueue"},
            {"sysfs", "/sys"},
            {"cgroup", "/sys/fs/cgroup"},
            {"cgroup2", "/sys/fs/cgroup"},
            {"bind", "/dev/shm"},
        };
        for (size_t i = 0; i < ARRAY_SIZE(known); i++)
                if (STREQ(type, known[i].type) && STREQ(dest, known[i].dest))
                        return true;
        return false;
}

/* A fresh tmpfs (nosuid, nodev, mode 0755, owned by the container's user,
 * at most limits.disk): options asking for anything else are refused. */
static int parse_tmpfs(struct oci_spec *s, size_t i, const char *dest, char **opts,
                       struct al_error *err)
{
        uint64_t size = 0;
        for (size_t j = 0; opts && opts[j]; j++) {
                const char *o = opts[j];
                if (STREQ(o, "nosuid") || STREQ(o, "nodev") || STREQ(o, "strictatime") ||
                    STREQ(o, "relatime") || STREQ(o, "rw") || STREQ(o, "mode=755") ||
                    STREQ(o, "mode=0755"))
                        continue;
                if (strncmp(o, "size=", 5) == 0 && parse_size(o + 5, &size) >= 0 && size > 0)
                        continue;
                return al_error_set_message(err, EINVAL,
                                            "mounts[%zu]: tmpfs option \"%s\" is not supported "
                                            "(nosuid, nodev, mode=755 and size= are)",
                                            i, o);
        }
        s->tmpfs[s->n_tmpfs] = xstrdup(dest);
        s->tmpfs_sizes[s->n_tmpfs++] = size;
        return 0;
}

static int parse_mounts(json_t *a, struct oci_spec *s, struct al_error *err)
{
        if (!a || json_is_null(a))
                return 0;
        if (!json_is_array(a))
                return al_error_set_message(err, EINVAL, "mounts: must be an array");
        s->binds = xcalloc(json_array_size(a) + 1, sizeof(*s->binds));
        s->tmpfs = xcalloc(json_array_size(a) + 1, sizeof(char *));
        s->tmpfs_sizes = xcalloc(json_array_size(a) + 1, sizeof(uint64_t));
        size_t i;
        json_t *m;
        json_array_foreach(a, i, m)
        {
                static const char *const keys[] = {
                    "destination", "type", "source", "options", "uidMappings", "gidMappings", NULL};
                if (!json_is_object(m))
                        return al_error_set_message(err, EINVAL, "mounts[%zu]: must be an object",
                                                    i);
                int r = spec_check_keys(m, "mounts[]", keys, err);
                const char *dest, *type, *src;
                _cleanup_strv_ char **opts = NULL;
                if (r >= 0)
                        r = spec_get_string(m, "destination", "mounts[]", true, &dest, err);
                if (r >= 0)
                        r = spec_get_string(m, "type", "mounts[]", false, &type, err);
                if (r >= 0)
                        r = spec_get_string(m, "source", "mounts[]", false, &src, err);
                if (r >= 0)
                        r = spec_get_strv(m, "options", "mounts[]", &opts, err);
                if (r >= 0)
                        r = spec_refuse_nonempty(m, "uidMappings", "mounts[]", "not supported",
                                                 err);
                if (r >= 0)
                        r = spec_refuse_nonempty(m, "gidMappings", "mounts[]", "not supported",
                                                 err);
                if (r < 0)
                        return r;
                if (dest[0] != '/')
                        return al_error_set_message(err, EINVAL,
                                                    "mounts[%zu].destination: must be absolute", i);
                bool bind = false, ro = false;
                for (size_t j = 0; opts && opts[j]; j++) {
                        if (STREQ(opts[j], "bind") || STREQ(opts[j], "rbind"))
                                bind = true;
                        else if (STREQ(opts[j], "ro"))
                                ro = true;
                }
                if (!type)
                        type = bind ? "bind" : "";
                if (provided_mount(type, dest))
                        continue;
                if (STREQ(type, "tmpfs")) {
                        r = parse_tmpfs(s, i, dest, opts, err);
                        if (r < 0)
                                return r;
                        continue;
                }
                if (!STREQ(type, "bind") && !bind)
                        return al_error_set_message(
                            err, EINVAL,
                            "mounts[%zu]: a %s mount at %s is not supported (bind mounts are, "
                            "and Airlock's own /proc, /dev, /tmp)",
                            i, *type ? type : "typeless", dest);
                if (!src || src[0] != '/')
                        return al_error_set_message(
                            err, EINVAL, "mounts[%zu].source: a bind mount needs an absolute path",
                            i);
                for (size_t j = 0; opts && opts[j]; j++) {
                        static const char *const ok[] = {"bind",     "rbind", "ro",     "rw",
                                                         "nosuid",   "nodev", "noexec", "private",
                                                         "rprivate", "slave", "rslave", NULL};
                        bool known = false;
                        for (size_t k = 0; ok[k]; k++)
                                known = known || STREQ(opts[j], ok[k]);
                        if (!known)
                                return al_error_set_message(
                                    err, EINVAL, "mounts[%zu].options: \"%s\" is not supported", i,
                                    opts[j]);
                }
                struct policy_mount *pm = &s->binds[s->n_binds++];
                pm->source = xstrdup(src);
                pm->target = xstrdup(dest);
                pm->readonly = ro;
        }
        return 0;
}

/* A host name (RFC 1123's letters, digits, '-' and '.'), set in the
 * container's own uts namespace. */
static bool hostname_ok(const char *h)
{
        size_t n = strlen(h);
        if (n == 0 || n > 64 || h[0] == '-' || h[0] == '.')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((h[i] >= 'a' && h[i] <= 'z') || (h[i] >= 'A' && h[i] <= 'Z') ||
                      (h[i] >= '0' && h[i] <= '9') || h[i] == '-' || h[i] == '.'))
                        return false;
        return true;
}

int oci_spec_parse(const char *json, const char *bundle, struct oci_spec **ret,
                   struct al_error *err)
{
        json_error_t je;
        json_t *o = json_loads(json, JSON_REJECT_DUPLICATES, &je);
        if (!o)
                return al_error_set_message(err, EINVAL, "config.json: line %d: %s", je.line,
                                            je.text);
        struct oci_spec *s = xcalloc(1, sizeof(*s));
        int r = 0;
        static const char *const keys[] = {"ociVersion", "root",       "mounts",      "process",
                                           "hostname",   "domainname", "annotations", "linux",
                                           "hooks",      NULL};
        if (!json_is_object(o)) {
                r = al_error_set_message(err, EINVAL, "config.json: must be an object");
                goto out;
        }
        r = spec_check_keys(o, "", keys, err);
        if (r < 0)
                goto out;
        const char *ver;
        r = spec_get_string(o, "ociVersion", "config", true, &ver, err);
        if (r < 0)
                goto out;
        if (strncmp(ver, "1.", 2) != 0) {
                r = al_error_set_message(
                    err, EINVAL, "ociVersion \"%s\": only runtime spec 1.x is supported", ver);
                goto out;
        }
        s->oci_version = xstrdup(ver);
        r = spec_refuse_nonempty(o, "hooks", "config", "hooks run host commands; not supported",
                                 err);
        if (r >= 0)
                r = spec_refuse_nonempty(o, "domainname", "config", "not supported; remove it",
                                         err);
        if (r < 0)
                goto out;
        const char *host;
        r = spec_get_string(o, "hostname", "config", false, &host, err);
        if (r < 0)
                goto out;
        if (host && *host && !hostname_ok(host)) {
                r = al_error_set_message(err, EINVAL,
                                         "hostname \"%s\": give at most 64 letters, digits, "
                                         "'-' and '.', not starting with '-' or '.'",
                                         host);
                goto out;
        }
        if (host && *host)
                s->hostname = xstrdup(host);

        json_t *root = json_object_get(o, "root");
        if (!root || !json_is_object(root)) {
                r = al_error_set_message(err, EINVAL, "root: missing; give root.path");
                goto out;
        }
        static const char *const rkeys[] = {"path", "readonly", NULL};
        const char *rp;
        r = spec_check_keys(root, "root", rkeys, err);
        if (r >= 0)
                r = spec_get_string(root, "path", "root", true, &rp, err);
        if (r < 0)
                goto out;
        if (!*rp) {
                r = al_error_set_message(err, EINVAL, "root.path: empty");
                goto out;
        }
        s->root = rp[0] == '/' ? xstrdup(rp) : xasprintf("%s/%s", bundle, rp);
        json_t *ro = json_object_get(root, "readonly");
        if (ro && !json_is_boolean(ro)) {
                r = al_error_set_message(err, EINVAL, "root.readonly: must be a boolean");
                goto out;
        }
        s->root_readonly = ro && json_is_true(ro);

        json_t *proc = json_object_get(o, "process");
        if (!proc) {
                r = al_error_set_message(err, EINVAL, "process: missing");
                goto out;
        }
        r = parse_process(proc, &s->process, err);
        if (r >= 0)
                r = parse_mounts(json_object_get(o, "mounts"), s, err);
        if (r >= 0)
                r = spec_parse_linux(json_object_get(o, "linux"), s, err);
        /* As runc: a joined uts namespace keeps its owner's name. */
        if (r >= 0 && s->hostname && s->join_uts)
                r = al_error_set_message(err, EINVAL,
                                         "hostname \"%s\" with the uts namespace %s joined: the "
                                         "name is the namespace's owner's; remove hostname",
                                         s->hostname, s->join_uts);
        if (r < 0)
                goto out;

        json_t *ann = json_object_get(o, "annotations");
        if (ann && !json_is_null(ann)) {
                if (!json_is_object(ann)) {
                        r = al_error_set_message(err, EINVAL, "annotations: must be an object");
                        goto out;
                }
                s->annotations = xcalloc(json_object_size(ann) + 1, sizeof(*s->annotations));
                const char *k;
                json_t *v;
                json_object_foreach(ann, k, v)
                {
                        if (!json_is_string(v)) {
                                r = al_error_set_message(err, EINVAL,
                                                         "annotations.%s: must be a string", k);
                                goto out;
                        }
                        s->annotations[s->n_annotations].key = xstrdup(k);
                        s->annotations[s->n_annotations++].value = xstrdup(json_string_value(v));
                }
        }
out:
        json_decref(o);
        if (r < 0) {
                oci_spec_free(s);
                return r;
        }
        *ret = s;
        return 0;
}

static void policy_freep(struct policy **p)
{
        if (*p)
                policy_free(*p);
}

static bool policy_name_ok(const char *n)
{
        size_t len = strlen(n);
        if (len == 0 || len > 64 || n[0] == '.')
                return false;
        for (size_t i = 0; i < len; i++)
                if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') ||
                      (n[i] >= '0' && n[i] <= '9') || n[i] == '-' || n[i] == '_' || n[i] == '.'))
                        return false;
        return true;
}

int oci_spec_policy(const struct oci_spec *s, const char *policy_dir, struct policy **ret,
                    struct al_error *err)
{
        _cleanup_(policy_freep) struct policy *p = policy_new();
        const char *doc = oci_spec_annotation(s, "airlock.io/policy");
        int r;
        if (doc && doc[0] != '{') {
                if (!policy_name_ok(doc))
                        return al_error_set_message(
                            err, EINVAL,
                            "annotation airlock.io/policy: \"%s\" is neither a policy document "
                            "nor a policy name ([A-Za-z0-9_.-], at most 64)",
                            doc);
                _cleanup_free_ char *path = xasprintf("%s/%s.json", policy_dir, doc);
                r = policy_load_file(p, path, err);
                if (r < 0)
                        return al_error_wrap(err, "annotation airlock.io/policy \"%s\"", doc);
                r = oci_spec_policy_access(s, policy_dir, doc, p, err);
                if (r < 0)
                        return r;
        } else if (doc) {
                r = policy_load_string(p, doc, "annotation airlock.io/policy", err);
                if (r < 0)
                        return r;
        }
        if (doc) {
                if (p->workspace)
                        return al_error_set_message(
                            err, EINVAL,
                            "annotation airlock.io/policy: \"workspace\" is not supported in a "
                            "container; use the spec's mounts");
        }
        /* Routes and tool definitions are host configuration: a route
         * carries the node's secrets to its upstream, a command tool runs
         * on the node. A pod's own document may allow the node's tools and
         * use its own network rules, never define either. */
        if (doc && doc[0] == '{' && (p->n_routes || p->n_tools))
                return al_error_set_message(
                    err, EPERM,
                    "annotation airlock.io/policy: %s are the node's configuration, not the "
                    "pod's; install the policy on the node (/etc/airlock/policies/NAME.json) "
                    "and name it in the annotation",
                    p->n_routes ? "routes" : "tool definitions (tools.define)");
        /* A host path is the node's too: a pod's document naming one would
         * bind what no volume of the pod was allowed (the spec's mounts,
         * made by the CRI from the pod's volumes, are added below). */
        if (doc && doc[0] == '{' && p->n_mounts)
                return al_error_set_message(
                    err, EPERM,
                    "annotation airlock.io/policy: filesystem.mounts binds host paths, the "
                    "node's configuration, not the pod's; use the pod's volumes, or install "
                    "the policy on the node (/etc/airlock/policies/NAME.json) and name it");
        /* The direct path puts sockets the node connected in the
         * container's hands (the API asks a grant with host rights). */
        if (doc && doc[0] == '{' && p->net_direct_path)
                return al_error_set_message(
                    err, EPERM,
                    "annotation airlock.io/policy: network.directPath hands the container "
                    "the node's own sockets, the node's choice, not the pod's; remove it, or "
                    "install the policy on the node (/etc/airlock/policies/NAME.json) and "
                    "name it");
        p->uid = s->process.uid;
        p->gid = s->process.gid;
        /* The spec's limits tighten the policy's, never loosen them. */
        struct {
                uint64_t spec;
                uint64_t *pol;
                unsigned bit;
        } lim[] = {
            {s->memory, &p->limits.memory, POLICY_LIMIT_MEMORY},
            {s->pids, &p->limits.pids, POLICY_LIMIT_PIDS},
            {s->cpus_milli, &p->limits.cpus_milli, POLICY_LIMIT_CPUS},
            {s->process.nofile, &p->limits.open_files, POLICY_LIMIT_OPEN_FILES},
            {s->process.fsize, &p->limits.file_size, POLICY_LIMIT_FILE_SIZE},
            {s->process.cpu, &p->limits.cpu_time_s, POLICY_LIMIT_CPU_TIME},
        };
        for (size_t i = 0; i < ARRAY_SIZE(lim); i++) {
                if (!lim[i].spec)
                        continue;
                if (!(p->limits_set & lim[i].bit) || *lim[i].pol == 0 ||
                    lim[i].spec < *lim[i].pol) {
                        *lim[i].pol = lim[i].spec;
                        p->limits_set |= lim[i].bit;
                }
        }
        for (size_t i = 0; i < s->n_binds; i++)
                policy_add_mount(p, s->binds[i].source, s->binds[i].target, s->binds[i].readonly);
        *ret = TAKE_PTR(p);
        return 0;
}
