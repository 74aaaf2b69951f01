/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <linux/filter.h>

#include "error.h"

/* The spec's linux.seccomp profile compiled to BPF (libseccomp), to be
 * stacked after Airlock's own filter (spawn_config.extra_filter): the
 * kernel applies the strictest answer of the two, so the profile can only
 * narrow what Airlock allows. Unknown syscall names are skipped, as the
 * common runtimes do; unknown actions, operators, flags and a listener are
 * refused. ret->filter is malloc'd. */
int rt_seccomp_compile(const char *json, struct sock_fprog *ret, struct al_error *err);
