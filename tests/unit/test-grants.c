/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>

#include "grants.h"
#include "util.h"

Test(grants, token_shape_and_randomness)
{
        char a[GRANT_TOKEN_LEN + 1], b[GRANT_TOKEN_LEN + 1];
        cr_assert_eq(grant_token_new(a), 0);
        cr_assert_eq(grant_token_new(b), 0);
        cr_assert_eq(strlen(a), GRANT_TOKEN_LEN);
        cr_assert_eq(strncmp(a, GRANT_TOKEN_PREFIX, strlen(GRANT_TOKEN_PREFIX)), 0);
        cr_assert_eq(strspn(a + 4, "0123456789abcdef"), 64);
        cr_assert_str_neq(a, b);
}

Test(grants, hash_is_sha256_hex)
{
        char h[GRANT_HASH_HEX + 1];
        grant_token_hash("abc", 3, h);
        cr_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        grant_token_hash("", 0, h);
        cr_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        grant_token_hash("abcd", 3, h);
        cr_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
                         "only len bytes are hashed");
}

Test(grants, bearer_header)
{
        const char *t;
        size_t n;
        cr_assert_eq(grant_bearer_token("Bearer alk_x", &t, &n), 0);
        cr_assert_eq(n, 5);
        cr_assert_eq(strncmp(t, "alk_x", n), 0);
        cr_assert_eq(grant_bearer_token("bearer   tok  ", &t, &n), 0);
        cr_assert_eq(n, 3);
        cr_assert_lt(grant_bearer_token("Basic dXNlcjpwdw==", &t, &n), 0);
        cr_assert_lt(grant_bearer_token("Bearer ", &t, &n), 0);
        cr_assert_lt(grant_bearer_token("Bearer a b", &t, &n), 0);
        cr_assert_lt(grant_bearer_token("Bearer a\tb", &t, &n), 0);
        cr_assert_lt(grant_bearer_token("Bearertok", &t, &n), 0);
        cr_assert_lt(grant_bearer_token(NULL, &t, &n), 0);
        char big[GRANT_TOKEN_MAX + 16];
        memcpy(big, "Bearer ", 7);
        memset(big + 7, 'a', GRANT_TOKEN_MAX + 1);
        big[7 + GRANT_TOKEN_MAX + 1] = '\0';
        cr_assert_lt(grant_bearer_token(big, &t, &n), 0);
        big[7 + GRANT_TOKEN_MAX] = '\0';
        cr_assert_eq(grant_bearer_token(big, &t, &n), 0);
}

Test(grants, names)
{
        cr_assert(grant_name_valid("ci"));
        cr_assert(grant_name_valid("team-a.bot_1"));
        cr_assert_not(grant_name_valid(""));
        cr_assert_not(grant_name_valid("-x"));
        cr_assert_not(grant_name_valid(".x"));
        cr_assert_not(grant_name_valid("a b"));
        cr_assert_not(grant_name_valid("a/b"));
        char name[GRANT_NAME_MAX + 2];
        memset(name, 'a', sizeof(name) - 1);
        name[GRANT_NAME_MAX + 1] = '\0';
        cr_assert_not(grant_name_valid(name));
        name[GRANT_NAME_MAX] = '\0';
        cr_assert(grant_name_valid(name));
}

Test(grants, classes)
{
        struct al_error err = {0};
        struct grant g = {0};
        cr_assert(grant_allows_class(&g, "xlarge"), "no list: any class");
        cr_assert_eq(grant_parse_classes("small,medium", &g.classes, &g.n_classes, &err), 0);
        cr_assert_eq(g.n_classes, 2);
        cr_assert(grant_allows_class(&g, "small"));
        cr_assert(grant_allows_class(&g, "medium"));
        cr_assert_not(grant_allows_class(&g, "large"));
        char *s = grant_classes_string(&g);
        cr_assert_str_eq(s, "small,medium");
        free(s);
        strv_free(g.classes);

        char **v = NULL;
        size_t n = 0;
        cr_assert_lt(grant_parse_classes("small,huge", &v, &n, &err), 0);
        cr_assert(strstr(err.msg, "huge"));
        cr_assert_lt(grant_parse_classes("small,,medium", &v, &n, &err), 0);
        cr_assert_lt(grant_parse_classes("small,small", &v, &n, &err), 0);
        cr_assert_lt(grant_parse_classes("", &v, &n, &err), 0);
        cr_assert_null(v);
}
