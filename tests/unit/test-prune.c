/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prune.h"
#include "store.h"
#include "util.h"

#include "store-fixture.h"

static void setup(void)
{
        store_fixture_open("prune");
}

TestSuite(prune, .init = setup, .fini = teardown);

static void put(const char *id, const char *state, uint64_t ended)
{
        struct store_sandbox r = {.state = (char *)state,
                                  .class_name = "small",
                                  .metadata = "{}",
                                  .policy = "{}",
                                  .created_ms = 1,
                                  .ended_ms = ended};
        snprintf(r.id, sizeof(r.id), "%s", id);
        cr_assert_eq(store_sandbox_put(st, &r), 0);
        struct store_process p = {.pid = 1, .argv = "[]", .state = "exited", .started_ms = 1};
        snprintf(p.sandbox, sizeof(p.sandbox), "%s", id);
        cr_assert_eq(store_process_put(st, &p), 0);
}

Test(prune, retain_durations)
{
        uint64_t ms;
        cr_assert_eq(prune_parse_retain("7d", &ms), 0);
        cr_assert_eq(ms, 7ull * 24 * 3600 * 1000);
        cr_assert_eq(prune_parse_retain("12h", &ms), 0);
        cr_assert_eq(ms, 12ull * 3600 * 1000);
        cr_assert_eq(prune_parse_retain("90", &ms), 0);
        cr_assert_eq(ms, 90000);
        cr_assert_lt(prune_parse_retain("d", &ms), 0);
        cr_assert_lt(prune_parse_retain("soon", &ms), 0);
        cr_assert_lt(prune_parse_retain("99999999999999999999d", &ms), 0);
}

Test(prune, only_ended_records_before_the_cutoff)
{
        put("aaaaaaaaaaaaaaaa", "destroyed", 100);
        put("bbbbbbbbbbbbbbbb", "failed", 200);
        put("cccccccccccccccc", "destroyed", 5000);
        put("dddddddddddddddd", "running", 0);
        uint64_t n = 0;
        cr_assert_eq(prune_records(st, 1000, &n), 0);
        cr_assert_eq(n, 2);
        struct store_sandbox *r = NULL;
        cr_assert_eq(store_sandbox_get(st, "aaaaaaaaaaaaaaaa", &r), -ENOENT);
        cr_assert_eq(store_sandbox_get(st, "cccccccccccccccc", &r), 0);
        r = store_sandbox_free(r);
        cr_assert_eq(store_sandbox_get(st, "dddddddddddddddd", &r), 0);
        r = store_sandbox_free(r);
        struct store_process **v = NULL;
        size_t k = 0;
        cr_assert_eq(store_process_list(st, "aaaaaaaaaaaaaaaa", 10, &v, &k), 0);
        cr_assert_eq(k, 0, "the pruned record's processes go with it");
        store_processes_free(v, k);
}

Test(prune, probe_checkpoint_and_file_checks)
{
        cr_assert_eq(store_probe(st), 0);
        cr_assert_eq(store_checkpoint(st), 0);
        cr_assert_eq(store_check_file(st), 0);
        /* Overwritten in place. */
        int fd = open(dbpath, O_WRONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        cr_assert_eq(pwrite(fd, "garbage garbage!", 16, 0), 16);
        close(fd);
        cr_assert_eq(store_check_file(st), -EUCLEAN);
        /* Deleted. */
        cr_assert_eq(unlink(dbpath), 0);
        cr_assert_eq(store_check_file(st), -ENOENT);
        cr_assert(strstr(store_last_error(st), "deleted"));
}

static void make_review(const char *root, const char *id, const char *state)
{
        char path[256];
        snprintf(path, sizeof(path), "%s/sandboxes/%s/changes", root, id);
        cr_assert_eq(mkdir_p(path, 0700, 0700), 0);
        snprintf(path, sizeof(path), "%s/sandboxes/%s/meta.json", root, id);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fprintf(f, "{\"id\": \"%s\", \"state\": \"%s\"}", id, state);
        fclose(f);
}

static bool keep_live(const char *id, void *ud)
{
        return STREQ(id, (const char *)ud);
}

Test(prune, review_state_of_reviewed_changes_only)
{
        char root[128];
        snprintf(root, sizeof(root), "%s/root", dir);
        make_review(root, "pending0000000000", "pending");
        make_review(root, "accepted000000000", "accepted");
        make_review(root, "discarded00000000", "discarded");
        make_review(root, "livediscarded0000", "discarded");
        uint64_t n = 0;
        /* Within the retention period: nothing. */
        cr_assert_eq(prune_review_state(root, 0, NULL, NULL, &n), 0);
        cr_assert_eq(n, 0);
        cr_assert_eq(prune_review_state(root, UINT64_MAX, keep_live, "livediscarded0000", &n), 0);
        cr_assert_eq(n, 2);
        char path[256];
        snprintf(path, sizeof(path), "%s/sandboxes/pending0000000000", root);
        cr_assert_eq(access(path, F_OK), 0, "changes waiting for review stay");
        snprintf(path, sizeof(path), "%s/sandboxes/livediscarded0000", root);
        cr_assert_eq(access(path, F_OK), 0, "a live sandbox's state stays");
        snprintf(path, sizeof(path), "%s/sandboxes/accepted000000000", root);
        cr_assert_neq(access(path, F_OK), 0);
        /* No state root: nothing to do. */
        cr_assert_eq(prune_review_state("/nonexistent/airlock", UINT64_MAX, NULL, NULL, &n), 0);
}
