/* SPDX-License-Identifier: Apache-2.0 */
/* The API server: libevent's HTTP server behind the guard (httpguard.c),
 * every request to the router (router.c). */
#include <event2/http.h>

#include "answers.h"
#include "daemon.h"
#include "files.h"
#include "http.h"
#include "routes.h"
#include "server.h"
#include "util.h"

static void on_request(struct evhttp_request *req, void *arg)
{
        route(arg, req);
}

void api_shutdown(struct daemon *d)
{
        exec_shutdown(d);
        pty_shutdown(d);
        answers_shutdown();
}

int api_setup(struct daemon *d, struct al_error *err)
{
        d->http = evhttp_new(d->base);
        if (!d->http)
                return al_error_set(err, ENOMEM, "creating the HTTP server");
        evhttp_set_gencb(d->http, on_request, d);
        evhttp_set_max_headers_size(d->http, 32 * 1024);
        evhttp_set_max_body_size(d->http, FILES_MAX_SIZE + 64 * 1024);
        evhttp_set_timeout(d->http, 60);
        evhttp_set_allowed_methods(d->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                                EVHTTP_REQ_DELETE);
        return 0;
}
