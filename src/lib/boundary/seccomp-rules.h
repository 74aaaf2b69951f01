/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The rules of the sandbox's seccomp filter, built with libseccomp. They are
 * compiled to BPF once, at build time, by seccomp-gen: generating the program
 * takes milliseconds, loading a ready one microseconds. Include after
 * libseccomp's <seccomp.h>. */

#include "error.h"

int seccomp_rules_build(scmp_filter_ctx *ret, struct al_error *err);
