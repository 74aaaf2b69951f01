/* SPDX-License-Identifier: Apache-2.0 */
/* ps, pause/resume (the freezer), update, features. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "runtime.h"
#include "spec.h"
#include "util.h"

static int load_alive(const struct rt_globals *g, const char *verb, int argc, char **argv,
                      struct rt_state *st, const char **ret_opt, struct al_error *err)
{
        const char *id = NULL;
        for (int i = 0; i < argc; i++) {
                const char *a = argv[i];
                if (ret_opt && (STREQ(a, "--format") || STREQ(a, "-f")) && i + 1 < argc)
                        *ret_opt = argv[++i];
                else if (ret_opt && strncmp(a, "--format=", 9) == 0)
                        *ret_opt = a + 9;
                else if (ret_opt && (STREQ(a, "--resources") || STREQ(a, "-r")) && i + 1 < argc)
                        *ret_opt = argv[++i];
                else if (a[0] == '-')
                        return al_error_set_message(err, EINVAL, "%s: option %s is not supported",
                                                    verb, a);
                else if (!id)
                        id = a;
                else
                        return al_error_set_message(err, EINVAL, "%s: one container id only", verb);
        }
        if (!id)
                return al_error_set_message(err, EINVAL, "%s: give a container id", verb);
        int r = rt_state_load(g, id, st, err);
        if (r < 0)
                return r;
        if (!rt_alive(st)) {
                rt_state_clear(st);
                return al_error_set_message(err, ESRCH, "container \"%s\" is not running", id);
        }
        return 0;
}

int rt_ps(const struct rt_globals *g, int argc, char **argv, struct al_error *err)
{
        struct rt_state st = {0};
        const char *format = "table";
        int r = load_alive(g, "ps", argc, argv, &st, &format, err);
        if (r < 0)
                return r;
        if (!STREQ(format, "json") && !STREQ(format, "table")) {
                rt_state_clear(&st);
                return al_error_set_message(err, EINVAL, "ps --format: json or table");
        }
        _cleanup_free_ char *buf = NULL;
        _cleanup_free_ char *path =
            st.cgroup_dir ? xasprintf("%s/cgroup.procs", st.cgroup_dir) : NULL;
        rt_state_clear(&st);
        if (!path)
                return al_error_set_message(err, ENOENT, "ps: the container has no cgroup");
        r = read_file_at(AT_FDCWD, path, 1 << 20, &buf, NULL);
        if (r < 0)
                return al_error_set(err, -r, "reading %s", path);
        json_t *a = json_array();
        for (char *p = buf, *nl; *p; p = nl + 1) {
                nl = strchr(p, '\n');
                if (!nl)
                        break;
                *nl = '\0';
                uint64_t pid;
                if (safe_atou64(p, &pid) >= 0)
                        json_array_append_new(a, json_integer((json_int_t)pid));
        }
        if (STREQ(format, "json")) {
                _cleanup_free_ char *text = json_dumps(a, JSON_COMPACT);
                printf("%s\n", text);
        } else {
                printf("PID\n");
                size_t i;
                json_t *v;
                json_array_foreach(a, i, v)
                    printf("%" JSON_INTEGER_FORMAT "\n", json_integer_value(v));
        }
        json_decref(a);
        return 0;
}

#define PAUSE_WAIT_MS 5000

/* Whether the kernel says every member is frozen (v1 freezer.state
 * FROZEN, not FREEZING; v2 "frozen 1" in cgroup.events), waiting up to
 * PAUSE_WAIT_MS (a loaded node can take a while to stop every process;
 * usleep(1000) sleeps at least that, so this is a lower bound). */
static bool frozen_now(const char *freeze_file, bool v1)
{
        _cleanup_free_ char *dir = xstrdup(freeze_file);
        *strrchr(dir, '/') = '\0';
        for (int ms = 0; ms < PAUSE_WAIT_MS; ms++) {
                _cleanup_free_ char *s = NULL;
                if (v1) {
                        if (read_file_at(AT_FDCWD, freeze_file, 64, &s, NULL) >= 0 &&
                            strncmp(s, "FROZEN", 6) == 0)
                                return true;
                } else {
                        uint64_t v = 0;
                        _cleanup_free_ char *ev = xasprintf("%s/cgroup.events", dir);
                        if (read_file_at(AT_FDCWD, ev, 4096, &s, NULL) >= 0 &&
                            cgroup_parse_keyed(s, "frozen", &v) >= 0 && v == 1)
                                return true;
                }
                usleep(1000);
        }
        return false;
}

static int freeze(const struct rt_globals *g, const char *verb, bool frozen, int argc, char **argv,
                  struct al_error *err)
{
        struct rt_state st = {0};
        int r = load_alive(g, verb, argc, argv, &st, NULL, err);
        if (r < 0)
                return r;
        if (!st.freeze_file) {
                rt_state_clear(&st);
                return al_error_set_message(err, EOPNOTSUPP, "%s: this host has no cgroup freezer",
                                            verb);
        }
        bool v1 = strstr(st.freeze_file, "freezer.state") != NULL;
        r = write_file_at(AT_FDCWD, st.freeze_file,
                          v1 ? (frozen ? "FROZEN" : "THAWED") : (frozen ? "1" : "0"));
        if (r < 0)
                al_error_set(err, -r, "%s: writing %s", verb, st.freeze_file);
        else if (frozen && !frozen_now(st.freeze_file, v1)) {
                /* Paused is every process stopped, as the caller expects
                 * when this returns; short of that, nothing is left half
                 * frozen. */
                (void)write_file_at(AT_FDCWD, st.freeze_file, v1 ? "THAWED" : "0");
                r = al_error_set_message(err, ETIMEDOUT,
                                         "pause: the container's processes did not all stop "
                                         "within %d ms; it runs on",
                                         PAUSE_WAIT_MS);
        }
        rt_state_clear(&st);
        return r;
}

int rt_pause(const struct rt_globals *g, int argc, char **argv, struct al_error *err)
{
        return freeze(g, "pause", true, argc, argv, err);
}

int rt_resume(const struct rt_globals *g, int argc, char **argv, struct al_error *err)
{
        return freeze(g, "resume", false, argc, argv, err);
}

/* update --resources FILE|-: memory, pids and cpu of a running container,
 * never above what it was created with (its policy's limits). */
int rt_update(const struct rt_globals *g, int argc, char **argv, struct al_error *err)
{
        struct rt_state st = {0};
        const char *file = NULL;
        int r = load_alive(g, "update", argc, argv, &st, &file, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *json = NULL;
        struct oci_spec res = {0};
        if (!file)
                r = al_error_set_message(err, EINVAL,
                                         "update: give --resources FILE (a LinuxResources "
                                         "document, - for stdin); single-value flags are not "
                                         "supported");
        else
                r = read_file_at(STREQ(file, "-") ? AT_FDCWD : AT_FDCWD,
                                 STREQ(file, "-") ? "/dev/stdin" : file, 1 << 20, &json, NULL);
        if (r < 0 && file)
                al_error_set(err, -r, "update: reading %s", file);
        if (r >= 0)
                r = oci_resources_parse(json, &res, err);
        const struct {
                const char *what;
                uint64_t v, max;
        } chk[] = {{"memory.limit", res.memory, st.max_memory},
                   {"pids.limit", res.pids, st.max_pids},
                   {"cpu quota", res.cpus_milli, st.max_cpus_milli}};
        for (size_t i = 0; r >= 0 && i < ARRAY_SIZE(chk); i++)
                if (chk[i].v && chk[i].max && chk[i].v > chk[i].max)
                        r = al_error_set_message(err, EPERM,
                                                 "update: %s %" PRIu64
                                                 " is above the container's limit %" PRIu64
                                                 " (its policy); recreate it to raise it",
                                                 chk[i].what, chk[i].v, chk[i].max);
        struct cgroup *cg = NULL;
        if (r >= 0 && (!st.cgroup_parents || !st.cgroup_name))
                r = al_error_set_message(err, ENOENT, "update: the container has no cgroup");
        if (r >= 0)
                r = st.cgroup_v2 ? cgroup_v2_new(st.cgroup_parents[0], st.cgroup_name, false, &cg)
                                 : cgroup_v1_new(st.cgroup_parents, strv_length(st.cgroup_parents),
                                                 st.cgroup_name, false, &cg);
        if (r >= 0) {
                struct cgroup_limits lim = {
                    .memory = res.memory, .pids = res.pids, .cpus_milli = res.cpus_milli};
                r = cg->ops->apply(cg, &lim, err);
        }
        /* Only the handle goes: cgroup_free() would remove the live leaf. */
        if (cg) {
                for (size_t i = 0; i < cg->n_dirs; i++)
                        free(cg->dirs[i]);
                free(cg->name);
                free(cg->parent_v2);
                if (cg->dir_fd >= 0)
                        close(cg->dir_fd);
                free(cg);
        }
        rt_state_clear(&st);
        return r;
}

int rt_features(const struct rt_globals *g, int argc, char **argv, struct al_error *err)
{
        if (argc > 0)
                return al_error_set_message(err, EINVAL, "features: takes no arguments");
        printf("{\n"
               "  \"ociVersionMin\": \"1.0.0\",\n"
               "  \"ociVersionMax\": \"1.1.0\",\n"
               "  \"hooks\": [],\n"
               "  \"mountOptions\": [\"bind\", \"rbind\", \"ro\", \"rw\", \"nosuid\", "
               "\"nodev\", \"noexec\", \"private\", \"rprivate\", \"slave\", \"rslave\"],\n"
               "  \"linux\": {\n"
               "    \"namespaces\": [\"pid\", \"network\", \"mount\", \"ipc\", \"uts\", "
               "\"user\", \"cgroup\"],\n"
               "    \"capabilities\": [],\n"
               "    \"cgroup\": {\"v1\": true, \"v2\": true, \"systemd\": false, "
               "\"systemdUser\": false},\n"
               "    \"seccomp\": {\"enabled\": false},\n"
               "    \"apparmor\": {\"enabled\": false},\n"
               "    \"selinux\": {\"enabled\": false}\n"
               "  },\n"
               "  \"annotations\": {\"io.airlock.runtime.policy\": \"airlock.io/policy\"}\n"
               "}\n");
        return 0;
}
