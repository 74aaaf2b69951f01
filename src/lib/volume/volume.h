/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

/* Named volumes: a directory <state root>/volumes/NAME holding `disk.img`,
 * an ext4 file system of the volume's size, and `lock`. A sandbox gets the
 * file system through a loop device, mounted nosuid and nodev; the size is
 * the file system's own, so a write past it fails with ENOSPC inside, and
 * what was written is on the host's disk as soon as the kernel writes it
 * back, whatever happens to the supervisor.
 *
 * Mounting a loop device needs root. A caller that is not root keeps a
 * volume as a directory of files instead (`data`, with its size in `size`):
 * the sandbox gets a tmpfs of exactly that size (the limit the kernel
 * enforces), filled from the files when it starts; the supervisor saves
 * the tmpfs back, whole, when the sandbox has ended (volume_save_all). A
 * supervisor killed outright loses what was written since the start.
 *
 * The lock: the attaching process holds flock(LOCK_EX) on `lock` for a
 * read-write attachment, LOCK_SH for a read-only one, on a close-on-exec fd
 * it keeps for the sandbox's life. A killed supervisor's lock goes with its
 * file table. docs/internals/volume.md. */

#define VOLUME_NAME_MAX 64
#define VOLUME_SIZE_MIN (8ull << 20)
#define VOLUME_SIZE_MAX (1ull << 40)
#define VOLUME_LIST_MAX 4096

/* NULL when `name` is a volume name (1-64 of [a-z0-9_.-], starting with a
 * letter or digit), else why not. */
const char *volume_name_check(const char *name);

/* <state root>/volumes; NULL when the state root is unknown. */
char *volume_root(void);

/* `owner`: the API grant that made it (kept in the volume's `owner` file),
 * NULL when made on the host (`airlock volume create`). */
int volume_create(const char *name, uint64_t size, const char *owner, struct al_error *err);
/* Refused (-EBUSY) while attached. */
int volume_remove(const char *name, struct al_error *err);
/* {"name", "size", "used", "attached": null|"rw"|"ro", "owner": null|grant};
 * used is the host disk the image takes. */
int volume_info(const char *name, json_t **ret, struct al_error *err);
/* [{...}, ...] sorted by name. */
int volume_list(json_t **ret, struct al_error *err);

/* Lock and mount the volume: *ret_lock is the lock's fd (keep it open as
 * long as the sandbox runs), *ret_mnt a detached mount (fsmount) of its
 * file system, nosuid, nodev, read-only when `readonly`. -EBUSY when
 * another sandbox holds it in a way that excludes this one. */
/* In the sandbox's child, for the mount volume_attach gave: a caller
 * that is not root got its volume's directory, made here into a filled
 * tmpfs (*ret_mnt, returning 1); 0 when `fd` is a file system to mount as
 * it is. */
int volume_child_mount(int fd, uid_t uid, gid_t gid, int *ret_mnt, struct al_error *err);

/* Once the sandbox has ended: save every directory volume this process
 * attached read-write; fn hears each (r < 0: not saved, the files stay as
 * they were). */
typedef void (*volume_saved_fn)(void *arg, const char *name, int r);
void volume_save_all(volume_saved_fn fn, void *arg);
/* The sandbox did not start: nothing it had is saved (its locks go too). */
void volume_forget_all(void);

int volume_attach(const char *name, bool readonly, int *ret_lock, int *ret_mnt,
                  struct al_error *err);
