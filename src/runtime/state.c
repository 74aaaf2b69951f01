/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime.h"
#include "util.h"

void rt_state_clear(struct rt_state *s)
{
        free(s->id);
        free(s->bundle);
        free(s->created);
        free(s->cgroup_dir);
        free(s->freeze_file);
        free(s->cgroup_name);
        free(s->annotations_json);
        strv_free(s->cgroup_parents);
        strv_free(s->cgroup_leaves);
        strv_free(s->cgroup_leaf_ids);
        memset(s, 0, sizeof(*s));
}

/* An id names a directory under --root: no separators, no dot names. */
int rt_id_check(const char *id, struct al_error *err)
{
        size_t n = strlen(id);
        if (n == 0 || n > 128 || id[0] == '.')
                return al_error_set_message(err, EINVAL,
                                            "container id \"%s\": 1 to 128 of [A-Za-z0-9_.-], "
                                            "not starting with a dot",
                                            id);
        for (size_t i = 0; i < n; i++) {
                char c = id[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '.' || c == '-'))
                        return al_error_set_message(err, EINVAL,
                                                    "container id \"%s\": 1 to 128 of "
                                                    "[A-Za-z0-9_.-]",
                                                    id);
        }
        return 0;
}

char *rt_dir(const struct rt_globals *g, const char *id)
{
        return xasprintf("%s/%s", g->root, id);
}

uint64_t rt_pid_start(pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        _cleanup_free_ char *buf = NULL;
        if (read_file_at(AT_FDCWD, path, 4096, &buf, NULL) < 0)
                return 0;
        /* Field 22 (starttime), counted after the command's closing paren. */
        char *p = strrchr(buf, ')');
        if (!p)
                return 0;
        int field = 2;
        for (p++; *p && field < 22; p++)
                if (*p == ' ')
                        field++;
        uint64_t v = 0;
        while (*p >= '0' && *p <= '9')
                v = v * 10 + (uint64_t)(*p++ - '0');
        return v;
}

bool rt_alive(const struct rt_state *s)
{
        if (s->pid <= 0)
                return false;
        if (kill(s->pid, 0) < 0 && errno == ESRCH)
                return false;
        /* A zombie is gone for this purpose. */
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)s->pid);
        _cleanup_free_ char *buf = NULL;
        if (read_file_at(AT_FDCWD, path, 4096, &buf, NULL) < 0)
                return false;
        char *p = strrchr(buf, ')');
        if (p && p[1] == ' ' && p[2] == 'Z')
                return false;
        return rt_pid_start(s->pid) == s->pid_start;
}

const char *rt_status(const struct rt_state *s)
{
        if (!rt_alive(s))
                return "stopped";
        if (s->freeze_file) {
                _cleanup_free_ char *v = NULL;
                if (read_file_at(AT_FDCWD, s->freeze_file, 64, &v, NULL) >= 0 &&
                    (strncmp(v, "1", 1) == 0 || strncmp(v, "FROZEN", 6) == 0 ||
                     strncmp(v, "FREEZING", 8) == 0))
                        return "paused";
        }
        return s->started ? "running" : "created";
}

static const char *jstr(json_t *o, const char *k)
{
        json_t *v = json_object_get(o, k);
        return json_is_string(v) ? json_string_value(v) : NULL;
}

int rt_state_load(const struct rt_globals *g, const char *id, struct rt_state *ret,
                  struct al_error *err)
{
        int r = rt_id_check(id, err);
        if (r < 0)
                return r;
        _cleanup_free_ char *path = xasprintf("%s/%s/state.json", g->root, id);
        _cleanup_free_ char *buf = NULL;
        r = read_file_at(AT_FDCWD, path, RUNTIME_STATE_MAX, &buf, NULL);
        if (r == -ENOENT)
                return al_error_set_message(err, ENOENT, "container \"%s\" does not exist", id);
        if (r < 0)
                return al_error_set(err, -r, "reading %s", path);
        json_error_t je;
        json_t *o = json_loads(buf, 0, &je);
        if (!o || !json_is_object(o)) {
                json_decref(o);
                return al_error_set_message(err, EINVAL, "%s: not a state file", path);
        }
        struct rt_state s = {0};
        const char *v;
        s.id = xstrdup(id);
        s.bundle = xstrdup((v = jstr(o, "bundle")) ? v : "");
        s.created = xstrdup((v = jstr(o, "created")) ? v : "");
        s.cgroup_dir = (v = jstr(o, "cgroupDir")) ? xstrdup(v) : NULL;
        s.freeze_file = (v = jstr(o, "freezeFile")) ? xstrdup(v) : NULL;
        s.cgroup_name = (v = jstr(o, "cgroupName")) ? xstrdup(v) : NULL;
        s.pid = (pid_t)json_integer_value(json_object_get(o, "pid"));
        s.pid_start = (uint64_t)json_integer_value(json_object_get(o, "pidStart"));
        s.started = json_is_true(json_object_get(o, "started"));
        json_t *parents = json_object_get(o, "cgroupParents");
        size_t n_parents = 0;
        if (json_is_array(parents)) {
                size_t i;
                json_t *e;
                json_array_foreach(parents, i, e) if (json_is_string(e)) s.cgroup_parents =
                    strv_append(s.cgroup_parents, &n_parents, json_string_value(e));
        }
        json_t *leaves = json_object_get(o, "cgroupLeaves");
        size_t n_leaves = 0;
        if (json_is_array(leaves)) {
                size_t i;
                json_t *e;
                json_array_foreach(leaves, i, e) if (json_is_string(e)) s.cgroup_leaves =
                    strv_append(s.cgroup_leaves, &n_leaves, json_string_value(e));
        }
        json_t *ids = json_object_get(o, "cgroupLeafIds");
        size_t n_ids = 0;
        if (json_is_array(ids)) {
                size_t i;
                json_t *e;
                json_array_foreach(ids, i, e) s.cgroup_leaf_ids = strv_append(
                    s.cgroup_leaf_ids, &n_ids, json_is_string(e) ? json_string_value(e) : "");
        }
        s.cgroup_v2 = json_is_true(json_object_get(o, "cgroupV2"));
        s.max_memory = (uint64_t)json_integer_value(json_object_get(o, "maxMemory"));
        s.max_pids = (uint64_t)json_integer_value(json_object_get(o, "maxPids"));
        s.max_cpus_milli = (uint64_t)json_integer_value(json_object_get(o, "maxCpusMilli"));
        json_t *ann = json_object_get(o, "annotations");
        s.annotations_json = json_dumps(ann ? ann : json_object(), JSON_COMPACT);
        json_decref(o);
        *ret = s;
        return 0;
}

int rt_state_save(const struct rt_globals *g, const struct rt_state *s, struct al_error *err)
{
        json_t *o = json_object();
        json_object_set_new(o, "id", json_string(s->id));
        json_object_set_new(o, "bundle", json_string(s->bundle));
        json_object_set_new(o, "created", json_string(s->created));
        json_object_set_new(o, "pid", json_integer(s->pid));
        json_object_set_new(o, "pidStart", json_integer((json_int_t)s->pid_start));
        json_object_set_new(o, "started", json_boolean(s->started));
        if (s->cgroup_dir)
                json_object_set_new(o, "cgroupDir", json_string(s->cgroup_dir));
        if (s->freeze_file)
                json_object_set_new(o, "freezeFile", json_string(s->freeze_file));
        if (s->cgroup_name)
                json_object_set_new(o, "cgroupName", json_string(s->cgroup_name));
        json_t *parents = json_array();
        for (size_t i = 0; s->cgroup_parents && s->cgroup_parents[i]; i++)
                json_array_append_new(parents, json_string(s->cgroup_parents[i]));
        json_object_set_new(o, "cgroupParents", parents);
        if (s->cgroup_leaves) {
                json_t *leaves = json_array();
                for (size_t i = 0; s->cgroup_leaves[i]; i++)
                        json_array_append_new(leaves, json_string(s->cgroup_leaves[i]));
                json_object_set_new(o, "cgroupLeaves", leaves);
        }
        if (s->cgroup_leaf_ids) {
                json_t *ids = json_array();
                for (size_t i = 0; s->cgroup_leaf_ids[i]; i++)
                        json_array_append_new(ids, json_string(s->cgroup_leaf_ids[i]));
                json_object_set_new(o, "cgroupLeafIds", ids);
        }
        json_object_set_new(o, "cgroupV2", json_boolean(s->cgroup_v2));
        json_object_set_new(o, "maxMemory", json_integer((json_int_t)s->max_memory));
        json_object_set_new(o, "maxPids", json_integer((json_int_t)s->max_pids));
        json_object_set_new(o, "maxCpusMilli", json_integer((json_int_t)s->max_cpus_milli));
        json_t *ann = s->annotations_json ? json_loads(s->annotations_json, 0, NULL) : NULL;
        json_object_set_new(o, "annotations", ann ? ann : json_object());
        _cleanup_free_ char *text = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        _cleanup_free_ char *tmp = xasprintf("%s/%s/state.json.tmp", g->root, s->id);
        _cleanup_free_ char *path = xasprintf("%s/%s/state.json", g->root, s->id);
        _cleanup_close_ int fd =
            open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return al_error_set(err, errno, "writing %s", tmp);
        int r = write_full(fd, text, strlen(text));
        if (r < 0)
                return al_error_set(err, -r, "writing %s", tmp);
        if (rename(tmp, path) < 0)
                return al_error_set(err, errno, "renaming %s", tmp);
        return 0;
}

int rt_write_pid_file(const char *path, pid_t pid, struct al_error *err)
{
        _cleanup_free_ char *tmp = xasprintf("%s.tmp", path);
        char buf[32];
        snprintf(buf, sizeof(buf), "%d", (int)pid);
        _cleanup_close_ int fd =
            open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        int r = fd < 0 ? -errno : write_full(fd, buf, strlen(buf));
        if (r >= 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0)
                return al_error_set(err, -r, "writing the pid file %s", path);
        return 0;
}

_Noreturn void rt_exit_like(int status)
{
        if (WIFSIGNALED(status)) {
                int sig = WTERMSIG(status);
                struct rlimit nocore = {0, 0};
                setrlimit(RLIMIT_CORE, &nocore);
                signal(sig, SIG_DFL);
                sigset_t set;
                sigemptyset(&set);
                sigaddset(&set, sig);
                sigprocmask(SIG_UNBLOCK, &set, NULL);
                raise(sig);
                _exit(128 + sig);
        }
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 255);
}
