/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "netgate/dns.h"
#include "netgate/rules.h"

/* A query as the sandbox sends it to the gate's name server: parsed, its
 * name through the host grammar, then answered (the answer must fit and
 * echo exactly the parsed question). */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct netgate_dns_msg m;
        uint8_t out[NETGATE_DNS_UDP_MAX];
        int r = netgate_dns_parse(data, size, &m);
        if (r == -EBADMSG) {
                if (netgate_dns_error(data, size, NETGATE_DNS_FORMERR, out, sizeof(out)) != 12)
                        abort();
                return 0;
        }
        if (r < 0)
                return 0;
        if (m.question_end > size || m.name_len != strlen(m.name) || m.name_len > NETGATE_HOST_MAX)
                abort();
        struct netgate_host h;
        (void)netgate_host_parse(m.name, m.name_len, &h);
        struct netgate_addr a[2];
        if (netgate_addr_parse("93.184.216.34", &a[0]) < 0 ||
            netgate_addr_parse("2001:db8::1", &a[1]) < 0)
                abort();
        ssize_t n = netgate_dns_answer(&m, data, NETGATE_DNS_NOERROR, a, 2, 60, out, sizeof(out));
        if (n != -ENOSPC && (n < (ssize_t)m.question_end || (size_t)n > sizeof(out)))
                abort();
        return 0;
}
