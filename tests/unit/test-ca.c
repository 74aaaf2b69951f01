/* SPDX-License-Identifier: Apache-2.0 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include "netgate/ca.h"
#include "util.h"

static X509 *pem_cert(const char *pem)
{
        BIO *b = BIO_new_mem_buf(pem, -1);
        X509 *x = PEM_read_bio_X509(b, NULL, NULL, NULL);
        BIO_free(b);
        return x;
}

/* Whether `leaf` chains to `root` alone and is good for `host`. */
static bool verifies(X509 *root, X509 *leaf, const char *host)
{
        X509_STORE *st = X509_STORE_new();
        X509_STORE_add_cert(st, root);
        X509_STORE_CTX *sc = X509_STORE_CTX_new();
        X509_STORE_CTX_init(sc, st, leaf, NULL);
        X509_VERIFY_PARAM *vp = X509_STORE_CTX_get0_param(sc);
        X509_VERIFY_PARAM_set_purpose(vp, X509_PURPOSE_SSL_SERVER);
        X509_VERIFY_PARAM_set1_host(vp, host, 0);
        bool ok = X509_verify_cert(sc) == 1;
        X509_STORE_CTX_free(sc);
        X509_STORE_free(st);
        return ok;
}

Test(ca, leaf_chains_to_this_sandbox_ca_only)
{
        struct netgate_ca *a = NULL, *b = NULL;
        struct al_error err = {0};
        cr_assert_eq(netgate_ca_new("sb-a", &a, &err), 0, "%s", err.msg);
        cr_assert_eq(netgate_ca_new("sb-b", &b, &err), 0, "%s", err.msg);
        const char *pem = netgate_ca_cert_pem(a);
        cr_assert(strstr(pem, "BEGIN CERTIFICATE"));
        cr_assert_null(strstr(pem, "PRIVATE"), "the key never leaves the CA's memory");

        SSL_CTX *ctx = NULL;
        cr_assert_eq(netgate_ca_server_ctx(a, "api.example.test", &ctx, &err), 0, "%s", err.msg);
        X509 *leaf = SSL_CTX_get0_certificate(ctx);
        cr_assert_not_null(leaf);
        X509 *ra = pem_cert(pem), *rb = pem_cert(netgate_ca_cert_pem(b));
        cr_assert(verifies(ra, leaf, "api.example.test"));
        cr_assert(!verifies(ra, leaf, "other.example.test"), "the leaf names its host only");
        cr_assert(!verifies(rb, leaf, "api.example.test"), "another sandbox's CA does not sign it");
        X509_NAME *subj = X509_get_subject_name(ra);
        char cn[256];
        X509_NAME_get_text_by_NID(subj, NID_commonName, cn, sizeof(cn));
        cr_assert(strstr(cn, "sb-a"), "%s", cn);
        X509_free(ra);
        X509_free(rb);
        SSL_CTX_free(ctx);

        cr_assert_eq(netgate_ca_server_ctx(a, "127.0.0.1", &ctx, &err), 0, "%s", err.msg);
        ra = pem_cert(pem);
        X509_STORE *st = X509_STORE_new();
        X509_STORE_add_cert(st, ra);
        X509_STORE_CTX *sc = X509_STORE_CTX_new();
        X509_STORE_CTX_init(sc, st, SSL_CTX_get0_certificate(ctx), NULL);
        X509_VERIFY_PARAM_set1_ip_asc(X509_STORE_CTX_get0_param(sc), "127.0.0.1");
        cr_assert_eq(X509_verify_cert(sc), 1, "an IP literal gets an IP SAN");
        X509_STORE_CTX_free(sc);
        X509_STORE_free(st);
        X509_free(ra);
        SSL_CTX_free(ctx);
        netgate_ca_free(a);
        netgate_ca_free(b);
}

Test(ca, bundle_is_host_bundle_then_ca)
{
        struct netgate_ca *a = NULL;
        struct al_error err = {0};
        cr_assert_eq(netgate_ca_new("sb", &a, &err), 0);
        char dir[] = "/tmp/test-ca-XXXXXX";
        cr_assert_not_null(mkdtemp(dir));
        _cleanup_free_ char *host = xasprintf("%s/host.pem", dir);
        FILE *f = fopen(host, "w");
        fputs("HOST-BUNDLE\n", f);
        fclose(f);
        char *path = NULL;
        cr_assert_eq(netgate_ca_write_bundle(a, host, dir, &path, &err), 0, "%s", err.msg);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        cr_assert_eq(st.st_mode & 07777, 0644);
        char *text = NULL;
        size_t len = 0;
        cr_assert_eq(read_file_at(AT_FDCWD, path, 1 << 20, &text, &len), 0);
        cr_assert_eq(strncmp(text, "HOST-BUNDLE\n", 12), 0);
        cr_assert(strstr(text, netgate_ca_cert_pem(a)));
        cr_assert_null(strstr(text, "PRIVATE"));
        unlink(path);
        free(path);
        free(text);
        /* No host bundle: the CA alone. */
        _cleanup_free_ char *missing = xasprintf("%s/none.pem", dir);
        cr_assert_eq(netgate_ca_write_bundle(a, missing, dir, &path, &err), 0, "%s", err.msg);
        unlink(path);
        free(path);
        unlink(host);
        rmdir(dir);
        netgate_ca_free(a);
}
