/* SPDX-License-Identifier: Apache-2.0 */
/* start, state, kill, delete: the container's life as the caller drives it. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgpath.h"
#include "cgroup.h"
#include "ctl.h"
#include "fs.h"
#include "runtime.h"
#include "util.h"

/* The one positional argument of a verb; any option is refused. */
static int one_id(const char *verb, int argc, char **argv, const char **ret, struct al_error *err)
{
        const char *id = NULL;
        for (int i = 0; i < argc; i++) {
                if (argv[i][0] == '-')
                        return al_error_set_message(err, EINVAL, "%s: unknown option %s", verb,
                                                    argv[i]);
                if (id)
                        return al_error_set_message(err, EINVAL, "%s: one container id only", verb);
                id = argv[i];
        }
        if (!id)
                return al_error_set_message(err, EINVAL, "%s: give a container id", verb);
        *ret = id;
        return 0;
}

/* One request to the keeper and its one-line answer. */
static int keeper_request(const struct rt_globals *g, const char *id, const char *req,
                          struct al_error *err)
{
        _cleanup_free_ char *path = xasprintf("%s/%s/%s", g->root, id, RUNTIME_CTL);
        _cleanup_close_ int fd = ctl_connect(path);
        if (fd < 0)
                return al_error_set(err, -fd, "container \"%s\": its keeper is not reachable", id);
        int r = ctl_send(fd, req, NULL, 0);
        if (r < 0)
                return al_error_set(err, -r, "container \"%s\": asking its keeper", id);
        char buf[AL_ERROR_MAX + 16];
        r = ctl_recv(fd, buf, sizeof(buf), NULL, 0, NULL);
        if (r < 0)
                return al_error_set(err, -r, "container \"%s\": the keeper did not answer", id);
        if (strncmp(buf, "error ", 6) == 0)
                return al_error_set_message(err, EINVAL, "%s", buf + 6);
        return 0;
}

int rt_start(const struct rt_globals *g, int argc, char **argv, struct al_error *err)
{
        const char *id;
        int r = one_id("start", argc, argv, &id, err);
        if (r < 0)
                return r;
        struct rt_state st = {0};
        r = rt_state_load(g, id, &st, err);
        if (r < 0)
                return r;
        const char *status = rt_status(&st);
        rt_state_clear(&st);
        if (!STREQ(status, "created"))
                return al_error_set_message(err, EINVAL,
                                            "container \"%s\" is %s; only a created container "
                                            "can be started",
                                            id, status);
        return keeper_request(g, id, "start", err);
}

int rt_state_cmd(const struct rt_globals *g, int argc, char **argv, struct al_error *err)
{
        const char *id;
        int r = one_id("state", argc, argv, &id, err);
        if (r < 0)
                return r;
        struct rt_state st = {0};
        r = rt_state_load(g, id, &st, err);
        if (r < 0)
                return r;
        const char *status = rt_status(&st);
        json_t *o = json_object();
        json_object_set_new(o, "ociVersion", json_string("1.0.2"));
        json_object_set_new(o, "id", json_string(st.id));
        json_object_set_new(o, "status", json_string(status));
        json_object_set_new(o, "pid", json_integer(STREQ(status, "stopped") ? 0 : st.pid));
        json_object_set_new(o, "bundle", json_string(st.bundle));
        json_t *ann = json_loads(st.annotations_json, 0, NULL);
        json_object_set_new(o, "annotations", ann ? ann : json_object());
        json_object_set_new(o, "created", json_string(st.created));
        json_object_set_new(o, "rootfs", json_string(st.bundle));
        _cleanup_free_ char *text = json_dumps(o, JSON_INDENT(2));
        json_decref(o);
        rt_state_clear(&st);
        printf("%s\n", text);
        return 0;
}

int rt_kill(const struct rt_globals *g, int argc, char **argv, struct al_error *err)
{
        const char *id = NULL, *signame = NULL;
        bool all = false;
        for (int i = 0; i < argc; i++) {
                if (STREQ(argv[i], "--all") || STREQ(argv[i], "-a"))
                        all = true;
                else if (argv[i][0] == '-' && argv[i][1])
                        return al_error_set_message(err, EINVAL, "kill: unknown option %s",
                                                    argv[i]);
                else if (!id)
                        id = argv[i];
                else if (!signame)
                        signame = argv[i];
                else
                        return al_error_set_message(err, EINVAL, "kill: ID [SIGNAL]");
        }
        if (!id)
                return al_error_set_message(err, EINVAL, "kill: give a container id");
        int sig = SIGTERM;
        if (signame && signal_parse(signame, &sig) < 0)
                return al_error_set_message(err, EINVAL, "kill: unknown signal \"%s\"", signame);
        struct rt_state st = {0};
        int r = rt_state_load(g, id, &st, err);
        if (r < 0)
                return r;
        if (!rt_alive(&st)) {
                rt_state_clear(&st);
                return al_error_set_message(err, ESRCH, "container \"%s\" is not running", id);
        }
        /* The keeper forwards a signal to the container's process; SIGKILL
         * cannot be caught, and kills the keeper and with it the whole
         * sandbox. --all with SIGKILL also empties the cgroup at once. */
        if (kill(st.pid, sig) < 0)
                r = al_error_set(err, errno, "signalling container \"%s\"", id);
        if (r >= 0 && all && sig == SIGKILL && st.cgroup_leaves)
                (void)rt_cgpath_reclaim(st.cgroup_leaves, st.cgroup_leaf_ids, st.cgroup_v2);
        else if (r >= 0 && all && sig == SIGKILL && st.cgroup_name)
                (void)cgroup_reclaim_named(st.cgroup_name);
        rt_state_clear(&st);
        return r;
}

int rt_delete(const struct rt_globals *g, int argc, char **argv, struct al_error *err)
{
        const char *id = NULL;
        bool force = false;
        for (int i = 0; i < argc; i++) {
                if (STREQ(argv[i], "--force") || STREQ(argv[i], "-f"))
                        force = true;
                else if (argv[i][0] == '-')
                        return al_error_set_message(err, EINVAL, "delete: unknown option %s",
                                                    argv[i]);
                else if (!id)
                        id = argv[i];
                else
                        return al_error_set_message(err, EINVAL, "delete: one container id only");
        }
        if (!id)
                return al_error_set_message(err, EINVAL, "delete: give a container id");
        struct rt_state st = {0};
        int r = rt_state_load(g, id, &st, err);
        if (r < 0)
                return r;
        const char *status = rt_status(&st);
        /* A created container may be deleted: it never ran anything. */
        if ((STREQ(status, "running") || STREQ(status, "paused")) && !force) {
                rt_state_clear(&st);
                return al_error_set_message(err, EBUSY,
                                            "container \"%s\" is %s; kill it first or use "
                                            "--force",
                                            id, status);
        }
        if (rt_alive(&st)) {
                if (st.freeze_file)
                        (void)write_file_at(AT_FDCWD, st.freeze_file,
                                            strstr(st.freeze_file, "freezer.state") ? "THAWED"
                                                                                    : "0");
                (void)kill(st.pid, SIGKILL);
                for (int i = 0; i < 200 && rt_alive(&st); i++)
                        usleep(10000);
        }
        /* A named leaf (linux.cgroupsPath) by its paths: its name need
         * not be unique on the host. */
        if (st.cgroup_leaves) {
                for (int i = 0; i < 50 && rt_cgpath_reclaim(st.cgroup_leaves, st.cgroup_leaf_ids,
                                                            st.cgroup_v2) == -EBUSY;
                     i++)
                        usleep(20000);
        } else if (st.cgroup_name) {
                for (int i = 0; i < 50 && cgroup_reclaim_named(st.cgroup_name) == -EBUSY; i++)
                        usleep(20000);
        }
        _cleanup_free_ char *dir = rt_dir(g, id);
        r = fs_remove_tree(AT_FDCWD, dir, 4);
        rt_state_clear(&st);
        if (r < 0)
                return al_error_set(err, -r, "removing %s", dir);
        return 0;
}
