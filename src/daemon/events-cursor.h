/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A reader of the audit log for the event stream (GET /v1/events): it
 * follows the live file and its rotated files by sequence number, so a
 * stream resumed after seq N sees every line after N once, in order, across
 * rotations. Each event it hands out is one audit line, unchanged. */

struct events_cursor;

/* A cursor on the log at path. after_set: start after seq `after` (the
 * oldest file that may hold seq after+1 is read from there on); otherwise
 * start at the live file's end (new lines only). */
int events_cursor_new(const char *path, bool after_set, uint64_t after, struct events_cursor **ret);
struct events_cursor *events_cursor_free(struct events_cursor *c);

/* Called for each complete line with seq past the cursor (the line without
 * its newline, NUL-terminated, and its seq). A negative return stops the
 * read and is returned. */
typedef int (*events_line_fn)(const char *line, size_t len, uint64_t seq, void *userdata);

/* Read at most max bytes of new lines; 1 when more may be ready at once, 0
 * when the cursor is at the end of the log, -errno on failure. */
int events_cursor_read(struct events_cursor *c, size_t max, events_line_fn cb, void *userdata);

/* The seq of the last line handed out (or skipped as not new). */
uint64_t events_cursor_seq(const struct events_cursor *c);
