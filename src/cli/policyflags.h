/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

/* The policy flags `airlock run` and `airlock agent` share: each shapes the
 * sandbox's struct policy, with one message and one meaning for both. A
 * command puts POLICYFLAGS_OPTIONS (and POLICYFLAGS_NET_OPTION) in its
 * getopt table and hands every option policyflags_is to policyflags_apply. */

struct policy;

enum {
        PF_OPT_FIRST = 1024,
        PF_OPT_RO = PF_OPT_FIRST,
        PF_OPT_RW,
        PF_OPT_DENY_READ,
        PF_OPT_READ,
        PF_OPT_MEMORY,
        PF_OPT_PIDS,
        PF_OPT_CPUS,
        PF_OPT_IO_READ_BPS,
        PF_OPT_IO_WRITE_BPS,
        PF_OPT_IO_READ_IOPS,
        PF_OPT_IO_WRITE_IOPS,
        PF_OPT_CLASS,
        PF_OPT_ENV,
        PF_OPT_UID,
        PF_OPT_NET,
        PF_OPT_ALLOW,
        PF_OPT_DENY,
        PF_OPT_ALLOW_PRIVATE,
        PF_OPT_HOST,
        PF_OPT_TOOL,
        PF_OPT_TOOLS,
        PF_OPT_ALLOW_BROAD,
        PF_OPT_HOME,
        PF_OPT_VOLUME,
        PF_OPT_USERS,
        PF_OPT_LAST,
};

/* clang-format off */
#define POLICYFLAGS_OPTIONS \
        {"ro", required_argument, NULL, PF_OPT_RO}, \
        {"rw", required_argument, NULL, PF_OPT_RW}, \
        {"deny-read", required_argument, NULL, PF_OPT_DENY_READ}, \
        {"read", required_argument, NULL, PF_OPT_READ}, \
        {"memory", required_argument, NULL, PF_OPT_MEMORY}, \
        {"pids", required_argument, NULL, PF_OPT_PIDS}, \
        {"cpus", required_argument, NULL, PF_OPT_CPUS}, \
        {"io-read-bps", required_argument, NULL, PF_OPT_IO_READ_BPS}, \
        {"io-write-bps", required_argument, NULL, PF_OPT_IO_WRITE_BPS}, \
        {"io-read-iops", required_argument, NULL, PF_OPT_IO_READ_IOPS}, \
        {"io-write-iops", required_argument, NULL, PF_OPT_IO_WRITE_IOPS}, \
        {"class", required_argument, NULL, PF_OPT_CLASS}, \
        {"env", required_argument, NULL, PF_OPT_ENV}, \
        {"uid", required_argument, NULL, PF_OPT_UID}, \
        {"allow", required_argument, NULL, PF_OPT_ALLOW}, \
        {"deny", required_argument, NULL, PF_OPT_DENY}, \
        {"allow-private", required_argument, NULL, PF_OPT_ALLOW_PRIVATE}, \
        {"host", required_argument, NULL, PF_OPT_HOST}, \
        {"tool", required_argument, NULL, PF_OPT_TOOL}, \
        {"tools", required_argument, NULL, PF_OPT_TOOLS}, \
        {"allow-broad-workspace", no_argument, NULL, PF_OPT_ALLOW_BROAD}, \
        {"home", required_argument, NULL, PF_OPT_HOME}, \
        {"volume", required_argument, NULL, PF_OPT_VOLUME}, \
        {"users", required_argument, NULL, PF_OPT_USERS}
/* --net, apart: airlock agent's model is called through a route of the
 * sandbox's network gate, so the agent leaves it out. */
#define POLICYFLAGS_NET_OPTION {"net", required_argument, NULL, PF_OPT_NET}
/* clang-format on */

/* What a flag leaves for after all flags are read. */
struct policyflags {
        const char *home_volume; /* --home NAME: placed once --uid is known */
};

static inline bool policyflags_is(int c)
{
        return c >= PF_OPT_FIRST && c < PF_OPT_LAST;
}

/* One policy flag c (policyflags_is) with its value arg into p; relative
 * mount sources are taken from cwd. < 0 with msg (or, when msg is left
 * empty, err) saying what was wrong. */
int policyflags_apply(struct policy *p, struct policyflags *pf, int c, const char *arg,
                      const char *cwd, char *msg, size_t msglen, struct al_error *err);

/* After every flag: what depends on more than one (--home on --uid). */
void policyflags_finish(struct policy *p, const struct policyflags *pf);
