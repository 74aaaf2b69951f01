/* SPDX-License-Identifier: Apache-2.0 */
/* The last bytes of an audit log, for a sweep that asks whether a line is
 * already there before it writes one (audit.h). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "util.h"

char *audit_read_tail(const char *path, size_t max, size_t *ret_len)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
                return NULL;
        size_t len = (uint64_t)st.st_size > max ? max : (size_t)st.st_size;
        char *buf = xcalloc(len + 1, 1);
        size_t got = 0;
        while (got < len) {
                ssize_t n = pread(fd, buf + got, len - got, st.st_size - (off_t)len + (off_t)got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                got += (size_t)n;
        }
        *ret_len = got;
        return buf;
}

bool audit_tail_has(const char *tail, size_t len, const char *sandbox, const char *kind,
                    const char *field)
{
        if (!tail)
                return false;
        _cleanup_free_ char *head = xasprintf("\"sandbox\":\"%s\",\"kind\":\"%s\"", sandbox, kind);
        size_t hl = strlen(head), fl = field ? strlen(field) : 0;
        const char *p = tail, *end = tail + len;
        while ((p = memmem(p, (size_t)(end - p), head, hl))) {
                const char *eol = memchr(p, '\n', (size_t)(end - p));
                if (!eol)
                        eol = end;
                if (!field || memmem(p + hl, (size_t)(eol - p - hl), field, fl))
                        return true;
                p = eol;
        }
        return false;
}
