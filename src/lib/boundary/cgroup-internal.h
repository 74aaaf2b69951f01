/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <dirent.h>
#include <stdint.h>

#include "cgroup.h"

/* Helpers shared by the v1 and v2 backends. */
int cgroup_write(struct cgroup *cg, const char *dir, const char *file, const char *value);
/* A control file of dir (through the leaf's descriptor when held):
 * whether it is there; its contents. */
bool cgroup_has(const struct cgroup *cg, const char *dir, const char *file);
int cgroup_read(const struct cgroup *cg, const char *dir, const char *file, size_t max, char **ret);
int cgroup_read_u64(const struct cgroup *cg, const char *dir, const char *file, uint64_t *ret);
int cgroup_read_keyed(const struct cgroup *cg, const char *dir, const char *file, const char *key,
                      uint64_t *ret);
int cgroup_rmdir(struct cgroup *cg, const char *dir);
