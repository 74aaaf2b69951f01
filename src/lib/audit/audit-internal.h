/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Shared between the files of the audit module (audit.c: the writer;
 * rotate.c: rotation and torn-tail repair; verify.c: reading and
 * verifying); not for other modules, which use audit.h. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "audit.h"

struct audit {
        char *path;
        int fd; /* O_RDWR so the tail can be read from the very inode we hold locked */
        struct audit_options opt;
        off_t known_size;  /* file size when we last read or wrote it; -1: unknown */
        off_t locked_size; /* the size fstat() saw when we took the lock */
        uint64_t seq;      /* last line's seq, 0 before the first line */
        char hash[AUDIT_HASH_HEX + 1];
        uint64_t flush_deadline;     /* monotonic µs; 0 when nothing is pending */
        uint64_t rotate_at;          /* 0: never */
        unsigned keep;               /* 0: all */
        struct audit_syncer *syncer; /* audit_set_background_sync(); NULL: syncs inline */
};

/* audit.c */
int audit_log_open(const char *path, int *ret_fd);
int audit_lock_current(struct audit *a, struct al_error *err);
int audit_fsync_dir_of(const char *path);
char *audit_build_line(const struct audit *a, const char *sandbox, const char *kind, json_t *body,
                       size_t *ret_len);
int audit_write_line(struct audit *a, char *line, size_t len, struct al_error *err);
int audit_write_lines(struct audit *a, const char *buf, size_t len, uint64_t n,
                      const char *last_hash, struct al_error *err);
int audit_sync_tail(struct audit *a, struct al_error *err);

/* sync.c */
int audit_syncer_start(struct audit *a);
int audit_syncer_wait(struct audit *a);
bool audit_syncer_usable(const struct audit *a);
void audit_syncer_free(struct audit *a);

/* rotate.c */
int audit_pread_full(int fd, char *buf, size_t len, off_t off);
uint64_t audit_fragment_seq(const char *s, size_t len);
int audit_tail_before(struct audit *a, off_t end, uint64_t *ret_seq, char *ret_hash,
                      struct al_error *err);
int audit_rotate_log(struct audit *a, struct al_error *err);
int audit_repair_torn(struct audit *a, off_t size, struct al_error *err);
