/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

#include "audit.h"
#include "paths.h"
#include "util.h"
#include "audit-internal.h"

static bool is_hash_hex(const char *s)
{
        if (!s || strlen(s) != AUDIT_HASH_HEX)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

int audit_foreach_line(const char *path,
                       int (*cb)(const char *line, size_t len, uint64_t lineno, bool complete,
                                 void *userdata),
                       void *userdata, struct al_error *err)
{
        struct stat st;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return al_error_set(err, errno, "opening \"%s\"", path);
        if (fstat(fd, &st) < 0)
                return al_error_set(err, errno, "inspecting \"%s\"", path);
        if (S_ISDIR(st.st_mode))
                return al_error_set(err, EISDIR, "reading \"%s\"", path);

        size_t cap = 64 * 1024, len = 0, start = 0;
        _cleanup_free_ char *buf = xcalloc(cap, 1);
        uint64_t lineno = 0;
        bool eof = false;
        for (;;) {
                char *nl = memchr(buf + start, '\n', len - start);
                if (nl) {
                        *nl = '\0';
                        int r =
                            cb(buf + start, (size_t)(nl - (buf + start)), ++lineno, true, userdata);
                        if (r < 0)
                                return r;
                        start = (size_t)(nl + 1 - buf);
                        continue;
                }
                if (eof) {
                        if (start < len) {
                                buf[len] = '\0';
                                int r = cb(buf + start, len - start, ++lineno, false, userdata);
                                if (r < 0)
                                        return r;
                        }
                        return 0;
                }
                if (start > 0) {
                        memmove(buf, buf + start, len - start);
                        len -= start;
                        start = 0;
                }
                if (len >= AUDIT_LINE_MAX) {
                        al_error_set(err, 0, "\"%s\": line %" PRIu64 " is longer than %d bytes",
                                     path, lineno + 1, AUDIT_LINE_MAX);
                        return -EMSGSIZE;
                }
                if (len + 1 >= cap) {
                        cap = cap * 2 < AUDIT_LINE_MAX + 1 ? cap * 2 : AUDIT_LINE_MAX + 1;
                        buf = xrealloc(buf, cap, 1);
                }
                ssize_t n = read(fd, buf + len, cap - 1 - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return al_error_set(err, errno, "reading \"%s\"", path);
                }
                if (n == 0)
                        eof = true;
                len += (size_t)n;
        }
}

/* Verification. */

struct vline {
        size_t file;
        uint64_t lineno;
        uint64_t seq;
        char hash[AUDIT_HASH_HEX + 1];
};

struct vstate {
        const struct audit_verify_options *opt;
        struct audit_verify_result *res;
        size_t file;
        uint64_t lineno; /* last line number seen in the current file */
        bool have_prev;
        struct vline prev; /* the last line accepted */
        /* A line whose prev did not match: either it or the one before it
         * (pend_before) was changed; the line after it decides. */
        bool pending;
        struct vline pend_before, pend;
        bool expect_seen;
};

#define VERIFY_STOP (-ECANCELED)

static int vfail(struct vstate *st, size_t file, uint64_t lineno, uint64_t seq, const char *fmt,
                 ...) __attribute__((format(printf, 5, 6)));

static int vfail(struct vstate *st, size_t file, uint64_t lineno, uint64_t seq, const char *fmt,
                 ...)
{
        va_list ap;

        st->res->ok = false;
        st->res->bad_file = file;
        st->res->bad_line = lineno;
        st->res->bad_seq = seq;
        va_start(ap, fmt);
        vsnprintf(st->res->reason, sizeof(st->res->reason), fmt, ap);
        va_end(ap);
        return VERIFY_STOP;
}

/* The line after a prev mismatch is known: next_links tells whether it
 * chains correctly onto the suspicious line. */
static int resolve_pending(struct vstate *st, bool next_links)
{
        st->pending = false;
        if (next_links)
                return vfail(st, st->pend_before.file, st->pend_before.lineno, st->pend_before.seq,
                             "line changed: its hash does not match prev of the next line");
        return vfail(st, st->pend.file, st->pend.lineno, st->pend.seq,
                     "prev does not match the hash of the previous line (seq %" PRIu64
                     "): this line or the one before it was changed, or lines between them "
                     "were replaced",
                     st->pend_before.seq);
}

static bool is_ts(const char *s)
{
        static const char shape[] = "dddd-dd-ddTdd:dd:dd.ddddddZ";

        if (!s || strlen(s) != sizeof(shape) - 1)
                return false;
        for (size_t i = 0; shape[i]; i++)
                if (shape[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != shape[i])
                        return false;
        return true;
}

static int verify_line(const char *line, size_t len, uint64_t lineno, bool complete, void *userdata)
{
        struct vstate *st = userdata;
        struct vline cur = {.file = st->file, .lineno = lineno};

        st->lineno = lineno;
        st->res->lines++;
        if (!complete) {
                if (st->pending)
                        return resolve_pending(st, false);
                st->res->torn = true;
                return vfail(st, st->file, lineno, audit_fragment_seq(line, len),
                             "torn record: the last line is incomplete (%zu bytes, no newline "
                             "at the end): a write was cut off, or the file was truncated; the "
                             "next writer cuts it off and records it as audit.torn",
                             len);
        }

        json_error_t jerr;
        json_auto_t *o = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!o || !json_is_object(o)) {
                if (st->pending)
                        return resolve_pending(st, false);
                /* Writers repair a torn last line before appending, so a
                 * broken line with more after it was changed, not torn. */
                return vfail(st, st->file, lineno, audit_fragment_seq(line, len),
                             "corrupt record: not a JSON object: %s", o ? "wrong type" : jerr.text);
        }
        json_t *seq = json_object_get(o, "seq");
        if (!json_is_integer(seq) || json_integer_value(seq) < 1) {
                if (st->pending)
                        return resolve_pending(st, false);
                return vfail(st, st->file, lineno, 0, "missing or invalid seq");
        }
        cur.seq = (uint64_t)json_integer_value(seq);
        const char *prev = json_string_value(json_object_get(o, "prev"));
        const char *bad_field = NULL;
        if (!is_hash_hex(prev))
                bad_field = "prev";
        else if (!is_ts(json_string_value(json_object_get(o, "ts"))))
                bad_field = "ts";
        else if (!json_is_string(json_object_get(o, "sandbox")))
                bad_field = "sandbox";
        else if (!json_is_string(json_object_get(o, "kind")))
                bad_field = "kind";
        if (bad_field) {
                if (st->pending)
                        return resolve_pending(st, false);
                return vfail(st, st->file, lineno, cur.seq, "missing or invalid %s", bad_field);
        }
        audit_hash_hex(line, len, cur.hash);

        if (st->pending)
                return resolve_pending(st,
                                       cur.seq == st->pend.seq + 1 && STREQ(prev, st->pend.hash));

        if (!st->have_prev) {
                if (!st->opt->from_rotated) {
                        if (cur.seq != 1)
                                return vfail(st, st->file, lineno, cur.seq,
                                             "the chain starts at seq %" PRIu64
                                             ", not 1: earlier lines are missing (or were "
                                             "rotated away: --from-rotated)",
                                             cur.seq);
                        if (!STREQ(prev, AUDIT_GENESIS))
                                return vfail(st, st->file, lineno, cur.seq,
                                             "prev of the first line is not the genesis value");
                }
                st->res->first_seq = cur.seq;
        } else {
                uint64_t want = st->prev.seq + 1;
                if (cur.seq > want)
                        return vfail(st, st->file, lineno, cur.seq,
                                     "seq %" PRIu64 " follows seq %" PRIu64 ": %" PRIu64
                                     " line(s) missing",
                                     cur.seq, st->prev.seq, cur.seq - want);
                if (cur.seq < want)
                        return vfail(st, st->file, lineno, cur.seq,
                                     "seq %" PRIu64 " follows seq %" PRIu64
                                     ": lines reordered, repeated or inserted",
                                     cur.seq, st->prev.seq);
                if (!STREQ(prev, st->prev.hash)) {
                        st->pending = true;
                        st->pend_before = st->prev;
                        st->pend = cur;
                }
        }

        if (st->opt->expect_last_seq && cur.seq == st->opt->expect_last_seq) {
                st->expect_seen = true;
                if (st->opt->expect_last_hash && !STREQ(cur.hash, st->opt->expect_last_hash))
                        return vfail(st, st->file, lineno, cur.seq,
                                     "line changed: its hash differs from the recorded one");
        }
        st->prev = cur;
        st->have_prev = true;
        st->res->last_seq = cur.seq;
        memcpy(st->res->last_hash, cur.hash, sizeof(cur.hash));
        return 0;
}

int audit_verify_files(const char *const *paths, size_t n, const struct audit_verify_options *opt,
                       struct audit_verify_result *ret, struct al_error *err)
{
        static const struct audit_verify_options defaults = {0};
        struct audit_verify_result res = {.ok = true};
        struct vstate st = {.opt = opt ? opt : &defaults, .res = &res};

        memcpy(res.last_hash, AUDIT_GENESIS, sizeof(res.last_hash));
        for (size_t i = 0; i < n && res.ok; i++) {
                st.file = i;
                st.lineno = 0;
                int r = audit_foreach_line(paths[i], verify_line, &st, err);
                if (r == -EMSGSIZE) {
                        res.lines++;
                        if (st.pending)
                                resolve_pending(&st, false);
                        else
                                vfail(&st, i, st.lineno + 1, 0, "line longer than %d bytes",
                                      AUDIT_LINE_MAX);
                } else if (r < 0 && r != VERIFY_STOP)
                        return r;
        }
        if (res.ok && st.pending)
                resolve_pending(&st, false);
        if (res.ok && st.opt->expect_last_seq && !st.expect_seen) {
                if (res.last_seq < st.opt->expect_last_seq)
                        vfail(&st, n > 0 ? n - 1 : 0, st.lineno + 1, res.last_seq + 1,
                              "the chain ends at seq %" PRIu64 " but seq %" PRIu64
                              " was recorded: lines were removed from the end",
                              res.last_seq, st.opt->expect_last_seq);
                else
                        vfail(&st, 0, 1, res.first_seq,
                              "the chain starts after the recorded seq %" PRIu64,
                              st.opt->expect_last_seq);
        }
        *ret = res;
        return 0;
}

json_t *audit_verify_result_json(const struct audit_verify_result *res, unsigned long missing)
{
        bool ok = res->ok && !missing;
        json_t *o = json_pack("{s:b, s:I, s:I, s:I}", "ok", ok, "lines", (json_int_t)res->lines,
                              "firstSeq", (json_int_t)res->first_seq, "lastSeq",
                              (json_int_t)res->last_seq);
        if (!res->ok) {
                json_object_set_new(o, "badSeq", json_integer((json_int_t)res->bad_seq));
                json_object_set_new(o, "torn", json_boolean(res->torn));
                json_object_set_new(o, "reason", json_string(res->reason));
        }
        if (missing) {
                json_object_set_new(o, "missingRotated", json_integer((json_int_t)missing));
                if (res->ok)
                        json_object_set_new(
                            o, "reason",
                            json_sprintf("rotated file %lu is missing while older and newer ones "
                                         "exist: lines were removed from the middle of the log",
                                         missing));
        }
        return o;
}
