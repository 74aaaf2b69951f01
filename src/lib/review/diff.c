/* SPDX-License-Identifier: Apache-2.0 */
/* The diff: a git-style unified diff of the plan, names quoted as git
 * quotes them, and lines of its own for what git cannot show (hidden
 * characters in a name, set-id bits, new directories, what was skipped). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <git2.h>

#include "review-internal.h"

/* The largest file shown as text: libgit2's diff refuses larger ones. */
#define TEXT_DIFF_MAX (1ULL << 30)
/* The most lines two versions of a file may have between them to be
 * compared: libgit2's diff holds about 100 bytes per line, so that a file
 * of newlines costs the host a hundred times its size (6.4 GB for 64 MiB).
 * A file shown whole (added or deleted) is streamed instead, whatever its
 * lines. */
#define TEXT_LINES_MAX (2u * 1000 * 1000)
/* Two versions compared hold both in memory as well. */
#define TEXT_PAIR_MAX (256ULL << 20)

struct differ {
        struct review *rv;
        FILE *out;
        struct al_error *err;
        bool git_up; /* libgit2 initialized, on the first text diff */
};

static void differ_done(struct differ *d)
{
        if (d->git_up)
                git_libgit2_shutdown();
        d->git_up = false;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(git_patch *, git_patch_free, patch_freep)

/* The whole content of the regular file fd, from its start, in *ret
 * (caller frees); -EFBIG past TEXT_DIFF_MAX. fd < 0 is an empty file. */
static int read_text(int fd, char **ret, size_t *ret_len)
{
        *ret = NULL;
        *ret_len = 0;
        if (fd < 0)
                return 0;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if ((uint64_t)st.st_size > TEXT_DIFF_MAX)
                return -EFBIG;
        size_t cap = (size_t)st.st_size + 1, len = 0;
        _cleanup_free_ char *buf = xrealloc(NULL, cap, 1);
        for (;;) {
                if (len == cap) {
                        if (cap > TEXT_DIFF_MAX)
                                return -EFBIG;
                        cap *= 2;
                        buf = xrealloc(buf, cap, 1);
                }
                ssize_t n = pread(fd, buf + len, cap - len, (off_t)len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        if (len > TEXT_DIFF_MAX)
                return -EFBIG;
        *ret = TAKE_PTR(buf);
        *ret_len = len;
        return 0;
}

/* "start,count" of a hunk header, the count left out when it is 1. */
static void put_range(FILE *out, int start, int count)
{
        if (count == 1)
                fprintf(out, "%d", start);
        else
                fprintf(out, "%d,%d", start, count);
}

static size_t count_lines(const char *s, size_t n)
{
        size_t lines = 0;
        for (const char *p = s, *end = s + n; p < end; lines++) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                p = nl ? nl + 1 : end;
        }
        return lines;
}

/* The lines of the regular file fd (its size at open, at most
 * TEXT_DIFF_MAX) as one hunk of additions or removals, read twice in
 * chunks: the same text libgit2 gives for a file against nothing, in
 * constant memory. */
static int whole_diff(struct differ *d, int fd, const char *alabel, const char *blabel, bool added)
{
        struct stat st;
        if (fstat(fd, &st) < 0)
                return al_error_set(d->err, errno, "reading the file to show");
        uint64_t size = (uint64_t)st.st_size;
        if (size > TEXT_DIFF_MAX) {
                fprintf(d->out, "airlock: %s and %s: too large to show as text (over %llu bytes)\n",
                        alabel, blabel, (unsigned long long)TEXT_DIFF_MAX);
                return 0;
        }
        _cleanup_free_ char *buf = xcalloc(COPY_CHUNK, 1);
        size_t lines = 0;
        char last = '\n';
        uint64_t got = 0;
        for (int pass = 0; pass < 2; pass++) {
                got = 0;
                bool at_start = true;
                while (got < size) {
                        size_t want = size - got < COPY_CHUNK ? (size_t)(size - got) : COPY_CHUNK;
                        ssize_t n = pread(fd, buf, want, (off_t)got);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0)
                                return al_error_set(d->err, errno, "reading the file to show");
                        if (n == 0)
                                break; /* shrunk since: shown as far as it goes */
                        if (pass == 0) {
                                for (const char *p = buf; p < buf + n; p++)
                                        lines += *p == '\n';
                                last = buf[n - 1];
                        } else {
                                for (const char *p = buf, *end = buf + n; p < end;) {
                                        if (at_start)
                                                fputc(added ? '+' : '-', d->out);
                                        const char *nl = memchr(p, '\n', (size_t)(end - p));
                                        const char *stop = nl ? nl + 1 : end;
                                        fwrite(p, 1, (size_t)(stop - p), d->out);
                                        at_start = nl != NULL;
                                        p = stop;
                                }
                        }
                        got += (uint64_t)n;
                }
                if (pass == 0) {
                        size = got;
                        if (size == 0)
                                return 0;
                        if (last != '\n')
                                lines++;
                        fprintf(d->out, "--- %s\n+++ %s\n@@ -", alabel, blabel);
                        put_range(d->out, added ? 0 : 1, added ? 0 : (int)lines);
                        fputs(" +", d->out);
                        put_range(d->out, added ? 1 : 0, added ? (int)lines : 0);
                        fputs(" @@\n", d->out);
                }
        }
        if (last != '\n')
                fputs("\n\\ No newline at end of file\n", d->out);
        if (ferror(d->out))
                return al_error_set(d->err, EIO, "writing the diff");
        return 0;
}

/* The unified diff (3 lines of context) of the text files a and b (either
 * -1 for none) under the names alabel and blabel, computed in process with
 * libgit2: "--- "/"+++ " lines, then the hunks, with "\ No newline at end
 * of file" after a last line that has none. Nothing when they are equal. */
static int text_diff(struct differ *d, int a, const char *alabel, int b, const char *blabel)
{
        if (a < 0 || b < 0)
                return whole_diff(d, a < 0 ? b : a, alabel, blabel, a < 0);
        _cleanup_free_ char *abuf = NULL, *bbuf = NULL;
        size_t alen, blen;
        struct stat ast, bst;
        int r = fstat(a, &ast) < 0 || fstat(b, &bst) < 0 ? -errno : 0;
        if (r == 0 && (uint64_t)ast.st_size + (uint64_t)bst.st_size > TEXT_PAIR_MAX)
                r = -EFBIG;
        if (r == 0)
                r = read_text(a, &abuf, &alen);
        if (r == 0)
                r = read_text(b, &bbuf, &blen);
        if (r == 0 && (uint64_t)alen + blen > TEXT_PAIR_MAX)
                r = -EFBIG;
        if (r == -EFBIG) {
                fprintf(d->out,
                        "airlock: %s and %s: too large to compare as text (over %llu bytes "
                        "together)\n",
                        alabel, blabel, (unsigned long long)TEXT_PAIR_MAX);
                return 0;
        }
        if (r < 0)
                return al_error_set(d->err, r, "reading the files to compare");
        size_t al = count_lines(abuf, alen), bl = count_lines(bbuf, blen);
        if (al + bl > TEXT_LINES_MAX) {
                fprintf(d->out,
                        "airlock: %s and %s: too many lines to compare as text (%zu and %zu; at "
                        "most %u together)\n",
                        alabel, blabel, al, bl, TEXT_LINES_MAX);
                return 0;
        }
        if (!d->git_up) {
                if (git_libgit2_init() < 0)
                        return al_error_set_message(d->err, EIO, "initializing libgit2");
                d->git_up = true;
        }
        git_diff_options opts = GIT_DIFF_OPTIONS_INIT;
        opts.flags = GIT_DIFF_FORCE_TEXT;
        opts.context_lines = 3;
        opts.interhunk_lines = 0;
        _cleanup_(patch_freep) git_patch *patch = NULL;
        if (git_patch_from_buffers(&patch, abuf, alen, NULL, bbuf, blen, NULL, &opts) < 0) {
                const git_error *ge = git_error_last();
                return al_error_set_message(d->err, EIO, "comparing the files: %s",
                                            ge && ge->message ? ge->message : "libgit2 failed");
        }
        size_t nh = git_patch_num_hunks(patch);
        if (nh == 0)
                return 0;
        FILE *out = d->out;
        fprintf(out, "--- %s\n+++ %s\n", alabel, blabel);
        for (size_t h = 0; h < nh; h++) {
                const git_diff_hunk *hunk;
                size_t nl;
                if (git_patch_get_hunk(&hunk, &nl, patch, h) < 0)
                        return al_error_set_message(d->err, EIO, "comparing the files");
                fputs("@@ -", out);
                put_range(out, hunk->old_start, hunk->old_lines);
                fputs(" +", out);
                put_range(out, hunk->new_start, hunk->new_lines);
                fputs(" @@\n", out);
                for (size_t l = 0; l < nl; l++) {
                        const git_diff_line *line;
                        if (git_patch_get_line_in_hunk(&line, patch, h, l) < 0)
                                return al_error_set_message(d->err, EIO, "comparing the files");
                        switch (line->origin) {
                        case GIT_DIFF_LINE_CONTEXT:
                        case GIT_DIFF_LINE_ADDITION:
                        case GIT_DIFF_LINE_DELETION:
                                fputc(line->origin, out);
                                fwrite(line->content, 1, line->content_len, out);
                                break;
                        case GIT_DIFF_LINE_CONTEXT_EOFNL:
                        case GIT_DIFF_LINE_ADD_EOFNL:
                        case GIT_DIFF_LINE_DEL_EOFNL:
                                /* The line before it ended without one. */
                                fputs("\n\\ No newline at end of file\n", out);
                                break;
                        default:
                                break;
                        }
                }
        }
        if (ferror(out))
                return al_error_set(d->err, EIO, "writing the diff");
        return 0;
}

static void put_escaped(FILE *out, const char *s, bool backslash)
{
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                if (c < 0x20 || c == 0x7f || (backslash && c == '\\'))
                        fprintf(out, "\\x%02x", c);
                else
                        fputc(c, out);
        }
}

#define QUOTED_MAX (PATH_MAX * 4 + 8)

/* Whether a name must be quoted in a diff: it holds a hidden code point, a
 * control character, bytes that are not UTF-8 (only a host name can), a
 * double quote or a backslash. */
static bool needs_quote(const char *path)
{
        const unsigned char *s = (const unsigned char *)path;
        size_t n = strlen(path);
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                size_t len = review_utf8_next(s + i, n - i, &cp);
                if (len == 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == '"' ||
                    cp == '\\' || review_is_hidden_codepoint(cp))
                        return true;
                i += len;
        }
        return false;
}

/* prefix and path as the diff names them: as they are, or in double
 * quotes with control characters, hidden code points and stray bytes as
 * octal escapes, which is how git writes such a name and git apply reads
 * it. Either way a name that looks like another cannot pass for it. */
static const char *qpath(char buf[static QUOTED_MAX], const char *prefix, const char *path)
{
        if (!needs_quote(path)) {
                snprintf(buf, QUOTED_MAX, "%s%s", prefix, path);
                return buf;
        }
        const unsigned char *s = (const unsigned char *)path;
        size_t n = strlen(path), o = 0;
        o += (size_t)snprintf(buf, QUOTED_MAX, "\"%s", prefix);
        for (size_t i = 0; i < n && o + 16 < QUOTED_MAX;) {
                uint32_t cp;
                size_t len = review_utf8_next(s + i, n - i, &cp);
                bool esc = len == 0 || cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) ||
                           review_is_hidden_codepoint(cp);
                if (len == 0)
                        len = 1;
                for (size_t k = 0; k < len; k++) {
                        if (esc)
                                o += (size_t)snprintf(buf + o, QUOTED_MAX - o, "\\%03o", s[i + k]);
                        else if (s[i + k] == '"' || s[i + k] == '\\') {
                                buf[o++] = '\\';
                                buf[o++] = (char)s[i + k];
                        } else
                                buf[o++] = (char)s[i + k];
                }
                i += len;
        }
        buf[o++] = '"';
        buf[o] = '\0';
        return buf;
}

/* Before an entry whose name holds hidden code points, a line that shows
 * them, as \uXXXX in the name and by number; git apply skips it. */
static void note_hidden(FILE *out, const char *path)
{
        if (!review_hidden_end(path))
                return;
        const unsigned char *s = (const unsigned char *)path;
        size_t n = strlen(path);
        fputs("airlock: hidden characters in the name \"", out);
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                size_t len = review_utf8_next(s + i, n - i, &cp);
                if (review_is_hidden_codepoint(cp))
                        fprintf(out, cp > 0xffff ? "\\U%08x" : "\\u%04x", (unsigned)cp);
                else if (cp == '\\' || cp == '"')
                        fprintf(out, "\\%c", (char)cp);
                else
                        fwrite(s + i, 1, len, out);
                i += len;
        }
        fputs("\" (", out);
        const char *sep = "";
        for (size_t i = 0; i < n;) {
                uint32_t cp;
                i += review_utf8_next(s + i, n - i, &cp);
                if (review_is_hidden_codepoint(cp)) {
                        fprintf(out, "%sU+%04X", sep, (unsigned)cp);
                        sep = ", ";
                }
        }
        fputs("); accept takes it only when it is named\n", out);
}

/* The "diff --git" line of an entry, after the notes about it. */
static void diff_header(FILE *out, const char *path)
{
        char a[QUOTED_MAX], b[QUOTED_MAX];
        note_hidden(out, path);
        fprintf(out, "diff --git %s %s\n", qpath(a, "a/", path), qpath(b, "b/", path));
}

/* Set-id and sticky bits the agent set: accept never applies them, and the
 * diff says so. */
static void note_setid(FILE *out, const char *path, mode_t mode)
{
        if (!(mode & 07000))
                return;
        const char *names[3];
        size_t n = 0;
        if (mode & S_ISUID)
                names[n++] = "setuid";
        if (mode & S_ISGID)
                names[n++] = "setgid";
        if (mode & S_ISVTX)
                names[n++] = "sticky";
        char q[QUOTED_MAX];
        fprintf(out, "airlock: %s: the sandbox set the ", qpath(q, "", path));
        for (size_t i = 0; i < n; i++)
                fprintf(out, "%s%s", i == 0 ? "" : i + 1 == n ? " and " : ", ", names[i]);
        fprintf(out, " %s (mode %04o); accept does not apply %s\n", n == 1 ? "bit" : "bits",
                (unsigned)mode & 07777, n == 1 ? "it" : "them");
}

/* Symlinks diff as one-line files holding the target, as git shows them;
 * control characters in a target are escaped so it stays one line. */
static void diff_link_body(FILE *out, const char *path, const char *old, const char *new)
{
        char q[QUOTED_MAX];
        if (old)
                fprintf(out, "--- %s\n", qpath(q, "a/", path));
        else
                fputs("--- /dev/null\n", out);
        if (new)
                fprintf(out, "+++ %s\n", qpath(q, "b/", path));
        else
                fputs("+++ /dev/null\n", out);
        fprintf(out, "@@ -%s +%s @@\n", old ? "1" : "0,0", new ? "1" : "0,0");
        if (old) {
                fputc('-', out);
                put_escaped(out, old, true);
                fputs("\n\\ No newline at end of file\n", out);
        }
        if (new) {
                fputc('+', out);
                put_escaped(out, new, true);
                fputs("\n\\ No newline at end of file\n", out);
        }
}

static unsigned git_mode(mode_t st_mode, mode_t perm)
{
        if (S_ISLNK(st_mode))
                return 0120000;
        return (unsigned)((st_mode & S_IFMT) | (perm & 0777));
}

/* The workspace's file at path is going away. */
static int diff_removed(struct differ *d, const char *path, const struct host *h)
{
        FILE *out = d->out;
        char q[QUOTED_MAX];
        diff_header(out, path);
        fprintf(out, "deleted file mode %06o\n", git_mode(h->mode, h->mode));
        if (S_ISLNK(h->mode)) {
                char target[PATH_MAX];
                int r = review_read_link(d->rv->ws_fd, path, target);
                if (r < 0)
                        return al_error_set(d->err, r, "reading \"%s\" in the workspace", path);
                diff_link_body(out, path, target, NULL);
                return 0;
        }
        if (!S_ISREG(h->mode))
                return 0;
        _cleanup_close_ int fd =
            review_open_beneath(d->rv->ws_fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return al_error_set(d->err, fd, "opening \"%s\" in the workspace", path);
        struct stat st;
        bool bin;
        if (fstat(fd, &st) < 0 || review_is_binary(fd, &bin) < 0)
                return al_error_set(d->err, errno, "reading \"%s\" in the workspace", path);
        if (st.st_size == 0)
                return 0;
        if (bin) {
                fprintf(out, "Binary files %s and /dev/null differ\n", qpath(q, "a/", path));
                return 0;
        }
        return text_diff(d, fd, qpath(q, "a/", path), -1, "/dev/null");
}

static int diff_file(struct differ *d, const struct item *it)
{
        FILE *out = d->out;
        const char *path = it->path;
        _cleanup_close_ int b = review_open_beneath(d->rv->changes_fd, path, O_RDONLY | O_NONBLOCK);
        if (b < 0)
                return al_error_set(d->err, b, "opening \"%s\" in changes/", path);
        struct stat bst;
        bool bbin;
        if (fstat(b, &bst) < 0 || review_is_binary(b, &bbin) < 0)
                return al_error_set(d->err, errno, "reading \"%s\" in changes/", path);
        if (!S_ISREG(bst.st_mode))
                return al_error_set_message(d->err, EBADMSG, "\"%s\" in changes/ is not a file",
                                            path);
        char alabel[QUOTED_MAX], blabel[QUOTED_MAX];
        qpath(alabel, "a/", path);
        qpath(blabel, "b/", path);
        unsigned bmode = git_mode(S_IFREG, it->mode);

        if (it->host.mode && !S_ISREG(it->host.mode)) {
                int r = diff_removed(d, path, &it->host);
                if (r < 0)
                        return r;
        }
        if (S_ISREG(it->host.mode)) {
                _cleanup_close_ int a =
                    review_open_beneath(d->rv->ws_fd, path, O_RDONLY | O_NONBLOCK | O_NOCTTY);
                if (a < 0)
                        return al_error_set(d->err, a, "opening \"%s\" in the workspace", path);
                bool same, abin;
                if (review_files_equal(a, b, &same) < 0 || review_is_binary(a, &abin) < 0)
                        return al_error_set(d->err, errno, "reading \"%s\"", path);
                unsigned amode = git_mode(S_IFREG, it->host.mode);
                note_setid(out, path, it->mode);
                if (same && amode == bmode)
                        return 0;
                diff_header(out, path);
                if (amode != bmode)
                        fprintf(out, "old mode %06o\nnew mode %06o\n", amode, bmode);
                if (same)
                        return 0;
                if (abin || bbin) {
                        fprintf(out, "Binary files %s and %s differ\n", alabel, blabel);
                        return 0;
                }
                return text_diff(d, a, alabel, b, blabel);
        }
        note_setid(out, path, it->mode);
        diff_header(out, path);
        fprintf(out, "new file mode %06o\n", bmode);
        if (bst.st_size == 0)
                return 0;
        if (bbin) {
                fprintf(out, "Binary files /dev/null and %s differ\n", blabel);
                return 0;
        }
        return text_diff(d, -1, "/dev/null", b, blabel);
}

static int diff_symlink(struct differ *d, const struct item *it)
{
        char target[PATH_MAX], old[PATH_MAX];
        int r = review_read_link(d->rv->changes_fd, it->path, target);
        if (r < 0)
                return al_error_set(d->err, r, "reading \"%s\" in changes/", it->path);
        if (S_ISLNK(it->host.mode)) {
                r = review_read_link(d->rv->ws_fd, it->path, old);
                if (r < 0)
                        return al_error_set(d->err, r, "reading \"%s\" in the workspace", it->path);
                if (STREQ(old, target))
                        return 0;
                diff_header(d->out, it->path);
                diff_link_body(d->out, it->path, old, target);
                return 0;
        }
        if (it->host.mode && (r = diff_removed(d, it->path, &it->host)) < 0)
                return r;
        diff_header(d->out, it->path);
        fputs("new file mode 120000\n", d->out);
        diff_link_body(d->out, it->path, NULL, target);
        return 0;
}

/* Directories: git shows them only through their files, so a new empty
 * one, or one the agent opened to everyone, would pass unseen. A new
 * directory is a line of its own, which git apply skips; a new mode of an
 * existing one is a mode change. */
static void diff_dir(FILE *out, const struct item *it)
{
        char q[QUOTED_MAX];
        note_setid(out, it->path, it->mode);
        if (S_ISDIR(it->host.mode)) {
                if ((it->host.mode & 0777) == (it->mode & 0777))
                        return;
                diff_header(out, it->path);
                fprintf(out, "old mode %06o\nnew mode %06o\n",
                        git_mode(it->host.mode, it->host.mode), git_mode(S_IFDIR, it->mode));
                return;
        }
        note_hidden(out, it->path);
        fprintf(out, "new directory %s/ (mode %06o%s)\n", qpath(q, "", it->path),
                git_mode(S_IFDIR, it->mode), (it->mode & 0002) ? ", writable by everyone" : "");
}

int review_diff(const char *state_dir, FILE *out, struct al_error *err)
{
        _cleanup_(review_done) struct review rv;
        _cleanup_(plan_done) struct plan p = {0};
        int r = review_load(state_dir, false, &rv, err);
        if (r < 0)
                return r;
        r = plan_build(&rv, &p, err);
        if (r < 0)
                return r;

        _cleanup_(differ_done) struct differ d = {.rv = &rv, .out = out, .err = err};
        for (size_t i = 0; i < p.n; i++) {
                const struct item *it = &p.v[i];
                r = 0;
                switch (it->op) {
                case OP_REMOVE:
                        if (S_ISDIR(it->host.mode)) {
                                /* Its files show as deleted; an empty one
                                 * would not show at all. */
                                char q[QUOTED_MAX];
                                note_hidden(out, it->path);
                                fprintf(out, "deleted directory %s/\n", qpath(q, "", it->path));
                        } else
                                r = diff_removed(&d, it->path, &it->host);
                        break;
                case OP_DIR:
                        diff_dir(out, it);
                        break;
                case OP_FILE:
                        r = diff_file(&d, it);
                        break;
                case OP_SYMLINK:
                        r = diff_symlink(&d, it);
                        break;
                }
                if (r < 0)
                        return al_error_wrap(err, "diff of \"%s\"", it->path);
        }
        size_t i;
        json_t *v;
        json_array_foreach(rv.m.skipped, i, v)
        {
                const char *path = json_string_value(json_object_get(v, "path"));
                const char *reason = json_string_value(json_object_get(v, "reason"));
                if (!path || !reason)
                        continue;
                fputs("Not captured: ", out);
                put_escaped(out, path, false);
                fputs(" (", out);
                put_escaped(out, reason, false);
                fputs(")\n", out);
        }
        if (fflush(out) != 0 || ferror(out))
                return al_error_set(err, errno ? errno : EIO, "writing the diff");
        return 0;
}
