/* SPDX-License-Identifier: Apache-2.0 */
/* Write protection (lib/boundary/protect.c) mounts the names on its list
 * read-only where they exist at start; a name that did not exist can be
 * made by the agent, and the host's shells, editors and agent tools run or
 * read it on open (an .envrc, .vscode/tasks.json, .claude/settings.json).
 * At the end of the run, each such name at the top of a read-write tree
 * that is not exactly what the host had there is moved aside, as gitguard
 * moves git's, audited (protect.neutralised) and reported. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gitguard-internal.h"
#include "mounts.h"
#include "util.h"

#define REASON                                                                                     \
        "made or changed during the run under a name the host's shells, editors or agent "         \
        "tools run or read on open (write protection covers only what exists at start)"

static bool known_dir(const struct root_start *rs, const char *name, const struct stat *st)
{
        for (size_t i = 0; i < rs->n_pdirs; i++)
                if (STREQ(rs->pdirs[i].name, name) && rs->pdirs[i].dev == st->st_dev &&
                    rs->pdirs[i].ino == st->st_ino)
                        return true;
        return false;
}

/* dfd/name (rel beneath the tree): a directory is the host's when it is the
 * one there at the start (read-only inside, so unchanged); anything else
 * is compared by its bytes. */
static void check(struct guard_run *g, int dfd, const char *name, const char *rel)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return;
        if (S_ISDIR(st.st_mode)) {
                if (g->record) {
                        struct root_start *rs = g->start;
                        if (rs->n_pdirs < PDIRS_MAX)
                                rs->pdirs[rs->n_pdirs++] = (typeof(rs->pdirs[0])){
                                    .name = rel, .dev = st.st_dev, .ino = st.st_ino};
                        return;
                }
                if (known_dir(g->root, rel, &st))
                        return;
        }
        gitguard_quarantine(g, dfd, name, rel, REASON);
}

void gitguard_protect_names(struct guard_run *g, int fd)
{
        const char *saved = g->event;
        g->event = "protect.neutralised";
        for (size_t i = 0; i < mounts_n_write_protect; i++) {
                const char *e = mounts_write_protect[i];
                const char *slash = strchr(e, '/');
                if (!slash) {
                        check(g, fd, e, e);
                        continue;
                }
                /* "A/B": A itself when it is no directory of the host's
                 * (a link the agent made leads the host's tool elsewhere),
                 * else B in it. */
                char a[64];
                snprintf(a, sizeof(a), "%.*s", (int)(slash - e), e);
                struct stat st;
                if (fstatat(fd, a, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (!S_ISDIR(st.st_mode)) {
                        /* Once, however many entries share it. */
                        if (i == 0 ||
                            strncmp(mounts_write_protect[i - 1], e, (size_t)(slash - e + 1)))
                                gitguard_quarantine(g, fd, a, a, REASON);
                        continue;
                }
                int afd = openat(fd, a, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (afd < 0)
                        continue;
                check(g, afd, slash + 1, e);
                close(afd);
        }
        g->event = saved;
}
