/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What volume.c and dirvol.c share; nothing outside src/lib/volume uses it. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "volume.h"

/* A caller that is not root keeps a volume as a directory (dirvol.c):
 * <volume>/size holds its size in bytes, <volume>/data its files, and
 * <volume>/data.new a save being made. */
#define DIRVOL_SIZE "size"
#define DIRVOL_DATA "data"
#define DIRVOL_NEW  "data.new"

int dirvol_read_size(int vol, uint64_t *ret);
/* In the sandbox's mount namespace: a tmpfs of the volume's size (root
 * directory owned by uid:gid, the mode of the saved files' directory),
 * nosuid and nodev, filled from the volume's files. *ret_mnt is the
 * detached mount, *ret_root its root directory. */
int dirvol_mount(int vol, uid_t uid, gid_t gid, int *ret_mnt, int *ret_root, struct al_error *err);
/* Copy the tree at `tmpfs` into the volume in place of its files, whole or
 * not at all: regular files, directories and symbolic links (never
 * followed), permission bits only, at most the volume's size in all. */
int dirvol_save(int vol, int tmpfs);
/* The host disk its files take. */
int dirvol_used(int vol, uint64_t *ret);
