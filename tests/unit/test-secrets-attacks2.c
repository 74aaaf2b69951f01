/* SPDX-License-Identifier: Apache-2.0 */
/* A secret reflected back HTML-escaped: an upstream's error page that
 * echoes the request ("invalid key: ...") escapes &, <, >, " and ' as its
 * template engine does (&amp; &lt; &gt; &quot; &#39; &#x27; &#039; &#34;),
 * and a password holding one of them reached the sandbox in that form,
 * which the redactor (and the gate's same-length scrubber) did not know. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "secrets.h"
#include "util.h"

static const char secret[] = "pw\"<K&9>'zQ";

static char *redact(const struct redactor *r, const char *in)
{
        char *out = NULL;
        size_t len = 0;
        cr_assert_eq(redactor_apply(r, in, strlen(in), &out, &len), 0);
        return out;
}

/* Scrub in one-byte feeds: what the gate does to a body cut anywhere. */
static char *scrub_bytewise(const struct redactor *r, const char *in)
{
        struct redactor_scrub *st = redactor_scrub_new(r);
        size_t n = strlen(in), o = 0;
        char *all = xcalloc(n + 1, 1);
        for (size_t i = 0; i <= n; i++) {
                char *out = NULL;
                size_t len = 0;
                if (i < n)
                        cr_assert_eq(redactor_scrub_feed(st, in + i, 1, &out, &len), 0);
                else
                        cr_assert_eq(redactor_scrub_finish(st, &out, &len), 0);
                memcpy(all + o, out, len);
                o += len;
                free(out);
        }
        cr_assert_eq(o, n, "the scrubber changed the length");
        redactor_scrub_free(st);
        return all;
}

static const char *const escaped[] = {
    "pw&quot;&lt;K&amp;9&gt;&#x27;zQ",   /* a quote-escaping encoder */
    "pw&quot;&lt;K&amp;9&gt;&#039;zQ",   /* another, zero-padded */
    "pw&#34;&lt;K&amp;9&gt;&#39;zQ",     /* numeric quotes */
    "pw&QUOT;&LT;K&AMP;9&GT;&#X27;zQ",   /* capitals */
    "pw&quot;&lt;K&amp;9&gt;&apos;zQ",   /* XML */
    "pw\"&lt;K&amp;9&gt;'zQ",            /* quotes left as they are */
    "&#112;&#x77;&quot;<K&#38;9>'z&#81;" /* every byte its own way */
};

Test(secrets_attacks2, html_escaped_forms_are_redacted)
{
        struct redactor *r = redactor_new();
        cr_assert_eq(redactor_add(r, secret, strlen(secret)), 0);
        for (size_t i = 0; i < ARRAY_SIZE(escaped); i++) {
                char in[256];
                snprintf(in, sizeof(in), "<p>invalid key: %s</p>", escaped[i]);
                char *out = redact(r, in);
                cr_expect_str_eq(out, "<p>invalid key: [REDACTED]</p>", "form %zu: %s", i,
                                 escaped[i]);
                free(out);
                char *s = scrub_bytewise(r, in);
                cr_expect_null(strstr(s, "&lt;K"), "form %zu scrubbed to %s", i, s);
                cr_expect_null(strstr(s, "zQ"), "form %zu scrubbed to %s", i, s);
                cr_expect_eq(strncmp(s, "<p>invalid key: *", 17), 0, "form %zu: %s", i, s);
                free(s);
        }
        redactor_free(r);
}

/* The raw value still matches where it holds an entity's text itself, and
 * text with entities but no secret is left alone. */
Test(secrets_attacks2, literal_ampersands_still_match_and_innocent_text_stays)
{
        struct redactor *r = redactor_new();
        const char lit[] = "a&amp;b&lt;c";
        cr_assert_eq(redactor_add(r, lit, strlen(lit)), 0);
        char *out = redact(r, "x a&amp;b&lt;c y");
        cr_expect_str_eq(out, "x [REDACTED] y");
        free(out);
        out = redact(r, "Tom &amp; Jerry &lt;3 &#; &#x; &unknown; &");
        cr_expect_str_eq(out, "Tom &amp; Jerry &lt;3 &#; &#x; &unknown; &");
        free(out);
        redactor_free(r);
}

/* A value whose '&' is followed by the start of a reference's name, at the
 * end of the input, is still a match; and its escaped form cut inside the
 * reference is held until the reference is complete. */
Test(secrets_attacks2, references_cut_at_the_end)
{
        struct redactor *r = redactor_new();
        cr_assert_eq(redactor_add(r, "k9&l", 4), 0);
        cr_assert_eq(redactor_add(r, "z8&y", 4), 0);
        char *out = redact(r, "end k9&l");
        cr_expect_str_eq(out, "end [REDACTED]");
        free(out);
        char *s = scrub_bytewise(r, "a z8&amp;y b z8&#38;y k9&amp;l");
        cr_expect_str_eq(s, "a ******** b ******** ********");
        free(s);
        redactor_free(r);
}

/* Random text of reference pieces: scrubbing cut anywhere keeps the length
 * and masks at least what redacting the whole masks. */
Test(secrets_attacks2, random_reference_soup)
{
        static const char alphabet[] = "&#xX;amplgtquosAMPLT0123456789k9\"<";
        struct redactor *r = redactor_new();
        cr_assert_eq(redactor_add(r, "k9&<\"", 5), 0);
        unsigned seed = 12345;
        for (int round = 0; round < 2000; round++) {
                char in[48];
                size_t n = 1 + (seed = seed * 1103515245u + 12345u) % (sizeof(in) - 1);
                for (size_t i = 0; i < n; i++) {
                        seed = seed * 1103515245u + 12345u;
                        in[i] = alphabet[(seed >> 16) % (sizeof(alphabet) - 1)];
                }
                in[n] = '\0';
                char *s = scrub_bytewise(r, in);
                char *whole = redact(r, in);
                bool hit = strstr(whole, REDACTOR_MARK) != NULL;
                cr_expect(!hit || strchr(s, '*'), "%s: redacted %s, scrubbed %s", in, whole, s);
                free(whole);
                free(s);
        }
        redactor_free(r);
}
