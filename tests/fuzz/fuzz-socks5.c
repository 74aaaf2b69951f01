/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netgate/rules.h"
#include "netgate/socks5.h"

/* The first byte sets the size of the pieces the rest is fed in. A parsed
 * target goes through the host rules as the gate would pass it. */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct netgate_rules *rules;
        if (!rules) {
                char *allow[] = {"allowed.test", "*.allowed.test", "10.0.0.1:22", "[::1]:80",
                                 "2130706433"};
                char *deny[] = {"evil.test", "*.evil.allowed.test"};
                struct al_error err;
                if (netgate_rules_new(allow, 5, deny, 2, &rules, &err) < 0)
                        abort();
        }
        if (size < 1)
                return 0;
        size_t step = (size_t)data[0] % 32 + 1;
        data++;
        size--;

        struct netgate_socks5 s;
        netgate_socks5_init(&s);
        size_t pos = 0;
        while (pos < size) {
                size_t n = size - pos < step ? size - pos : step;
                size_t used = 0;
                int r = netgate_socks5_feed(&s, data + pos, n, &used);
                if (used > n)
                        abort();
                pos += used;
                if (r < 0)
                        break;
                if (r == NETGATE_SOCKS5_REQUEST) {
                        if (s.host_len > 255)
                                abort();
                        struct netgate_decision d;
                        netgate_rules_decide(rules, s.host, s.host_len, s.port, &d);
                        if (!d.allow && !d.reason)
                                abort();
                        uint8_t out[22];
                        (void)netgate_socks5_reply(
                            0, d.host.kind == NETGATE_HOST_NAME ? NULL : &d.host.addr, s.port, out);
                        break;
                }
                if (used == 0 && r == NETGATE_SOCKS5_MORE)
                        abort(); /* no progress on a non-empty piece */
        }

        /* The raw bytes as a host name and as a rule, too. */
        struct netgate_host h;
        (void)netgate_host_parse((const char *)data, size, &h);
        if (size < 300) {
                char text[300];
                memcpy(text, data, size);
                text[size] = '\0';
                struct netgate_rule rule;
                if (netgate_rule_parse(text, &rule) == 0)
                        netgate_rule_done(&rule);
                struct netgate_cidr c;
                (void)netgate_cidr_parse(text, &c);
        }
        return 0;
}
