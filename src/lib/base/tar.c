/* SPDX-License-Identifier: Apache-2.0 */
/* The one tar reader (tar.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tar.h"
#include "util.h"

void tar_entry_clear(struct tar_entry *e)
{
        free(e->name);
        free(e->link);
        *e = (struct tar_entry){0};
}

int tar_mem_read(void *src, void *buf, size_t n, struct al_error *err)
{
        struct tar_mem *m = src;
        (void)err;
        if (n > m->len - m->off) {
                m->off = m->len;
                return -ENODATA;
        }
        memcpy(buf, m->data + m->off, n);
        m->off += n;
        return 0;
}

static int truncated(struct tar_reader *r)
{
        return al_error_set_message(r->err, EINVAL, "%s: the archive ends inside entry %zu",
                                    r->what, r->index);
}

/* Pass over n bytes. */
static int skip(struct tar_reader *r, uint64_t n)
{
        char buf[TAR_BLOCK * 16];
        while (n > 0) {
                size_t k = n > sizeof(buf) ? sizeof(buf) : (size_t)n;
                int e = r->read(r->src, buf, k, r->err);
                if (e == -ENODATA)
                        return truncated(r);
                if (e < 0)
                        return e;
                n -= k;
        }
        return 0;
}

static uint64_t padding(uint64_t n)
{
        return (TAR_BLOCK - n % TAR_BLOCK) % TAR_BLOCK;
}

/* An octal field: leading spaces, at least one digit, then NUL or spaces.
 * The base-256 form (past 8 GiB) is refused: nothing taken is that big. */
static int octal(const unsigned char *f, size_t n, uint64_t *ret)
{
        size_t i = 0, digits = 0;
        uint64_t v = 0;
        while (i < n && f[i] == ' ')
                i++;
        for (; i < n && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
                if (v > (UINT64_MAX >> 3))
                        return -ERANGE;
                v = (v << 3) | (uint64_t)(f[i] - '0');
        }
        for (; i < n; i++)
                if (f[i] != ' ' && f[i] != '\0')
                        return -EINVAL;
        if (digits == 0)
                return -EINVAL;
        *ret = v;
        return 0;
}

static bool checksum_ok(const unsigned char *h)
{
        uint64_t want, sum = 0;
        if (octal(h + 148, 8, &want) < 0)
                return false;
        for (size_t i = 0; i < TAR_BLOCK; i++)
                sum += (i >= 148 && i < 156) ? ' ' : h[i];
        return sum == want;
}

/* A field that may fill its whole width without a NUL. */
static char *field(const unsigned char *f, size_t n)
{
        return xasprintf("%.*s", (int)strnlen((const char *)f, n), (const char *)f);
}

struct pending {
        char *pax_path, *pax_link, *long_name, *long_link;
        uint64_t pax_size;
        bool has_pax_size;
};

static void pending_clear(struct pending *p)
{
        free(p->pax_path);
        free(p->pax_link);
        free(p->long_name);
        free(p->long_link);
        *p = (struct pending){0};
}

static int bad_pax(struct tar_reader *r, const char *why)
{
        return al_error_set_message(r->err, EINVAL, "%s: entry %zu: a malformed pax header (%s)",
                                    r->what, r->index, why);
}

/* "LEN key=value\n" records: path, linkpath and size are taken, the rest
 * passed over. A value with a NUL in it, or an empty path, is refused. */
static int pax(struct tar_reader *r, const char *d, size_t n, struct pending *p)
{
        size_t off = 0;
        while (off < n) {
                size_t len = 0, i = off;
                while (i < n && d[i] >= '0' && d[i] <= '9' && len <= n)
                        len = len * 10 + (size_t)(d[i++] - '0');
                if (i >= n || d[i] != ' ' || len < 5 || len > n - off || d[off + len - 1] != '\n')
                        return bad_pax(r, "a record's length");
                const char *kv = d + i + 1, *end = d + off + len - 1;
                if (kv > end)
                        return bad_pax(r, "a record's length");
                const char *eq = memchr(kv, '=', (size_t)(end - kv));
                if (!eq)
                        return bad_pax(r, "a record without \"=\"");
                size_t klen = (size_t)(eq - kv), vlen = (size_t)(end - eq - 1);
                const char *val = eq + 1;
                char **slot = klen == 4 && !memcmp(kv, "path", 4)       ? &p->pax_path
                              : klen == 8 && !memcmp(kv, "linkpath", 8) ? &p->pax_link
                                                                        : NULL;
                if (slot) {
                        if (memchr(val, '\0', vlen) || (slot == &p->pax_path && vlen == 0))
                                return bad_pax(r, "a name empty or with a NUL in it");
                        free(*slot);
                        *slot = xasprintf("%.*s", (int)vlen, val);
                } else if (klen == 4 && !memcmp(kv, "size", 4)) {
                        _cleanup_free_ char *v = xasprintf("%.*s", (int)vlen, val);
                        if (memchr(val, '\0', vlen) || safe_atou64(v, &p->pax_size) < 0)
                                return bad_pax(r, "its size");
                        p->has_pax_size = true;
                }
                off += len;
        }
        return 0;
}

/* An extended header's body: at most ext_max bytes, read whole. */
static int read_ext(struct tar_reader *r, uint64_t size, char **ret)
{
        if (size == 0 || size > r->ext_max)
                return al_error_set_message(r->err, EINVAL,
                                            "%s: entry %zu: an extended header of %llu bytes, "
                                            "refused (at most %zu)",
                                            r->what, r->index, (unsigned long long)size,
                                            r->ext_max);
        char *buf = xcalloc(1, (size_t)size + 1);
        int e = r->read(r->src, buf, (size_t)size, r->err);
        if (e >= 0)
                e = skip(r, padding(size));
        else if (e == -ENODATA)
                e = truncated(r);
        if (e < 0) {
                free(buf);
                return e;
        }
        *ret = buf;
        return 0;
}

int tar_next(struct tar_reader *r, struct tar_entry *ret)
{
        /* Apart: their sum must not wrap to pass over nothing. */
        int e = skip(r, r->left);
        if (e >= 0)
                e = skip(r, r->pad);
        r->left = r->pad = 0;
        if (e < 0)
                return e;
        struct pending p = {0};
        for (;;) {
                unsigned char h[TAR_BLOCK];
                e = r->read(r->src, h, TAR_BLOCK, r->err);
                if (e == -ENODATA) {
                        if (r->end_optional && !p.pax_path && !p.long_name && !p.has_pax_size &&
                            !p.pax_link && !p.long_link)
                                e = 0;
                        else
                                e = al_error_set_message(
                                    r->err, EINVAL, "%s: ends without its end-of-archive blocks",
                                    r->what);
                        break;
                }
                if (e < 0)
                        break;
                bool zero = true;
                for (size_t i = 0; i < TAR_BLOCK && zero; i++)
                        zero = h[i] == 0;
                if (zero) { /* the end (a second zero block may follow) */
                        e = 0;
                        break;
                }
                r->index++;
                if (!checksum_ok(h)) {
                        e = al_error_set_message(r->err, EINVAL,
                                                 "%s: entry %zu: a header with a bad checksum "
                                                 "(not a tar archive, or a damaged one)",
                                                 r->what, r->index);
                        break;
                }
                uint64_t size, mode;
                if (octal(h + 124, 12, &size) < 0 || octal(h + 100, 8, &mode) < 0) {
                        e = al_error_set_message(
                            r->err, EINVAL, "%s: entry %zu: a bad size or mode", r->what, r->index);
                        break;
                }
                char type = (char)h[156];
                if (type == 'x' || type == 'g' || type == 'L' || type == 'K') {
                        char *v = NULL;
                        e = read_ext(r, size, &v);
                        if (e < 0)
                                break;
                        if (type == 'x')
                                e = pax(r, v, (size_t)size, &p);
                        else if (type == 'L' || type == 'K') {
                                char **slot = type == 'L' ? &p.long_name : &p.long_link;
                                free(*slot);
                                *slot = xstrdup(v); /* up to its NUL */
                                if (!**slot)
                                        e = al_error_set_message(r->err, EINVAL,
                                                                 "%s: entry %zu: an empty long "
                                                                 "name",
                                                                 r->what, r->index);
                        } /* 'g': global records, for no entry in particular */
                        free(v);
                        if (e < 0)
                                break;
                        continue;
                }
                struct tar_entry t = {.type = type, .mode = mode, .index = r->index};
                t.size = p.has_pax_size ? p.pax_size : size;
                if (t.size > TAR_SIZE_MAX) {
                        e = al_error_set_message(r->err, EINVAL,
                                                 "%s: entry %zu: a size of %llu bytes, refused "
                                                 "(at most %llu)",
                                                 r->what, r->index, (unsigned long long)t.size,
                                                 (unsigned long long)TAR_SIZE_MAX);
                        break;
                }
                if (p.pax_path)
                        t.name = TAKE_PTR(p.pax_path);
                else if (p.long_name)
                        t.name = TAKE_PTR(p.long_name);
                else {
                        _cleanup_free_ char *base = field(h, 100);
                        bool ustar = memcmp(h + 257, "ustar", 5) == 0;
                        _cleanup_free_ char *prefix = ustar ? field(h + 345, 155) : NULL;
                        t.name =
                            prefix && *prefix ? xasprintf("%s/%s", prefix, base) : TAKE_PTR(base);
                }
                t.link = p.pax_link    ? TAKE_PTR(p.pax_link)
                         : p.long_link ? TAKE_PTR(p.long_link)
                                       : field(h + 157, 100);
                pending_clear(&p);
                /* Links, devices, directories and FIFOs carry no data,
                 * whatever their size field says (POSIX). */
                r->left = type >= '1' && type <= '6' ? 0 : t.size;
                r->pad = padding(r->left);
                *ret = t;
                return 1;
        }
        pending_clear(&p);
        return e;
}

int tar_data(struct tar_reader *r, void *buf, size_t n)
{
        if (n > r->left)
                return al_error_set_message(r->err, EINVAL, "%s: entry %zu: read past its data",
                                            r->what, r->index);
        int e = r->read(r->src, buf, n, r->err);
        if (e == -ENODATA)
                return truncated(r);
        if (e < 0)
                return e;
        r->left -= n;
        return 0;
}
