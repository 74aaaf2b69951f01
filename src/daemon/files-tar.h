/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"

/* Directories in and out of the workspace as tar streams (read with the
 * one tar reader, src/lib/base/tar.h: ustar, pax records, GNU long names;
 * ustar and pax written).
 *
 * Extraction fails closed, and before anything is written: the whole
 * archive is checked first. Refused: a bad header checksum, an absolute
 * name, a `..` component (files_clean_path, the files API's own checker),
 * links (hard or symbolic), devices, FIFOs and every other type but
 * regular files and directories, an entry running past the end, more than
 * FILES_TAR_ENTRIES_MAX entries. Files are then written as the files API
 * writes them (files_write: no symbolic link followed anywhere on the
 * path), with permission bits only: no set-id or sticky bit survives. */

#define FILES_TAR_ENTRIES_MAX 100000
#define FILES_TAR_DEPTH_MAX   64

/* Only the checks of files_tar_extract: the number of entries it would
 * make (directories and files), or the refusal. */
int files_tar_check(const char *rel, const void *data, size_t len, size_t *ret_entries,
                    struct al_error *err);

/* Extract the tar in data[0..len) beneath directory `rel` (made when
 * missing). *ret: {"path", "files", "dirs", "bytes"}. */
int files_tar_extract(int root, const char *rel, const void *data, size_t len, json_t **ret,
                      struct al_error *err);

/* As files_tar_extract, each entry checked against the sandbox's deny set
 * (NULL: none) from the directory it is written in, once that is open: a
 * denied directory moved beneath rel after the request was checked is
 * never written into (-EACCES, what came before it stays). */
struct files_deny;
int files_tar_extract_deny(int root, const char *rel, const void *data, size_t len,
                           const struct files_deny *deny, json_t **ret, struct al_error *err);

/* A tar of directory `rel`, produced a buffer at a time: its directories
 * and regular files; symbolic links and special files are left out (and
 * never followed), as are trees deeper than FILES_TAR_DEPTH_MAX. */
struct files_tar_writer;
int files_tar_writer_new(int root, const char *rel, struct files_tar_writer **ret,
                         struct al_error *err);
/* Up to `cap` (a multiple of 512) more bytes of the archive into buf: the
 * count, 0 at its end, -errno on a read error. */
ssize_t files_tar_writer_read(struct files_tar_writer *w, char *buf, size_t cap);
struct files_tar_writer *files_tar_writer_free(struct files_tar_writer *w);
/* Leave out every entry of `deny` (files-deny.h), checked by identity as
 * each is reached; w owns it from here. */
struct files_deny;
void files_tar_writer_deny(struct files_tar_writer *w, struct files_deny *deny);
