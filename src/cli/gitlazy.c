/* SPDX-License-Identifier: Apache-2.0 */
/* libgit2, loaded by `airlock` only when a command calls it (`airlock diff`
 * for its text diffs). Linked normally, libgit2 and the sixteen libraries
 * it pulls in (TLS, SSH, Kerberos, ...) are mapped and relocated at every
 * start of airlock: about 1.5 ms of CPU before `airlock run` does anything,
 * a third of a whole sandbox start. These definitions stand in for the
 * libgit2 functions the airlock program references (its link drops
 * libgit2 with --as-needed, src/cli/meson.build); each forwards to the real
 * one, loaded on first use from the same library the build linked against
 * (AIRLOCK_LIBGIT2_SONAME). airlock-git links libgit2 itself. */
#include <dlfcn.h>
#include <git2.h>
#include <stdarg.h>
#include <stdio.h>

#include "lazylib.h"

#ifndef AIRLOCK_LIBGIT2_SONAME
#error "AIRLOCK_LIBGIT2_SONAME must name libgit2's shared object (src/cli/meson.build)"
#endif

static void *lib;
static git_error load_error = {.message = "libgit2 could not be loaded", .klass = 0};
static char load_msg[256];

static void *sym(const char *name)
{
        if (!lib) {
                lib = lazylib_open(AIRLOCK_LIBGIT2_SONAME, load_msg, sizeof(load_msg));
                if (!lib) {
                        load_error.message = load_msg;
                        return NULL;
                }
        }
        return dlsym(lib, name);
}

LAZY(int, git_libgit2_init, (void), (), -1)
LAZY(int, git_libgit2_shutdown, (void), (), -1)
LAZY(int, git_patch_from_buffers,
     (git_patch * *out, const void *old_buffer, size_t old_len, const char *old_as_path,
      const void *new_buffer, size_t new_len, const char *new_as_path,
      const git_diff_options *opts),
     (out, old_buffer, old_len, old_as_path, new_buffer, new_len, new_as_path, opts), -1)
LAZY(size_t, git_patch_num_hunks, (const git_patch *patch), (patch), 0)
LAZY(int, git_patch_get_hunk,
     (const git_diff_hunk **out, size_t *lines_in_hunk, git_patch *patch, size_t hunk_idx),
     (out, lines_in_hunk, patch, hunk_idx), -1)
LAZY(int, git_patch_get_line_in_hunk,
     (const git_diff_line **out, git_patch *patch, size_t hunk_idx, size_t line_of_hunk),
     (out, patch, hunk_idx, line_of_hunk), -1)

void git_patch_free(git_patch *patch)
{
        static void (*f)(git_patch *);
        if (!patch)
                return;
        if (!f)
                f = (void (*)(git_patch *))sym("git_patch_free");
        if (f)
                f(patch);
}

void git_buf_dispose(git_buf *buffer)
{
        static void (*f)(git_buf *);
        if (!f)
                f = (void (*)(git_buf *))sym("git_buf_dispose");
        if (f)
                f(buffer);
}

const git_error *git_error_last(void)
{
        static const git_error *(*f)(void);
        if (!f)
                f = (const git_error *(*)(void))sym("git_error_last");
        return f ? f() : &load_error;
}

/* Variadic: only the option airlock's own code sets (gitops.c, gitlib_up)
 * is forwarded; any other fails, so that a new one is added here. */
int git_libgit2_opts(int option, ...)
{
        static int (*f)(int, ...);
        if (!f)
                f = (int (*)(int, ...))sym("git_libgit2_opts");
        if (!f || option != GIT_OPT_SET_CACHE_MAX_SIZE)
                return -1;
        va_list ap;
        va_start(ap, option);
        ssize_t v = va_arg(ap, ssize_t);
        va_end(ap);
        return f(option, v);
}
