/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* Images for the container tier (docs/tiers.md, docs/internals/tiers.md):
 * root file systems kept in a content-addressed cache under Airlock's state
 * directory, <state root>/images:
 *
 *   <id>/rootfs/    the tree, id = sha256 of its canonical listing
 *   names/<name>    a file holding the id the name stands for
 *
 * What is imported is hostile: nothing is followed, no device node, FIFO or
 * socket is kept, no set-id or sticky bit survives, and every entry is
 * created beneath the new tree (openat on directory fds, O_NOFOLLOW), so no
 * path leaves the cache. Symbolic links are kept as links: they resolve
 * only inside the sandbox, whose root the image is. */

#define IMAGE_ID_LEN      64
#define IMAGE_NAME_MAX    64
#define IMAGE_DEPTH_MAX   64
#define IMAGE_ENTRIES_MAX 1000000
/* Entries an import may unpack over all its layers: each layer may hold
 * IMAGE_ENTRIES_MAX, but 256 of them must not make 256 million inodes on
 * the host's disk before the cache copy counts the tree. */
#define IMAGE_UNPACK_ENTRIES_MAX (4 * IMAGE_ENTRIES_MAX)
/* What an archive may unpack to at most, and the free space an import
 * leaves on the cache's file system (image_info.bytes_max). */
#define IMAGE_BYTES_MAX   (64ull << 30)
#define IMAGE_BYTES_SPARE (256ull << 20)

struct image_info {
        char id[IMAGE_ID_LEN + 1];
        uint64_t files, dirs, links, bytes;
        uint64_t skipped; /* device nodes, FIFOs, sockets left out */
        uint64_t setid_stripped;
        uint64_t whiteouts; /* OCI whiteouts applied */
        int cached;         /* the same tree was already in the cache */
        /* In: the most an archive may unpack to, in bytes (0: the lesser of
         * IMAGE_BYTES_MAX and the free space of the target, less a reserve). */
        uint64_t bytes_max;
        /* In/out: archive entries unpacked so far, over every layer, and
         * the most allowed (0: IMAGE_UNPACK_ENTRIES_MAX). */
        uint64_t entries, entries_max;
};

/* <state root>/images for this caller; NULL when there is no state root. */
char *image_dir(uid_t uid, const char *home);

/* NULL when `name` is a valid image name, else why not. */
const char *image_name_check(const char *name);

/* Import the directory `src` into the cache; `name` (may be NULL) then
 * stands for it. `ret`, when given, is read for bytes_max (0: the default
 * bound) and filled. */
int image_import(const char *images_dir, const char *src, const char *name, struct image_info *ret,
                 struct al_error *err);

/* The root file system of image `ref` (a name, or a 64-digit id): its path
 * (caller frees) and id. */
int image_resolve(const char *images_dir, const char *ref, char **ret_rootfs,
                  char ret_id[IMAGE_ID_LEN + 1], struct al_error *err);

/* [{"id", "names": [...]}] for every image in the cache. */
int image_list(const char *images_dir, json_t **ret, struct al_error *err);

/* Remove a name; the tree goes when no name is left for it. An id removes
 * the tree and every name standing for it. */
int image_remove(const char *images_dir, const char *ref, struct al_error *err);
