/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "image.h"

/* Shared by image.c (the cache, directory copies) and layer.c and
 * formats.c (archives). */

/* The entries of directory fd, sorted; caller frees with strv_free. */
int image_sorted_entries(int fd, char ***ret, size_t *ret_n);

/* What a directory counts against the bytes bound (a block of its own),
 * as a symbolic link counts its target: a million of either is not free
 * on the host's disk. */
#define IMAGE_DIR_BYTES 4096

/* The most bytes an import may write at directory fd `root`: info->bytes_max
 * when set, else the lesser of IMAGE_BYTES_MAX and what the file system can
 * take beyond info->bytes, less IMAGE_BYTES_SPARE. */
uint64_t image_bytes_bound(int root, const struct image_info *info);

/* `n` more bytes to write, counted in info->bytes: refused past `max`
 * (from image_bytes_bound), before anything is written; `what` names the
 * source in the message. */
int image_take_bytes(struct image_info *info, uint64_t max, uint64_t n, const char *what,
                     struct al_error *err);

/* Apply the tar stream read from fd `in` (gzip-compressed or not) to the tree
 * at directory fd `root`, with the OCI whiteouts; `what` names it in
 * messages. Counts go to *info. */
int image_layer_apply(int root, int in, const char *what, struct image_info *info,
                      struct al_error *err);

/* Unpack the image at `src` (an archive file or an OCI layout directory)
 * into directory fd `stage` (empty): its root file system ends up at
 * `stage`/rootfs. 0 when `src` is a plain directory to copy as it is
 * (nothing staged: *ret_staged false). */
int image_stage(const char *src, int stage, bool *ret_staged, struct image_info *info,
                struct al_error *err);
