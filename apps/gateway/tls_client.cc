#include "apps/gateway/tls_client.h"

#include <openssl/err.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <array>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ssl/error.hpp>
#include <utility>
#include <vector>

#include "src/tls_certificate_caches.h"

namespace fusebox::gateway {

namespace asio = boost::asio;

namespace {

void FreeKey(void* /*parent*/, void* ptr, CRYPTO_EX_DATA* /*ad*/, int /*idx*/, long /*argl*/,
             void* /*argp*/) {
  delete static_cast<std::string*>(ptr);
}

// A connection's "host:port" (a std::string the SSL owns), where its session
// is remembered.
int KeyIndex() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, FreeKey);
  return index;
}

// Set (to a non-null marker) when the upstream asked for a client
// certificate and the context had none to give.
int CertRequestedIndex() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// The SSL_CTX's TlsClientContext (Boost.Asio keeps its own callbacks in the
// SSL_CTX's and the SSL's app data, index 0: ours are separate indexes).
int ContextIndex() {
  static const int index = SSL_CTX_get_ex_new_index(0, nullptr, nullptr, nullptr, nullptr);
  return index;
}

// OpenSSL's queued errors, oldest first, as one line; the queue is emptied.
std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    std::array<char, 256> buf{};
    ERR_error_string_n(e, buf.data(), buf.size());
    if (!out.empty()) out += "; ";
    out += buf.data();
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

Status CannotLoad(std::string_view key, const std::string& file) {
  return Status::InvalidArgument("tls." + std::string(key) + ": cannot load \"" + file +
                                 "\": " + OpenSslErrors());
}

}  // namespace

bool IsTlsFailure(const Status& status) {
  return status.code() == StatusCode::kUnauthenticated && status.reason().starts_with("tls_");
}

std::string_view TlsCheckName(std::string_view reason) {
  if (reason.starts_with("tls_")) reason.remove_prefix(4);
  return reason;
}

std::string_view TlsFailureMessage(std::string_view reason) {
  if (reason == kTlsHostnameMismatch) {
    return "the upstream's TLS certificate is not for the host name of its base_url";
  }
  if (reason == kTlsCertificateExpired) return "the upstream's TLS certificate has expired";
  if (reason == kTlsCertificateNotYetValid) {
    return "the upstream's TLS certificate is not valid yet";
  }
  if (reason == kTlsUnknownCa) {
    return "the upstream's TLS certificate is not issued by a trusted CA (the system's trust "
           "store, tls.ca_file)";
  }
  if (reason == kTlsClientCertificateRequired) {
    return "the upstream requires a client certificate (tls.client_cert) and got none it accepts";
  }
  return "the TLS handshake with the upstream failed";
}

TlsClientContext::TlsClientContext(TlsClientSettings settings)
    : settings_(std::move(settings)), ctx_(asio::ssl::context::tls_client) {}

TlsClientContext::~TlsClientContext() {
  internal::MutexLock lock(&mu_);
  for (auto& [key, session] : sessions_) SSL_SESSION_free(session);
}

Result<std::shared_ptr<TlsClientContext>> TlsClientContext::Create(
    const TlsClientSettings& settings) {
  std::shared_ptr<TlsClientContext> c(new TlsClientContext(settings));
  SSL_CTX* ctx = c->ctx_.native_handle();
  ERR_clear_error();
  // TLS 1.0 and 1.1 are deprecated (RFC 8996); Meta's Graph API speaks 1.2 and 1.3.
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
    return Status::Internal("TLS: cannot set the minimum version: " + OpenSslErrors());
  }
  if (settings.insecure_skip_verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  } else {
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      return Status::InvalidArgument("TLS: cannot load the system's trust store: " +
                                     OpenSslErrors());
    }
    if (!settings.ca_file.empty() &&
        SSL_CTX_load_verify_locations(ctx, settings.ca_file.c_str(), nullptr) != 1) {
      return CannotLoad("ca_file", settings.ca_file);
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  }
  if (!settings.client_cert.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, settings.client_cert.c_str()) != 1) {
      return CannotLoad("client_cert", settings.client_cert);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, settings.client_key.c_str(), SSL_FILETYPE_PEM) != 1) {
      return CannotLoad("client_key", settings.client_key);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return Status::InvalidArgument("tls.client_key: \"" + settings.client_key +
                                     "\" is not the key of tls.client_cert \"" +
                                     settings.client_cert + "\": " + OpenSslErrors());
    }
  } else {
    // Notes that the upstream asked for one: its refusal is then named.
    SSL_CTX_set_client_cert_cb(ctx, &TlsClientContext::OnClientCertRequested);
  }
  // Sessions are remembered here, per host:port (OnNewSession), not in
  // OpenSSL's internal cache, which a client does not look up by itself.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(ctx, &TlsClientContext::OnNewSession);
  SSL_CTX_set_ex_data(ctx, ContextIndex(), c.get());
  // Shared from here by the handshakes of every I/O thread (Shared()).
  fusebox::internal::FillCertificateCaches(ctx);
  return c;
}

namespace {

// The process's contexts (TlsClientContext::Shared), each alive while held.
struct SharedContexts {
  internal::Mutex mu;
  std::vector<std::weak_ptr<TlsClientContext>> list FUSEBOX_GUARDED_BY(mu);
};

SharedContexts& Contexts() {
  static auto* contexts = new SharedContexts();  // Never destroyed: used until exit.
  return *contexts;
}

}  // namespace

Result<std::shared_ptr<TlsClientContext>> TlsClientContext::Shared(
    const TlsClientSettings& settings) {
  SharedContexts& shared = Contexts();
  internal::MutexLock lock(&shared.mu);
  std::vector<std::weak_ptr<TlsClientContext>>& contexts = shared.list;
  std::erase_if(contexts, [](const std::weak_ptr<TlsClientContext>& w) { return w.expired(); });
  for (const std::weak_ptr<TlsClientContext>& w : contexts) {
    std::shared_ptr<TlsClientContext> c = w.lock();
    if (c && c->settings() == settings) return c;
  }
  Result<std::shared_ptr<TlsClientContext>> made = Create(settings);
  if (made) contexts.push_back(*made);
  return made;
}

int TlsClientContext::OnNewSession(SSL* ssl, SSL_SESSION* session) {
  auto* self =
      static_cast<TlsClientContext*>(SSL_CTX_get_ex_data(SSL_get_SSL_CTX(ssl), ContextIndex()));
  const auto* key = static_cast<const std::string*>(SSL_get_ex_data(ssl, KeyIndex()));
  if (self == nullptr || key == nullptr || SSL_SESSION_is_resumable(session) != 1) return 0;
  SSL_SESSION* old = nullptr;
  {
    internal::MutexLock lock(&self->mu_);
    SSL_SESSION*& slot = self->sessions_[*key];
    old = std::exchange(slot, session);
  }
  if (old != nullptr) SSL_SESSION_free(old);
  return 1;  // The session is ours now.
}

int TlsClientContext::OnClientCertRequested(SSL* ssl, X509** /*cert*/, EVP_PKEY** /*key*/) {
  static char marker = 0;
  SSL_set_ex_data(ssl, CertRequestedIndex(), &marker);
  return 0;  // No certificate: the handshake goes on without one.
}

Status TlsClientContext::Prepare(SSL* ssl, const std::string& host, int port) {
  auto key = std::make_unique<std::string>(host + ":" + std::to_string(port));
  if (SSL_set_ex_data(ssl, KeyIndex(), key.get()) != 1) {
    return Status::Internal("TLS: cannot attach the session key");
  }
  const std::string& host_port = *key.release();  // Freed with the SSL (FreeKey).
  boost::system::error_code ec;
  (void)asio::ip::make_address(host, ec);
  const bool ip = !ec;
  // SNI carries a host name, never an address (RFC 6066 section 3).
  if (!ip && SSL_set_tlsext_host_name(ssl, host.c_str()) != 1) {
    return Status::InvalidArgument("TLS: \"" + host + "\" is not a valid server name");
  }
  if (!settings_.insecure_skip_verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const int set = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                       : X509_VERIFY_PARAM_set1_host(param, host.c_str(), host.size());
    if (set != 1) {
      return Status::InvalidArgument("TLS: cannot verify certificates for \"" + host + "\"");
    }
  }
  internal::MutexLock lock(&mu_);
  auto it = sessions_.find(host_port);
  if (it != sessions_.end()) SSL_set_session(ssl, it->second);
  return Status();
}

const char* TlsClientContext::FailureReason(const boost::system::error_code& ec, SSL* ssl,
                                            bool handshake) const {
  if (ec.category() != asio::error::get_ssl_category()) return nullptr;
  const unsigned long packed = static_cast<unsigned int>(ec.value());
  const int reason = ERR_GET_REASON(packed);
  if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED && ssl != nullptr) {
    switch (SSL_get_verify_result(ssl)) {
      case X509_V_ERR_HOSTNAME_MISMATCH:
      case X509_V_ERR_IP_ADDRESS_MISMATCH:
        return kTlsHostnameMismatch;
      case X509_V_ERR_CERT_HAS_EXPIRED:
        return kTlsCertificateExpired;
      case X509_V_ERR_CERT_NOT_YET_VALID:
        return kTlsCertificateNotYetValid;
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
      case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
      case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
      case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        return kTlsUnknownCa;
      default:
        return kTlsHandshakeFailed;
    }
  }
  if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED) return kTlsClientCertificateRequired;
  const bool asked = ssl != nullptr && SSL_get_ex_data(ssl, CertRequestedIndex()) != nullptr;
  // TLS 1.2: a server that wants a certificate and got none ends the
  // handshake with an alert (handshake_failure as OpenSSL sends it).
  if (asked &&
      (reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE ||
       reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE || reason == SSL_R_TLSV1_ALERT_ACCESS_DENIED)) {
    return kTlsClientCertificateRequired;
  }
  // After the handshake, an OpenSSL error on a record is the stream's: a
  // transport failure like any other.
  return handshake ? kTlsHandshakeFailed : nullptr;
}

}  // namespace fusebox::gateway
