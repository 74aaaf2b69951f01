/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared by tools.c (tools.define: parsing and cross-checks) and
 * tools-argv.c (what an argv template may run); not for other modules. */

#include <jansson.h>
#include <stddef.h>

#include "policy-internal.h"

/* One definition being checked. */
struct tool_ctx {
        struct ctx *c;
        struct policy_tool *t;
        json_t *def;
};

/* Fail the load naming the tool and the key. */
int policy_tool_fail_key(struct tool_ctx *tc, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "${args.NAME}" as a whole string: NAME (in name, of size), else NULL. */
const char *policy_tool_placeholder(const char *s, char *name, size_t size);

/* The argv template: an absolute program that is not a shell (nor an
 * interpreter given a command string), each placeholder a whole element
 * naming a scalar required argument. */
int policy_tool_check_command(struct tool_ctx *tc);
