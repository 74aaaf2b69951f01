/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/* What connect-handed.c (the records, the socket table, failing closed)
 * and connect-scan.c (the sandbox's fd tables) share. Nothing else
 * includes it. */

#include <linux/inet_diag.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "connect-handed.h"
#include "connect-take.h"

struct cn_handed {
        dev_t dev;
        ino_t ino;
        bool seen, refused, cut, alive;
        bool pending;          /* refused, open, unreached: its holders are being killed */
        const char *how;       /* the reason recorded for a cut */
        uint16_t lport, rport; /* its ports (network order), to know it there */
        uint64_t cookie;       /* SO_COOKIE, never given again; 0: not known */
        int family;            /* from the socket table, to abort it there */
        struct inet_diag_sockid id;
        struct netgate_verdict v;
};

struct cn_handed_set {
        struct cn_handed *h;
        size_t n;
        size_t *by_ino; /* indices of h sorted by inode, for one run */
        bool have_ns;   /* the sandbox's pid namespace, read from its pid 1 */
        dev_t nsdev;
        ino_t nsino;
        int nl;             /* the socket table (connect-sockdiag.h), opened ahead */
        long long sock_mnt; /* the socket file system's mount id; -1: not known */
        /* For one run: whether the socket table was read (else the scan
         * decides what is closed), and whether the scan read everything. */
        bool table, full;
        /* How far up a process's parents are followed to find pid 1
         * (CN_DESCENT_MAX; smaller in tests). */
        unsigned descent_max;
        /* The wait for the kills to take the refused sockets along runs on
         * the caller's timers (cn_handed_wait_step) rather than in a sleep
         * here (async); while it runs (waiting) no recheck starts. */
        bool async, waiting;
        pid_t wait_pid1;  /* ended when the sockets outlive the wait */
        unsigned wait_ms; /* the delay before the step under way */
};

#define CN_DESCENT_MAX 4096

#define HIDDEN_MAX 256 /* sandbox processes one scan could not read, or kills */

enum cn_pass {
        CN_PASS_FIND,   /* the refused sockets: taken and shut down */
        CN_PASS_QUEUED, /* the holders of Unix sockets with something queued */
};

struct cn_scan {
        struct cn_handed_set *s;
        pid_t pid1; /* the sandbox's pid 1, or 0: none known */
        enum cn_pass pass;
        size_t tasks, fds;
        bool truncated;
        pid_t hidden[HIDDEN_MAX]; /* in the sandbox, their fds unreadable */
        size_t n_hidden;
        pid_t victims[HIDDEN_MAX]; /* CN_PASS_QUEUED: could receive one in transit */
        size_t n_victims;
        bool unsure; /* CN_PASS_QUEUED: the process read now may be the sandbox's */
};

/* The first position in by_ino whose record has inode `ino`, or s->n. */
static inline size_t first_with(const struct cn_handed_set *s, unsigned long long ino)
{
        size_t lo = 0, hi = s->n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if ((unsigned long long)s->h[s->by_ino[mid]].ino < ino)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo < s->n && (unsigned long long)s->h[s->by_ino[lo]].ino == ino ? lo : s->n;
}

/* The pid namespace of `pid` (device and inode), or -errno. */
int cn_pidns_of(pid_t pid, dev_t *dev, ino_t *ino);

/* The pid namespace on the way up from that of `pid` whose parent is this
 * process's own (device and inode), or -errno (-EPERM: `pid`'s is not
 * below this process's). */
int cn_pidns_below_own(pid_t pid, dev_t *dev, ino_t *ino);

/* Whether `pid` is in the pid namespace (dev, ino) or one nested in it
 * (its parents, NS_GET_PARENT): 1 or 0, or -errno when it cannot be read. */
int cn_pidns_within(pid_t pid, dev_t dev, ino_t ino);

/* One scan (sc->pass) of every process of the pid namespace (nsdev,
 * nsino) and those nested in it: 0, or -errno when /proc cannot be read (sc->truncated: not all
 * of it was). */
int cn_scan(struct cn_scan *sc, dev_t nsdev, ino_t nsino);

/* Kill a process that descends from pid1 (checked on its pidfd): 1; 0
 * when it is gone; -1 when it could not be killed (its descent cannot be
 * told, or the signal failed). */
int cn_kill_in_sandbox(const struct cn_handed_set *s, pid_t pid, pid_t pid1);
