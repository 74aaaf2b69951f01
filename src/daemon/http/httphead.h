/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "netgate/http.h"

/* The API's rules for a request head, on top of the strict HTTP/1.1 grammar
 * of netgate/http.c (which airlockd reads every head with before libevent
 * sees it), and the words for what was wrong with a head that was refused.
 * Pure functions over bytes: unit-tested and fuzzed (tests/fuzz). */

/* 0 when a complete, parsed head may be served; otherwise the HTTP status to
 * refuse it with, and a message naming what was wrong. The rules beyond the
 * grammar: one Content-Length at most (RFC 9112 6.3 allows equal copies; a
 * server that refuses them cannot be fooled by them), and only the methods
 * the API serves, so that the framing read here is the one libevent reads
 * (it gives a HEAD request no body whatever its Content-Length says). */
int http_head_check(const struct netgate_http_head *h, char *msg, size_t size);

/* The status and message for a head the parser refused with `error` (its
 * return value); `head` is the raw bytes read so far. */
int http_head_explain(const char *head, size_t len, int error, char *msg, size_t size);
