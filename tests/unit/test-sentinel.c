/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "netgate/sentinel.h"
#include "util.h"

static char ph[NETGATE_SENTINEL_LEN + 1];
static char *hosts[] = {"git.example.test", "*.api.example.test"};
static struct netgate_sentinel one;
static struct netgate_sentinels set;

static void setup(void)
{
        cr_assert_eq(netgate_sentinel_make(ph), 0);
        one = (struct netgate_sentinel){.placeholder = ph,
                                        .value = "ghp_REALVALUE",
                                        .value_len = 13,
                                        .hosts = hosts,
                                        .n_hosts = 2};
        set = (struct netgate_sentinels){.v = &one, .n = 1};
}

static char *apply(const char *host, const char *name, const char *value)
{
        char *out = NULL;
        size_t len = 0;
        int r = netgate_sentinels_apply(&set, host, name, strlen(name), value, strlen(value), &out,
                                        &len);
        cr_assert(r == 0 || r == 1);
        if (r == 0)
                return NULL;
        cr_assert_eq(strlen(out), len);
        return out;
}

Test(sentinel, placeholder_form, .init = setup)
{
        char other[NETGATE_SENTINEL_LEN + 1];
        cr_assert_eq(strlen(ph), NETGATE_SENTINEL_LEN);
        cr_assert_eq(strncmp(ph, "airlock-sentinel-", 17), 0);
        cr_assert_eq(netgate_sentinel_make(other), 0);
        cr_assert_str_neq(ph, other, "each placeholder is fresh");
}

Test(sentinel, replaced_only_for_listed_hosts, .init = setup)
{
        _cleanup_free_ char *v = xasprintf("Bearer %s", ph);
        _cleanup_free_ char *a = apply("git.example.test", "Authorization", v);
        cr_assert_str_eq(a, "Bearer ghp_REALVALUE");
        _cleanup_free_ char *b = apply("x.api.example.test", "X-Token", v);
        cr_assert_str_eq(b, "Bearer ghp_REALVALUE");
        /* Not listed: the suffix alone, a look-alike, another host. */
        cr_assert_null(apply("api.example.test", "X-Token", v));
        cr_assert_null(apply("git.example.test.evil", "X-Token", v));
        cr_assert_null(apply("evilgit.example.test", "X-Token", v));
        cr_assert_null(apply("other.test", "Authorization", v));
        /* No placeholder: unchanged. */
        cr_assert_null(apply("git.example.test", "X-Token", "Bearer nothing"));
        /* Every occurrence. */
        _cleanup_free_ char *two = xasprintf("%s,%s", ph, ph);
        _cleanup_free_ char *c = apply("git.example.test", "X-Token", two);
        cr_assert_str_eq(c, "ghp_REALVALUE,ghp_REALVALUE");
}

Test(sentinel, inside_basic_credentials, .init = setup)
{
        _cleanup_free_ char *cred = xasprintf("x-access-token:%s", ph);
        unsigned char enc[256];
        EVP_EncodeBlock(enc, (const unsigned char *)cred, (int)strlen(cred));
        _cleanup_free_ char *v = xasprintf("Basic %s", enc);
        _cleanup_free_ char *a = apply("git.example.test", "Authorization", v);
        cr_assert_not_null(a);
        unsigned char want[256];
        EVP_EncodeBlock(want, (const unsigned char *)"x-access-token:ghp_REALVALUE", 28);
        _cleanup_free_ char *w = xasprintf("Basic %s", want);
        cr_assert_str_eq(a, w);
        cr_assert_null(apply("other.test", "Authorization", v));
        /* Only in the credentials' fields. */
        cr_assert_null(apply("git.example.test", "X-Other", v));
        cr_assert_null(apply("git.example.test", "Authorization", "Basic !!!!"));
}
