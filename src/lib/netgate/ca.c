/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "netgate/addr.h"
#include "netgate/ca.h"
#include "util.h"

#define CA_DAYS           1
#define BUNDLE_MAX        (8u << 20) /* the host's bundle */
#define BUNDLE_READ_CHUNK 65536

struct netgate_ca {
        EVP_PKEY *key;
        X509 *cert;
        char *pem;
};

static int ossl_error(struct al_error *err, const char *what)
{
        char buf[256] = "unknown error";
        unsigned long e = ERR_get_error();
        if (e)
                ERR_error_string_n(e, buf, sizeof(buf));
        ERR_clear_error();
        return al_error_set(err, 0, "the sandbox's TLS authority: %s: %s", what, buf);
}

static bool set_serial(X509 *x)
{
        unsigned char raw[16];
        if (RAND_bytes(raw, sizeof(raw)) != 1)
                return false;
        raw[0] &= 0x7f; /* positive */
        BIGNUM *bn = BN_bin2bn(raw, sizeof(raw), NULL);
        bool ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
        BN_free(bn);
        return ok;
}

static bool add_ext(X509 *issuer, X509 *x, int nid, const char *value)
{
        X509V3_CTX v3;
        X509V3_set_ctx_nodb(&v3);
        X509V3_set_ctx(&v3, issuer, x, NULL, NULL, 0);
        X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &v3, nid, value);
        if (!e)
                return false;
        bool ok = X509_add_ext(x, e, -1) == 1;
        X509_EXTENSION_free(e);
        return ok;
}

/* A certificate for `key`, valid from an hour ago (clocks differ) for
 * CA_DAYS; self-signed when `issuer` is NULL. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key)
{
        X509 *x = X509_new();
        if (!x)
                return NULL;
        X509_NAME *name = X509_get_subject_name(x);
        bool ok = X509_set_version(x, 2) == 1 && set_serial(x) &&
                  X509_gmtime_adj(X509_getm_notBefore(x), -3600) &&
                  X509_gmtime_adj(X509_getm_notAfter(x), 86400L * CA_DAYS) &&
                  X509_set_pubkey(x, key) == 1 &&
                  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                             (const unsigned char *)"Airlock", -1, -1, 0) == 1 &&
                  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn,
                                             -1, -1, 0) == 1 &&
                  X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name) == 1;
        if (ok && !issuer)
                ok = add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") &&
                     add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") &&
                     add_ext(x, x, NID_subject_key_identifier, "hash");
        if (!ok || X509_sign(x, issuer_key ? issuer_key : key, EVP_sha256()) == 0) {
                X509_free(x);
                return NULL;
        }
        return x;
}

int netgate_ca_new(const char *sandbox_id, struct netgate_ca **ret, struct al_error *err)
{
        ERR_clear_error();
        struct netgate_ca *ca = xcalloc(1, sizeof(*ca));
        char cn[128];
        snprintf(cn, sizeof(cn), "Airlock sandbox %.64s", sandbox_id ? sandbox_id : "");
        int r = 0;
        ca->key = EVP_EC_gen("P-256");
        if (!ca->key) {
                r = ossl_error(err, "making the key");
                goto out;
        }
        ca->cert = make_cert(ca->key, cn, NULL, NULL);
        if (!ca->cert) {
                r = ossl_error(err, "making the certificate");
                goto out;
        }
        BIO *b = BIO_new(BIO_s_mem());
        if (!b || PEM_write_bio_X509(b, ca->cert) != 1) {
                BIO_free(b);
                r = ossl_error(err, "writing the certificate");
                goto out;
        }
        char *data;
        long n = BIO_get_mem_data(b, &data);
        ca->pem = xcalloc((size_t)n + 1, 1);
        memcpy(ca->pem, data, (size_t)n);
        BIO_free(b);
out:
        if (r < 0) {
                netgate_ca_free(ca);
                return r;
        }
        *ret = ca;
        return 0;
}

struct netgate_ca *netgate_ca_free(struct netgate_ca *ca)
{
        if (!ca)
                return NULL;
        EVP_PKEY_free(ca->key);
        X509_free(ca->cert);
        free(ca->pem);
        free(ca);
        return NULL;
}

const char *netgate_ca_cert_pem(const struct netgate_ca *ca)
{
        return ca->pem;
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
        static const unsigned char http11[] = "\x08http/1.1";
        /* Only HTTP/1.1 is parsed behind the terminator: a client that
         * offers h2 alone gets no ALPN and speaks HTTP/1.1 or fails. */
        if (SSL_select_next_proto((unsigned char **)out, outlen, http11, sizeof(http11) - 1, in,
                                  inlen) == OPENSSL_NPN_NEGOTIATED)
                return SSL_TLSEXT_ERR_OK;
        return SSL_TLSEXT_ERR_NOACK;
}

int netgate_ca_server_ctx(const struct netgate_ca *ca, const char *host, SSL_CTX **ret,
                          struct al_error *err)
{
        ERR_clear_error();
        struct netgate_addr ip;
        bool is_ip = netgate_addr_parse(host, &ip) == 0;
        char san[300];
        if (strlen(host) > 253)
                return al_error_set(err, -EINVAL,
                                    "the sandbox's TLS authority: host name too long");
        snprintf(san, sizeof(san), "%s:%s", is_ip ? "IP" : "DNS", host);

        EVP_PKEY *key = EVP_EC_gen("P-256");
        X509 *leaf = NULL;
        SSL_CTX *ctx = NULL;
        int r = 0;
        if (!key) {
                r = ossl_error(err, "making a leaf key");
                goto out;
        }
        leaf = make_cert(key, host, ca->cert, ca->key);
        /* The extensions go in before the signature: re-sign after. */
        if (!leaf || !add_ext(ca->cert, leaf, NID_subject_alt_name, san) ||
            !add_ext(ca->cert, leaf, NID_basic_constraints, "critical,CA:FALSE") ||
            !add_ext(ca->cert, leaf, NID_key_usage, "critical,digitalSignature") ||
            !add_ext(ca->cert, leaf, NID_ext_key_usage, "serverAuth") ||
            !add_ext(ca->cert, leaf, NID_authority_key_identifier, "keyid:always") ||
            X509_sign(leaf, ca->key, EVP_sha256()) == 0) {
                r = ossl_error(err, "making the leaf certificate");
                goto out;
        }
        ctx = SSL_CTX_new(TLS_server_method());
        if (!ctx || SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
            SSL_CTX_use_certificate(ctx, leaf) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1 ||
            SSL_CTX_add1_chain_cert(ctx, ca->cert) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
                r = ossl_error(err, "setting up the TLS server");
                goto out;
        }
        SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
        SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_TICKET);
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
out:
        EVP_PKEY_free(key);
        X509_free(leaf);
        if (r < 0) {
                SSL_CTX_free(ctx);
                return r;
        }
        *ret = ctx;
        return 0;
}

int netgate_ca_write_bundle(const struct netgate_ca *ca, const char *host_bundle, const char *dir,
                            char **ret_path, struct al_error *err)
{
        _cleanup_free_ char *path = xasprintf("%s/airlock-ca-XXXXXX", dir);
        _cleanup_close_ int out = mkostemp(path, O_CLOEXEC);
        if (out < 0)
                return al_error_set(err, -errno, "creating the sandbox's CA bundle in %s", dir);
        _cleanup_close_ int in = -1;
        int r = 0;
        if (fchmod(out, 0644) < 0) {
                r = al_error_set(err, -errno, "creating the sandbox's CA bundle %s", path);
                goto fail;
        }
        in = host_bundle ? open(host_bundle, O_RDONLY | O_CLOEXEC) : -1;
        if (in < 0 && host_bundle && errno != ENOENT) {
                r = al_error_set(err, -errno, "reading the host's CA bundle %s", host_bundle);
                goto fail;
        }
        size_t total = 0;
        char *buf = xcalloc(BUNDLE_READ_CHUNK, 1);
        while (in >= 0) {
                ssize_t n = read(in, buf, BUNDLE_READ_CHUNK);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = al_error_set(err, -errno, "reading the host's CA bundle %s",
                                         host_bundle);
                        break;
                }
                if (n == 0)
                        break;
                total += (size_t)n;
                if (total > BUNDLE_MAX) {
                        r = al_error_set(err, -EFBIG, "the host's CA bundle %s is over %u bytes",
                                         host_bundle, BUNDLE_MAX);
                        break;
                }
                r = write_full(out, buf, (size_t)n);
                if (r < 0) {
                        r = al_error_set(err, r, "writing the sandbox's CA bundle %s", path);
                        break;
                }
        }
        free(buf);
        if (r < 0)
                goto fail;
        r = write_full(out, "\n", 1);
        if (r >= 0)
                r = write_full(out, ca->pem, strlen(ca->pem));
        if (r < 0) {
                r = al_error_set(err, r, "writing the sandbox's CA bundle %s", path);
                goto fail;
        }
        *ret_path = TAKE_PTR(path);
        return 0;
fail:
        unlink(path);
        return r;
}
