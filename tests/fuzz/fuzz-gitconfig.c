/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gitguard-internal.h"
#include "gitguard.h"
#include "util.h"

/* gitguard's reader of git config files (src/lib/git/gitguard-config.c):
 * every byte of a .git/config, config.worktree or included file is the
 * agent's, read as root on the host at the end of each run. Beyond not
 * crashing: a text the check passes (no reason to move it aside) names
 * no include, no program and no hooks directory, whatever the other
 * readers of the same text find; and a path gitguard_pointer_target
 * resolves never climbs out (no "..", not absolute). */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool count_key(const char *sec, const char *sub, const char *name, const char *value,
                      void *userdata)
{
        (void)sub;
        (void)value;
        if (!sec || !name || !*name) /* "[.b]" is section "" */
                abort();
        (*(size_t *)userdata)++;
        return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *text = (const char *)data;
        char reason[256] = "";
        int clean = gitguard_config_check(text, size, reason, sizeof(reason)) == 0;
        if (!clean && !reason[0])
                abort();
        size_t keys = 0;
        int each = gitguard_config_each(text, size, count_key, &keys);
        if (clean && each < 0)
                abort();
        size_t n_inc = 0, n_prog = 0;
        char **inc = gitguard_config_includes(text, size, &n_inc);
        char **prog = gitguard_config_programs(text, size, &n_prog);
        char *hooks = gitguard_config_value(text, size, "core", "hookspath");
        char *fsmon = gitguard_config_value(text, size, "core", "fsmonitor");
        if (clean && (n_inc || n_prog || hooks))
                abort();
        for (size_t i = 0; i < n_inc; i++)
                if (!inc[i] || !inc[i][0])
                        abort();
        for (size_t i = 0; i < n_prog; i++)
                if (!prog[i] || !strchr(prog[i], '/'))
                        abort();
        strv_free(inc);
        strv_free(prog);
        free(hooks);
        free(fsmon);

        /* The same bytes as a path ("gitdir: X", an include). */
        char *s = xcalloc(size + 1, 1);
        memcpy(s, text, size);
        char *t = gitguard_pointer_target("a/b", s);
        if (t && (t[0] == '/' || STREQ(t, "..") || strncmp(t, "../", 3) == 0 || strstr(t, "/../") ||
                  (strlen(t) >= 3 && STREQ(t + strlen(t) - 3, "/.."))))
                abort();
        free(t);
        free(s);
        return 0;
}
