/* SPDX-License-Identifier: Apache-2.0 */
/* HTTP tools: a request from the tool's template through one of the
 * network gate's routes (injected headers, the route's upstream and TLS).
 * Not built yet: every call is answered "internal", and the policy still
 * refuses an HTTP tool whose route it lacks. */
#include "toolgate-internal.h"

void toolgate_http_start(struct tg_call *c)
{
        toolgate_call_finish(c, NULL, "internal", "http", "HTTP tools are not available", -1, 0);
}
