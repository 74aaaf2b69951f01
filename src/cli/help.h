/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdio.h>

/* One help text per command serves both `--help` and the man page (written
 * from it by man/mkman.py), so the two cannot disagree. The text up to a
 * section "More options..." is the short help: one screen with the usage,
 * the common uses and the common options. The whole text is printed under
 * AIRLOCK_HELP=full, which `airlock help CMD` and man/mkman.py set. */

/* Print text to f, short or whole, then where the rest is: the man page of
 * cmd ("run" for airlock-run(1); "airlockd" for airlockd(8)). */
void help_print(FILE *f, const char *text, const char *cmd);

/* Whether the whole text is wanted (AIRLOCK_HELP=full). */
int help_full(void);
