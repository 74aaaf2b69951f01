/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* An idle sandbox costs host memory for as long as it lives: its supervisor
 * and its init each keep the heap and stack pages they touched while
 * starting (policy parsing, mounts, the spawn path) although an idle loop
 * never uses them again. release_startup_memory() gives those back; each
 * calls it once, single-threaded, just before settling into its loop.
 * bench/density.py measures the result. */

#include <fcntl.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "util.h"

/* The stack below the caller's frame is dead: drop its pages (they come
 * back zeroed if it grows there again). A margin of two pages is left for
 * this function's own frames and madvise's. Then the heap's free pages. */
static inline void release_startup_memory(void)
{
        volatile char here = 0;
        uintptr_t sp = (uintptr_t)&here;
        long page = sysconf(_SC_PAGESIZE);
        char *maps = NULL;
        size_t len = 0;
        if (page > 0 && read_file_at(AT_FDCWD, "/proc/self/maps", 1 << 20, &maps, &len) >= 0) {
                char *line = strstr(maps, " [stack]\n");
                while (line && line > maps && line[-1] != '\n')
                        line--;
                char *end = NULL, *end2 = NULL;
                errno = 0;
                unsigned long long lo = line ? strtoull(line, &end, 16) : 0;
                unsigned long long hi = end && *end == '-' ? strtoull(end + 1, &end2, 16) : 0;
                uintptr_t top = (sp - 2 * (uintptr_t)page) & ~((uintptr_t)page - 1);
                /* Only when the caller runs on the main stack. */
                if (errno == 0 && end2 && *end2 == ' ' && lo < top && sp < hi)
                        madvise((void *)(uintptr_t)lo, top - (uintptr_t)lo, MADV_DONTNEED);
        }
        free(maps);
        malloc_trim(0);
}
