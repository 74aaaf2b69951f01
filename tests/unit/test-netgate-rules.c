/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <string.h>
#include <sys/socket.h>

#include "netgate/rules.h"

static struct netgate_host host(const char *s)
{
        struct netgate_host h;
        cr_assert_eq(netgate_host_parse(s, strlen(s), &h), 0, "%s should parse", s);
        return h;
}

static void refused(const char *s, size_t len)
{
        struct netgate_host h;
        cr_expect_lt(netgate_host_parse(s, len, &h), 0, "\"%.*s\" should be refused", (int)len, s);
}

#define REFUSED(lit) refused(lit, sizeof(lit) - 1)

Test(netgate_rules, canonical_names)
{
        cr_expect_str_eq(host("Example.COM").name, "example.com");
        cr_expect_str_eq(host("example.com.").name, "example.com");
        cr_expect_str_eq(host("A-B.example").name, "a-b.example");
        cr_expect_str_eq(host("xn--bcher-kva.example").name, "xn--bcher-kva.example");
        cr_expect_str_eq(host("localhost").name, "localhost");
        cr_expect_str_eq(host("123.example.com").name, "123.example.com");
        cr_expect_str_eq(host("0xdead.example").name, "0xdead.example");
        cr_expect_eq(host("example.com").kind, NETGATE_HOST_NAME);
}

Test(netgate_rules, refused_names)
{
        REFUSED("");
        REFUSED(".");
        REFUSED("example.com..");
        REFUSED(".example.com");
        REFUSED("a..b");
        REFUSED("evil.test\0.allowed.test");
        REFUSED("allowed.test\0");
        REFUSED("\0allowed.test");
        REFUSED("exa mple.com");
        REFUSED("under_score.test");
        REFUSED("evil.test/allowed.test");
        REFUSED("allowed.test@evil.test");
        REFUSED("evil.test%00.allowed.test");
        REFUSED("-lead.test");
        REFUSED("trail-.test");
        REFUSED("a.-b.test");
        REFUSED("caf\xc3\xa9.test");
        REFUSED("tab\t.test");
        REFUSED("crlf\r\n.test");
        REFUSED("[::1]");
        REFUSED("*.example.com");
        refused(NULL, 0);
}

Test(netgate_rules, lengths)
{
        char label[70], name[300];
        memset(label, 'a', 63);
        label[63] = '\0';
        cr_expect_str_eq(host(label).name, label);
        memset(label, 'a', 64);
        label[64] = '\0';
        refused(label, 64);

        /* 4 labels of 63 + 3 dots = 255 > 253; trim to exactly 253. */
        memset(name, 'a', sizeof(name));
        for (int i = 63; i < 253; i += 64)
                name[i] = '.';
        name[253] = '\0';
        cr_expect_eq(strlen(host(name).name), 253);
        name[253] = '.';
        name[254] = '\0';
        cr_expect_eq(strlen(host(name).name), 253, "one trailing dot is not counted");
        name[253] = 'a';
        refused(name, 254);
}

Test(netgate_rules, ip_literals)
{
        struct netgate_host h = host("10.1.2.3");
        cr_expect_eq(h.kind, NETGATE_HOST_IP);
        cr_expect_eq(h.addr.family, AF_INET);
        cr_expect_str_eq(h.name, "10.1.2.3");

        h = host("::FFFF:127.0.0.1");
        cr_expect_eq(h.kind, NETGATE_HOST_IP);
        cr_expect_eq(h.addr.family, AF_INET6);
        cr_expect_str_eq(h.name, "::ffff:127.0.0.1");
        cr_expect_str_eq(host("2001:DB8:0:0:0:0:0:1").name, "2001:db8::1");
        cr_expect_str_eq(host("1.2.3.4.").name, "1.2.3.4");

        REFUSED("fe80::1%eth0");
        REFUSED("::1\0.allowed.test");
        REFUSED("1:2:3:4:5:6:7:8:9");
}

static void numeric(const char *s, const char *canon, const uint8_t a, const uint8_t b,
                    const uint8_t c, const uint8_t d)
{
        struct netgate_host h = host(s);
        cr_expect_eq(h.kind, NETGATE_HOST_NUMERIC, "%s is a numeric spelling", s);
        cr_expect_str_eq(h.name, canon);
        uint8_t want[4] = {a, b, c, d};
        cr_expect_eq(h.addr.family, AF_INET);
        cr_expect_arr_eq(h.addr.bytes, want, 4, "%s denotes %u.%u.%u.%u", s, a, b, c, d);
}

Test(netgate_rules, numeric_spellings)
{
        numeric("2130706433", "2130706433", 127, 0, 0, 1);
        numeric("0177.0.0.1", "0177.0.0.1", 127, 0, 0, 1);
        numeric("0x7f.1", "0x7f.1", 127, 0, 0, 1);
        numeric("0X7F.1", "0x7f.1", 127, 0, 0, 1);
        numeric("127.1", "127.1", 127, 0, 0, 1);
        numeric("0x7f000001", "0x7f000001", 127, 0, 0, 1);
        numeric("017700000001", "017700000001", 127, 0, 0, 1);
        numeric("169.254.43518", "169.254.43518", 169, 254, 169, 254);
        numeric("0", "0", 0, 0, 0, 0);
        numeric("010.0.0.1", "010.0.0.1", 8, 0, 0, 1);
        numeric("2130706433.", "2130706433", 127, 0, 0, 1);

        /* A numeric last label makes the name an address; a bad one is no
         * name at all. */
        REFUSED("1.2.3.4.5");
        REFUSED("256.1.1.1");
        REFUSED("1.2.3.256");
        REFUSED("4294967296");
        REFUSED("0x100000000");
        REFUSED("example.123");
        REFUSED("08.0.0.1");
        REFUSED("0x7g.1");
}

static struct netgate_rule rule(const char *s)
{
        struct netgate_rule r;
        cr_assert_eq(netgate_rule_parse(s, &r), 0, "rule %s should parse", s);
        return r;
}

Test(netgate_rules, rule_parse)
{
        struct netgate_rule r = rule("Example.com");
        cr_expect_str_eq(r.host.name, "example.com");
        cr_expect_not(r.wildcard);
        cr_expect_eq(r.port, 0);
        cr_expect_str_eq(r.text, "Example.com");
        netgate_rule_done(&r);

        r = rule("*.github.com:443");
        cr_expect(r.wildcard);
        cr_expect_str_eq(r.host.name, "github.com");
        cr_expect_eq(r.port, 443);
        netgate_rule_done(&r);

        r = rule("[::1]:8080");
        cr_expect_eq(r.host.kind, NETGATE_HOST_IP);
        cr_expect_eq(r.port, 8080);
        netgate_rule_done(&r);

        r = rule("::1");
        cr_expect_eq(r.host.kind, NETGATE_HOST_IP);
        cr_expect_eq(r.port, 0);
        netgate_rule_done(&r);

        r = rule("10.0.0.1:22");
        cr_expect_eq(r.host.kind, NETGATE_HOST_IP);
        cr_expect_eq(r.port, 22);
        netgate_rule_done(&r);

        r = rule("2130706433");
        cr_expect_eq(r.host.kind, NETGATE_HOST_NUMERIC);
        netgate_rule_done(&r);

        const char *bad[] = {"",          "*",         "*.",          "*.*.example.com",
                             "a.*.com",   "host:",     "host:0",      "host:65536",
                             "host:080",  "host:8a",   "[::1",        "[::1]x",
                             "[1.2.3.4]", "*.1.2.3.4", "*.[::1]",     "http://example.com",
                             "exa mple",  "a:b:c",     "host:123456", "under_score.test"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct netgate_rule x;
                cr_expect_lt(netgate_rule_parse(bad[i], &x), 0, "rule \"%s\" should be refused",
                             bad[i]);
        }
}

static struct netgate_rules *rules;

static void setup(void)
{
        char *allow[] = {"allowed.test", "*.github.test", "pypi.test:443", "10.0.0.5",
                         "[::1]:8080",   "2130706433",    "Upper.Test."};
        char *deny[] = {"evil.test", "*.bad.github.test", "pypi.test:8443", "blocked.github.test"};
        struct al_error err = {0};
        cr_assert_eq(netgate_rules_new(allow, 7, deny, 4, &rules, &err), 0, "%s", err.msg);
}

static void teardown(void)
{
        rules = netgate_rules_free(rules);
}

static struct netgate_decision decide_n(const char *h, size_t len, uint16_t port)
{
        struct netgate_decision d;
        netgate_rules_decide(rules, h, len, port, &d);
        return d;
}

static struct netgate_decision decide(const char *h, uint16_t port)
{
        return decide_n(h, strlen(h), port);
}

static void allowed(const char *h, uint16_t port, const char *by)
{
        struct netgate_decision d = decide(h, port);
        cr_expect(d.allow, "%s:%u should be allowed (got %s)", h, port, d.reason ? d.reason : "?");
        if (d.allow) {
                cr_expect_not_null(d.rule);
                cr_expect_str_eq(d.rule->text, by, "%s:%u allowed by %s", h, port, by);
                cr_expect_null(d.reason);
        }
}

static void denied(const char *h, size_t len, uint16_t port, const char *reason, const char *by)
{
        struct netgate_decision d = decide_n(h, len, port);
        cr_expect_not(d.allow, "%.*s:%u should be denied", (int)len, h, port);
        cr_expect_str_eq(d.reason, reason, "%.*s:%u: reason", (int)len, h, port);
        if (by) {
                cr_expect_not_null(d.rule);
                if (d.rule)
                        cr_expect_str_eq(d.rule->text, by);
        } else
                cr_expect_null(d.rule, "%.*s:%u: no rule", (int)len, h, port);
}

#define DENIED(lit, port, reason, by) denied(lit, sizeof(lit) - 1, port, reason, by)

Test(netgate_rules, decide_names, .init = setup, .fini = teardown)
{
        allowed("allowed.test", 80, "allowed.test");
        allowed("allowed.test", 443, "allowed.test");
        allowed("ALLOWED.TEST.", 443, "allowed.test");
        allowed("upper.test", 80, "Upper.Test.");
        DENIED("allowed.test", 8080, "port_not_allowed", "allowed.test");
        DENIED("allowed.test", 22, "port_not_allowed", "allowed.test");
        DENIED("allowed.test.evil.test", 443, "not_allowed", NULL);
        DENIED("xallowed.test", 443, "not_allowed", NULL);
        DENIED("sub.allowed.test", 443, "not_allowed", NULL);
        DENIED("evil.test\0.allowed.test", 443, "bad_host", NULL);
        DENIED("allowed.test\0", 443, "bad_host", NULL);
        DENIED("allowed.test..", 443, "bad_host", NULL);
        DENIED("nothing.test", 80, "not_allowed", NULL);

        allowed("api.github.test", 443, "*.github.test");
        allowed("a.b.github.test", 80, "*.github.test");
        DENIED("github.test", 443, "not_allowed", NULL);
        DENIED("evilgithub.test", 443, "not_allowed", NULL);
        DENIED("github.test.evil.test", 443, "not_allowed", NULL);

        allowed("pypi.test", 443, "pypi.test:443");
        DENIED("pypi.test", 80, "port_not_allowed", "pypi.test:443");
        DENIED("pypi.test", 8443, "denied_by_rule", "pypi.test:8443");
}

Test(netgate_rules, deny_beats_allow, .init = setup, .fini = teardown)
{
        DENIED("evil.test", 80, "denied_by_rule", "evil.test");
        DENIED("EVIL.TEST.", 443, "denied_by_rule", "evil.test");
        DENIED("Evil.Test", 22, "denied_by_rule", "evil.test");
        DENIED("x.bad.github.test", 443, "denied_by_rule", "*.bad.github.test");
        DENIED("blocked.github.test", 443, "denied_by_rule", "blocked.github.test");
        DENIED("BLOCKED.github.test.", 443, "denied_by_rule", "blocked.github.test");
        allowed("bad.github.test", 443, "*.github.test");
        /* A trailing-dot deny does not let the subdomains through either. */
        DENIED("sub.evil.test", 443, "not_allowed", NULL);
}

Test(netgate_rules, decide_literals, .init = setup, .fini = teardown)
{
        allowed("10.0.0.5", 80, "10.0.0.5");
        DENIED("10.0.0.5", 22, "port_not_allowed", "10.0.0.5");
        DENIED("10.0.0.6", 80, "ip_literal_not_listed", NULL);
        DENIED("127.0.0.1", 80, "ip_literal_not_listed", NULL);
        allowed("::1", 8080, "[::1]:8080");
        allowed("0:0:0:0:0:0:0:1", 8080, "[::1]:8080");
        DENIED("::1", 80, "port_not_allowed", "[::1]:8080");
        DENIED("::ffff:127.0.0.1", 80, "ip_literal_not_listed", NULL);
        DENIED("::ffff:10.0.0.5", 80, "ip_literal_not_listed", NULL);

        /* Listed exactly: the spelling, not the address it denotes. */
        allowed("2130706433", 80, "2130706433");
        DENIED("0x7f.1", 80, "ip_literal_not_listed", NULL);
        DENIED("0177.0.0.1", 80, "ip_literal_not_listed", NULL);
        DENIED("127.1", 80, "ip_literal_not_listed", NULL);
        DENIED("167772165", 80, "ip_literal_not_listed", NULL); /* 10.0.0.5 */
        DENIED("012.0.0.5", 80, "ip_literal_not_listed", NULL);

        struct netgate_decision d = decide("2130706433", 80);
        cr_expect_eq(d.host.kind, NETGATE_HOST_NUMERIC);
        cr_expect_eq(d.host.addr.bytes[0], 127);
        cr_expect_eq(d.host.addr.bytes[3], 1);
}

Test(netgate_rules, bad_host_is_escaped, .init = setup, .fini = teardown)
{
        struct netgate_decision d = decide_n("evil.test\0.allowed.test", 23, 443);
        cr_expect_str_eq(d.host.name, "evil.test\\x00.allowed.test");
        d = decide_n("a\"b\\c\r\n", 7, 80);
        cr_expect_str_eq(d.host.name, "a\\x22b\\x5cc\\x0d\\x0a");
}

Test(netgate_rules, empty_rules_allow_nothing)
{
        struct netgate_rules *r = NULL;
        struct al_error err = {0};
        cr_assert_eq(netgate_rules_new(NULL, 0, NULL, 0, &r, &err), 0);
        struct netgate_decision d;
        netgate_rules_decide(r, "example.com", 11, 443, &d);
        cr_expect_not(d.allow);
        cr_expect_str_eq(d.reason, "not_allowed");
        netgate_rules_free(r);
}

Test(netgate_rules, bad_rule_names_its_index)
{
        char *allow[] = {"ok.test", "bad host"};
        struct netgate_rules *r = NULL;
        struct al_error err = {0};
        cr_expect_lt(netgate_rules_new(allow, 2, NULL, 0, &r, &err), 0);
        cr_expect_null(r);
        cr_expect(strstr(err.msg, "network.allow[1]") != NULL, "%s", err.msg);
        cr_expect(strstr(err.msg, "bad host") != NULL, "%s", err.msg);

        char *deny[] = {"evil\x01.test"};
        cr_expect_lt(netgate_rules_new(NULL, 0, deny, 1, &r, &err), 0);
        cr_expect(strstr(err.msg, "network.deny[0] \"evil\\x01.test\"") != NULL, "%s", err.msg);
}
