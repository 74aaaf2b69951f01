/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <dirent.h>
#include <stdint.h>

#include "cgroup.h"

/* Helpers shared by the v1 and v2 backends. */
int cgroup_write(struct cgroup *cg, const char *dir, const char *file, const char *value);
int cgroup_read_u64(const char *dir, const char *file, uint64_t *ret);
int cgroup_read_keyed(const char *dir, const char *file, const char *key, uint64_t *ret);
int cgroup_rmdir(struct cgroup *cg, const char *dir);
