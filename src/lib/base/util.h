/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define _cleanup_(f) __attribute__((cleanup(f)))

static inline void freep(void *p)
{
        free(*(void **)p);
}

static inline void closep(int *fd)
{
        if (*fd >= 0) {
                int saved = errno;
                close(*fd);
                errno = saved;
        }
}

static inline void fclosep(FILE **f)
{
        if (*f)
                fclose(*f);
}

static inline void closedirp(DIR **d)
{
        if (*d)
                closedir(*d);
}

void strv_free(char **v);
static inline void strv_freep(char ***v)
{
        strv_free(*v);
}

/* A cleanup handler "name" that calls func on a pointer of type; func must
 * accept NULL, as free() does. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func, name)                                              \
        static inline void name(type *p)                                                           \
        {                                                                                          \
                func(*p);                                                                          \
        }

#define _cleanup_free_   _cleanup_(freep)
#define _cleanup_close_  _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_strv_   _cleanup_(strv_freep)

/* Hand ownership of a pointer or fd on: the variable is reset so that its
 * cleanup handler does nothing. */
#define TAKE_PTR(p)                                                                                \
        ({                                                                                         \
                __typeof__(p) _p = (p);                                                            \
                (p) = NULL;                                                                        \
                _p;                                                                                \
        })
#define TAKE_FD(fd)                                                                                \
        ({                                                                                         \
                int _fd = (fd);                                                                    \
                (fd) = -1;                                                                         \
                _fd;                                                                               \
        })

#define STREQ(a, b) (strcmp((a), (b)) == 0)

/* Checked number parsing: the whole string must be a number in range. */
int safe_atou64(const char *s, uint64_t *ret);
int safe_atoi(const char *s, int *ret);

/* A signal by name ("TERM", "SIGTERM") or number (1..64): 0 and *ret, or
 * -EINVAL. */
int signal_parse(const char *s, int *ret);

/* Sizes such as "512M", "1G", "64k", "1024": binary multiples, bytes. */
int parse_size(const char *s, uint64_t *ret);
/* Durations in seconds with an optional fraction and unit: "1.5", "30s", "5m", "1h". */
int parse_duration_ms(const char *s, uint64_t *ret);

/* Write a whole buffer / string to a path or fd; -errno on failure. */
int write_full(int fd, const void *buf, size_t len);
int write_file_at(int dirfd, const char *path, const char *content);
/* Read a small file (at most max bytes) into a NUL-terminated buffer. */
int read_file_at(int dirfd, const char *path, size_t max, char **ret, size_t *ret_len);

/* mkdir -p: the missing parents made with parent_mode, path itself with mode.
 * -ENAMETOOLONG, before anything is made, when path is PATH_MAX or longer. */
int mkdir_p(const char *path, mode_t parent_mode, mode_t mode);

/* Allocating string helpers; they abort only on allocation failure. */
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n, size_t size);
char **strv_append(char **v, size_t *n, const char *s);
size_t strv_length(char *const *v);
/* In an array of n elements of `size` bytes sorted by the string each holds
 * at key_off (a `char *` member, strcmp order): the index of the first
 * whose string is not below key, n when none. */
size_t sorted_first_at_or_after(const void *base, size_t n, size_t size, size_t key_off,
                                const char *key);

/* Random id of n hex characters (n even, at most 64). */
int random_hex(char *buf, size_t n);

/* Standard base64 (RFC 4648, padded, no line breaks). The encoding is
 * NUL-terminated; the decoding is too, one byte past *ret_len. Decoding fails
 * with -EINVAL on a length that is not a multiple of 4 or a bad character. */
char *base64_encode(const void *data, size_t len);
int base64_decode(const char *in, unsigned char **ret, size_t *ret_len);
/* The same into out, which has room for 4 * ((len + 2) / 3) + 1 bytes. */
void base64_encode_into(char *out, const void *data, size_t len);
/* The same of the n bytes at in (no NUL needed). */
int base64_decode_n(const char *in, size_t n, unsigned char **ret, size_t *ret_len);

/* Monotonic and wall clocks in microseconds. */
/* Whether JSON text nests arrays and objects at most `max` deep, counted
 * outside strings before a parser sees it (jansson's own limit is far
 * deeper than a line of a protocol needs). Malformed text passes here and
 * fails in the parser. */
bool json_text_depth_ok(const char *s, size_t len, unsigned max);

uint64_t now_monotonic_us(void);
uint64_t now_realtime_us(void);
