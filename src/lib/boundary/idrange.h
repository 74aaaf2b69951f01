/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "policy.h"

/* The host ids of a sandbox with more than one user inside (policy
 * "users": N). Inside uid (and gid) k, for k from 0 to N-1, is host id
 * base + k, except the sandbox's own user, which stays what it always is
 * (the caller, or SPAWN_ROOT_HOST_UID for root). So two users inside are two
 * distinct unprivileged host ids, and no other sandbox and no host account
 * holds either:
 *
 *   - for a root caller the ids come from a range Airlock reserves,
 *     [IDRANGE_BASE, IDRANGE_END), skipping every id /etc/passwd, /etc/group,
 *     /etc/subuid or /etc/subgid names; each sandbox takes its own blocks,
 *     recorded under <state root>/idranges;
 *   - for any other caller they come from its own /etc/subuid and
 *     /etc/subgid range, written by newuidmap/newgidmap, each sandbox of
 *     the caller taking its own blocks of it; without a range (or without
 *     those programs) the sandbox is refused with the reason.
 *
 * A record is a file named for its first block, holding "BLOCKS SHARED",
 * locked (flock) by the supervisor for its life; a lock nobody holds is a
 * sandbox that ended. Its blocks are free again, except a root caller's
 * whose sandbox had a writable host tree (SHARED = 1): files its users made
 * there may still be writable by those ids, so the record stays and its ids
 * are never handed out again. docs/internals/idrange.md. */

#define IDRANGE_BASE  0x70000000u
#define IDRANGE_END   0x7ffe0000u
#define IDRANGE_BLOCK 1024u

struct idrange {
        uint32_t users; /* 0: no range (one user, the plain map) */
        uid_t uid_base;
        gid_t gid_base;
        bool helper; /* written by newuidmap/newgidmap (not root) */
        int lock;    /* the record's fd, or -1 */
        int dir;     /* the records' directory, or -1 */
        char name[16];
};

#define IDRANGE_INIT                                                                               \
        {                                                                                          \
                .lock = -1, .dir = -1                                                              \
        }

/* Reserve the ids for a sandbox of policy `p` (nothing when p->users is 0).
 * It is SHARED when its other users could leave files on a host tree that
 * outlives it: an overlay workspace, a writable volume, or `plain_writable`,
 * a read-write tree mounted without an idmapping of the whole tree (one
 * that is idmapped to the sandbox's user lets no other user create a file:
 * EOVERFLOW). */
int idrange_acquire(const struct policy *p, bool plain_writable, struct idrange *ret,
                    struct al_error *err);
/* The sandbox started: its record stays locked for the life of this
 * process (a killed supervisor's lock goes with its file table). */
void idrange_keep(struct idrange *r);
/* A read-write host tree is about to be mounted into the running sandbox
 * of this process: its other users could leave files there, so a root
 * caller's kept records are made retired (SHARED 1, synced) first. 0 when
 * nothing is kept or the caller is not root. */
int idrange_retire_kept(void);

/* Write pid's uid and gid maps: the range, and main_uid/main_gid inside on
 * host_uid/host_gid. setgroups is denied where the writer is root (the
 * helpers decide it for themselves: they allow it with a subordinate range,
 * and no process inside holds the capability to call it). */
int idrange_write_maps(const struct idrange *r, pid_t pid, uid_t main_uid, uid_t host_uid,
                       gid_t main_gid, gid_t host_gid, struct al_error *err);

/* Whether /etc/nsswitch.conf's text `nsswitch` takes passwd and group
 * only from sources whose ids Airlock reads itself ("files", "systemd"):
 * false when another source (sss, ldap, nis, compat...) may name ids no
 * file holds. */
bool idrange_nss_local(const char *nsswitch);
/* Whether the name service knows an account or group numbered in
 * [first, first+n) (getpwuid_r/getgrgid_r, so LDAP and sssd count); a
 * failed lookup counts as known. */
bool idrange_ids_named(uint32_t first, uint32_t n);

/* NULL when a process of a sandbox of policy `p` may run as inside uid
 * `uid` (-1: its own), else why not, in `buf`. */
const char *idrange_check_uid(const struct policy *p, long uid, char *buf, size_t len);

/* Forget a reservation made for a sandbox that did not start. */
void idrange_release(struct idrange *r);

/* Parse one /etc/subuid-style file's text: the first range of `user` (or
 * of its numeric `uid`). -ENOENT when there is none. */
int idrange_parse_subid(const char *text, const char *user, uid_t uid, uint32_t *ret_start,
                        uint32_t *ret_count);
