/* SPDX-License-Identifier: Apache-2.0 */
#include <stdlib.h>
#include <string.h>

#include "help.h"

int help_full(void)
{
        const char *mode = getenv("AIRLOCK_HELP");
        return mode && strcmp(mode, "full") == 0;
}

void help_print(FILE *f, const char *text, const char *cmd)
{
        if (help_full()) {
                fputs(text, f);
                return;
        }
        const char *more = strstr(text, "\n\nMore options");
        if (more)
                fwrite(text, 1, (size_t)(more - text) + 1, f);
        else
                fputs(text, f);
        if (strcmp(cmd, "airlockd") == 0)
                fprintf(f, "\n%s: 'man airlockd' or 'AIRLOCK_HELP=full airlockd --help'.\n",
                        more ? "Every option" : "More");
        else
                fprintf(f, "\n%s: 'man airlock-%s' or 'airlock help %s'.\n",
                        more ? "Every option" : "More", cmd, cmd);
}
