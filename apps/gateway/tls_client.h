// apps/gateway/tls_client.h: the gateway's TLS client side (an https://
// upstream), on OpenSSL through Boost.Asio's ssl::context.
//
// One TlsClientContext per distinct TlsClientSettings in the process
// (Shared()): one SSL_CTX, its trust store (the system's, plus ca_file), the
// client certificate when there is one, TLS 1.2 at least, and the sessions it
// remembers, one per host:port, so that a new connection resumes the last
// session instead of a full handshake (a TLS 1.3 ticket, a TLS 1.2 session).
//
//   Result<std::shared_ptr<TlsClientContext>> tls = TlsClientContext::Shared(settings);
//   if (!tls) ...  // "tls.ca_file: cannot load \"ca.pem\": ..."
//   boost::beast::ssl_stream<boost::beast::tcp_stream> stream(ioc, (*tls)->context());
//   (*tls)->Prepare(stream.native_handle(), "graph.facebook.com", 443);
//   ... handshake ...
//
// A failure is named (TlsFailureReason): the check that refused the upstream's
// certificate (hostname, validity dates, issuer) or the upstream's refusal of
// ours. docs/gateway.md says how the gateway answers each.
//
// Thread-safe.
#ifndef FUSEBOX_APPS_GATEWAY_TLS_CLIENT_H_
#define FUSEBOX_APPS_GATEWAY_TLS_CLIENT_H_

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "apps/gateway/config.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/result.h"

namespace fusebox::gateway {

// The reasons (Status::reason()) of a TLS failure that is the configuration's
// or the certificates' doing, not the network's: the same on every try.
inline constexpr char kTlsHostnameMismatch[] = "tls_hostname_mismatch";
inline constexpr char kTlsCertificateExpired[] = "tls_certificate_expired";
inline constexpr char kTlsCertificateNotYetValid[] = "tls_certificate_not_yet_valid";
inline constexpr char kTlsUnknownCa[] = "tls_unknown_ca";
inline constexpr char kTlsClientCertificateRequired[] = "tls_client_certificate_required";
// Any other refusal: another verification error (a revoked or malformed
// certificate), no protocol version or cipher in common, plain HTTP on the
// port.
inline constexpr char kTlsHandshakeFailed[] = "tls_handshake_failed";

// Whether `status` is one of the failures above (code kUnauthenticated, a
// reason starting "tls_").
bool IsTlsFailure(const Status& status);

// The failure's check for the client ("hostname_mismatch") and a sentence
// that says what failed.
std::string_view TlsCheckName(std::string_view reason);
std::string_view TlsFailureMessage(std::string_view reason);

class TlsClientContext {
 public:
  // Builds the context: verification against the system's trust store and
  // `settings.ca_file` (unless insecure_skip_verify), the client certificate
  // and key, TLS 1.2 at least. kInvalidArgument naming the key and the file
  // that could not be loaded ("tls.client_key: cannot load \"k.pem\": ...").
  static Result<std::shared_ptr<TlsClientContext>> Create(const TlsClientSettings& settings);

  // The process's one context for `settings`, made by Create() on first use
  // and shared while anyone holds it.
  static Result<std::shared_ptr<TlsClientContext>> Shared(const TlsClientSettings& settings);

  ~TlsClientContext();
  TlsClientContext(const TlsClientContext&) = delete;
  TlsClientContext& operator=(const TlsClientContext&) = delete;

  boost::asio::ssl::context& context() { return ctx_; }
  const TlsClientSettings& settings() const { return settings_; }

  // Readies a new connection's `ssl` for `host`:`port`: SNI (unless `host`
  // is an IP address), the name or address the certificate must carry, and
  // the session last remembered for host:port. kInvalidArgument when OpenSSL
  // refuses the name.
  Status Prepare(SSL* ssl, const std::string& host, int port);

  // The failure `ec` is, on a connection whose TLS object is `ssl`: one of
  // the reasons above, or nullptr for a failure of the network (a reset, the
  // end of the stream, a timeout), which is the upstream's like any other.
  // `handshake`: whether the handshake had not completed yet.
  const char* FailureReason(const boost::system::error_code& ec, SSL* ssl, bool handshake) const;

 private:
  explicit TlsClientContext(TlsClientSettings settings);
  static int OnNewSession(SSL* ssl, SSL_SESSION* session);
  static int OnClientCertRequested(SSL* ssl, X509** cert, EVP_PKEY** key);

  const TlsClientSettings settings_;
  boost::asio::ssl::context ctx_;
  internal::Mutex mu_;
  // host:port -> the last session the upstream gave (owned: SSL_SESSION_free).
  std::map<std::string, SSL_SESSION*> sessions_ FUSEBOX_GUARDED_BY(mu_);
};

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_TLS_CLIENT_H_
