/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "files.h"
#include "prune.h"
#include "util.h"

int prune_parse_retain(const char *s, uint64_t *ret_ms)
{
        if (!s || !*s)
                return -EINVAL;
        size_t n = strlen(s);
        if (s[n - 1] == 'd') {
                char num[32];
                if (n > sizeof(num))
                        return -ERANGE;
                memcpy(num, s, n - 1);
                num[n - 1] = '\0';
                uint64_t days;
                int r = safe_atou64(num, &days);
                if (r < 0)
                        return r;
                if (days > UINT64_MAX / (24ull * 3600 * 1000))
                        return -ERANGE;
                *ret_ms = days * 24ull * 3600 * 1000;
                return 0;
        }
        return parse_duration_ms(s, ret_ms);
}

int prune_records(struct store *s, uint64_t cutoff_ms, uint64_t *ret_n)
{
        return store_sandbox_prune(s, cutoff_ms, ret_n);
}

/* The review state's "state", read without following links and bounded:
 * the directory is the host's, but its files were made from the agent's
 * work. */
static bool reviewed(int dir, const char *id)
{
        _cleanup_close_ int idfd = openat(dir, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (idfd < 0)
                return false;
        _cleanup_close_ int fd = openat(idfd, "meta.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return false;
        char buf[65536];
        size_t len = 0;
        for (;;) {
                ssize_t k = read(fd, buf + len, sizeof(buf) - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return false;
                if (k == 0)
                        break;
                len += (size_t)k;
                if (len == sizeof(buf))
                        return false; /* no meta.json is that long */
        }
        json_error_t jerr;
        json_t *o = json_loadb(buf, len, 0, &jerr);
        const char *st = json_string_value(json_object_get(o, "state"));
        bool done = st && (STREQ(st, "accepted") || STREQ(st, "discarded"));
        json_decref(o);
        return done;
}

int prune_review_state(const char *state_root, uint64_t cutoff_ms,
                       bool (*keep)(const char *id, void *ud), void *ud, uint64_t *ret_n)
{
        _cleanup_free_ char *path = xasprintf("%s/sandboxes", state_root);
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        DIR *dir = fdopendir(fd);
        if (!dir) {
                int e = errno;
                close(fd);
                return -e;
        }
        uint64_t n = 0;
        int r = 0;
        struct dirent *de;
        while ((de = readdir(dir))) {
                const char *id = de->d_name;
                if (id[0] == '.' || strlen(id) > 64)
                        continue;
                struct stat st;
                if (fstatat(dirfd(dir), id, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                        continue;
                uint64_t mtime_ms =
                    (uint64_t)st.st_mtim.tv_sec * 1000 + (uint64_t)st.st_mtim.tv_nsec / 1000000;
                if (mtime_ms >= cutoff_ms || (keep && keep(id, ud)) || !reviewed(dirfd(dir), id))
                        continue;
                int k = files_remove_tree(dirfd(dir), id);
                if (k < 0 && r == 0)
                        r = k;
                else if (k >= 0)
                        n++;
        }
        closedir(dir);
        if (ret_n)
                *ret_n = n;
        return r;
}
