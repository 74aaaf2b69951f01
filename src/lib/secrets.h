/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Host-side secrets and the redactor that keeps them out of what is stored.
 *
 * A secrets file is a JSON object of strings or a dotenv file
 * (KEY=VALUE, "double" or 'single' quoted values, # comments, an optional
 * `export ` prefix). It must be a regular file owned by the caller with no
 * group or other permission bits. A name the file lacks falls back to the
 * host environment variable of that name. Every value handed out by
 * secrets_get() or secrets_expand() is added to the redactor
 * (secrets_redactor()), which the caller applies to captured output and to
 * audit fields. */

#define SECRETS_FILE_MAX   (1024 * 1024)
#define SECRETS_EXPAND_MAX (64 * 1024)

struct secrets;
struct redactor;

/* No file: every name comes from the environment. */
struct secrets *secrets_new(void);
int secrets_load_file(const char *path, struct secrets **ret, struct al_error *err);
/* Values are wiped before they are freed. Returns NULL. */
struct secrets *secrets_free(struct secrets *s);

/* The value of NAME from the file, else from the environment, else NULL. The
 * value is registered in the redactor. An environment value lives as long as
 * the environment entry. */
const char *secrets_get(const struct secrets *s, const char *name);

/* The redactor holding every value handed out so far; owned by s. */
struct redactor *secrets_redactor(const struct secrets *s);

/* Values for the non-secret template variables; NULL: not available, and
 * using it is an error. */
struct secrets_vars {
        const char *run_id;      /* ${run.id} */
        const char *run_attempt; /* ${run.attempt} */
        const char *sandbox_id;  /* ${sandbox.id} */
        const char *account;     /* ${account} */
};

/* Expand ${secret:NAME}, ${run.id}, ${run.attempt}, ${sandbox.id} and
 * ${account} in template; "$${" stands for a literal "${". A missing secret,
 * an unknown or unset variable, or a result longer than SECRETS_EXPAND_MAX
 * is an error naming it. vars may be NULL. The result is malloc'd. */
int secrets_expand(const struct secrets *s, const char *template, const struct secrets_vars *vars,
                   char **ret, struct al_error *err);

/* The redactor replaces every occurrence of a known value with "[REDACTED]",
 * longest pattern first, in these forms: the value itself; its base64
 * (standard and URL-safe alphabet, with and without padding) and the base64
 * characters it gives at each of the three offsets inside a longer encoded
 * text (when at least 4 characters long); its hex in either case; and the
 * value reversed. In each form any subset of the bytes may be
 * percent-encoded ("%2F" or "%2f", "+" for a space) or, if ASCII, written as
 * a JSON string escape ("\/", "\u002f"). Every non-empty value
 * is redacted, even a very short one that will also hide innocent text. Not
 * covered: other escapings (HTML entities, JSON escapes of non-ASCII
 * characters), other encodings (base32, compression) and any transformation
 * an agent invents. */
#define REDACTOR_MARK         "[REDACTED]"
#define REDACTOR_VALUE_MAX    (256 * 1024)
#define REDACTOR_PATTERNS_MAX 4096

/* A NULL redactor knows no values: output equals input. */
struct redactor *redactor_new(void);
struct redactor *redactor_free(struct redactor *r);
/* Add a value and its base64 forms; adding a known value again is a no-op. */
int redactor_add(struct redactor *r, const char *value, size_t len);
/* Redacted copy of in[0..len) in a malloc'd, NUL-terminated buffer. */
int redactor_apply(const struct redactor *r, const char *in, size_t len, char **ret,
                   size_t *ret_len);
/* The hook for struct audit_options: userdata is a struct redactor; sets *ret
 * to NULL when nothing was replaced. */
int redactor_audit_hook(void *userdata, const char *in, size_t len, char **ret, size_t *ret_len);

/* Redaction of a byte stream cut into arbitrary chunks: a tail that could
 * still begin a known value is held back until the next chunk tells (at
 * most 6 × the longest pattern − 1 bytes, a pattern spelt fully as JSON
 * "\u00XX" escapes), so that a value split across two reads is still caught
 * and everything else passes at once. Feed each chunk, then finish once;
 * each call returns the bytes that are ready (malloc'd, possibly empty). */
struct redactor_stream;
struct redactor_stream *redactor_stream_new(const struct redactor *r);
struct redactor_stream *redactor_stream_free(struct redactor_stream *st);
int redactor_stream_feed(struct redactor_stream *st, const char *in, size_t len, char **ret,
                         size_t *ret_len);
int redactor_stream_finish(struct redactor_stream *st, char **ret, size_t *ret_len);

/* Same-length scrubbing of a byte stream, for bodies whose framing (a
 * Content-Length, chunk sizes) is already fixed: every byte inside a match
 * of any form above becomes '*', so the output is exactly as long as the
 * input. Holds back as redactor_stream does; finish gives the rest. */
struct redactor_scrub;
struct redactor_scrub *redactor_scrub_new(const struct redactor *r);
struct redactor_scrub *redactor_scrub_free(struct redactor_scrub *st);
int redactor_scrub_feed(struct redactor_scrub *st, const char *in, size_t len, char **ret,
                        size_t *ret_len);
int redactor_scrub_finish(struct redactor_scrub *st, char **ret, size_t *ret_len);
/* Bytes held back now; how many matches were scrubbed so far. */
size_t redactor_scrub_held(const struct redactor_scrub *st);
uint64_t redactor_scrub_hits(const struct redactor_scrub *st);
