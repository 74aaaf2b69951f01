/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* Stand-ins for a shared library's functions that airlock loads on first use
 * (gitlazy.c, tlslazy.c, sqlitelazy.c): each definition forwards to the real function,
 * found by the including file's own `static void *sym(const char *name)`
 * (which loads the library once), or returns `fail` when it cannot be found.
 * Hidden, so that the loaded libraries bind to each other, never to these. */

#include <dlfcn.h>
#include <stddef.h>

#define HIDDEN __attribute__((visibility("hidden")))

/* dlopen(soname) for a lazily loaded library; on failure, why, in msg.
 * Only while the process still sees the file system it was started on (the
 * same root directory and mount namespace, noted before main): a process
 * that has entered a sandbox's root would otherwise load the sandbox's own
 * copy of the library, code the agent wrote, with the caller's rights. */
void *lazylib_open(const char *soname, char *msg, size_t size);

#define LAZY_FN(ret, name, params)                                                                 \
        static ret(*f) params = NULL;                                                              \
        ret(*g) params = __atomic_load_n(&f, __ATOMIC_ACQUIRE);                                    \
        if (!g) {                                                                                  \
                g = (ret(*) params)sym(#name);                                                     \
                __atomic_store_n(&f, g, __ATOMIC_RELEASE);                                         \
        }

#define LAZY(ret, name, params, args, fail)                                                        \
        HIDDEN ret name params;                                                                    \
        ret name params                                                                            \
        {                                                                                          \
                LAZY_FN(ret, name, params)                                                         \
                return g ? g args : fail;                                                          \
        }

#define LAZY_VOID(name, params, args)                                                              \
        HIDDEN void name params;                                                                   \
        void name params                                                                           \
        {                                                                                          \
                LAZY_FN(void, name, params)                                                        \
                if (g)                                                                             \
                        g args;                                                                    \
        }
