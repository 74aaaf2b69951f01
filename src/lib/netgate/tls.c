/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "netgate/addr.h"
#include "netgate/rules.h"
#include "netgate/tls.h"
#include "util.h"

struct netgate_tls {
        SSL_CTX *ctx;
};

static int ssl_error(struct al_error *err, const char *what, const char *route)
{
        char buf[256] = "unknown error";
        unsigned long e = ERR_get_error();
        if (e)
                ERR_error_string_n(e, buf, sizeof(buf));
        ERR_clear_error();
        return al_error_set(err, 0, "route \"%s\": %s: %s", route, what, buf);
}

int netgate_tls_new(const char *ca_file, const char *route, struct netgate_tls **ret,
                    struct al_error *err)
{
        ERR_clear_error();
        struct netgate_tls *t = xcalloc(1, sizeof(*t));
        int r = 0;
        t->ctx = SSL_CTX_new(TLS_client_method());
        if (!t->ctx) {
                r = ssl_error(err, "creating the TLS context", route);
                goto out;
        }
        SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
        SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
        SSL_CTX_set_mode(t->ctx, SSL_MODE_RELEASE_BUFFERS);
        static const unsigned char alpn[] = "\x08http/1.1";
        SSL_CTX_set_alpn_protos(t->ctx, alpn, sizeof(alpn) - 1);
        if (ca_file) {
                /* Only this CA: the route trusts what the host configured. */
                if (SSL_CTX_load_verify_locations(t->ctx, ca_file, NULL) != 1) {
                        char what[PATH_MAX + 32];
                        snprintf(what, sizeof(what), "caFile \"%s\"", ca_file);
                        r = ssl_error(err, what, route);
                }
        } else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1)
                r = ssl_error(err, "loading the system CA store", route);
out:
        if (r < 0) {
                netgate_tls_free(t);
                return r;
        }
        *ret = t;
        return 0;
}

struct netgate_tls *netgate_tls_free(struct netgate_tls *t)
{
        if (!t)
                return NULL;
        if (t->ctx)
                SSL_CTX_free(t->ctx);
        free(t);
        return NULL;
}

struct bufferevent *netgate_tls_layer(const struct netgate_tls *t, struct event_base *base, int fd,
                                      const struct netgate_host *peer)
{
        ERR_clear_error();
        SSL *ssl = SSL_new(t->ctx);
        if (!ssl)
                return NULL;
        int ok;
        if (peer->kind == NETGATE_HOST_NAME) {
                SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                ok = SSL_set_tlsext_host_name(ssl, peer->name) == 1 &&
                     SSL_set1_host(ssl, peer->name) == 1;
        } else {
                char ip[NETGATE_ADDR_STRLEN];
                netgate_addr_format(&peer->addr, ip);
                ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), ip) == 1;
        }
        if (!ok) {
                SSL_free(ssl);
                ERR_clear_error();
                return NULL;
        }
        struct bufferevent *bev =
            bufferevent_openssl_socket_new(base, fd, ssl, BUFFEREVENT_SSL_CONNECTING,
                                           BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
        if (!bev) {
                SSL_free(ssl);
                return NULL;
        }
        /* Many servers close without close_notify; framing, not the TLS
         * close, tells a whole response from a cut one. */
        bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
        return bev;
}

void netgate_tls_describe_failure(struct bufferevent *bev, int err, char *buf, size_t size)
{
        SSL *ssl = bufferevent_openssl_get_ssl(bev);
        long v = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;
        unsigned long e = bufferevent_get_openssl_error(bev);
        if (v != X509_V_OK)
                snprintf(buf, size, "TLS: certificate not accepted: %s",
                         X509_verify_cert_error_string(v));
        else if (e) {
                char what[200];
                ERR_error_string_n(e, what, sizeof(what));
                snprintf(buf, size, "TLS handshake failed: %s", what);
        } else
                snprintf(buf, size, "TLS handshake failed%s%s", err ? ": " : "",
                         err ? strerror(err) : "");
        netgate_tls_clear_errors(bev);
        ERR_clear_error();
}

void netgate_tls_clear_errors(struct bufferevent *bev)
{
        /* 0 at once for a bufferevent without the layer. */
        while (bufferevent_get_openssl_error(bev))
                ;
}
