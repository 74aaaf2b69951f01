/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* The host side's processes that answer (airlockd, a sandbox's supervisor)
 * ask the scheduler for its shortest slice: woken, they run at once
 * instead of after the slice of whatever holds the CPU, often the
 * sandbox's own command on a machine with few cores. A shorter slice is
 * not more CPU: over time each still gets its fair share. The request
 * resets at fork: the sandbox's processes, and every child, keep the
 * default. Only a hint: a kernel without custom slices (before 6.12) or
 * one that refuses the call leaves the defaults, and nothing depends on
 * it. Returns 0 or -errno. */
int al_sched_prefer_latency(void);
