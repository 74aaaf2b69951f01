/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <ftw.h>
#include <sqlite3.h>
#include <string.h>
#include <sys/stat.h>

#include "store.h"
#include "util.h"

#include "store-fixture.h"

static void setup(void)
{
        store_fixture_open("store");
}

TestSuite(store, .init = setup, .fini = teardown);

static struct grant make_grant(const char *name, const char *hash)
{
        struct grant g = {.name = (char *)name, .allow_sandbox = true, .max_sandboxes = 3,
                          .created_ms = 1000};
        snprintf(g.token_hash, sizeof(g.token_hash), "%s", hash);
        return g;
}

Test(store, database_is_private_and_wal)
{
        struct stat s;
        cr_assert_eq(stat(dbpath, &s), 0);
        cr_assert_eq(s.st_mode & 0777, 0600);
        _cleanup_free_ char *wal = xasprintf("%s-wal", dbpath);
        cr_assert_eq(access(wal, F_OK), 0, "journal_mode=WAL");
}

Test(store, grants_add_find_revoke_list)
{
        struct al_error err = {0};
        struct grant g = make_grant("ci", "aa");
        char *classes[] = {"small", "large", NULL};
        g.classes = classes;
        g.n_classes = 2;
        g.allow_host_workspace = true;
        g.allow_git = true;
        cr_assert_eq(store_grant_add(st, &g, &err), 0, "%s", err.msg);

        struct grant *found = NULL;
        cr_assert_eq(store_grant_by_hash(st, "aa", &found), 0);
        cr_assert_str_eq(found->name, "ci");
        cr_assert(found->allow_sandbox);
        cr_assert_not(found->allow_exec);
        cr_assert(found->allow_host_workspace);
        cr_assert(found->allow_git);
        cr_assert_eq(found->max_sandboxes, 3);
        cr_assert_eq(found->n_classes, 2);
        cr_assert_str_eq(found->classes[1], "large");
        grant_free(found);
        cr_assert_eq(store_grant_by_hash(st, "bb", &found), -ENOENT);

        /* A name in force is taken; so is a token hash. */
        struct grant dup = make_grant("ci", "cc");
        cr_assert_eq(store_grant_add(st, &dup, &err), -EEXIST);
        struct grant samehash = make_grant("other", "aa");
        cr_assert_eq(store_grant_add(st, &samehash, &err), -EEXIST);

        cr_assert_eq(store_grant_revoke(st, "ci", 2000), 0);
        cr_assert_eq(store_grant_by_hash(st, "aa", &found), -ENOENT, "revoked at once");
        cr_assert_eq(store_grant_revoke(st, "ci", 3000), -ENOENT);
        cr_assert_eq(store_grant_revoke(st, "nobody", 3000), -ENOENT);

        /* A revoked name is never given again: what the revoked grant
         * made is owned by that name. */
        cr_assert_eq(store_grant_add(st, &dup, &err), -EEXIST);
        cr_assert(strstr(err.msg, "was revoked"), "%s", err.msg);
        cr_assert_eq(store_grant_by_hash(st, "cc", &found), -ENOENT);

        struct grant **v = NULL;
        size_t n = 0;
        struct grant other = make_grant("alpha", "dd");
        cr_assert_eq(store_grant_add(st, &other, &err), 0);
        cr_assert_eq(store_grant_list(st, &v, &n), 0);
        cr_assert_eq(n, 2);
        cr_assert_str_eq(v[0]->name, "alpha");
        cr_assert_str_eq(v[1]->name, "ci");
        store_grants_free(v, n);
}

/* A database the version before allow_git made: opening it adds the
 * column, the old grants allow no git, and a second open changes nothing. */
Test(store, grants_without_allow_git_are_migrated)
{
        _cleanup_free_ char *old = xasprintf("%s/old.db", dir);
        sqlite3 *db = NULL;
        cr_assert_eq(sqlite3_open(old, &db), SQLITE_OK);
        cr_assert_eq(sqlite3_exec(db,
                                  "CREATE TABLE grants (name TEXT PRIMARY KEY,"
                                  " token_hash TEXT NOT NULL UNIQUE,"
                                  " allow_sandbox INTEGER NOT NULL, allow_exec INTEGER NOT NULL,"
                                  " allow_host_workspace INTEGER NOT NULL,"
                                  " max_sandboxes INTEGER NOT NULL, classes TEXT NOT NULL,"
                                  " created_ms INTEGER NOT NULL,"
                                  " revoked_ms INTEGER NOT NULL DEFAULT 0);"
                                  "INSERT INTO grants VALUES ('old', 'ee', 1, 1, 0, 0, '', 5, 0);"
                                  "PRAGMA user_version=1;",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
        sqlite3_close(db);

        for (int i = 0; i < 2; i++) {
                struct al_error err = {0};
                struct store *o = NULL;
                cr_assert_eq(store_open(old, &o, &err), 0, "open %d: %s", i, err.msg);
                struct grant *found = NULL;
                cr_assert_eq(store_grant_by_hash(o, "ee", &found), 0);
                cr_assert(found->allow_exec);
                cr_assert_not(found->allow_git);
                grant_free(found);
                if (i == 0) {
                        struct grant g = make_grant("new", "ff");
                        g.allow_git = true;
                        cr_assert_eq(store_grant_add(o, &g, &err), 0, "%s", err.msg);
                }
                cr_assert_eq(store_grant_by_hash(o, "ff", &found), 0);
                cr_assert(found->allow_git);
                grant_free(found);
                store_close(o);
        }
}

static struct store_sandbox make_sb(const char *id, const char *state, const char *meta,
                                    uint64_t created)
{
        struct store_sandbox sb = {.state = (char *)state, .grant = "ci", .class_name = "small",
                                   .metadata = (char *)meta, .policy = "{\"class\":\"small\"}",
                                   .workspace = "/ws", .workspace_owned = true, .pid = 42,
                                   .created_ms = created, .expires_ms = created + 10};
        snprintf(sb.id, sizeof(sb.id), "%s", id);
        return sb;
}

Test(store, sandboxes_put_get_replace)
{
        struct store_sandbox a = make_sb("aaaaaaaaaaaaaaaa", "running", "{\"k\":\"v\"}", 5);
        cr_assert_eq(store_sandbox_put(st, &a), 0);
        struct store_sandbox *r = NULL;
        cr_assert_eq(store_sandbox_get(st, "aaaaaaaaaaaaaaaa", &r), 0);
        cr_assert_str_eq(r->state, "running");
        cr_assert_str_eq(r->metadata, "{\"k\":\"v\"}");
        cr_assert_eq(r->pid, 42);
        cr_assert_eq(r->expires_ms, 15);
        cr_assert(r->workspace_owned);
        cr_assert_null(r->reason);
        store_sandbox_free(r);

        a.state = "destroyed";
        a.reason = "ttl";
        a.ended_ms = 99;
        cr_assert_eq(store_sandbox_put(st, &a), 0);
        cr_assert_eq(store_sandbox_get(st, "aaaaaaaaaaaaaaaa", &r), 0);
        cr_assert_str_eq(r->state, "destroyed");
        cr_assert_str_eq(r->reason, "ttl");
        cr_assert_eq(r->ended_ms, 99);
        store_sandbox_free(r);
        cr_assert_eq(store_sandbox_get(st, "bbbbbbbbbbbbbbbb", &r), -ENOENT);

        uint64_t n = 0;
        cr_assert_eq(store_sandbox_count_state(st, "destroyed", &n), 0);
        cr_assert_eq(n, 1);
        cr_assert_eq(store_sandbox_delete(st, "aaaaaaaaaaaaaaaa"), 0);
        cr_assert_eq(store_sandbox_get(st, "aaaaaaaaaaaaaaaa", &r), -ENOENT);
}

Test(store, sandbox_list_filters)
{
        struct store_sandbox v[] = {
                make_sb("0000000000000001", "running", "{\"task\":\"a\",\"team\":\"x\"}", 1),
                make_sb("0000000000000002", "running", "{\"task\":\"b\",\"team\":\"x\"}", 2),
                make_sb("0000000000000003", "destroyed", "{\"task\":\"a\"}", 3),
                make_sb("0000000000000004", "pooled", "{}", 4),
                make_sb("0000000000000005", "running", "{\"odd key\":\"'\\\"\"}", 5),
        };
        for (size_t i = 0; i < ARRAY_SIZE(v); i++)
                cr_assert_eq(store_sandbox_put(st, &v[i]), 0);

        struct store_sandbox **r = NULL;
        size_t n = 0;
        struct store_filter all = {0};
        cr_assert_eq(store_sandbox_list(st, &all, &r, &n), 0);
        cr_assert_eq(n, 4, "pooled ones are not listed");
        cr_assert_str_eq(r[0]->id, "0000000000000005", "newest first");
        store_sandboxes_free(r, n);

        struct store_filter f = {.n_meta = 1, .meta_key = {"task"}, .meta_value = {"a"}};
        cr_assert_eq(store_sandbox_list(st, &f, &r, &n), 0);
        cr_assert_eq(n, 2);
        store_sandboxes_free(r, n);

        f.state = "running";
        cr_assert_eq(store_sandbox_list(st, &f, &r, &n), 0);
        cr_assert_eq(n, 1);
        cr_assert_str_eq(r[0]->id, "0000000000000001");
        store_sandboxes_free(r, n);

        struct store_filter two = {.n_meta = 2, .meta_key = {"team", "task"},
                                   .meta_value = {"x", "b"}};
        cr_assert_eq(store_sandbox_list(st, &two, &r, &n), 0);
        cr_assert_eq(n, 1);
        cr_assert_str_eq(r[0]->id, "0000000000000002");
        store_sandboxes_free(r, n);

        struct store_filter missing = {.n_meta = 1, .meta_key = {"nope"}, .meta_value = {"a"}};
        cr_assert_eq(store_sandbox_list(st, &missing, &r, &n), 0);
        cr_assert_eq(n, 0);
        store_sandboxes_free(r, n);

        struct store_filter pooled = {.state = "pooled"};
        cr_assert_eq(store_sandbox_list(st, &pooled, &r, &n), 0);
        cr_assert_eq(n, 1);
        store_sandboxes_free(r, n);

        struct store_filter lim = {.limit = 2};
        cr_assert_eq(store_sandbox_list(st, &lim, &r, &n), 0);
        cr_assert_eq(n, 2);
        store_sandboxes_free(r, n);
}

Test(store, processes)
{
        struct store_process p = {.pid = 1, .argv = "[\"sh\"]", .background = true,
                                  .state = "running", .exit_code = -1, .started_ms = 10};
        memcpy(p.sandbox, "0000000000000001", 17);
        cr_assert_eq(store_process_put(st, &p), 0);
        p.pid = 2;
        p.background = false;
        cr_assert_eq(store_process_put(st, &p), 0);
        p.pid = 1;
        p.background = true;
        p.state = "exited";
        p.exit_code = 3;
        p.error_code = "timeout";
        cr_assert_eq(store_process_put(st, &p), 0);

        struct store_process **v = NULL;
        size_t n = 0;
        cr_assert_eq(store_process_list(st, "0000000000000001", 0, &v, &n), 0);
        cr_assert_eq(n, 2);
        cr_assert_eq(v[0]->pid, 2);
        cr_assert_eq(v[1]->pid, 1);
        cr_assert_str_eq(v[1]->state, "exited");
        cr_assert_eq(v[1]->exit_code, 3);
        cr_assert_str_eq(v[1]->error_code, "timeout");
        cr_assert(v[1]->background);
        store_processes_free(v, n);
        cr_assert_eq(store_sandbox_delete(st, "0000000000000001"), 0);
        cr_assert_eq(store_process_list(st, "0000000000000001", 0, &v, &n), 0);
        cr_assert_eq(n, 0, "a sandbox's processes go with it");
        store_processes_free(v, n);
}

Test(store, survives_reopen)
{
        struct al_error err = {0};
        struct grant g = make_grant("keep", "ee");
        cr_assert_eq(store_grant_add(st, &g, &err), 0);
        struct store_sandbox a = make_sb("aaaaaaaaaaaaaaaa", "running", "{}", 5);
        cr_assert_eq(store_sandbox_put(st, &a), 0);
        st = store_close(st);
        cr_assert_eq(store_open(dbpath, &st, &err), 0, "%s", err.msg);
        struct grant *found = NULL;
        cr_assert_eq(store_grant_by_hash(st, "ee", &found), 0);
        grant_free(found);
        struct store_sandbox *r = NULL;
        cr_assert_eq(store_sandbox_get(st, "aaaaaaaaaaaaaaaa", &r), 0);
        store_sandbox_free(r);
}

Test(store, open_failure_names_the_path)
{
        struct store *s = NULL;
        struct al_error err = {0};
        cr_assert_lt(store_open("/nonexistent-dir/x.db", &s, &err), 0);
        cr_assert(strstr(err.msg, "/nonexistent-dir/x.db"), "%s", err.msg);
        cr_assert_null(s);
}
