/* SPDX-License-Identifier: Apache-2.0 */
/* Write protection (lib/boundary/protect.c) mounts the names on its list
 * read-only where they exist at the top of a tree at start; a name that did
 * not exist, or one deeper in the tree, can be made or changed by the
 * agent, and the host's shells, editors and agent tools run or read it on
 * open (direnv reads sub/dir/.envrc when the user cd's there, an editor
 * opened on sub/ runs sub/.vscode/tasks.json). At the end of the run, each
 * such name at any depth of a read-write tree that is not exactly what the
 * host had there is moved aside, as gitguard moves git's, audited
 * (protect.neutralised) and reported. This does not depend on
 * workspace.protectGit, which is about git's metadata only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gitguard-internal.h"
#include "mounts.h"
#include "util.h"

#define REASON                                                                                     \
        "made or changed during the run under a name the host's shells, editors or agent "         \
        "tools run or read on open (write protection covers only what exists at start)"

/* The first component of entry e ("A" of "A/B"), its length. */
static size_t first_len(const char *e)
{
        return strcspn(e, "/");
}

bool gitguard_protect_match(const char *name)
{
        if (name[0] != '.')
                return false; /* every name on the list is a dot name */
        for (size_t i = 0; i < mounts_n_write_protect; i++) {
                const char *e = mounts_write_protect[i];
                size_t k = first_len(e);
                if (strlen(name) == k && strncasecmp(name, e, k) == 0)
                        return true;
        }
        return false;
}

static int cmp_pdir(const void *a, const void *b)
{
        return strcmp(((const struct pdir *)a)->rel, ((const struct pdir *)b)->rel);
}

void gitguard_pdirs_sort(struct root_start *rs)
{
        if (rs->n_pdirs > 1)
                qsort(rs->pdirs, rs->n_pdirs, sizeof(*rs->pdirs), cmp_pdir);
}

/* pdirs is sorted once noted (gitguard_pdirs_sort). */
static bool known_dir(const struct root_start *rs, const char *rel, const struct stat *st)
{
        size_t lo = sorted_first_at_or_after(rs->pdirs, rs->n_pdirs, sizeof(*rs->pdirs),
                                             offsetof(typeof(*rs->pdirs), rel), rel);
        for (size_t i = lo; i < rs->n_pdirs && STREQ(rs->pdirs[i].rel, rel); i++)
                if (rs->pdirs[i].dev == st->st_dev && rs->pdirs[i].ino == st->st_ino)
                        return true;
        return false;
}

/* What a protected directory holds, each entry compared with what was there
 * at the start (noted then): a file the run added or changed is moved aside
 * on its own, and the host's directory stays. Past PROTECT_DEPTH_MAX a
 * directory is moved aside whole (its contents were not noted). */
static void contents(struct guard_run *g, int fd, const char *rel, int depth)
{
        DIR *d = gitguard_dir_of(fd);
        if (!d)
                return;
        const char *n;
        while ((n = gitguard_next_entry(g, d, rel))) {
                _cleanup_free_ char *r = gitguard_join(rel, n);
                struct stat st;
                if (fstatat(fd, n, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (S_ISDIR(st.st_mode) && depth < PROTECT_DEPTH_MAX) {
                        _cleanup_close_ int sfd = gitguard_open_dir(fd, n);
                        if (sfd >= 0) {
                                contents(g, sfd, r, depth + 1);
                                continue;
                        }
                }
                gitguard_quarantine(g, fd, n, r, REASON);
        }
        closedir(d);
}

/* dfd/name (rel beneath the tree): a directory is the host's when it is the
 * one there at the start, and then each thing in it is compared; anything
 * else is compared by its bytes. */
static void check(struct guard_run *g, int dfd, const char *name, const char *rel)
{
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return;
        if (S_ISDIR(st.st_mode)) {
                struct root_start *rs = g->start;
                if (g->record && rs->n_pdirs < PDIRS_MAX) {
                        rs->pdirs = xrealloc(rs->pdirs, rs->n_pdirs + 1, sizeof(*rs->pdirs));
                        rs->pdirs[rs->n_pdirs++] =
                            (struct pdir){.rel = xstrdup(rel), .dev = st.st_dev, .ino = st.st_ino};
                }
                if (g->record || known_dir(g->root, rel, &st)) {
                        _cleanup_close_ int sfd = gitguard_open_dir(dfd, name);
                        if (sfd >= 0)
                                contents(g, sfd, rel, 0);
                        return;
                }
        }
        gitguard_quarantine(g, dfd, name, rel, REASON);
}

void gitguard_protect_entry(struct guard_run *g, int dfd, const char *name, const char *dir_rel)
{
        const char *saved = g->event;
        g->event = "protect.neutralised";
        _cleanup_free_ char *rel = gitguard_join(dir_rel, name);
        size_t k = strlen(name);
        bool whole = false, parts = false;
        for (size_t i = 0; i < mounts_n_write_protect; i++) {
                const char *e = mounts_write_protect[i];
                if (first_len(e) != k || strncasecmp(e, name, k) != 0)
                        continue;
                if (e[k] == '/')
                        parts = true;
                else
                        whole = true;
        }
        struct stat st;
        if (whole || !parts) {
                check(g, dfd, name, rel);
        } else if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode)) {
                /* "A/B": A itself when it is no directory (a link the agent
                 * made leads the host's tool elsewhere), else each B in it. */
                gitguard_quarantine(g, dfd, name, rel, REASON);
        } else {
                _cleanup_close_ int afd = gitguard_open_dir(dfd, name);
                DIR *d = afd >= 0 ? gitguard_dir_of(afd) : NULL;
                struct dirent *de;
                while (d && (de = readdir(d))) {
                        const char *n = de->d_name;
                        if (STREQ(n, ".") || STREQ(n, "..") || !gitguard_count_entry(g, rel))
                                continue;
                        for (size_t i = 0; i < mounts_n_write_protect; i++) {
                                const char *e = mounts_write_protect[i];
                                if (first_len(e) == k && strncasecmp(e, name, k) == 0 &&
                                    e[k] == '/' && strcasecmp(e + k + 1, n) == 0) {
                                        _cleanup_free_ char *r = gitguard_join(rel, n);
                                        check(g, afd, n, r);
                                        break;
                                }
                        }
                }
                if (d)
                        closedir(d);
        }
        g->event = saved;
}

void gitguard_root_free(struct root_start *rs)
{
        for (size_t k = 0; k < rs->n_known; k++)
                free(rs->known[k].rel);
        free(rs->known);
        for (size_t k = 0; k < rs->n_pdirs; k++)
                free(rs->pdirs[k].rel);
        free(rs->pdirs);
        free(rs->path);
        free(rs->pointer);
}
