#include "src/transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "src/tls_certificate_caches.h"

namespace fusebox::redis::internal {
namespace {

using std::chrono::ceil;
using std::chrono::milliseconds;

std::string MsText(Duration d) { return std::to_string(ceil<milliseconds>(d).count()) + " ms"; }

// poll() takes whole milliseconds: round up, so that a short timeout still
// waits, and never wait forever.
int PollMs(Duration d) {
  return static_cast<int>(std::clamp<long long>(ceil<milliseconds>(d).count(), 0, INT_MAX));
}

// Waits for `events` on `fd` for at most `timeout`. 1: ready (or an error
// or hang-up, which the next I/O call reports), 0: timed out, -1: errno.
int WaitFor(int fd, short events, Duration timeout) {
  pollfd p{.fd = fd, .events = events, .revents = 0};
  for (;;) {
    const int n = poll(&p, 1, PollMs(timeout));
    // EINTR: retry with the whole bound again; a signal storm could stretch
    // the wait, but reading a clock here is not allowed (style) and the
    // bound stays per wait, as SO_RCVTIMEO's was.
    if (n < 0 && errno == EINTR) continue;
    return n > 0 ? 1 : n;
  }
}

Status Unavailable(std::string detail) { return Status::Unavailable(std::move(detail)); }

Status TimedOut(Duration timeout) { return Unavailable("timed out after " + MsText(timeout)); }

Status Errno(std::string_view what, int e) {
  return Unavailable(std::string(what) + std::strerror(e));
}

// Blocks SIGPIPE on this thread while OpenSSL may write (it writes with
// write(2), not send(MSG_NOSIGNAL)), and swallows a SIGPIPE that the write
// raised, so that a server that went away yields EPIPE (a broken connection)
// instead of killing the process. The process-wide disposition of SIGPIPE
// belongs to the application and is not touched.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
  }
  ~ScopedSigpipeBlock() {
    if (!blocked_) return;
    const int saved_errno = errno;
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{};
        while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    errno = saved_errno;
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
  bool blocked_ = false;
};

// hiredis' keepalive: probes after 15 s idle, every 5 s, 3 of them.
void EnableKeepAlive(int fd) {
  int on = 1;
  int idle = 15;
  int interval = 5;
  int count = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

// One address: a non-blocking connect bounded by `timeout`. The fd, or -1
// with `error` set.
int ConnectOne(const addrinfo& ai, Duration timeout, std::string& error) {
  const int fd =
      socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol);
  if (fd < 0) {
    error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  if (connect(fd, ai.ai_addr, ai.ai_addrlen) != 0) {
    if (errno != EINPROGRESS) {
      error = std::strerror(errno);
      close(fd);
      return -1;
    }
    const int ready = WaitFor(fd, POLLOUT, timeout);
    int so_error = 0;
    socklen_t len = sizeof so_error;
    if (ready == 0) {
      error = "timed out";
    } else if (ready < 0) {
      error = std::strerror(errno);
    } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) {
      error = std::strerror(errno);
    } else if (so_error != 0) {
      error = std::strerror(so_error);
    } else {
      return fd;
    }
    close(fd);
    return -1;
  }
  return fd;
}

Result<int> ConnectSocket(const ConnectionOptions& options) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const std::string port = std::to_string(options.port);
  if (const int rc = getaddrinfo(options.host.c_str(), port.c_str(), &hints, &list); rc != 0) {
    return Unavailable(std::string("cannot resolve host: ") + gai_strerror(rc));
  }
  std::string error = "no address";
  int fd = -1;
  for (const addrinfo* ai = list; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ConnectOne(*ai, options.connect_timeout, error);
  }
  freeaddrinfo(list);
  if (fd < 0) return Unavailable(error);
  int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  if (options.tcp_keepalive) EnableKeepAlive(fd);
  return fd;
}

class PlainTransport final : public Transport {
 public:
  explicit PlainTransport(int fd) : Transport(fd) {}
  ~PlainTransport() override { CloseFd(); }
  PlainTransport(const PlainTransport&) = delete;
  PlainTransport& operator=(const PlainTransport&) = delete;

  Status WriteAll(std::string_view data, Duration timeout) override {
    while (!data.empty()) {
      const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n > 0) {
        data.remove_prefix(static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        const int ready = WaitFor(fd_, POLLOUT, timeout);
        if (ready == 0) return RanOut(timeout);
        if (ready < 0) return Errno("poll: ", errno);
        continue;
      }
      return Errno("write: ", n < 0 ? errno : EIO);
    }
    return Status();
  }

  Result<std::size_t> Read(char* buf, std::size_t capacity, Duration timeout) override {
    for (;;) {
      const ssize_t n = recv(fd_, buf, capacity, 0);
      if (n > 0) return static_cast<std::size_t>(n);
      if (n == 0) return Unavailable("server closed the connection");
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return Errno("read: ", errno);
      const int ready = WaitFor(fd_, POLLIN, timeout);
      if (ready == 0) return RanOut(timeout);
      if (ready < 0) return Errno("poll: ", errno);
    }
  }

  bool HasBuffered() const override { return false; }
};

// --- TLS ----------------------------------------------------------------------------------

using CtxKey = std::tuple<std::string, std::string, std::string, bool>;

std::string OpenSslErrors() {
  std::string out;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

Result<SSL_CTX*> MakeContext(const ConnectionOptions& o) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return Status::Internal("TLS: SSL_CTX_new: " + OpenSslErrors());
  auto fail = [ctx](Status s) {
    SSL_CTX_free(ctx);
    return s;
  };
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (o.insecure_skip_verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
      return fail(Status::Internal("TLS: cannot load the system trust store: " + OpenSslErrors()));
    }
  }
  if (!o.ca_file.empty() && SSL_CTX_load_verify_locations(ctx, o.ca_file.c_str(), nullptr) != 1) {
    return fail(Status::InvalidArgument("TLS: ca_file '" + o.ca_file +
                                        "' holds no usable certificate: " + OpenSslErrors()));
  }
  if (!o.client_cert.empty()) {
    if (SSL_CTX_use_certificate_chain_file(ctx, o.client_cert.c_str()) != 1) {
      return fail(Status::InvalidArgument("TLS: client_cert '" + o.client_cert +
                                          "' holds no usable certificate: " + OpenSslErrors()));
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, o.client_key.c_str(), SSL_FILETYPE_PEM) != 1) {
      if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
        ERR_clear_error();
        return fail(Status::InvalidArgument("TLS: client_key '" + o.client_key +
                                            "' does not match client_cert '" + o.client_cert +
                                            "'"));
      }
      return fail(Status::InvalidArgument("TLS: client_key '" + o.client_key +
                                          "' holds no usable private key: " + OpenSslErrors()));
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
      return fail(Status::InvalidArgument("TLS: client_key '" + o.client_key +
                                          "' does not match client_cert '" + o.client_cert + "'"));
    }
  }
  // Shared from here by the connections of every thread (SharedContext()).
  fusebox::internal::FillCertificateCaches(ctx);
  return ctx;
}

// The process' TLS contexts, one per distinct settings, kept until exit
// (deliberately never freed: connections of any thread may use them until
// the very end).
Result<SSL_CTX*> SharedContext(const ConnectionOptions& o) {
  static std::mutex mu;
  static auto* contexts = new std::map<CtxKey, SSL_CTX*>();
  CtxKey key{o.ca_file, o.client_cert, o.client_key, o.insecure_skip_verify};
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = contexts->find(key); it != contexts->end()) return it->second;
  Result<SSL_CTX*> ctx = MakeContext(o);
  if (!ctx) return ctx;
  contexts->emplace(std::move(key), *ctx);
  return ctx;
}

bool IsIpAddress(const std::string& host) {
  in6_addr a6{};
  in_addr a4{};
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

// Which check refused the server's certificate, in words.
std::string VerifyFailure(long v, const std::string& host) {
  switch (v) {
    case X509_V_ERR_HOSTNAME_MISMATCH:
    case X509_V_ERR_IP_ADDRESS_MISMATCH:
      return "hostname mismatch: the server's certificate is not valid for '" + host + "'";
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return "certificate expired";
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return "certificate not yet valid";
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
      return "unknown CA: the chain does not lead to a trusted CA (system store or ca_file) (" +
             std::string(X509_verify_cert_error_string(v)) + ")";
    default:
      return X509_verify_cert_error_string(v);
  }
}

class TlsTransport final : public Transport {
 public:
  TlsTransport(int fd, SSL* ssl, const ConnectionOptions& options)
      : Transport(fd),
        ssl_(ssl),
        host_(options.host),
        has_client_cert_(!options.client_cert.empty()) {}
  ~TlsTransport() override {
    // No close_notify: the server does not need it, and it could block.
    SSL_free(ssl_);
    CloseFd();
  }
  TlsTransport(const TlsTransport&) = delete;
  TlsTransport& operator=(const TlsTransport&) = delete;

  Status Handshake(Duration timeout) {
    ScopedSigpipeBlock no_sigpipe;
    for (;;) {
      ERR_clear_error();
      const int rc = SSL_connect(ssl_);
      if (rc == 1) return Status();
      if (Status s = WaitAfter(rc, timeout, "TLS handshake"); !s.ok()) return s;
    }
  }

  Status WriteAll(std::string_view data, Duration timeout) override {
    ScopedSigpipeBlock no_sigpipe;
    while (!data.empty()) {
      ERR_clear_error();
      std::size_t written = 0;
      const int rc = SSL_write_ex(ssl_, data.data(), data.size(), &written);
      if (rc == 1) {
        data.remove_prefix(written);
        continue;
      }
      if (Status s = WaitAfter(rc, timeout, "write"); !s.ok()) return s;
    }
    return Status();
  }

  Result<std::size_t> Read(char* buf, std::size_t capacity, Duration timeout) override {
    ScopedSigpipeBlock no_sigpipe;  // A read may write (key update, renegotiation).
    for (;;) {
      ERR_clear_error();
      std::size_t n = 0;
      const int rc = SSL_read_ex(ssl_, buf, capacity, &n);
      if (rc == 1) return n;
      if (Status s = WaitAfter(rc, timeout, "read"); !s.ok()) return s;
    }
  }

  bool HasBuffered() const override { return SSL_pending(ssl_) > 0 || SSL_has_pending(ssl_) == 1; }

 private:
  // After an SSL call returned `rc`: waits for what it wants (OK to retry),
  // or the Status saying why it failed.
  Status WaitAfter(int rc, Duration timeout, std::string_view stage) {
    const int err = SSL_get_error(ssl_, rc);
    const int saved_errno = errno;
    short events = 0;
    if (err == SSL_ERROR_WANT_READ) events = POLLIN;
    if (err == SSL_ERROR_WANT_WRITE) events = POLLOUT;
    if (events != 0) {
      const int ready = WaitFor(fd_, events, timeout);
      if (ready == 0 && stage == "TLS handshake") {
        timed_out_ = true;
        return Unavailable("TLS handshake: timed out after " + MsText(timeout) +
                           " (is this a TLS port?)");
      }
      if (ready == 0) return RanOut(timeout);
      if (ready < 0) return Errno("poll: ", errno);
      return Status();
    }
    if (err == SSL_ERROR_ZERO_RETURN) return Unavailable("server closed the connection");
    if (err == SSL_ERROR_SYSCALL && stage == "write") {
      // The server may have refused us with an alert (TLS 1.3 refuses a
      // client certificate after the handshake) and closed: read it, so the
      // error says why rather than "connection reset".
      if (std::string alert = PendingAlert(); !alert.empty()) {
        return Unavailable("TLS write: " + alert);
      }
    }
    if (err == SSL_ERROR_SYSCALL) {
      ERR_clear_error();
      if (saved_errno == 0) {
        return Unavailable(stage == "TLS handshake"
                               ? "server closed the connection during the TLS handshake"
                               : "server closed the connection");
      }
      return Errno(std::string(stage) + ": ", saved_errno);
    }
    return Unavailable(std::string(stage == "TLS handshake" ? "" : "TLS ") + std::string(stage) +
                       ": " + TlsFailure());
  }

  // The failure an alert already received says, or "" when none is there.
  std::string PendingAlert() {
    ERR_clear_error();
    char buf[256];
    std::size_t n = 0;
    for (int i = 0; i < 4; ++i) {
      const int rc = SSL_read_ex(ssl_, buf, sizeof buf, &n);
      if (rc == 1) continue;
      if (SSL_get_error(ssl_, rc) == SSL_ERROR_SSL) return TlsFailure();
      break;
    }
    ERR_clear_error();
    return "";
  }

  // The OpenSSL failure in words, naming the check that refused.
  std::string TlsFailure() {
    const long v = SSL_get_verify_result(ssl_);
    const unsigned long e = ERR_peek_error();
    if (v != X509_V_OK && ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED) {
      ERR_clear_error();
      return "certificate verify failed: " + VerifyFailure(v, host_);
    }
    const int reason = ERR_GET_REASON(e);
    if (reason == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED ||
        (!has_client_cert_ && reason == SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE)) {
      const std::string raw = OpenSslErrors();
      if (!has_client_cert_) {
        return "the server requires a client certificate and none is set (client_cert, "
               "client_key) (" +
               raw + ")";
      }
      return "the server refused the client certificate (" + raw + ")";
    }
    if (reason == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE || reason == SSL_R_TLSV1_ALERT_UNKNOWN_CA ||
        reason == SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN) {
      return "the server refused the client certificate (" + OpenSslErrors() + ")";
    }
    if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG) {
      return "the server does not speak TLS on this port (" + OpenSslErrors() + ")";
    }
    return OpenSslErrors();
  }

  SSL* ssl_;
  std::string host_;
  bool has_client_cert_;
};

Result<std::unique_ptr<Transport>> ConnectTls(int fd, const ConnectionOptions& o) {
  Result<SSL_CTX*> ctx = SharedContext(o);
  if (!ctx) {
    close(fd);
    return ctx.error();
  }
  ERR_clear_error();
  SSL* ssl = SSL_new(*ctx);
  if (ssl == nullptr) {
    close(fd);
    return Status::Internal("TLS: SSL_new: " + OpenSslErrors());
  }
  // From here the transport owns fd and ssl.
  auto transport = std::make_unique<TlsTransport>(fd, ssl, o);
  bool ok = SSL_set_fd(ssl, fd) == 1;
  if (IsIpAddress(o.host)) {
    ok = ok && X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), o.host.c_str()) == 1;
  } else {
    // SNI carries names only (RFC 6066), never an address.
    ok = ok && SSL_set_tlsext_host_name(ssl, o.host.c_str()) == 1;
    SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    ok = ok && SSL_set1_host(ssl, o.host.c_str()) == 1;
  }
  if (!ok) return Status::Internal("TLS: cannot set up the session: " + OpenSslErrors());
  if (Status s = transport->Handshake(o.connect_timeout); !s.ok()) return s;
  if (o.insecure_skip_verify) {
    o.Warn("redis_tls_insecure", "connected to " + o.Endpoint() +
                                     " with insecure_skip_verify: its certificate is NOT verified");
  }
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace

bool Transport::WaitReadable(Duration timeout) const {
  if (HasBuffered()) return true;
  return WaitFor(fd_, POLLIN, timeout) != 0;
}

Status Transport::RanOut(Duration timeout) {
  timed_out_ = true;
  return TimedOut(timeout);
}

void Transport::CloseFd() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

Result<std::unique_ptr<Transport>> Transport::Connect(const ConnectionOptions& options) {
  Result<int> fd = ConnectSocket(options);
  if (!fd) return fd.error();
  if (!options.tls) return std::unique_ptr<Transport>(std::make_unique<PlainTransport>(*fd));
  return ConnectTls(*fd, options);
}

}  // namespace fusebox::redis::internal
