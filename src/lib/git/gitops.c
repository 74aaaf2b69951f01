/* SPDX-License-Identifier: Apache-2.0 */
/* Host-side git (gitops.h): what its parts share: libgit2's lifetime, the
 * deadline, libgit2 errors as al_error; and git.json, the clone's state,
 * and the escaping of what is shown on a terminal. The parts: URLs and
 * credentials (gitops-creds.c), clone (gitops-clone.c), the private copy
 * of the agent's .git (gitops-copy.c), object size caps (gitops-objcap.c),
 * export and count (gitops-export.c), push (gitops-push.c). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fs.h"
#include "gitops-internal.h"
#include "utf8.h"

/* A libgit2 failure: "<what>: <libgit2's message>". */
int gitops_fail_git(struct al_error *err, int code, const char *what)
{
        const git_error *e = git_error_last();
        return al_error_set_message(err, code, "%s: %s", what,
                                    e && e->message ? e->message : "unknown error");
}

static uint64_t deadline_us; /* monotonic; 0: none */

void gitops_set_deadline(unsigned seconds)
{
        deadline_us = seconds ? now_monotonic_us() + (uint64_t)seconds * 1000000 : 0;
}

bool gitops_past_deadline(void)
{
        return deadline_us && now_monotonic_us() > deadline_us;
}

int gitops_fail_deadline(struct al_error *err)
{
        return al_error_set_message(err, ETIMEDOUT,
                                    "the host-side git operation took too long and was stopped");
}

void gitops_wipe_free(char *s)
{
        if (s) {
                explicit_bzero(s, strlen(s));
                free(s);
        }
}

void gitlib_down(struct gitlib *g)
{
        if (g->up)
                git_libgit2_shutdown();
}

int gitlib_up(struct gitlib *g, struct al_error *err)
{
        if (git_libgit2_init() < 0)
                return gitops_fail_git(err, EIO, "initializing libgit2");
        g->up = true;
        /* Bounds what libgit2 keeps of objects read: with each object under
         * GITOPS_OBJECT_MAX, the memory an operation uses stays bounded. */
        git_libgit2_opts(GIT_OPT_SET_CACHE_MAX_SIZE, (ssize_t)GITOPS_OBJECT_MAX);
        return 0;
}

void gitops_buf_disposep(git_buf *b)
{
        git_buf_dispose(b);
}

void gitops_rm_rf(const char *path)
{
        (void)fs_remove_tree(AT_FDCWD, path, FS_REMOVE_DEPTH_MAX);
}

static json_t *jstr_or_null(const char *s)
{
        return s ? json_string(s) : json_null();
}

int gitops_state_write(const char *state_dir, const struct gitops_state *st, struct al_error *err)
{
        json_t *j = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "url", jstr_or_null(st->url),
                              "user", jstr_or_null(st->user), "rev", jstr_or_null(st->rev), "base",
                              jstr_or_null(st->base), "workspace", jstr_or_null(st->workspace),
                              "audit", jstr_or_null(st->audit));
        if (!j)
                return al_error_set_message(err, EINVAL, "%s/%s: a value is not valid UTF-8",
                                            state_dir, GITOPS_STATE);
        _cleanup_free_ char *s = json_dumps(j, JSON_INDENT(1) | JSON_SORT_KEYS);
        json_decref(j);
        if (!s)
                return al_error_set_message(err, ENOMEM, "%s/%s", state_dir, GITOPS_STATE);

        _cleanup_close_ int dfd = open(state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return al_error_set(err, errno, "%s", state_dir);
        char tmp[64];
        snprintf(tmp, sizeof(tmp), ".%s.%d", GITOPS_STATE, (int)getpid());
        _cleanup_close_ int fd =
            openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return al_error_set(err, errno, "%s/%s", state_dir, tmp);
        int r = write_full(fd, s, strlen(s));
        if (r >= 0)
                r = write_full(fd, "\n", 1);
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && renameat(dfd, tmp, dfd, GITOPS_STATE) < 0)
                r = -errno;
        if (r < 0) {
                unlinkat(dfd, tmp, 0);
                return al_error_set(err, r, "writing %s/%s", state_dir, GITOPS_STATE);
        }
        return 0;
}

static char *jdup(json_t *j, const char *key, bool *ok)
{
        json_t *v = json_object_get(j, key);
        if (!v || json_is_null(v))
                return NULL;
        if (!json_is_string(v)) {
                *ok = false;
                return NULL;
        }
        return xstrdup(json_string_value(v));
}

int gitops_state_read(const char *state_dir, struct gitops_state *ret, struct al_error *err)
{
        _cleanup_close_ int dfd = open(state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return al_error_set(err, errno, "%s", state_dir);
        _cleanup_free_ char *buf = NULL;
        size_t len;
        int r = read_file_at(dfd, GITOPS_STATE, STATE_MAX, &buf, &len);
        if (r == -ENOENT)
                return al_error_set_message(err, ENOENT, "%s/%s: no such file", state_dir,
                                            GITOPS_STATE);
        if (r < 0)
                return al_error_set(err, r, "reading %s/%s", state_dir, GITOPS_STATE);
        json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(j)) {
                json_decref(j);
                return al_error_set_message(err, EINVAL, "%s/%s is not a JSON object", state_dir,
                                            GITOPS_STATE);
        }
        bool ok = true;
        struct gitops_state st = {
            .url = jdup(j, "url", &ok),
            .user = jdup(j, "user", &ok),
            .rev = jdup(j, "rev", &ok),
            .base = jdup(j, "base", &ok),
            .workspace = jdup(j, "workspace", &ok),
            .audit = jdup(j, "audit", &ok),
        };
        json_decref(j);
        if (!ok || !st.url || !st.base || !st.workspace || st.workspace[0] != '/') {
                gitops_state_clear(&st);
                return al_error_set_message(err, EINVAL, "%s/%s: missing or malformed fields",
                                            state_dir, GITOPS_STATE);
        }
        *ret = st;
        return 0;
}

void gitops_state_clear(struct gitops_state *st)
{
        free(st->url);
        free(st->user);
        free(st->rev);
        free(st->base);
        free(st->workspace);
        free(st->audit);
        memset(st, 0, sizeof(*st));
}

/* The code point at s (n bytes left) and its length, or -EILSEQ when s does not
 * start a well-formed UTF-8 sequence (overlong forms and surrogates are
 * not well-formed). */
static int utf8_decode(const unsigned char *s, size_t n, uint32_t *ret_cp)
{
        return utf8_decode_char(s, n, ret_cp);
}

/* Code points that show nothing or reorder what follows: a name or a
 * subject holding them does not read as what it is. */
static bool invisible(uint32_t cp)
{
        return cp == 0xad || cp == 0x61c || cp == 0x180e || (cp >= 0x200b && cp <= 0x200f) ||
               (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2069) || cp == 0xfeff ||
               (cp >= 0xfff9 && cp <= 0xfffb);
}

char *gitops_escape(const char *s, size_t len, bool keep_newlines)
{
        /* At most 10 bytes out ("\u{10FFFF}") per byte in. */
        if (len > (SIZE_MAX - 1) / 10)
                return NULL;
        char *out = xcalloc(len * 10 + 1, 1);
        size_t j = 0;
        const unsigned char *u = (const unsigned char *)s;
        for (size_t i = 0; i < len;) {
                uint32_t cp;
                int k = utf8_decode(u + i, len - i, &cp);
                if (k < 0) {
                        j += (size_t)snprintf(out + j, 5, "\\x%02x", u[i]);
                        i++;
                        continue;
                }
                if (k == 1 && (cp == '\n' || cp == '\t') && keep_newlines)
                        out[j++] = (char)cp;
                else if (k == 1 && (cp < 0x20 || cp == 0x7f))
                        j += (size_t)snprintf(out + j, 5, "\\x%02x", cp);
                else if ((cp >= 0x80 && cp <= 0x9f) || invisible(cp))
                        j += (size_t)snprintf(out + j, 11, "\\u{%04x}", cp);
                else {
                        memcpy(out + j, u + i, (size_t)k);
                        j += (size_t)k;
                }
                i += (size_t)k;
        }
        out[j] = '\0';
        return out;
}
