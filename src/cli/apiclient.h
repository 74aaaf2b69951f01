/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "netgate/http.h"

/* The client of airlockd's API (docs/api.md) that `airlock create`, `ls`,
 * `exec`, `cp`, `rm` and `logs` share: which daemon (the options every one
 * of them takes, and the environment), one request per connection over its
 * unix socket or TCP, and the response read with netgate's strict HTTP/1.1
 * parser and body framer (netgate/http.h), the one engine the project
 * reads HTTP with. Messages go to stderr as "airlock: CMD: ...". */

#define EXIT_FAIL  1
#define EXIT_USAGE 2
#define EXIT_SETUP 125

/* Which daemon, and as whom. */
struct api_target {
        const char *socket_path; /* NULL: TCP */
        char host[256];
        char port[16];
        const char *token;
};

/* One connection: one request, one response. */
struct api_conn {
        int fd;
        char buf[64 * 1024];
        size_t start, end;
        int status;
        struct netgate_http_body body;
        bool done;
        struct netgate_http_parser parser;
};

/* "airlock: CMD: message" on stderr; returns -EIO. */
int api_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int api_conn_open(const char *cmd, const struct api_target *t, struct api_conn *c);
void api_conn_close(struct api_conn *c);
int api_send_request(struct api_conn *c, const struct api_target *t, const char *method,
                     const char *path, const char *ctype, const void *body, size_t len);
/* The response's head: c->status set. -EPROTO when it is not HTTP/1.1 as
 * the strict parser reads it. */
int api_read_head(struct api_conn *c);
/* Up to `size` bytes of the body; 0 at its end; -EPROTO on bad framing. */
ssize_t api_read_body(struct api_conn *c, char *out, size_t size);
/* The whole body (at most 64 MiB), NUL-terminated, for the caller to free. */
int api_read_all(struct api_conn *c, char **ret, size_t *ret_len);

/* The API's one-line error from an error body. */
void api_print_error(const char *cmd, int status, const char *body);
/* A request whose whole answer is read. Returns the HTTP status (an API
 * error already printed when print_errors), or -errno. */
int api_call(const char *cmd, const struct api_target *t, const char *method, const char *path,
             const char *ctype, const void *body, size_t len, char **ret_body, size_t *ret_len,
             bool print_errors);

/* Percent-encoded for a query string; '/' kept. */
char *api_url_escape(const char *s);
/* A sandbox id: 16 lowercase hex digits. */
bool api_valid_id(const char *s);
/* A duration ("30", "5m", "1h") in seconds. */
int api_parse_seconds(const char *s, double *ret);

/* Options every command takes. */
enum { API_O_SOCKET = 1000, API_O_URL, API_O_TOKEN };
#define API_COMMON_OPTIONS                                                                         \
        {"socket", required_argument, NULL, API_O_SOCKET},                                         \
            {"url", required_argument, NULL, API_O_URL},                                           \
            {"token", required_argument, NULL, API_O_TOKEN},                                       \
        {                                                                                          \
                "help", no_argument, NULL, 'h'                                                     \
        }

extern const char api_common_help[];
/* A command's help followed by the common options, short or whole
 * (help.h), then where its man page is. */
void api_print_help(const char *usage, const char *cmd);

struct api_common {
        const char *socket_path;
        const char *url;
        const char *token;
};

/* 1 when getopt's c was one of the common options (taken into o). */
int api_common_opt(int c, struct api_common *o);
/* The target the options and the environment name. */
int api_make_target(const char *cmd, const struct api_common *o, struct api_target *t);
int api_bad_option(const char *cmd, char **argv);
/* For the commands that take only the common options. Returns the exit
 * status when the command is done (help, or a bad option), else -1. */
int api_common_options_only(const char *cmd, const char *usage, int argc, char **argv,
                            struct api_common *co);
