/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* A tool's argument schema: a JSON Schema subset compiled once at policy
 * load (docs/tools.md). Keywords: type (object, string, integer, number,
 * boolean, array), properties, required, additionalProperties (only false,
 * and enforced whether given or not), enum, minimum, maximum, minLength,
 * maxLength, pattern (POSIX ERE, a search as JSON Schema says), items,
 * maxItems, and the annotations description and title. Any other keyword is
 * refused at load. Every node names its type; an array names its items. */

#define TOOL_SCHEMA_DEPTH_MAX   8   /* nesting of properties and items */
#define TOOL_SCHEMA_NODES_MAX   256 /* nodes in one schema */
#define TOOL_SCHEMA_PATTERN_MAX 512 /* bytes of one pattern */
#define TOOL_SCHEMA_ENUM_MAX    256 /* values in one enum */

enum tool_schema_type {
        TOOL_SCHEMA_OBJECT = 0,
        TOOL_SCHEMA_STRING,
        TOOL_SCHEMA_INTEGER,
        TOOL_SCHEMA_NUMBER,
        TOOL_SCHEMA_BOOLEAN,
        TOOL_SCHEMA_ARRAY,
};

struct tool_schema;

/* Compile `doc` (type object at the root). NULL with a message in why
 * ("\"properties.q.pattern\": ...") when it is not in the subset. */
struct tool_schema *tool_schema_compile(const json_t *doc, char *why, size_t why_size);
/* Reference counted: a policy and its copies share one. */
struct tool_schema *tool_schema_ref(struct tool_schema *s);
struct tool_schema *tool_schema_unref(struct tool_schema *s);

/* The type of the top-level property `name`; -ENOENT when the schema has
 * none. *ret_required: whether it is listed in required. */
int tool_schema_property(const struct tool_schema *s, const char *name,
                         enum tool_schema_type *ret_type, bool *ret_required);

/* Check `args` against the schema. A number outside minimum/maximum is
 * clamped in place when `clamp` is true (each clamp appended to *clamps as
 * {"arg", "from", "to"}, the array made on first use), else refused.
 * -EINVAL with why naming the argument ("argument \"q\": ...") on a
 * violation. */
int tool_schema_check(const struct tool_schema *s, json_t *args, bool clamp, json_t **clamps,
                      char *why, size_t why_size);
