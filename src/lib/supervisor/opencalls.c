/* SPDX-License-Identifier: Apache-2.0 */
/* The host tool calls under way, in a file of the supervisor's run
 * directory (opencalls.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "opencalls.h"
#include "util.h"

#define OPEN_CALLS_TMP OPEN_CALLS_FILE ".tmp"

struct open_calls {
        int dirfd;
        char *lazy_dir; /* made at the first call when dirfd < 0 */
        json_t *calls;  /* [{"callId", "tool", "argsDigest", "rule", "startedMs"}] */
};

struct open_calls *open_calls_new(const char *dir)
{
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        struct open_calls *oc = xcalloc(1, sizeof(*oc));
        oc->dirfd = fd;
        oc->calls = json_array();
        return oc;
}

struct open_calls *open_calls_new_lazy(const char *dir)
{
        struct open_calls *oc = xcalloc(1, sizeof(*oc));
        oc->dirfd = -1;
        oc->lazy_dir = xstrdup(dir);
        oc->calls = json_array();
        return oc;
}

int open_calls_remove(const char *dir)
{
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        if ((unlinkat(fd, OPEN_CALLS_FILE, 0) < 0 && errno != ENOENT) ||
            (unlinkat(fd, OPEN_CALLS_TMP, 0) < 0 && errno != ENOENT))
                return -errno;
        return rmdir(dir) < 0 && errno != ENOENT ? -errno : 0;
}

struct open_calls *open_calls_free(struct open_calls *oc)
{
        if (!oc)
                return NULL;
        if (oc->dirfd >= 0)
                close(oc->dirfd);
        free(oc->lazy_dir);
        json_decref(oc->calls);
        free(oc);
        return NULL;
}

/* The file as the calls are now: written beside it, then renamed over it;
 * removed when none is under way. */
static int save(struct open_calls *oc)
{
        if (oc->dirfd < 0) {
                if (json_array_size(oc->calls) == 0)
                        return 0;
                if (!oc->lazy_dir)
                        return -EBADF;
                if (mkdir(oc->lazy_dir, 0700) < 0 && errno != EEXIST)
                        return -errno;
                oc->dirfd = open(oc->lazy_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (oc->dirfd < 0)
                        return -errno;
        }
        if (json_array_size(oc->calls) == 0) {
                if (unlinkat(oc->dirfd, OPEN_CALLS_FILE, 0) < 0 && errno != ENOENT)
                        return -errno;
                return 0;
        }
        _cleanup_free_ char *text = json_dumps(oc->calls, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        size_t len = strlen(text);
        if (len > OPEN_CALLS_FILE_MAX)
                return -E2BIG;
        int fd = openat(oc->dirfd, OPEN_CALLS_TMP,
                        O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        int r = 0;
        for (size_t off = 0; off < len && r == 0;) {
                ssize_t n = write(fd, text + off, len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        r = n < 0 ? -errno : -EIO;
                else
                        off += (size_t)n;
        }
        if (close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && renameat(oc->dirfd, OPEN_CALLS_TMP, oc->dirfd, OPEN_CALLS_FILE) < 0)
                r = -errno;
        if (r < 0)
                (void)unlinkat(oc->dirfd, OPEN_CALLS_TMP, 0);
        return r;
}

int open_calls_start(struct open_calls *oc, uint64_t seq, const char *call_id, const char *tool,
                     const char *args_digest, const char *rule, uint64_t now_ms)
{
        if (seq == 0 || seq > (uint64_t)INT64_MAX)
                return -EINVAL;
        if (json_array_size(oc->calls) >= OPEN_CALLS_MAX)
                return -EMFILE;
        json_t *o = json_pack("{s:I, s:s, s:s, s:s?, s:s?, s:I}", "seq", (json_int_t)seq, "callId",
                              call_id ? call_id : "", "tool", tool ? tool : "", "argsDigest",
                              args_digest, "rule", rule, "startedMs", (json_int_t)now_ms);
        if (!o || json_array_append_new(oc->calls, o) < 0)
                return -ENOMEM;
        int r = save(oc);
        if (r < 0)
                json_array_remove(oc->calls, json_array_size(oc->calls) - 1);
        return r;
}

static json_t *find(struct open_calls *oc, uint64_t seq, size_t *ret_i)
{
        size_t i;
        json_t *o;
        if (seq == 0)
                return NULL;
        json_array_foreach(oc->calls, i, o)
        {
                if ((uint64_t)json_integer_value(json_object_get(o, "seq")) == seq) {
                        *ret_i = i;
                        return o;
                }
        }
        return NULL;
}

void open_calls_ending(struct open_calls *oc, uint64_t seq)
{
        size_t i;
        json_t *o = find(oc, seq, &i);
        if (!o)
                return;
        json_object_set_new(o, "ending", json_true());
        /* A failed rewrite leaves the call as under way: a kill after its
         * line then closes it twice, never not at all. */
        (void)save(oc);
}

void open_calls_end(struct open_calls *oc, uint64_t seq)
{
        size_t i;
        if (!find(oc, seq, &i))
                return;
        json_array_remove(oc->calls, i);
        /* A failed rewrite leaves the call marked as ending: the sweep
         * finds its line on the log and writes no second one. */
        (void)save(oc);
}

/* How far back from the end of the audit log a sweep looks for the line
 * of a call that was ending: the supervisor wrote it just before it died. */
#define OPEN_CALLS_LOG_TAIL (4u * 1024 * 1024)

static json_t *closing(const json_t *o, uint64_t now_ms, const char *by)
{
        const json_t *id = json_object_get(o, "callId");
        const json_t *tool = json_object_get(o, "tool");
        const json_t *digest = json_object_get(o, "argsDigest");
        const json_t *rule = json_object_get(o, "rule");
        const json_t *at = json_object_get(o, "startedMs");
        const json_t *seq = json_object_get(o, "seq");
        if (!json_is_string(id) || !json_is_string(tool) || (digest && !json_is_string(digest)) ||
            (rule && !json_is_string(rule)) || !json_is_integer(at) || json_integer_value(at) < 0 ||
            !json_is_integer(seq) || json_integer_value(seq) <= 0)
                return NULL;
        uint64_t started = (uint64_t)json_integer_value(at);
        return json_pack("{s:O, s:O, s:n, s:O?, s:s, s:O?, s:s, s:I, s:I, s:O, s:s}", "callId", id,
                         "tool", tool, "args", "argsDigest", digest, "decision", "allow", "rule",
                         rule, "errorCode", OPEN_CALLS_DIED_CODE, "durationMs",
                         (json_int_t)(now_ms > started ? now_ms - started : 0), "outputBytes",
                         (json_int_t)0, "callSeq", seq, "closedBy", by);
}

/* Whether the call's own tool.call line made it to the log. */
static bool end_logged(const json_t *o, const char *tail, size_t len, const char *sandbox)
{
        if (!json_is_true(json_object_get(o, "ending")) || !tail || !sandbox)
                return false;
        char field[48];
        snprintf(field, sizeof(field), "\"callSeq\":%" JSON_INTEGER_FORMAT ",",
                 json_integer_value(json_object_get(o, "seq")));
        return audit_tail_has(tail, len, sandbox, "tool.call", field);
}

int open_calls_closing(const char *dir, const char *audit_path, const char *sandbox,
                       uint64_t now_ms, const char *by, json_t **ret)
{
        *ret = NULL;
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return errno == ENOENT ? (*ret = json_array(), 0) : -errno;
        _cleanup_close_ int fd = openat(dfd, OPEN_CALLS_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? (*ret = json_array(), 0) : -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_size > (off_t)OPEN_CALLS_FILE_MAX)
                return -EINVAL;
        json_error_t jerr;
        json_t *calls = json_loadfd(fd, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_array(calls) || json_array_size(calls) > OPEN_CALLS_MAX) {
                json_decref(calls);
                return -EINVAL;
        }
        json_t *out = json_array();
        size_t i, tail_len = 0;
        json_t *o;
        _cleanup_free_ char *tail = NULL;
        bool tail_read = false;
        json_array_foreach(calls, i, o)
        {
                json_t *f = closing(o, now_ms, by);
                if (!f) {
                        json_decref(calls);
                        json_decref(out);
                        return -EINVAL;
                }
                if (json_is_true(json_object_get(o, "ending")) && audit_path && !tail_read) {
                        tail = audit_read_tail(audit_path, OPEN_CALLS_LOG_TAIL, &tail_len);
                        tail_read = true;
                }
                if (end_logged(o, tail, tail_len, sandbox))
                        json_decref(f);
                else
                        json_array_append_new(out, f);
        }
        json_decref(calls);
        *ret = out;
        return 0;
}
