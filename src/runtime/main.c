/* SPDX-License-Identifier: Apache-2.0 */
/* airlock-runtime: the OCI runtime command line containerd's runc shim
 * drives (docs/kubernetes.md). Global flags first, then a verb; every
 * error is printed once, to stderr and, with --log, to the log in the
 * format the shim reads. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"
#include "util.h"

static const struct {
        const char *name;
        int (*fn)(const struct rt_globals *, int, char **, struct al_error *);
} verbs[] = {
    {"create", rt_create}, {"start", rt_start},       {"state", rt_state_cmd},
    {"kill", rt_kill},     {"delete", rt_delete},     {"exec", rt_exec},
    {"ps", rt_ps},         {"pause", rt_pause},       {"resume", rt_resume},
    {"update", rt_update}, {"features", rt_features},
};

static void log_error(const struct rt_globals *g, const char *msg)
{
        fprintf(stderr, "airlock-runtime: %s\n", msg);
        if (!g->log)
                return;
        _cleanup_close_ int fd =
            open(g->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return;
        char ts[64];
        time_t now = time(NULL);
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
        _cleanup_free_ char *line = NULL;
        if (g->log_json) {
                json_t *o = json_pack("{s:s, s:s, s:s}", "level", "error", "msg", msg, "time", ts);
                _cleanup_free_ char *t = json_dumps(o, JSON_COMPACT);
                json_decref(o);
                line = xasprintf("%s\n", t);
        } else {
                line = xasprintf("%s error %s\n", ts, msg);
        }
        (void)write_full(fd, line, strlen(line));
}

static void usage(void)
{
        fputs("usage: airlock-runtime [--root DIR] [--log FILE] [--log-format text|json] VERB ...\n"
              "verbs: create start state kill delete exec ps pause resume update features\n"
              "see docs/kubernetes.md\n",
              stderr);
}

int main(int argc, char **argv)
{
        struct rt_globals g = {.root = RUNTIME_ROOT_DEFAULT};
        struct al_error err = {0};
        int i;
        for (i = 1; i < argc && argv[i][0] == '-'; i++) {
                const char *a = argv[i];
                if (STREQ(a, "--root") && i + 1 < argc)
                        g.root = argv[++i];
                else if (strncmp(a, "--root=", 7) == 0)
                        g.root = a + 7;
                else if (STREQ(a, "--log") && i + 1 < argc)
                        g.log = argv[++i];
                else if (strncmp(a, "--log=", 6) == 0)
                        g.log = a + 6;
                else if ((STREQ(a, "--log-format") && i + 1 < argc) ||
                         strncmp(a, "--log-format=", 13) == 0) {
                        const char *v = a[12] == '=' ? a + 13 : argv[++i];
                        if (STREQ(v, "json"))
                                g.log_json = true;
                        else if (!STREQ(v, "text")) {
                                al_error_set_message(&err, EINVAL,
                                                     "--log-format \"%s\": text or json", v);
                                goto fail;
                        }
                } else if (STREQ(a, "--debug")) {
                        /* Accepted: airlock-runtime logs errors only. */
                } else if (STREQ(a, "--systemd-cgroup")) {
                        al_error_set_message(&err, EINVAL,
                                             "--systemd-cgroup: systemd cgroup paths are not "
                                             "supported; set SystemdCgroup = false in the "
                                             "runtime's containerd options");
                        goto fail;
                } else if (STREQ(a, "--help") || STREQ(a, "-h")) {
                        usage();
                        return 0;
                } else if (STREQ(a, "--version") || STREQ(a, "-v")) {
                        printf("airlock-runtime 0.1.0\nspec: 1.0.2\n");
                        return 0;
                } else {
                        al_error_set_message(&err, EINVAL, "global option %s is not supported", a);
                        goto fail;
                }
        }
        if (i >= argc) {
                usage();
                return 2;
        }
        if (g.root[0] != '/') {
                al_error_set_message(&err, EINVAL, "--root %s: must be absolute", g.root);
                goto fail;
        }
        for (size_t v = 0; v < ARRAY_SIZE(verbs); v++) {
                if (!STREQ(argv[i], verbs[v].name))
                        continue;
                if (verbs[v].fn(&g, argc - i - 1, argv + i + 1, &err) < 0)
                        goto fail;
                return 0;
        }
        al_error_set_message(&err, EINVAL,
                             "\"%s\" is not supported by airlock-runtime (checkpoint, restore, "
                             "run, spec, list, events are not)",
                             argv[i]);
fail:
        log_error(&g, err.msg);
        return 1;
}
