/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "env.h"
#include "spawn.h"
#include "util.h"

#define PROXY_HTTP  "http://127.0.0.1:3128"
#define PROXY_SOCKS "socks5h://127.0.0.1:1080"
#define NO_PROXY    "localhost,127.0.0.1,::1"

/* Every common client looks for one of these: curl, wget, git, pip and
 * Python's urllib/requests read the lower- or upper-case forms; npm and yarn
 * read their own config keys; Node's fetch honours NODE_USE_ENV_PROXY. */
static const char *const proxy_env[][2] = {
        {"HTTP_PROXY", PROXY_HTTP},
        {"HTTPS_PROXY", PROXY_HTTP},
        {"http_proxy", PROXY_HTTP},
        {"https_proxy", PROXY_HTTP},
        {"ALL_PROXY", PROXY_SOCKS},
        {"all_proxy", PROXY_SOCKS},
        {"NO_PROXY", NO_PROXY},
        {"no_proxy", NO_PROXY},
        {"npm_config_proxy", PROXY_HTTP},
        {"npm_config_https_proxy", PROXY_HTTP},
        {"YARN_HTTP_PROXY", PROXY_HTTP},
        {"YARN_HTTPS_PROXY", PROXY_HTTP},
        {"PIP_PROXY", PROXY_HTTP},
        {"NODE_USE_ENV_PROXY", "1"},
        {"GLOBAL_AGENT_HTTP_PROXY", PROXY_HTTP},
        /* gRPC's C core (Python, Ruby, C++ clients) reads grpc_proxy first. */
        {"grpc_proxy", PROXY_HTTP},
        /* The JVM reads no proxy variable; every JVM reads this one. */
        {"JAVA_TOOL_OPTIONS", "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128 "
                              "-Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort=3128 "
                              "-Dhttp.nonProxyHosts=localhost|127.0.0.1|[::1] "
                              "-Djava.net.useSystemProxies=false"},
};

const char *env_home_for_uid(unsigned uid)
{
        return uid == 0 ? "/root" : "/home/agent";
}

const char *env_user_for_uid(unsigned uid)
{
        return uid == 0 ? "root" : "agent";
}

static void set(char ***v, size_t *n, const char *key, const char *value)
{
        size_t klen = strlen(key);
        for (size_t i = 0; i < *n; i++)
                if (strncmp((*v)[i], key, klen) == 0 && (*v)[i][klen] == '=') {
                        free((*v)[i]);
                        (*v)[i] = xasprintf("%s=%s", key, value);
                        return;
                }
        _cleanup_free_ char *kv = xasprintf("%s=%s", key, value);
        *v = strv_append(*v, n, kv);
}

static bool term_ok(const char *t)
{
        if (!t || !*t || strlen(t) > 64)
                return false;
        for (const char *c = t; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                      (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.' || *c == '+'))
                        return false;
        return true;
}

int env_build(const struct policy *p, const char *home, const char *user, const char *term,
              char ***ret, struct al_error *err)
{
        char **v = NULL;
        size_t n = 0;

        set(&v, &n, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        set(&v, &n, "HOME", home);
        set(&v, &n, "USER", user);
        set(&v, &n, "LOGNAME", user);
        set(&v, &n, "SHELL", "/bin/sh");
        set(&v, &n, "TERM", term_ok(term) ? term : "dumb");
        set(&v, &n, "LANG", "C.UTF-8");
        set(&v, &n, "TMPDIR", "/tmp");
        set(&v, &n, "AIRLOCK_SANDBOX", "1");
        if (p->net_mode == POLICY_NET_GATED)
                for (size_t i = 0; i < ARRAY_SIZE(proxy_env); i++)
                        set(&v, &n, proxy_env[i][0], proxy_env[i][1]);

        for (size_t i = 0; i < p->n_env; i++) {
                if (strstr(p->env[i].value, "${secret:")) {
                        strv_free(v);
                        return al_error_set(err, 0,
                                            "env %s names a secret, and secrets never enter the "
                                            "sandbox; inject it through a network route instead",
                                            p->env[i].key);
                }
                set(&v, &n, p->env[i].key, p->env[i].value);
        }
        *ret = v;
        return 0;
}

void env_set(char ***envp, const char *key, const char *value)
{
        size_t n = strv_length(*envp);
        set(envp, &n, key, value);
}

void env_add_ca(char ***envp, const char *bundle)
{
        /* OpenSSL (curl, git, Python's ssl, Ruby), requests, curl's own,
         * git's, Node's extra CAs, pip, AWS and gRPC's C core. */
        static const char *const vars[] = {
            "SSL_CERT_FILE",       "REQUESTS_CA_BUNDLE",
            "CURL_CA_BUNDLE",      "GIT_SSL_CAINFO",
            "NODE_EXTRA_CA_CERTS", "PIP_CERT",
            "AWS_CA_BUNDLE",       "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH",
        };
        size_t n = strv_length(*envp);
        for (size_t i = 0; i < ARRAY_SIZE(vars); i++)
                set(envp, &n, vars[i], bundle);
}

void env_add_tool(char ***envp, const char *run_id)
{
        size_t n = strv_length(*envp);
        const char *path = NULL;
        for (size_t i = 0; i < n; i++)
                if (strncmp((*envp)[i], "PATH=", 5) == 0)
                        path = (*envp)[i] + 5;
        _cleanup_free_ char *full = path && *path ? xasprintf("%s:%s", path, SPAWN_TOOL_BIN_DIR)
                                                  : xstrdup(SPAWN_TOOL_BIN_DIR);
        set(envp, &n, "PATH", full);
        set(envp, &n, "AIRLOCK_TOOL_SOCKET", SPAWN_TOOL_SOCKET);
        set(envp, &n, "AIRLOCK_RUN_ID", run_id);
}
