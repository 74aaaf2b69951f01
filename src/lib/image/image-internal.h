/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "error.h"
#include "image.h"

/* Shared by image.c (the cache, directory copies) and layer.c and
 * formats.c (archives). */

/* The entries of directory fd, sorted; caller frees with strv_free. */
int image_sorted_entries(int fd, char ***ret, size_t *ret_n);

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
