/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "audit.h"
#include "runtime-audit.h"
#include "secrets.h"
#include "util.h"

int rt_audit_open(struct rt_audit *ra, const struct rt_globals *g, const struct oci_spec *s,
                  const char *id, struct secrets *secrets)
{
        memset(ra, 0, sizeof(*ra));
        ra->sandbox = xasprintf("oci:%s", id);
        const char *v;
        if ((v = oci_spec_annotation(s, "io.kubernetes.cri.sandbox-name")) ||
            (v = oci_spec_annotation(s, "io.kubernetes.pod.name")))
                ra->pod = xstrdup(v);
        if ((v = oci_spec_annotation(s, "io.kubernetes.cri.sandbox-namespace")) ||
            (v = oci_spec_annotation(s, "io.kubernetes.pod.namespace")))
                ra->ns = xstrdup(v);
        if ((v = oci_spec_annotation(s, "io.kubernetes.cri.container-name")) ||
            (v = oci_spec_annotation(s, "io.kubernetes.container.name")))
                ra->container = xstrdup(v);
        const char *path = getenv("AIRLOCK_RUNTIME_AUDIT");
        _cleanup_free_ char *def = NULL;
        if (!path || !*path) {
                const char *home = getenv("HOME");
                def = audit_default_path(geteuid(), home ? home : "/root");
                path = def;
        }
        struct audit_options opt = {0};
        /* The node's secrets never reach the log (a tool's output, a
         * route's answer). */
        struct redactor *red = secrets ? secrets_redactor(secrets) : NULL;
        if (red) {
                opt.redact = redactor_audit_hook;
                opt.redact_userdata = red;
        }
        return audit_open(path, &opt, &ra->a, &ra->open_err);
}

static int append(struct rt_audit *ra, const char *kind, json_t *f)
{
        if (!ra->a) {
                json_decref(f);
                return -EBADF;
        }
        json_object_set_new(f, "runtime", json_string("oci"));
        if (ra->pod)
                json_object_set_new(f, "pod", json_string(ra->pod));
        if (ra->ns)
                json_object_set_new(f, "namespace", json_string(ra->ns));
        if (ra->container)
                json_object_set_new(f, "container", json_string(ra->container));
        struct al_error e = {0};
        int r = audit_append(ra->a, ra->sandbox, kind, f, &e);
        json_decref(f);
        return r;
}

int rt_audit_fields(struct rt_audit *ra, const char *kind, json_t *fields)
{
        return append(ra, kind, fields);
}

int rt_audit_event(struct rt_audit *ra, const char *kind, const char *message)
{
        json_t *f = json_object();
        if (message)
                json_object_set_new(f, "message", json_string(message));
        return append(ra, kind, f);
}

void rt_audit_exit(struct rt_audit *ra, int status)
{
        json_t *f = json_object();
        if (WIFSIGNALED(status))
                json_object_set_new(f, "signal", json_integer(WTERMSIG(status)));
        else
                json_object_set_new(f, "exit_code", json_integer(WEXITSTATUS(status)));
        (void)append(ra, "container.exited", f);
        ra->a = audit_close(ra->a);
}
