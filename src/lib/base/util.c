/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "util.h"

void strv_free(char **v)
{
        if (!v)
                return;
        for (char **i = v; *i; i++)
                free(*i);
        free(v);
}

static void oom(void)
{
        /* The one place library code may stop the process: an allocation
         * failure leaves nothing safe to do. */
        abort();
}

char *xstrdup(const char *s)
{
        if (!s)
                return NULL;
        char *r = strdup(s);
        if (!r)
                oom();
        return r;
}

char *xasprintf(const char *fmt, ...)
{
        char *r = NULL;
        va_list ap;
        va_start(ap, fmt);
        int n = vasprintf(&r, fmt, ap);
        va_end(ap);
        if (n < 0)
                oom();
        return r;
}

void *xcalloc(size_t n, size_t size)
{
        void *r = calloc(n ? n : 1, size ? size : 1);
        if (!r)
                oom();
        return r;
}

void *xrealloc(void *p, size_t n, size_t size)
{
        if (size && n > SIZE_MAX / size)
                oom();
        size_t total = n * size;
        void *r = realloc(p, total > 0 ? total : 1);
        if (!r)
                oom();
        return r;
}

char **strv_append(char **v, size_t *n, const char *s)
{
        v = xrealloc(v, *n + 2, sizeof(char *));
        v[(*n)++] = xstrdup(s);
        v[*n] = NULL;
        return v;
}

size_t strv_length(char *const *v)
{
        size_t n = 0;
        while (v && v[n])
                n++;
        return n;
}

size_t sorted_first_at_or_after(const void *base, size_t n, size_t size, size_t key_off,
                                const char *key)
{
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                const char *k;
                memcpy(&k, (const char *)base + mid * size + key_off, sizeof(k));
                if (strcmp(k, key) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

int safe_atou64(const char *s, uint64_t *ret)
{
        if (!s || !isdigit((unsigned char)s[0]))
                return -EINVAL;
        errno = 0;
        char *end = NULL;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (!end || *end != '\0')
                return -EINVAL;
        *ret = (uint64_t)v;
        return 0;
}

int safe_atoi(const char *s, int *ret)
{
        if (!s || !*s)
                return -EINVAL;
        errno = 0;
        char *end = NULL;
        long v = strtol(s, &end, 10);
        if (errno == ERANGE || v < INT32_MIN || v > INT32_MAX)
                return -ERANGE;
        if (!end || *end != '\0' || isspace((unsigned char)s[0]))
                return -EINVAL;
        *ret = (int)v;
        return 0;
}

int signal_parse(const char *s, int *ret)
{
        static const struct {
                const char *name;
                int sig;
        } names[] = {
            {"HUP", SIGHUP},   {"INT", SIGINT},     {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
            {"USR1", SIGUSR1}, {"USR2", SIGUSR2},   {"TERM", SIGTERM}, {"CONT", SIGCONT},
            {"STOP", SIGSTOP}, {"WINCH", SIGWINCH}, {"ALRM", SIGALRM}, {"PIPE", SIGPIPE},
        };
        const char *n = strncmp(s, "SIG", 3) == 0 ? s + 3 : s;
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (STREQ(n, names[i].name)) {
                        *ret = names[i].sig;
                        return 0;
                }
        int v;
        if (safe_atoi(s, &v) < 0 || v <= 0 || v >= 65)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* Parse "<digits>[.<digits>]" into an integer count of 1/1000 units. */
static int parse_milli(const char **p, uint64_t *ret)
{
        const char *s = *p;
        uint64_t whole = 0, frac = 0, scale = 1000;
        if (!isdigit((unsigned char)*s))
                return -EINVAL;
        while (isdigit((unsigned char)*s)) {
                if (whole > (UINT64_MAX / 10000) - 10)
                        return -ERANGE;
                whole = whole * 10 + (uint64_t)(*s++ - '0');
        }
        if (*s == '.') {
                s++;
                if (!isdigit((unsigned char)*s))
                        return -EINVAL;
                while (isdigit((unsigned char)*s)) {
                        if (scale > 1) {
                                scale /= 10;
                                frac += (uint64_t)(*s - '0') * scale;
                        }
                        s++;
                }
        }
        *ret = whole * 1000 + frac;
        *p = s;
        return 0;
}

int parse_size(const char *s, uint64_t *ret)
{
        if (!s)
                return -EINVAL;
        const char *p = s;
        uint64_t milli;
        int r = parse_milli(&p, &milli);
        if (r < 0)
                return r;
        uint64_t mult = 1;
        switch (*p) {
        case '\0':
                break;
        case 'k': case 'K': mult = 1ULL << 10; p++; break;
        case 'm': case 'M': mult = 1ULL << 20; p++; break;
        case 'g': case 'G': mult = 1ULL << 30; p++; break;
        case 't': case 'T': mult = 1ULL << 40; p++; break;
        default:
                return -EINVAL;
        }
        if (mult > 1 && (*p == 'i' || *p == 'I'))
                p++;
        if (*p == 'b' || *p == 'B')
                p++;
        if (*p != '\0')
                return -EINVAL;
        if (mult == 1 && milli % 1000 != 0)
                return -EINVAL; /* fractional bytes */
        if (milli / 1000 > UINT64_MAX / mult)
                return -ERANGE;
        uint64_t v = (milli / 1000) * mult + ((milli % 1000) * mult) / 1000;
        *ret = v;
        return 0;
}

int parse_duration_ms(const char *s, uint64_t *ret)
{
        if (!s)
                return -EINVAL;
        const char *p = s;
        uint64_t milli;
        int r = parse_milli(&p, &milli);
        if (r < 0)
                return r;
        uint64_t mult = 1;
        if (STREQ(p, "") || STREQ(p, "s"))
                mult = 1;
        else if (STREQ(p, "ms")) {
                *ret = milli / 1000;
                return 0;
        } else if (STREQ(p, "m"))
                mult = 60;
        else if (STREQ(p, "h"))
                mult = 3600;
        else
                return -EINVAL;
        if (milli > UINT64_MAX / mult)
                return -ERANGE;
        *ret = milli * mult;
        return 0;
}

int write_full(int fd, const void *buf, size_t len)
{
        const char *p = buf;
        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

int write_file_at(int dirfd, const char *path, const char *content)
{
        _cleanup_close_ int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        return write_full(fd, content, strlen(content));
}

int read_file_at(int dirfd, const char *path, size_t max, char **ret, size_t *ret_len)
{
        _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        size_t cap = 4096 < max + 1 ? 4096 : max + 1, len = 0;
        _cleanup_free_ char *buf = xcalloc(cap, 1);
        for (;;) {
                if (len + 1 >= cap) {
                        if (cap >= max + 1) {
                                /* Exactly max bytes is fine: look for the end. */
                                char extra;
                                ssize_t m;
                                do
                                        m = read(fd, &extra, 1);
                                while (m < 0 && errno == EINTR);
                                if (m < 0)
                                        return -errno;
                                if (m > 0)
                                        return -EFBIG;
                                break;
                        }
                        cap = cap * 2 < max + 1 ? cap * 2 : max + 1;
                        buf = xrealloc(buf, cap, 1);
                }
                ssize_t n = read(fd, buf + len, cap - 1 - len);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        buf[len] = '\0';
        if (ret_len)
                *ret_len = len;
        *ret = TAKE_PTR(buf);
        return 0;
}

int random_hex(char *buf, size_t n)
{
        static const char hex[] = "0123456789abcdef";
        uint8_t raw[32];
        if (n > 64 || n % 2)
                return -EINVAL;
        size_t got = 0;
        while (got < n / 2) {
                ssize_t r = getrandom(raw + got, n / 2 - got, 0);
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                got += (size_t)r;
        }
        for (size_t i = 0; i < n / 2; i++) {
                buf[2 * i] = hex[raw[i] >> 4];
                buf[2 * i + 1] = hex[raw[i] & 15];
        }
        buf[n] = '\0';
        return 0;
}

int mkdir_p(const char *path, mode_t parent_mode, mode_t mode)
{
        char buf[PATH_MAX];
        if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
                return -ENAMETOOLONG;
        for (char *p = buf[0] ? buf + 1 : buf; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(buf, parent_mode) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

static const char b64_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void base64_encode_into(char *out, const void *data, size_t len)
{
        const unsigned char *p = data;
        size_t o = 0;
        for (size_t i = 0; i < len; i += 3) {
                uint32_t v = (uint32_t)p[i] << 16;
                if (i + 1 < len)
                        v |= (uint32_t)p[i + 1] << 8;
                if (i + 2 < len)
                        v |= p[i + 2];
                out[o++] = b64_alphabet[v >> 18];
                out[o++] = b64_alphabet[(v >> 12) & 63];
                out[o++] = i + 1 < len ? b64_alphabet[(v >> 6) & 63] : '=';
                out[o++] = i + 2 < len ? b64_alphabet[v & 63] : '=';
        }
        out[o] = '\0';
}

char *base64_encode(const void *data, size_t len)
{
        char *out = xcalloc(4 * ((len + 2) / 3) + 1, 1);
        base64_encode_into(out, data, len);
        return out;
}

static int b64_value(char c)
{
        const char *p = c ? strchr(b64_alphabet, c) : NULL;
        return p ? (int)(p - b64_alphabet) : -1;
}

int base64_decode_n(const char *in, size_t n, unsigned char **ret, size_t *ret_len)
{
        if (n % 4 != 0)
                return -EINVAL;
        /* Padding only as the last one or two characters. */
        size_t pad = (n >= 1 && in[n - 1] == '=') + (n >= 2 && in[n - 2] == '=');
        unsigned char *out = xcalloc(n / 4 * 3 + 1, 1);
        size_t o = 0;
        for (size_t i = 0; i < n; i += 4) {
                uint32_t v = 0;
                for (size_t j = 0; j < 4; j++) {
                        int d = i + j >= n - pad ? 0 : b64_value(in[i + j]);
                        if (d < 0) {
                                explicit_bzero(out, n / 4 * 3 + 1);
                                free(out);
                                return -EINVAL;
                        }
                        v = v << 6 | (uint32_t)d;
                }
                out[o++] = (unsigned char)(v >> 16);
                out[o++] = (unsigned char)(v >> 8);
                out[o++] = (unsigned char)v;
        }
        o -= pad;
        out[o] = 0;
        *ret = out;
        *ret_len = o;
        return 0;
}

int base64_decode(const char *in, unsigned char **ret, size_t *ret_len)
{
        return base64_decode_n(in, strlen(in), ret, ret_len);
}

static uint64_t clock_us(clockid_t id)
{
        struct timespec ts;
        clock_gettime(id, &ts);
        return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000;
}

uint64_t now_monotonic_us(void)
{
        return clock_us(CLOCK_MONOTONIC);
}

uint64_t now_realtime_us(void)
{
        return clock_us(CLOCK_REALTIME);
}

bool json_text_depth_ok(const char *s, size_t len, unsigned max)
{
        unsigned depth = 0;
        bool in_string = false;
        for (size_t i = 0; i < len; i++) {
                char ch = s[i];
                if (in_string) {
                        if (ch == '\\')
                                i++;
                        else if (ch == '"')
                                in_string = false;
                        continue;
                }
                if (ch == '"')
                        in_string = true;
                else if (ch == '[' || ch == '{') {
                        if (++depth > max)
                                return false;
                } else if ((ch == ']' || ch == '}') && depth > 0)
                        depth--;
        }
        return true;
}
