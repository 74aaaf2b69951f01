/* SPDX-License-Identifier: Apache-2.0 */
/* review_start_ns(): a host change made after the stamp has a later change
 * time, though file times come from the coarse clock (a change within the
 * same tick as a fine-clock stamp looked older than the start, and accept
 * overwrote it without a conflict). */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "review.h"
#include "util.h"

static uint64_t ns_of(const struct timespec *ts)
{
        return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

Test(review_start, a_change_made_after_the_stamp_is_later)
{
        for (int i = 0; i < 20; i++) {
                char path[] = "/tmp/airlock-review-start-XXXXXX";
                int fd = mkstemp(path);
                cr_assert_geq(fd, 0);
                uint64_t at = review_start_ns();
                cr_assert_eq(write(fd, "x", 1), 1);
                struct stat st;
                cr_assert_eq(fstat(fd, &st), 0);
                unlink(path);
                close(fd);
                cr_assert_gt(ns_of(&st.st_ctim), at,
                             "round %d: a change after the start looks older than it (%lld.%09ld <= %llu)",
                             i, (long long)st.st_ctim.tv_sec, st.st_ctim.tv_nsec,
                             (unsigned long long)at);
        }
}

Test(review_start, the_stamp_is_not_in_the_future)
{
        uint64_t at = review_start_ns();
        cr_assert_leq(at, now_realtime_us() * 1000 + 1000);
}
