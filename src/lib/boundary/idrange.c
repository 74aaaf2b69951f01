/* SPDX-License-Identifier: Apache-2.0 */
/* Per-sandbox ranges of host ids for sandboxes with several users inside
 * (idrange.h, docs/internals/idrange.md). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child.h"
#include "idrange.h"
#include "paths.h"
#include "util.h"

#define RECORD_MAX  64
#define SUBID_MAX   (1 << 20)
#define ROOT_BLOCKS ((IDRANGE_END - IDRANGE_BASE) / IDRANGE_BLOCK)
#define NEWUIDMAP   "/usr/bin/newuidmap"
#define NEWGIDMAP   "/usr/bin/newgidmap"

static int parse_u32(const char *s, size_t len, uint32_t *ret)
{
        char buf[16];
        uint64_t v;
        if (len == 0 || len >= sizeof(buf))
                return -EINVAL;
        memcpy(buf, s, len);
        buf[len] = '\0';
        if (safe_atou64(buf, &v) < 0 || v > UINT32_MAX)
                return -EINVAL;
        *ret = (uint32_t)v;
        return 0;
}

int idrange_parse_subid(const char *text, const char *user, uid_t uid, uint32_t *ret_start,
                        uint32_t *ret_count)
{
        char num[16];
        snprintf(num, sizeof(num), "%u", (unsigned)uid);
        for (const char *line = text; line && *line;) {
                const char *end = strchr(line, '\n');
                size_t len = end ? (size_t)(end - line) : strlen(line);
                const char *c1 = memchr(line, ':', len);
                const char *c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
                if (c1 && c2 && line[0] != '#') {
                        size_t nlen = (size_t)(c1 - line);
                        bool me = (user && strlen(user) == nlen && memcmp(line, user, nlen) == 0) ||
                                  (strlen(num) == nlen && memcmp(line, num, nlen) == 0);
                        uint32_t start, count;
                        if (me && parse_u32(c1 + 1, (size_t)(c2 - c1 - 1), &start) == 0 &&
                            parse_u32(c2 + 1, len - (size_t)(c2 + 1 - line), &count) == 0 &&
                            count > 0 && (uint64_t)start + count <= UINT32_MAX) {
                                *ret_start = start;
                                *ret_count = count;
                                return 0;
                        }
                }
                line = end ? end + 1 : NULL;
        }
        return -ENOENT;
}

/* Mark blocks [first, first+n) of `used` taken, clipped to `total`. */
static void mark(uint8_t *used, uint64_t total, uint64_t first, uint64_t n)
{
        for (uint64_t b = first; b < first + n && b < total; b++)
                used[b / 8] |= (uint8_t)(1u << (b % 8));
}

static bool is_used(const uint8_t *used, uint64_t b)
{
        return used[b / 8] & (1u << (b % 8));
}

/* A root caller's range: every block holding an id some host file names
 * (an account, a group, a subordinate range) is not Airlock's to give. */
static void mark_host_ids(uint8_t *used)
{
        static const char *const files[] = {"/etc/passwd", "/etc/group", "/etc/subuid",
                                            "/etc/subgid"};
        for (size_t f = 0; f < ARRAY_SIZE(files); f++) {
                _cleanup_free_ char *text = NULL;
                if (read_file_at(AT_FDCWD, files[f], SUBID_MAX, &text, NULL) < 0)
                        continue;
                bool sub = f >= 2;
                for (char *line = text; line && *line;) {
                        char *end = strchr(line, '\n');
                        if (end)
                                *end = '\0';
                        /* passwd and group: the id is the third field;
                         * subuid and subgid: start and count are the second
                         * and third. */
                        char *c1 = strchr(line, ':');
                        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                        char *c3 = c2 ? strchr(c2 + 1, ':') : NULL;
                        uint32_t a = 0, n = 1;
                        bool ok = false;
                        if (sub && c1 && c2)
                                ok = parse_u32(c1 + 1, (size_t)(c2 - c1 - 1), &a) == 0 &&
                                     parse_u32(c2 + 1, strlen(c2 + 1), &n) == 0;
                        else if (!sub && c2)
                                ok = parse_u32(c2 + 1, c3 ? (size_t)(c3 - c2 - 1) : strlen(c2 + 1),
                                               &a) == 0;
                        uint64_t lo = a, hi = (uint64_t)a + n;
                        if (ok && hi > IDRANGE_BASE && lo < IDRANGE_END) {
                                if (lo < IDRANGE_BASE)
                                        lo = IDRANGE_BASE;
                                uint64_t first = (lo - IDRANGE_BASE) / IDRANGE_BLOCK;
                                uint64_t last = (hi - 1 - IDRANGE_BASE) / IDRANGE_BLOCK;
                                mark(used, ROOT_BLOCKS, first, last - first + 1);
                        }
                        line = end ? end + 1 : NULL;
                }
        }
}

/* nss-systemd's drop-in records: "UID.user" and "GID.group" name an id
 * (systemd's userdb directories). Its other sources are homed's and dynamic
 * users' ranges (60001-65519), below the reserve. */
static void mark_userdb_ids(uint8_t *used)
{
        static const char *const dirs[] = {"/etc/userdb", "/run/userdb", "/run/host/userdb",
                                           "/usr/local/lib/userdb", "/usr/lib/userdb"};
        for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
                DIR *d = opendir(dirs[i]);
                if (!d)
                        continue;
                struct dirent *de;
                while ((de = readdir(d))) {
                        const char *dot = strrchr(de->d_name, '.');
                        uint32_t id;
                        if (!dot || (strcmp(dot, ".user") != 0 && strcmp(dot, ".group") != 0) ||
                            parse_u32(de->d_name, (size_t)(dot - de->d_name), &id) < 0)
                                continue;
                        if (id >= IDRANGE_BASE && id < IDRANGE_END)
                                mark(used, ROOT_BLOCKS, (id - IDRANGE_BASE) / IDRANGE_BLOCK, 1);
                }
                closedir(d);
        }
}

bool idrange_nss_local(const char *nsswitch)
{
        unsigned seen = 0;
        for (const char *line = nsswitch; line && *line;) {
                const char *end = strchr(line, '\n');
                size_t len = end ? (size_t)(end - line) : strlen(line);
                const char *hash = memchr(line, '#', len);
                if (hash)
                        len = (size_t)(hash - line);
                size_t skip = strspn(line, " \t"), name = skip;
                while (skip < len && line[skip] != ':' && line[skip] != ' ' && line[skip] != '\t')
                        skip++;
                bool ours = (skip - name == 6 && memcmp(line + name, "passwd", 6) == 0) ||
                            (skip - name == 5 && memcmp(line + name, "group", 5) == 0);
                skip += strspn(line + skip, " \t");
                if (ours && skip < len && line[skip] == ':') {
                        seen |= line[name] == 'p' ? 1u : 2u;
                        skip++;
                        /* Each source must be one whose ids were read from
                         * its files; an action ("[NOTFOUND=return]") is no
                         * source. Anything else (sss, ldap, nis, winbind,
                         * compat's +/- entries...) may name any id. */
                        for (size_t i = skip; i < len;) {
                                while (i < len && (line[i] == ' ' || line[i] == '\t'))
                                        i++;
                                size_t w = i;
                                if (i < len && line[i] == '[') {
                                        while (i < len && line[i] != ']')
                                                i++;
                                        i++;
                                        continue;
                                }
                                while (i < len && line[i] != ' ' && line[i] != '\t')
                                        i++;
                                size_t n = i - w;
                                if (n == 0)
                                        continue;
                                if (!((n == 5 && memcmp(line + w, "files", 5) == 0) ||
                                      (n == 7 && memcmp(line + w, "systemd", 7) == 0)))
                                        return false;
                        }
                }
                line = end ? end + 1 : NULL;
        }
        /* A database with no line takes the C library's default, which
         * has named "compat" and "nis": not known to be local. */
        return seen == 3;
}

bool idrange_ids_named(uint32_t first, uint32_t n)
{
        /* Large enough for any sane entry; an entry that does not fit
         * (ERANGE) exists, and any other error is taken as an account too:
         * a range is given only when it is known to be nobody's. */
        _cleanup_free_ char *buf = xcalloc(1, 65536);
        for (uint64_t id = first; id < (uint64_t)first + n; id++) {
                struct passwd pw, *pwp = NULL;
                struct group gr, *grp = NULL;
                int r = getpwuid_r((uid_t)id, &pw, buf, 65536, &pwp);
                if (pwp || (r != 0 && r != ENOENT && r != ESRCH && r != EBADF && r != EPERM))
                        return true;
                r = getgrgid_r((gid_t)id, &gr, buf, 65536, &grp);
                if (grp || (r != 0 && r != ENOENT && r != ESRCH && r != EBADF && r != EPERM))
                        return true;
        }
        return false;
}

/* The caller's subordinate ids: uid and gid starts, and how many blocks
 * both ranges hold. */
static int caller_subids(uint32_t users, uid_t *ret_uid, gid_t *ret_gid, uint64_t *ret_blocks,
                         struct al_error *err)
{
        uid_t me = geteuid();
        char pwbuf[4096];
        struct passwd pw, *pwp = NULL;
        const char *name =
            getpwuid_r(me, &pw, pwbuf, sizeof(pwbuf), &pwp) == 0 && pwp ? pw.pw_name : NULL;
        uint32_t us = 0, uc = 0, gs = 0, gc = 0;
        _cleanup_free_ char *su = NULL, *sg = NULL;
        if (access(NEWUIDMAP, X_OK) < 0 || access(NEWGIDMAP, X_OK) < 0)
                return al_error_set_message(
                    err, EPERM,
                    "a sandbox with \"users\" needs " NEWUIDMAP " and " NEWGIDMAP
                    " (package uidmap) when not started by root: only they may map more than the "
                    "caller's own id; install them or leave \"users\" out");
        if (read_file_at(AT_FDCWD, "/etc/subuid", SUBID_MAX, &su, NULL) < 0 ||
            idrange_parse_subid(su, name, me, &us, &uc) < 0 ||
            read_file_at(AT_FDCWD, "/etc/subgid", SUBID_MAX, &sg, NULL) < 0 ||
            idrange_parse_subid(sg, name, me, &gs, &gc) < 0)
                return al_error_set_message(
                    err, EPERM,
                    "a sandbox with \"users\" needs subordinate ids, and %s (uid %u) has no range "
                    "in /etc/subuid and /etc/subgid; ask the administrator for one (usermod "
                    "--add-subuids FIRST-LAST --add-subgids FIRST-LAST %s) or leave \"users\" out",
                    name ? name : "this user", (unsigned)me, name ? name : "USER");
        uint32_t count = uc < gc ? uc : gc;
        if (count < users)
                return al_error_set_message(
                    err, ERANGE,
                    "\"users\": %u needs %u subordinate ids, and /etc/subuid and /etc/subgid give "
                    "%s %u; ask for \"users\" of at most %u",
                    (unsigned)users, (unsigned)users, name ? name : "this user", (unsigned)count,
                    (unsigned)(count / IDRANGE_BLOCK * IDRANGE_BLOCK));
        *ret_uid = us;
        *ret_gid = gs;
        *ret_blocks = count / IDRANGE_BLOCK;
        return 0;
}

/* Read the records in `dir`: mark the blocks of live and retired ones,
 * remove those of sandboxes that ended (unless retired). */
static void scan_records(int dir, uint8_t *used, uint64_t total)
{
        DIR *d = fdopendir(fcntl(dir, F_DUPFD_CLOEXEC, 3));
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                uint32_t first;
                if (de->d_name[0] == '.' || parse_u32(de->d_name, strlen(de->d_name), &first) < 0)
                        continue;
                _cleanup_close_ int fd = openat(dir, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        continue;
                char buf[RECORD_MAX] = {0};
                ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
                uint32_t blocks = 0, shared = 1;
                char *sp = n > 0 ? strchr(buf, ' ') : NULL;
                bool ok = sp && parse_u32(buf, (size_t)(sp - buf), &blocks) == 0 &&
                          parse_u32(sp + 1, strcspn(sp + 1, "\n"), &shared) == 0 && blocks > 0;
                bool live = flock(fd, LOCK_EX | LOCK_NB) < 0;
                if (!live && ok && shared == 0) {
                        /* Its sandbox ended: the ids are free again. */
                        unlinkat(dir, de->d_name, 0);
                        continue;
                }
                /* Live, retired, or unreadable (kept: never guess a range free). */
                mark(used, total, first, ok ? blocks : 1);
                if (!live)
                        flock(fd, LOCK_UN);
        }
        closedir(d);
}

static bool shares_host_tree(const struct policy *p, bool plain_writable)
{
        if (plain_writable)
                return true;
        /* An overlay's upper layer is kept on the host for review. */
        if (p->workspace && p->workspace_mode == POLICY_WORKSPACE_OVERLAY)
                return true;
        /* A volume's file system is mounted as it is: its files keep the
         * host ids that made them. */
        for (size_t i = 0; i < p->n_mounts; i++)
                if (!p->mounts[i].readonly && p->mounts[i].volume)
                        return true;
        return false;
}

int idrange_acquire(const struct policy *p, bool plain_writable, struct idrange *ret,
                    struct al_error *err)
{
        bool shared = shares_host_tree(p, plain_writable);
        *ret = (struct idrange)IDRANGE_INIT;
        if (p->users == 0)
                return 0;
        bool root = geteuid() == 0;
        uint64_t total = ROOT_BLOCKS;
        uid_t ubase = IDRANGE_BASE;
        gid_t gbase = IDRANGE_BASE;
        int r;
        if (!root) {
                r = caller_subids(p->users, &ubase, &gbase, &total, err);
                if (r < 0)
                        return r;
        }
        uint64_t need = (p->users + IDRANGE_BLOCK - 1) / IDRANGE_BLOCK;

        _cleanup_free_ char *state = paths_state_root(geteuid(), getenv("HOME"));
        if (!state)
                return al_error_set_message(err, ENOENT,
                                            "no state directory for id ranges: set $HOME");
        _cleanup_free_ char *path = xasprintf("%s/idranges", state);
        r = mkdir_p(path, 0755, 0700);
        if (r < 0)
                return al_error_set(err, r, "creating %s", path);
        _cleanup_close_ int dir = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0)
                return al_error_set(err, errno, "%s", path);
        /* One allocation at a time: the directory's own lock. */
        _cleanup_close_ int biglock =
            openat(dir, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (biglock < 0 || flock(biglock, LOCK_EX) < 0)
                return al_error_set(err, errno, "locking %s", path);

        _cleanup_free_ uint8_t *used = xcalloc(total / 8 + 1, 1);
        /* Accounts the name service knows from elsewhere (LDAP, sssd, NIS)
         * are in no file: where such a source is configured, each id of a
         * candidate block is asked for by number (only the blocks looked
         * at, a lookup costs a round trip). */
        bool ask_nss = false;
        if (root) {
                mark_host_ids(used);
                mark_userdb_ids(used);
                _cleanup_free_ char *nss = NULL;
                int rn = read_file_at(AT_FDCWD, "/etc/nsswitch.conf", SUBID_MAX, &nss, NULL);
                ask_nss = rn < 0 || !idrange_nss_local(nss);
        }
        scan_records(dir, used, total);
        uint64_t first = 0, run = 0;
        for (uint64_t b = 0; b < total && run < need; b++) {
                if (!is_used(used, b) && ask_nss &&
                    idrange_ids_named(IDRANGE_BASE + (uint32_t)(b * IDRANGE_BLOCK), IDRANGE_BLOCK))
                        mark(used, total, b, 1);
                if (is_used(used, b)) {
                        run = 0;
                        continue;
                }
                if (run++ == 0)
                        first = b;
        }
        if (run < need)
                return al_error_set_message(
                    err, ENOSPC,
                    "no free range of %u host ids for \"users\" (%s are taken by running "
                    "sandboxes%s); ask for fewer users or end a sandbox",
                    (unsigned)p->users, root ? "the ids Airlock reserves" : "the subordinate ids",
                    root ? " and by ended ones whose files may remain on shared trees" : "");
        char name[16];
        snprintf(name, sizeof(name), "%" PRIu64, first);
        _cleanup_close_ int lk =
            openat(dir, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (lk < 0 || flock(lk, LOCK_EX | LOCK_NB) < 0)
                return al_error_set(err, errno, "recording the id range %s/%s", path, name);
        char rec[RECORD_MAX];
        /* Only a root caller's ids are Airlock's to retire: a user's own
         * subordinate ids go back to it whatever its sandboxes left. */
        snprintf(rec, sizeof(rec), "%" PRIu64 " %d\n", need, root && shared ? 1 : 0);
        r = write_full(lk, rec, strlen(rec));
        /* A record that may be retired must survive a crash (files of its
         * ids may stay); one that is freed at the end needs no sync. */
        if (r < 0 || (root && shared && (fsync(lk) < 0 || fsync(dir) < 0))) {
                unlinkat(dir, name, 0);
                return al_error_set(err, r < 0 ? r : -errno, "recording the id range %s/%s", path,
                                    name);
        }
        ret->users = p->users;
        ret->uid_base = ubase + (uid_t)(first * IDRANGE_BLOCK);
        ret->gid_base = gbase + (gid_t)(first * IDRANGE_BLOCK);
        ret->helper = !root;
        ret->lock = TAKE_FD(lk);
        ret->dir = TAKE_FD(dir);
        snprintf(ret->name, sizeof(ret->name), "%s", name);
        return 0;
}

const char *idrange_check_uid(const struct policy *p, long uid, char *buf, size_t len)
{
        if (uid == -1 || uid == (long)p->uid)
                return NULL;
        if (uid >= 0 && uid < (long)p->users)
                return NULL;
        if (p->users)
                snprintf(buf, len,
                         "must be a user of this sandbox: 0 to %u (its policy's \"users\": %u)",
                         (unsigned)p->users - 1, (unsigned)p->users);
        else
                snprintf(buf, len,
                         "must be %u, the sandbox's one user; for other users create the sandbox "
                         "with \"users\" in its policy (e.g. \"users\": 1024 maps uids 0 to 1023)",
                         (unsigned)p->uid);
        return buf;
}

/* The records this process holds for its sandboxes. */
static int kept[64];
static size_t n_kept;
static int kept_dir = -1; /* the records' directory (root: one state root) */

void idrange_keep(struct idrange *r)
{
        if (r->lock >= 0 && n_kept < ARRAY_SIZE(kept))
                kept[n_kept++] = TAKE_FD(r->lock);
        /* Past 64 sandboxes in one process the fd simply stays open. */
        r->lock = -1;
        if (r->dir >= 0 && kept_dir < 0)
                kept_dir = TAKE_FD(r->dir);
        if (r->dir >= 0)
                close(r->dir);
        r->dir = -1;
}

int idrange_retire_kept(void)
{
        if (geteuid() != 0 || n_kept == 0)
                return 0;
        for (size_t i = 0; i < n_kept; i++) {
                char buf[RECORD_MAX] = {0};
                ssize_t n = pread(kept[i], buf, sizeof(buf) - 1, 0);
                if (n < 0)
                        return -errno;
                /* "BLOCKS SHARED\n": SHARED, one digit, becomes 1 in place
                 * (one byte written: a crash leaves the old or the new). */
                char *sp = strchr(buf, ' ');
                uint32_t blocks = 0;
                if (!sp || parse_u32(buf, (size_t)(sp - buf), &blocks) < 0 || blocks == 0 ||
                    (sp[1] != '0' && sp[1] != '1'))
                        return -EBADMSG;
                if (sp[1] == '1')
                        continue;
                ssize_t w = pwrite(kept[i], "1", 1, (off_t)(sp + 1 - buf));
                if (w < 0)
                        return -errno;
                if (w != 1)
                        return -EIO;
                if (fsync(kept[i]) < 0)
                        return -errno;
        }
        /* Records to be freed were made without a sync: their names must
         * survive a crash now too. */
        if (kept_dir >= 0 && fsync(kept_dir) < 0)
                return -errno;
        return 0;
}

void idrange_release(struct idrange *r)
{
        if (r->dir >= 0 && r->name[0])
                unlinkat(r->dir, r->name, 0);
        if (r->lock >= 0)
                close(r->lock);
        if (r->dir >= 0)
                close(r->dir);
        *r = (struct idrange)IDRANGE_INIT;
}

/* "IN OUT COUNT" triples: below the main id, the main id, above it. */
static size_t map_lines(uint32_t users, uint32_t main_in, uint32_t main_out, uint32_t base,
                        uint32_t out[3][3])
{
        size_t n = 0;
        if (main_in > 0) {
                out[n][0] = 0, out[n][1] = base, out[n][2] = main_in;
                n++;
        }
        out[n][0] = main_in, out[n][1] = main_out, out[n][2] = 1;
        n++;
        if (main_in + 1 < users) {
                out[n][0] = main_in + 1, out[n][1] = base + main_in + 1;
                out[n][2] = users - main_in - 1;
                n++;
        }
        return n;
}

static int run_helper(const char *prog, pid_t pid, uint32_t lines[3][3], size_t n)
{
        char args[10][16];
        char *argv[12];
        size_t k = 0;
        argv[k++] = (char *)prog;
        snprintf(args[0], sizeof(args[0]), "%d", (int)pid);
        argv[k++] = args[0];
        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < 3; j++) {
                        snprintf(args[1 + i * 3 + j], sizeof(args[0]), "%u", (unsigned)lines[i][j]);
                        argv[k++] = args[1 + i * 3 + j];
                }
        argv[k] = NULL;
        char *const envp[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        struct child_spawn s = {
            .path = prog,
            .argv = argv,
            .envp = envp,
            .fds = {CHILD_FD_NULL, CHILD_FD_NULL, CHILD_FD_NULL},
            .n_fds = 3,
        };
        pid_t child;
        int r = child_spawn(&s, &child, NULL);
        if (r < 0)
                return r;
        int st = child_wait(child);
        if (st < 0)
                return st;
        return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EPERM;
}

static int write_map(pid_t pid, const char *file, uint32_t lines[3][3], size_t n)
{
        char buf[128], path[64];
        size_t len = 0;
        for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%u %u %u\n",
                                        (unsigned)lines[i][0], (unsigned)lines[i][1],
                                        (unsigned)lines[i][2]);
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* A map is taken whole from one write. */
        ssize_t w = write(fd, buf, len);
        return w == (ssize_t)len ? 0 : w < 0 ? -errno : -EIO;
}

int idrange_write_maps(const struct idrange *r, pid_t pid, uid_t main_uid, uid_t host_uid,
                       gid_t main_gid, gid_t host_gid, struct al_error *err)
{
        uint32_t ul[3][3], gl[3][3];
        size_t nu = map_lines(r->users, main_uid, host_uid, r->uid_base, ul);
        size_t ng = map_lines(r->users, main_gid, host_gid, r->gid_base, gl);
        int e;
        if (r->helper) {
                e = run_helper(NEWUIDMAP, pid, ul, nu);
                if (e < 0)
                        return al_error_set(
                            err, e, "%s could not map uids %u-%u onto /etc/subuid's %u-%u",
                            NEWUIDMAP, 0u, (unsigned)r->users - 1, (unsigned)r->uid_base,
                            (unsigned)(r->uid_base + r->users - 1));
                e = run_helper(NEWGIDMAP, pid, gl, ng);
                if (e < 0)
                        return al_error_set(
                            err, e, "%s could not map gids %u-%u onto /etc/subgid's %u-%u",
                            NEWGIDMAP, 0u, (unsigned)r->users - 1, (unsigned)r->gid_base,
                            (unsigned)(r->gid_base + r->users - 1));
                return 0;
        }
        e = write_map(pid, "uid_map", ul, nu);
        if (e < 0)
                return al_error_set(err, e, "writing the sandbox's uid map");
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)pid);
        e = write_file_at(AT_FDCWD, path, "deny");
        if (e < 0 && e != -ENOENT)
                return al_error_set(err, e, "denying setgroups in the sandbox");
        e = write_map(pid, "gid_map", gl, ng);
        if (e < 0)
                return al_error_set(err, e, "writing the sandbox's gid map");
        return 0;
}
