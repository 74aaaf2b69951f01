/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* The one tar reader: headers of a hostile archive, one entry at a time
 * (ustar; pax "path", "linkpath" and "size" records; GNU long names and
 * long links), each header's checksum, every number and length bounded.
 * It knows nothing of files: what an entry may be and where it goes is its
 * user's policy (image layers: src/lib/image/layer.c; the files API:
 * src/daemon/files-tar.c). Every failure has its message in err. */

#define TAR_BLOCK 512
/* The largest entry size taken (a pax size past it is refused): an
 * entry's size and padding never wrap. */
#define TAR_SIZE_MAX ((uint64_t)INT64_MAX)

/* Read exactly n bytes into buf: 0, -ENODATA when the source ended first
 * (having read nothing, or part), or -errno (with err set). */
typedef int (*tar_read_fn)(void *src, void *buf, size_t n, struct al_error *err);

struct tar_reader {
        tar_read_fn read;
        void *src;
        const char *what; /* names the archive in messages */
        struct al_error *err;
        size_t ext_max;    /* the largest extended header (pax, GNU long name) taken */
        bool end_optional; /* an archive may end without its end-of-archive block */
        /* The reader's own: */
        uint64_t left, pad; /* of the current entry's data, and its padding */
        size_t index;       /* headers read, the extended ones included */
};

struct tar_entry {
        char *name; /* as the archive gives it: pax path, GNU long name, ustar prefix/name */
        char *link; /* pax linkpath, GNU long link, or the header's link name */
        char type;  /* the typeflag ('0', '5', '2', ...) */
        uint64_t size;
        uint64_t mode;
        size_t index; /* of its header, from 1, for messages */
};

void tar_entry_clear(struct tar_entry *e);

/* The next entry (its data, e->size bytes for a file, none for a link, a
 * device, a directory or a FIFO, is read with tar_data or passed over by
 * the next tar_next): 1, 0 at the end of the archive, or -errno. */
int tar_next(struct tar_reader *r, struct tar_entry *e);
/* n more bytes of the current entry's data (at most what is left). */
int tar_data(struct tar_reader *r, void *buf, size_t n);

/* A source over a buffer in memory; `off` is where the data of the entry
 * tar_next returned starts. */
struct tar_mem {
        const unsigned char *data;
        size_t len, off;
};
int tar_mem_read(void *src, void *buf, size_t n, struct al_error *err);
