/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "grants.h"
#include "util.h"

/* The daemon's state in one SQLite database (WAL): grants, sandboxes and the
 * processes run in them. The daemon and `airlock grant` open it; each write is
 * one statement, durable when it returns. Times are milliseconds since the
 * epoch. */

#define STORE_FILE "airlockd.db"

struct store;

int store_open(const char *path, struct store **ret, struct al_error *err);
struct store *store_close(struct store *s);

/* The last failure's message ("sandbox: database or disk is full"). Writes
 * fail with -ENOSPC on a full disk, -EUCLEAN on a corrupt file, -EIO else. */
const char *store_last_error(struct store *s);
/* Checkpoint the WAL and truncate it, so that space it held comes back.
 * It never waits for another process's reader: while one holds part of
 * the WAL, what it can copy is copied and it fails (-EIO, "database is
 * locked"), to be called again later. */
int store_checkpoint(struct store *s);
/* Checkpoint the WAL but keep its file: the next commits overwrite its
 * blocks from the start, so their syncs write data, not a growing file's
 * size and extents (an fdatasync of 0.1 ms instead of a journal commit of
 * milliseconds on ext4). The WAL stays within journal_size_limit. */
int store_checkpoint_keep(struct store *s);
/* One small write and a read of the file's first page: 0 when the store
 * can record again. */
int store_probe(struct store *s);
/* -ENOENT when the database file was deleted, -ESTALE when another file has
 * taken its name (the daemon's writes would be lost), -EUCLEAN when its
 * header is no SQLite header any more; 0 otherwise. */
int store_check_file(struct store *s);

/* -EEXIST when a grant in force has that name; a revoked one is replaced. */
int store_grant_add(struct store *s, const struct grant *g, struct al_error *err);
/* The grant in force with that token hash, or -ENOENT. */
int store_grant_by_hash(struct store *s, const char *hash, struct grant **ret);
int store_grant_revoke(struct store *s, const char *name, uint64_t now_ms);
/* Every grant, revoked ones too, by name. */
int store_grant_list(struct store *s, struct grant ***ret, size_t *ret_n);
void store_grants_free(struct grant **v, size_t n);

struct store_sandbox {
        char id[17];
        char *state;      /* starting pooled running stopping destroyed failed */
        char *grant;      /* the grant that made it; NULL while pooled */
        char *class_name;
        char *metadata;   /* JSON object of strings */
        char *policy;     /* canonical JSON */
        char *workspace;  /* host path */
        bool workspace_owned; /* made by the daemon, removed with the sandbox */
        int64_t pid;      /* the supervisor; 0 when unknown */
        uint64_t created_ms;
        uint64_t ended_ms;
        uint64_t expires_ms;      /* 0: no TTL */
        uint64_t idle_timeout_ms; /* 0: none */
        uint64_t last_active_ms;
        char *reason; /* why it ended, or the start error */
};

struct store_sandbox *store_sandbox_free(struct store_sandbox *sb);
void store_sandboxes_free(struct store_sandbox **v, size_t n);

/* Insert or replace the whole record. */
int store_sandbox_put(struct store *s, const struct store_sandbox *sb);
/* As store_sandbox_put(), not synced (store_process_start() says how): for
 * the states no answer reports (a start under way, a pool's ready sandbox,
 * stopping), each followed by a synced write before anyone is told. */
int store_sandbox_put_unsynced(struct store *s, const struct store_sandbox *sb);
int store_sandbox_get(struct store *s, const char *id, struct store_sandbox **ret);
int store_sandbox_delete(struct store *s, const char *id);
int store_sandbox_count_state(struct store *s, const char *state, uint64_t *ret);
/* Delete the records of sandboxes destroyed or failed before `before_ms`,
 * and their processes. */
int store_sandbox_prune(struct store *s, uint64_t before_ms, uint64_t *ret_n);

#define STORE_META_MAX 32

struct store_filter {
        const char *state;     /* NULL: every state but pooled */
        const char *grant;     /* NULL: any */
        const char *meta_key[STORE_META_MAX];
        const char *meta_value[STORE_META_MAX];
        size_t n_meta;
        size_t limit;          /* 0: 1000 */
        /* A page after the sandbox (created_ms, id) a previous page ended
         * with; after_id NULL: from the newest. */
        uint64_t after_created_ms;
        const char *after_id;
};

/* Newest first. */
int store_sandbox_list(struct store *s, const struct store_filter *f, struct store_sandbox ***ret,
                       size_t *ret_n);

struct store_process {
        char sandbox[17];
        uint64_t pid;   /* the process's number within the sandbox */
        char *argv;     /* JSON array */
        bool background;
        char *state;    /* running exited */
        int64_t exit_code; /* -1 while running or unknown */
        char *error_code;
        uint64_t started_ms;
        uint64_t ended_ms;
};

struct store_process *store_process_free(struct store_process *p);
void store_processes_free(struct store_process **v, size_t n);
int store_process_put(struct store *s, const struct store_process *p);
/* As store_process_put(), but not synced: the record is in the WAL when it
 * returns (it survives a crash of the daemon) and on disk with the next
 * synced commit or store_sync(). For a process's start, so that it is not
 * held up by a sync; its end, written with store_process_end() or
 * store_process_put(), is synced and takes the start with it. A failure is
 * reported as for any write (a full disk refuses it). */
int store_process_start(struct store *s, const struct store_process *p);
/* Whether a store_process_start() commit still waits for a sync. */
bool store_unsynced(const struct store *s);
/* Make what store_process_start() wrote durable (a checkpoint; nothing when
 * nothing waits). */
int store_sync(struct store *s);
/* Record how a process ended; -ENOENT when it was never recorded. */
int store_process_end(struct store *s, const char *sandbox, uint64_t pid, int64_t exit_code,
                      const char *error_code, uint64_t ended_ms);
int store_process_list(struct store *s, const char *sandbox, size_t limit,
                       struct store_process ***ret, size_t *ret_n);
