/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* The audit log: append-only JSON lines, one event per line, hash-chained.
 *
 *   {"seq":7,"ts":"2026-11-22T10:00:00.123456Z","sandbox":"…","kind":"…",
 *    <the event's fields>,"prev":"<sha256 hex of line 6 without its newline>"}
 *
 * seq starts at 1 and the first line's prev is AUDIT_GENESIS. Rotation renames
 * the file to FILE.1 (shifting FILE.1 to FILE.2, …); the chain and seq simply
 * continue in the new FILE: its first line's prev is the hash of FILE.1's last
 * line. Several writers may share one file: each append takes flock(LOCK_EX)
 * and picks up the chain from whatever the file ends with.
 *
 * A torn last line (a writer died mid-write, or the disk filled under it) is
 * repaired by the next writer, under the lock: a fragment that is a whole,
 * correctly chained record only lacking its newline gets the newline; any
 * other fragment is cut off and an "audit.torn" event (sandbox "-") records
 * where, how many bytes, their SHA-256, the seq they claimed (tornSeq) and (up to
 * AUDIT_TORN_DATA_MAX bytes) the bytes themselves in base64.
 *
 * What verification can prove: any edited, inserted, reordered or deleted line
 * before the last one, a partial last line, and a missing start of the chain.
 * What it cannot: removal of whole lines at the end of the newest file, or a
 * change to the last line's content, or a rewrite of every line from some
 * point on (the chain has no key). Record the last seq and hash elsewhere
 * (audit_last_seq(), audit_last_hash()) and pass them as expect_last_* to
 * close that gap. */

#define AUDIT_GENESIS  "0000000000000000000000000000000000000000000000000000000000000000"
#define AUDIT_LINE_MAX (1024 * 1024) /* bytes per line, newline included */
#define AUDIT_HASH_HEX 64

/* Rotation by default: at 64 MiB, keeping 8 older files (576 MiB at most). */
#define AUDIT_ROTATE_SIZE_DEFAULT (64ull << 20)
#define AUDIT_ROTATE_KEEP_DEFAULT 8u
#define AUDIT_ROTATE_NEVER        UINT64_MAX /* rotate_size: never rotate */
#define AUDIT_KEEP_ALL            UINT32_MAX /* rotate_keep: never delete a rotated file */
#define AUDIT_TORN_DATA_MAX       (16 * 1024)
/* The sandbox field of the log's own events (audit.torn). */
#define AUDIT_SANDBOX_NONE "-"

enum audit_sync {
        AUDIT_SYNC_EVENT = 0, /* fdatasync after every event */
        AUDIT_SYNC_BATCH,     /* fdatasync at most batch_ms after an event */
};

struct audit_options {
        enum audit_sync sync;
        uint64_t batch_ms; /* AUDIT_SYNC_BATCH: 0 means 100 */
        /* Rotate before a line would make the file larger than this: 0 means
         * AUDIT_ROTATE_SIZE_DEFAULT, AUDIT_ROTATE_NEVER never. */
        uint64_t rotate_size;
        /* Rotated files kept (FILE.1 … FILE.N), older ones are deleted: 0
         * means AUDIT_ROTATE_KEEP_DEFAULT, AUDIT_KEEP_ALL keeps every one. */
        unsigned rotate_keep;
        /* Applied to every string value of an event's fields (recursively)
         * before it is written. Set *ret to a malloc'd replacement, or to NULL
         * to keep the value. Returns 0 or -errno. */
        int (*redact)(void *userdata, const char *in, size_t len, char **ret, size_t *ret_len);
        void *redact_userdata;
};

struct audit;

/* Create missing parent directories (0700) and open (creating, 0600) the log
 * at path; the chain continues from the last line of the file, or of FILE.1
 * when the file is empty. opt may be NULL for the defaults. */
int audit_open(const char *path, const struct audit_options *opt, struct audit **ret,
               struct al_error *err);

/* Append one event. fields (borrowed, may be NULL) must be an object; its
 * keys must not be seq, ts, sandbox, kind or prev. */
int audit_append(struct audit *a, const char *sandbox, const char *kind, json_t *fields,
                 struct al_error *err);

/* Append several events under one lock in as few write(2)s as fit (a writer
 * with several ready, e.g. a gate's per-request records): the same lines,
 * the same checks, rotation and sync as that many audit_append() calls, in
 * order, with no other writer's line between them unless a rotation falls
 * between two. Each record is checked before anything is written; on an
 * error while writing, the records before the failing write are in the log
 * and none after. */
struct audit_record {
        const char *sandbox;
        const char *kind;
        json_t *fields; /* borrowed, may be NULL */
};
int audit_append_many(struct audit *a, const struct audit_record *recs, size_t n,
                      struct al_error *err);

/* Parse "SIZE[:KEEP]" (SIZE as parse_size(), "0" or "never": no rotation;
 * KEEP a count, "all": keep every file) into opt's rotate_size and
 * rotate_keep. -EINVAL when malformed. */
int audit_parse_rotate(const char *s, struct audit_options *opt);

/* Before an action whose end must be recorded (a sandbox, an exec): make
 * sure the disk has room for the lines to come by allocating
 * AUDIT_RESERVE_BYTES past the end of the file (fallocate KEEP_SIZE; later
 * appends use that space). A full disk refuses the action here, rather than
 * let it start and lose its end. A filesystem without fallocate is let
 * through. */
#define AUDIT_RESERVE_BYTES (16 * 1024)
int audit_reserve(struct audit *a, struct al_error *err);

/* Batch mode: fdatasync what is pending. audit_flush_deadline() is the
 * CLOCK_MONOTONIC time in µs (as now_monotonic_us()) by which audit_flush()
 * must run, or 0 when nothing is pending. audit_append() flushes by itself
 * when it finds the deadline passed. */
int audit_flush(struct audit *a);
/* Batch mode, for an event loop that must not wait on the disk: from now
 * on the syncs batch mode makes by itself (an append past the deadline,
 * audit_flush_soon()) run in a helper process of this writer (forked by
 * the first sync handed to it, so use the writer while the caller has one
 * thread; it ends with audit_close()), and the caller goes on at once. audit_flush() and audit_close() still return
 * only once everything written is synced (they wait for the helper). A
 * failed background sync is returned (-errno) by the next
 * audit_flush_soon(), audit_flush() or append. -EINVAL in AUDIT_SYNC_EVENT
 * mode. */
int audit_set_background_sync(struct audit *a);
/* The same, with the helper forked now rather than by the first sync: for a
 * long-lived writer (airlockd) whose descriptors and memory only grow. */
int audit_background_sync_now(struct audit *a);
/* What is pending, synced by the helper when there is one (at once, not
 * waiting for it), else as audit_flush(). */
int audit_flush_soon(struct audit *a);
uint64_t audit_flush_deadline(const struct audit *a);
bool audit_needs_flush(const struct audit *a, uint64_t now_us);

/* The seq and hash (hex) of the last line this writer appended or found. */
uint64_t audit_last_seq(const struct audit *a);
const char *audit_last_hash(const struct audit *a);
/* The path the log was opened at. */
const char *audit_file_path(const struct audit *a);

/* Flush and close; returns NULL. */
struct audit *audit_close(struct audit *a);

/* The last `max` bytes (or fewer) of the log at path, NUL-terminated, for a
 * sweep that looks whether a line is already there (tail.c); NULL when it
 * cannot be read or is empty. Caller frees. */
char *audit_read_tail(const char *path, size_t max, size_t *ret_len);
/* Whether tail has a line of sandbox's event `kind` holding `field` (a
 * piece of its JSON, such as "\"callSeq\":3,"; NULL: any such line). */
bool audit_tail_has(const char *tail, size_t len, const char *sandbox, const char *kind,
                    const char *field);

/* /var/lib/airlock/audit/audit.jsonl for root, else
 * <home>/.local/state/airlock/audit/audit.jsonl; NULL when home is not an
 * absolute path. Caller frees. */
char *audit_default_path(uid_t uid, const char *home);

/* The existing rotated files of path, oldest first, then path itself:
 * { "FILE.3", "FILE.2", "FILE.1", "FILE" }. NULL-terminated; strv_free().
 * Every FILE.N present is listed, gaps or not. */
int audit_rotated_paths(const char *path, char ***ret, size_t *ret_n);

/* As audit_rotated_paths(), and *ret_missing is the highest N below the
 * oldest file for which FILE.N is absent (a rotated file removed from the
 * middle), or 0 when the numbers are contiguous from 1. */
int audit_rotated_files(const char *path, char ***ret, size_t *ret_n, unsigned long *ret_missing);

/* Call cb for every line of a file (without its newline; NUL-terminated for
 * convenience). `complete` is false only for a last line lacking its newline.
 * Lines longer than AUDIT_LINE_MAX are an error. A negative return from cb
 * stops the walk and is returned. */
int audit_foreach_line(const char *path,
                       int (*cb)(const char *line, size_t len, uint64_t lineno, bool complete,
                                 void *userdata),
                       void *userdata, struct al_error *err);

/* SHA-256 of buf as 64 lowercase hex digits and a NUL. */
void audit_hash_hex(const void *buf, size_t len, char ret[static AUDIT_HASH_HEX + 1]);

struct audit_verify_options {
        /* The chain may start after seq 1 (older files rotated away): accept
         * the first line's seq and prev as given. */
        bool from_rotated;
        /* When non-zero, the chain must reach this seq; when expect_last_hash
         * is also set, that line's hash must equal it. Catches lines cut off
         * at the end. */
        uint64_t expect_last_seq;
        const char *expect_last_hash;
};

struct audit_verify_result {
        bool ok;
        uint64_t lines; /* lines read, all files */
        uint64_t first_seq;
        uint64_t last_seq;
        char last_hash[AUDIT_HASH_HEX + 1];
        /* When !ok: the first bad line. */
        size_t bad_file;   /* index into paths */
        uint64_t bad_line; /* 1-based, within that file */
        uint64_t bad_seq;  /* 0 when unreadable */
        bool torn;         /* the bad line is an incomplete record (a write cut off) */
        char reason[256];
};

/* Verify files holding one chain, oldest first. Returns 0 with ret->ok telling
 * whether the chain holds, or -errno (err set) when a file cannot be read. */
int audit_verify_files(const char *const *paths, size_t n, const struct audit_verify_options *opt,
                       struct audit_verify_result *ret, struct al_error *err);
/* A verification as JSON (`airlock audit verify --json`, the dashboard's
 * GET /v1/ui/audit/verify): {"ok", "lines", "firstSeq", "lastSeq"}, and
 * "badSeq", "torn", "reason" when the chain is broken. `missing`, the
 * number of a rotated file missing between others (audit_rotated_files),
 * makes it not ok: lines were removed from the middle of the log. */
json_t *audit_verify_result_json(const struct audit_verify_result *res, unsigned long missing);
