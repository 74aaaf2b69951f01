/* SPDX-License-Identifier: Apache-2.0 */
/* libssl and libcrypto, loaded by `airlock` only when a command calls them:
 * the network gate when it terminates or originates TLS, the gate's CA, the
 * image digests, the dashboard's WebSocket handshake. Linked statically,
 * libcrypto's 16,649 relative relocations and libssl's 1,847 were applied at
 * every exec of airlock (about 100 pages written, and libcrypto's CPU probe
 * run from _init): about 0.3 ms of CPU of each `airlock run`, which calls
 * neither (its SHA-256 and base64 are Airlock's own, base/sha256.c and
 * base/util.c). These definitions stand in for every libssl and libcrypto
 * function the airlock program references, its own code's and statically
 * linked libevent_openssl's; each forwards to the real one, loaded on first
 * use from the shared libssl of the version the build compiled against
 * (AIRLOCK_LIBSSL_SONAME). With these defined, the link pulls no member of
 * libssl.a or libcrypto.a (the `airlock-no-libcrypto` test checks it).
 * When the library cannot be loaded each returns its failure value, so TLS
 * fails closed, and ERR_error_string_n says why. airlockd and the other
 * programs link libssl and libcrypto themselves. Hidden: the shared
 * libraries must bind to each other, never to these. */
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lazylib.h"

#ifndef AIRLOCK_LIBSSL_SONAME
#error "AIRLOCK_LIBSSL_SONAME must name libssl's shared object (src/cli/meson.build)"
#endif

static void *lib;
static char load_msg[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* The stand-ins that return nothing cannot report a function the library
 * lacks: a missing SSL_CTX_set_verify would leave a peer unverified. The
 * library is taken only when it has every one of them. */
#define VOID_FNS(X) \
        X(BIO_clear_flags, (BIO *a0, int a1), (a0, a1)) \
        X(BIO_set_data, (BIO *a0, void *a1), (a0, a1)) \
        X(BIO_set_flags, (BIO *a0, int a1), (a0, a1)) \
        X(BIO_set_init, (BIO *a0, int a1), (a0, a1)) \
        X(BIO_set_shutdown, (BIO *a0, int a1), (a0, a1)) \
        X(BN_free, (BIGNUM *a0), (a0)) \
        X(EVP_MD_CTX_free, (EVP_MD_CTX *a0), (a0)) \
        X(EVP_PKEY_free, (EVP_PKEY *a0), (a0)) \
        X(SSL_CTX_free, (SSL_CTX *a0), (a0)) \
        X(SSL_CTX_set_alpn_select_cb, (SSL_CTX *a0, SSL_CTX_alpn_select_cb_func a1, void *a2), (a0, a1, a2)) \
        X(SSL_CTX_set_verify, (SSL_CTX *a0, int a1, SSL_verify_cb a2), (a0, a1, a2)) \
        X(SSL_free, (SSL *a0), (a0)) \
        X(SSL_set_accept_state, (SSL *a0), (a0)) \
        X(SSL_set_bio, (SSL *a0, BIO *a1, BIO *a2), (a0, a1, a2)) \
        X(SSL_set_connect_state, (SSL *a0), (a0)) \
        X(SSL_set_hostflags, (SSL *a0, unsigned int a1), (a0, a1)) \
        X(X509V3_set_ctx, (X509V3_CTX *a0, X509 *a1, X509 *a2, X509_REQ *a3, X509_CRL *a4, int a5), (a0, a1, a2, a3, a4, a5)) \
        X(X509_EXTENSION_free, (X509_EXTENSION *a0), (a0)) \
        X(X509_free, (X509 *a0), (a0))

#define NAME_OF(name, params, args) #name,
static const char *const void_fns[] = {VOID_FNS(NAME_OF)};
#undef NAME_OF

static void load(void)
{
        /* libssl brings libcrypto, which dlsym on this handle searches too. */
        lib = lazylib_open(AIRLOCK_LIBSSL_SONAME, load_msg, sizeof(load_msg));
        for (size_t i = 0; lib && i < sizeof(void_fns) / sizeof(void_fns[0]); i++)
                if (!dlsym(lib, void_fns[i])) {
                        snprintf(load_msg, sizeof(load_msg), "loading %s: it lacks %s",
                                 AIRLOCK_LIBSSL_SONAME, void_fns[i]);
                        dlclose(lib);
                        lib = NULL;
                }
}

/* A call that failed for want of the library queues one error, as libssl
 * queues its own: ERR_get_error hands it out once, so that the caller's
 * message says why (ERR_error_string_n) and a loop draining the queue ends. */
static __thread bool load_error_queued;
#define LOAD_ERROR_CODE 1UL

static void *sym(const char *name)
{
        pthread_once(&load_once, load);
        if (!lib) {
                load_error_queued = true;
                return NULL;
        }
        return dlsym(lib, name);
}

VOID_FNS(LAZY_VOID)
LAZY(long int, BIO_ctrl, (BIO *a0, int a1, long int a2, void *a3), (a0, a1, a2, a3), 0)
LAZY(int, BIO_free, (BIO *a0), (a0), 0)
LAZY(void *, BIO_get_data, (BIO *a0), (a0), NULL)
LAZY(int, BIO_get_init, (BIO *a0), (a0), 0)
LAZY(int, BIO_get_shutdown, (BIO *a0), (a0), 0)
LAZY(BIO_METHOD *, BIO_meth_new, (int a0, const char *a1), (a0, a1), NULL)
LAZY(int, BIO_meth_set_create, (BIO_METHOD *a0, int (*a1) (BIO *)), (a0, a1), 0)
LAZY(int, BIO_meth_set_ctrl, (BIO_METHOD *a0, long int (*a1) (BIO *, int, long int, void *)), (a0, a1), 0)
LAZY(int, BIO_meth_set_destroy, (BIO_METHOD *a0, int (*a1) (BIO *)), (a0, a1), 0)
LAZY(int, BIO_meth_set_puts, (BIO_METHOD *a0, int (*a1) (BIO *, const char *)), (a0, a1), 0)
LAZY(int, BIO_meth_set_read, (BIO_METHOD *a0, int (*a1) (BIO *, char *, int)), (a0, a1), 0)
LAZY(int, BIO_meth_set_write, (BIO_METHOD *a0, int (*a1) (BIO *, const char *, int)), (a0, a1), 0)
LAZY(BIO *, BIO_new, (const BIO_METHOD *a0), (a0), NULL)
LAZY(BIO *, BIO_new_socket, (int a0, int a1), (a0, a1), NULL)
LAZY(uint64_t, BIO_number_read, (BIO *a0), (a0), 0)
LAZY(uint64_t, BIO_number_written, (BIO *a0), (a0), 0)
LAZY(const BIO_METHOD *, BIO_s_mem, (void), (), NULL)
LAZY(BIGNUM *, BN_bin2bn, (const unsigned char *a0, int a1, BIGNUM *a2), (a0, a1, a2), NULL)
LAZY(ASN1_INTEGER *, BN_to_ASN1_INTEGER, (const BIGNUM *a0, ASN1_INTEGER *a1), (a0, a1), NULL)
LAZY(int, EVP_DigestFinal_ex, (EVP_MD_CTX *a0, unsigned char *a1, unsigned int *a2), (a0, a1, a2), 0)
LAZY(int, EVP_DigestInit_ex, (EVP_MD_CTX *a0, const EVP_MD *a1, ENGINE *a2), (a0, a1, a2), 0)
LAZY(int, EVP_DigestUpdate, (EVP_MD_CTX *a0, const void *a1, size_t a2), (a0, a1, a2), 0)
LAZY(EVP_MD_CTX *, EVP_MD_CTX_new, (void), (), NULL)
LAZY(const EVP_MD *, EVP_sha256, (void), (), NULL)
LAZY(int, PEM_write_bio_X509, (BIO *a0, const X509 *a1), (a0, a1), 0)
LAZY(int, RAND_bytes, (unsigned char *a0, int a1), (a0, a1), 0)
LAZY(unsigned char *, SHA1, (const unsigned char *a0, size_t a1, unsigned char *a2), (a0, a1, a2), NULL)
LAZY(int, SSL_CTX_check_private_key, (const SSL_CTX *a0), (a0), 0)
LAZY(long int, SSL_CTX_ctrl, (SSL_CTX *a0, int a1, long int a2, void *a3), (a0, a1, a2, a3), 0)
LAZY(int, SSL_CTX_load_verify_locations, (SSL_CTX *a0, const char *a1, const char *a2), (a0, a1, a2), 0)
LAZY(SSL_CTX *, SSL_CTX_new, (const SSL_METHOD *a0), (a0), NULL)
LAZY(int, SSL_CTX_set_alpn_protos, (SSL_CTX *a0, const unsigned char *a1, unsigned int a2), (a0, a1, a2), 0)
LAZY(int, SSL_CTX_set_default_verify_paths, (SSL_CTX *a0), (a0), 0)
LAZY(uint64_t, SSL_CTX_set_options, (SSL_CTX *a0, uint64_t a1), (a0, a1), 0)
LAZY(int, SSL_CTX_use_PrivateKey, (SSL_CTX *a0, EVP_PKEY *a1), (a0, a1), 0)
LAZY(int, SSL_CTX_use_certificate, (SSL_CTX *a0, X509 *a1), (a0, a1), 0)
LAZY(int, SSL_clear, (SSL *a0), (a0), 0)
LAZY(long int, SSL_ctrl, (SSL *a0, int a1, long int a2, void *a3), (a0, a1, a2, a3), 0)
LAZY(int, SSL_do_handshake, (SSL *a0), (a0), -1)
LAZY(X509_VERIFY_PARAM *, SSL_get0_param, (SSL *a0), (a0), NULL)
LAZY(int, SSL_get_error, (const SSL *a0, int a1), (a0, a1), SSL_ERROR_SSL)
LAZY(BIO *, SSL_get_rbio, (const SSL *a0), (a0), NULL)
LAZY(int, SSL_get_shutdown, (const SSL *a0), (a0), 0)
LAZY(long int, SSL_get_verify_result, (const SSL *a0), (a0), X509_V_ERR_UNSPECIFIED)
LAZY(BIO *, SSL_get_wbio, (const SSL *a0), (a0), NULL)
LAZY(SSL *, SSL_new, (SSL_CTX *a0), (a0), NULL)
LAZY(int, SSL_pending, (const SSL *a0), (a0), 0)
LAZY(int, SSL_read, (SSL *a0, void *a1, int a2), (a0, a1, a2), -1)
LAZY(int, SSL_renegotiate, (SSL *a0), (a0), 0)
LAZY(int, SSL_select_next_proto, (unsigned char **a0, unsigned char *a1, const unsigned char *a2, unsigned int a3, const unsigned char *a4, unsigned int a5), (a0, a1, a2, a3, a4, a5), OPENSSL_NPN_NO_OVERLAP)
LAZY(int, SSL_set1_host, (SSL *a0, const char *a1), (a0, a1), 0)
LAZY(int, SSL_write, (SSL *a0, const void *a1, int a2), (a0, a1, a2), -1)
LAZY(const SSL_METHOD *, TLS_client_method, (void), (), NULL)
LAZY(const SSL_METHOD *, TLS_server_method, (void), (), NULL)
LAZY(X509_EXTENSION *, X509V3_EXT_conf_nid, (struct lhash_st_CONF_VALUE *a0, X509V3_CTX *a1, int a2, const char *a3), (a0, a1, a2, a3), NULL)
LAZY(int, X509_NAME_add_entry_by_txt, (X509_NAME *a0, const char *a1, int a2, const unsigned char *a3, int a4, int a5, int a6), (a0, a1, a2, a3, a4, a5, a6), 0)
LAZY(int, X509_VERIFY_PARAM_set1_ip_asc, (X509_VERIFY_PARAM *a0, const char *a1), (a0, a1), 0)
LAZY(int, X509_add_ext, (X509 *a0, X509_EXTENSION *a1, int a2), (a0, a1, a2), 0)
LAZY(ASN1_INTEGER *, X509_get_serialNumber, (X509 *a0), (a0), NULL)
LAZY(X509_NAME *, X509_get_subject_name, (const X509 *a0), (a0), NULL)
LAZY(ASN1_TIME *, X509_getm_notAfter, (const X509 *a0), (a0), NULL)
LAZY(ASN1_TIME *, X509_getm_notBefore, (const X509 *a0), (a0), NULL)
LAZY(ASN1_TIME *, X509_gmtime_adj, (ASN1_TIME *a0, long int a1), (a0, a1), NULL)
LAZY(X509 *, X509_new, (void), (), NULL)
LAZY(int, X509_set_issuer_name, (X509 *a0, const X509_NAME *a1), (a0, a1), 0)
LAZY(int, X509_set_pubkey, (X509 *a0, EVP_PKEY *a1), (a0, a1), 0)
LAZY(int, X509_set_version, (X509 *a0, long int a1), (a0, a1), 0)
LAZY(int, X509_sign, (X509 *a0, EVP_PKEY *a1, const EVP_MD *a2), (a0, a1, a2), 0)

HIDDEN void ERR_clear_error(void);
void ERR_clear_error(void)
{
        LAZY_FN(void, ERR_clear_error, (void))
        load_error_queued = false;
        if (g)
                g();
}

HIDDEN unsigned long ERR_get_error(void);
unsigned long ERR_get_error(void)
{
        bool queued = load_error_queued; /* before the lookup queues another */
        LAZY_FN(unsigned long, ERR_get_error, (void))
        if (g)
                return g();
        load_error_queued = false;
        return queued ? LOAD_ERROR_CODE : 0;
}

HIDDEN unsigned long ERR_peek_error(void);
unsigned long ERR_peek_error(void)
{
        bool queued = load_error_queued;
        LAZY_FN(unsigned long, ERR_peek_error, (void))
        load_error_queued = queued;
        if (g)
                return g();
        return queued ? LOAD_ERROR_CODE : 0;
}

HIDDEN const char *X509_verify_cert_error_string(long int n);
const char *X509_verify_cert_error_string(long int n)
{
        bool queued = load_error_queued;
        LAZY_FN(const char *, X509_verify_cert_error_string, (long int))
        load_error_queued = queued;
        return g ? g(n) : load_msg;
}

/* Why the last call failed: libssl's own error, or that it is not loaded. */
HIDDEN void ERR_error_string_n(unsigned long e, char *buf, size_t len);
void ERR_error_string_n(unsigned long e, char *buf, size_t len)
{
        bool queued = load_error_queued;
        LAZY_FN(void, ERR_error_string_n, (unsigned long, char *, size_t))
        load_error_queued = queued;
        if (g)
                g(e, buf, len);
        else if (len)
                snprintf(buf, len, "%s", load_msg);
}

/* Variadic: only the key type airlock's own code makes (EVP_EC_gen, in the
 * gate's CA: "EC" and a curve name) is forwarded; any other fails, so that a
 * new one is added here. */
HIDDEN EVP_PKEY *EVP_PKEY_Q_keygen(OSSL_LIB_CTX *libctx, const char *propq, const char *type,
                                   ...);
EVP_PKEY *EVP_PKEY_Q_keygen(OSSL_LIB_CTX *libctx, const char *propq, const char *type, ...)
{
        LAZY_FN(EVP_PKEY *, EVP_PKEY_Q_keygen,
                (OSSL_LIB_CTX *, const char *, const char *, ...))
        if (!g || !type || strcmp(type, "EC") != 0)
                return NULL;
        va_list ap;
        va_start(ap, type);
        const char *curve = va_arg(ap, const char *);
        va_end(ap);
        return g(libctx, propq, type, curve);
}
