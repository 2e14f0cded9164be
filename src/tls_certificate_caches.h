// src/tls_certificate_caches.h: readies an OpenSSL context (a client's or a
// server's) to be shared by the handshakes of many threads at once.
//
// OpenSSL caches what it decodes from a certificate's extensions (key usage,
// basic constraints, the key identifiers) in the certificate itself, on
// first use: a thread checks the cache under a read lock, decodes, then
// writes under a write lock without looking again (3.0, Debian 12's, and
// the releases after it alike; OpenSSL issue 32609). Two threads that both
// found the cache empty both write it, the second overwriting the fields the
// first is already reading (ThreadSanitizer: a data race in
// ASN1_STRING_cmp). A context's certificates, its trust store's and its own
// chain, are shared by every connection made with it; filling their caches
// before the context is shared leaves nothing for concurrent handshakes to
// write.
//
// Header-only, for the targets that link OpenSSL (the Redis module, the
// gateway and its fake upstream): fusebox::core does not.
//
// Not thread-safe: call it on a context no other thread can see yet.
#ifndef FUSEBOX_SRC_TLS_CERTIFICATE_CACHES_H_
#define FUSEBOX_SRC_TLS_CERTIFICATE_CACHES_H_

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace fusebox::internal {

// Fills the extension caches of every certificate `ctx` holds: the trust
// store's (the system's and ca_file's, loaded by then) and its own
// certificate with its chain. Certificates a hashed CA directory adds to the
// store later, during a handshake, are not covered: their first two users
// may still race inside OpenSSL.
inline void FillCertificateCaches(SSL_CTX* ctx) {
  // X509_check_purpose() with purpose -1 fills the cache and checks nothing.
  const auto fill = [](X509* x) {
    if (x != nullptr) (void)X509_check_purpose(x, -1, 0);
  };
  STACK_OF(X509_OBJECT)* objects = X509_STORE_get0_objects(SSL_CTX_get_cert_store(ctx));
  for (int i = 0; i < sk_X509_OBJECT_num(objects); ++i) {
    fill(X509_OBJECT_get0_X509(sk_X509_OBJECT_value(objects, i)));
  }
  fill(SSL_CTX_get0_certificate(ctx));
  STACK_OF(X509)* chain = nullptr;
  if (SSL_CTX_get0_chain_certs(ctx, &chain) == 1) {
    for (int i = 0; i < sk_X509_num(chain); ++i) fill(sk_X509_value(chain, i));
  }
}

}  // namespace fusebox::internal

#endif  // FUSEBOX_SRC_TLS_CERTIFICATE_CACHES_H_
