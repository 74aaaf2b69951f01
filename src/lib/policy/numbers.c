/* SPDX-License-Identifier: Apache-2.0 */
/* Numbers in a policy: durations, sizes, counts and cpus as text or JSON,
 * their ranges, and the messages that name what a key takes. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "policy-internal.h"

const char *policy_kind_what(enum value_kind kind, uint64_t min)
{
        switch (kind) {
        case KIND_DURATION:
        case KIND_SECONDS:
                return "a duration in seconds, or a string such as \"30s\" or \"5m\"";
        case KIND_SIZE:
                return "a size in bytes, or a string such as \"512M\"";
        case KIND_CPUS:
                return "a number greater than 0 and at most 1024";
        case KIND_COUNT:
                break;
        }
        return min > 0 ? "a positive integer" : "a non-negative integer";
}

int policy_check_range(struct ctx *c, const char *path, enum value_kind kind, uint64_t v,
                       uint64_t min, uint64_t max)
{
        if (v >= min && v <= max)
                return 0;
        switch (kind) {
        case KIND_CPUS:
                if (v > 0 && v < min)
                        return policy_fail(c,
                                           "\"%s\" must be at least %.2f (the kernel refuses less)",
                                           path, (double)min / 1000.0);
                return policy_fail(c, "\"%s\" must be %s", path, policy_kind_what(kind, min));
        case KIND_COUNT:
                if (v > 0 && v < min)
                        return policy_fail(c,
                                           "\"%s\" must be at least %" PRIu64
                                           " (a sandbox cannot start with less)",
                                           path, min);
                if (v < min)
                        return policy_fail(c, "\"%s\" must be %s", path,
                                           policy_kind_what(kind, min));
                return policy_fail(c, "\"%s\" must be at most %" PRIu64, path, max);
        case KIND_SIZE:
                if (v > 0 && v < min)
                        return policy_fail(c,
                                           "\"%s\" must be at least %" PRIu64
                                           " bytes (a sandbox cannot start with less)",
                                           path, min);
                if (v < min)
                        return policy_fail(c, "\"%s\" must be greater than 0", path);
                break;
        case KIND_DURATION:
        case KIND_SECONDS:
                break;
        }
        return policy_fail(c, "\"%s\" is too large", path);
}

int policy_parse_text(const char *s, enum value_kind kind, uint64_t *ret)
{
        uint64_t v;
        int r;

        switch (kind) {
        case KIND_COUNT:
                return safe_atou64(s, ret);
        case KIND_SIZE:
                return parse_size(s, ret);
        case KIND_CPUS:
                /* A plain decimal; parse_duration_ms() reads exactly that
                 * into thousandths when no unit follows. */
                if (!*s || s[strspn(s, "0123456789.")] != '\0')
                        return -EINVAL;
                return parse_duration_ms(s, ret);
        case KIND_DURATION:
        case KIND_SECONDS:
                r = parse_duration_ms(s, &v);
                if (r < 0)
                        return r;
                if (v == 0 && strpbrk(s, "123456789"))
                        return -EDOM;
                *ret = v;
                return 0;
        }
        return -EINVAL;
}

void policy_limit_store(struct policy *p, const struct limit_desc *d, uint64_t v)
{
        *policy_limit_field(&p->limits, d) =
            d->kind == KIND_SECONDS ? v / 1000 + (v % 1000 != 0) : v;
        p->limits_set |= d->bit;
}
