/* SPDX-License-Identifier: Apache-2.0 */
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "paths.h"
#include "util.h"

/* The state root with `sub` after it ("" or "/..."). */
static char *state_path(uid_t uid, const char *home, const char *sub)
{
        if (uid == 0)
                return xasprintf("%s%s", PATHS_STATE_ROOT_SYSTEM, sub);
        if (!home || home[0] != '/')
                return NULL;
        size_t n = strlen(home);
        while (n > 1 && home[n - 1] == '/')
                n--;
        return xasprintf("%.*s/%s%s", (int)n, home, PATHS_STATE_ROOT_HOME, sub);
}

static char *run_path(uid_t uid, const char *xdg_runtime, const char *sub)
{
        if (uid == 0)
                return xasprintf("%s%s", PATHS_RUN_ROOT_SYSTEM, sub);
        if (!xdg_runtime || xdg_runtime[0] != '/')
                return NULL;
        return xasprintf("%s/%s%s", xdg_runtime, PATHS_RUN_ROOT_XDG, sub);
}

char *paths_state_root(uid_t uid, const char *home)
{
        return state_path(uid, home, "");
}

char *paths_daemon_state_dir(uid_t uid, const char *home)
{
        return state_path(uid, home, "/daemon");
}

char *paths_audit_log(uid_t uid, const char *home)
{
        return state_path(uid, home, "/audit/audit.jsonl");
}

char *paths_daemon_socket(uid_t uid, const char *xdg_runtime)
{
        return run_path(uid, xdg_runtime, "/airlockd.sock");
}

char *paths_sandbox_run_dir(uid_t uid, const char *xdg_runtime)
{
        return run_path(uid, xdg_runtime, "/sandboxes");
}

char *paths_beside_self(const char *name)
{
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
                return NULL;
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (!slash)
                return NULL;
        return xasprintf("%.*s/%s", (int)(slash - self), self, name);
}
