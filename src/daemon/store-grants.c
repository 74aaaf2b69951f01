/* SPDX-License-Identifier: Apache-2.0 */
/* The state database's grants: docs/internals/daemon.md, "The store". */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store-internal.h"
/* grants */

static bool grant_name_revoked(struct store *s, const char *name)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        if (store_prepare(s, "SELECT 1 FROM grants WHERE name = ?1 AND revoked_ms != 0", &st) < 0)
                return false;
        store_bind_text(st, 1, name);
        return sqlite3_step(st) == SQLITE_ROW;
}

int store_grant_add(struct store *s, const struct grant *g, struct al_error *err)
{
        /* A revoked grant's row stays: its name is the identity its
         * sandboxes, runs and events are owned by, so a new grant under that
         * name would inherit them. The primary key refuses it. */
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s,
                    "INSERT INTO grants (name, token_hash, allow_sandbox, allow_exec,"
                     " allow_host_workspace, max_sandboxes, classes, created_ms, allow_git, secrets,"
                    " tools, allow_capabilities, allow_runs) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8,"
                    " ?9, ?10, ?11, ?12, ?13)",
                    &st);
        if (r < 0)
                return al_error_set(err, -r, "adding grant \"%s\"", g->name);
        _cleanup_free_ char *classes = grant_classes_string(g);
        _cleanup_free_ char *secrets = grant_secrets_string(g);
        _cleanup_free_ char *tools = grant_tools_string(g);
        store_bind_text(st, 1, g->name);
        store_bind_text(st, 2, g->token_hash);
        sqlite3_bind_int(st, 3, g->allow_sandbox);
        sqlite3_bind_int(st, 4, g->allow_exec);
        sqlite3_bind_int(st, 5, g->allow_host_workspace);
        sqlite3_bind_int64(st, 6, (sqlite3_int64)g->max_sandboxes);
        store_bind_text(st, 7, classes);
        sqlite3_bind_int64(st, 8, (sqlite3_int64)g->created_ms);
        sqlite3_bind_int(st, 9, g->allow_git);
        store_bind_text(st, 10, secrets);
        store_bind_text(st, 11, tools);
        sqlite3_bind_int(st, 12, g->allow_capabilities);
        sqlite3_bind_int(st, 13, g->allow_runs);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return 0;
        if ((rc & 0xff) == SQLITE_CONSTRAINT) {
                if (err) {
                        if (grant_name_revoked(s, g->name))
                                al_error_set(err, 0,
                                             "a grant named \"%s\" was revoked, and a name is "
                                             "never given again (what that grant made stays "
                                             "its own): choose another name",
                                             g->name);
                        else
                                al_error_set(err, 0, "a grant named \"%s\" exists", g->name);
                        err->code = EEXIST;
                }
                return -EEXIST;
        }
        return store_sql_error(s, rc & 0xff, err, "adding grant");
}

static struct grant *grant_from_row(sqlite3_stmt *st)
{
        struct grant *g = xcalloc(1, sizeof(*g));
        g->name = store_col_text(st, 0);
        const unsigned char *h = sqlite3_column_text(st, 1);
        snprintf(g->token_hash, sizeof(g->token_hash), "%s", h ? (const char *)h : "");
        g->allow_sandbox = sqlite3_column_int(st, 2) != 0;
        g->allow_exec = sqlite3_column_int(st, 3) != 0;
        g->allow_host_workspace = sqlite3_column_int(st, 4) != 0;
        g->max_sandboxes = (uint64_t)sqlite3_column_int64(st, 5);
        const unsigned char *classes = sqlite3_column_text(st, 6);
        if (classes && classes[0]) {
                struct al_error e;
                if (grant_parse_classes((const char *)classes, &g->classes, &g->n_classes, &e) < 0) {
                        /* A class list that no longer parses allows nothing. */
                        g->classes = strv_append(NULL, &g->n_classes, "");
                }
        }
        g->created_ms = (uint64_t)sqlite3_column_int64(st, 7);
        g->revoked_ms = (uint64_t)sqlite3_column_int64(st, 8);
        g->allow_git = sqlite3_column_int(st, 9) != 0;
        const unsigned char *secrets = sqlite3_column_text(st, 10);
        if (secrets && secrets[0]) {
                /* A list that no longer parses names nothing. */
                struct al_error e = {0};
                (void)grant_parse_secrets((const char *)secrets, &g->secrets, &g->n_secrets, &e);
        }
        const unsigned char *tools = sqlite3_column_text(st, 11);
        if (tools && tools[0]) {
                /* A list that no longer parses names nothing. */
                struct al_error e = {0};
                (void)grant_parse_tools((const char *)tools, &g->tools, &g->n_tools, &e);
        }
        g->allow_capabilities = sqlite3_column_int(st, 12) != 0;
        g->allow_runs = sqlite3_column_int(st, 13) != 0;
        return g;
}

#define GRANT_COLUMNS                                                                              \
        "name, token_hash, allow_sandbox, allow_exec, allow_host_workspace, max_sandboxes,"        \
        " classes, created_ms, revoked_ms, allow_git, secrets, tools, allow_capabilities,"        \
        " allow_runs"

int store_grant_by_hash(struct store *s, const char *hash, struct grant **ret)
{
        _cleanup_reset_ sqlite3_stmt *st = NULL;
        int r = store_prepare_cached(
            s, "SELECT " GRANT_COLUMNS " FROM grants WHERE token_hash = ?1 AND revoked_ms = 0",
            &st);
        if (r < 0)
                return r;
        store_bind_text(st, 1, hash);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_DONE)
                return -ENOENT;
        if (rc != SQLITE_ROW)
                return store_sql_error(s, rc & 0xff, NULL, "grant");
        *ret = grant_from_row(st);
        return 0;
}

int store_grant_revoke(struct store *s, const char *name, uint64_t now_ms)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s, "UPDATE grants SET revoked_ms = ?2 WHERE name = ?1 AND revoked_ms = 0", &st);
        if (r < 0)
                return r;
        store_bind_text(st, 1, name);
        sqlite3_bind_int64(st, 2, (sqlite3_int64)(now_ms ? now_ms : 1));
        r = store_step_done(s, st, NULL, "revoke");
        if (r < 0)
                return r;
        return sqlite3_changes(s->db) > 0 ? 0 : -ENOENT;
}

void store_grants_free(struct grant **v, size_t n)
{
        for (size_t i = 0; i < n; i++)
                grant_free(v[i]);
        free(v);
}

int store_grant_list(struct store *s, struct grant ***ret, size_t *ret_n)
{
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = store_prepare(s, "SELECT " GRANT_COLUMNS " FROM grants ORDER BY name", &st);
        if (r < 0)
                return r;
        struct grant **v = NULL;
        size_t n = 0;
        int rc;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                v = xrealloc(v, n + 1, sizeof(*v));
                v[n++] = grant_from_row(st);
        }
        if (rc != SQLITE_DONE) {
                store_grants_free(v, n);
                return store_sql_error(s, rc & 0xff, NULL, "grants");
        }
        *ret = v;
        *ret_n = n;
        return 0;
}
