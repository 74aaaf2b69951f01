/* SPDX-License-Identifier: Apache-2.0 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netgate/sni.h"

/* A tunnel's first bytes as the SNI check reads them. */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char name[NETGATE_HOST_MAX + 1];
        size_t nl = 0;
        enum netgate_sni_result r = netgate_sni_parse(data, size, name, &nl);
        if (r == NETGATE_SNI_NAME && (nl == 0 || nl > NETGATE_HOST_MAX || name[nl] != '\0'))
                abort();
        if (r != NETGATE_SNI_NAME && nl != 0)
                abort();
        struct netgate_host h;
        if (r == NETGATE_SNI_NAME)
                (void)netgate_host_parse(name, nl, &h);
        return 0;
}
