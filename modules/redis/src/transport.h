// The byte stream under a Connection: a non-blocking TCP socket, plain or
// wrapped in TLS (OpenSSL), where every wait is one poll() bounded by the
// timeout the caller passes (the connect timeout while connecting, the
// command timeout after). hiredis 0.14 has no TLS, so the module does its own
// I/O and keeps only hiredis' reply parser and command encoder; plain and TLS
// connections run the same code and differ only in these bytes.
//
// TLS: TLS 1.2 or later, SNI (for a host name), the chain verified against
// the system trust store plus options.ca_file and the certificate against
// options.host (name or IP address), an optional client certificate.
// Connections with the same TLS settings share one SSL_CTX (loading the
// system store costs tens of ms of CPU; a shared context makes a TLS connect
// cost about one handshake), kept for the life of the process.
//
// Errors are Status with a detail for the Connection's message: "timed out
// after 250 ms", "server closed the connection", "Connection refused", or a
// TLS check by name ("TLS: certificate verify failed: hostname mismatch ...").
//
// Not thread-safe (one per Connection); the SSL_CTX cache is.
#ifndef FUSEBOX_REDIS_SRC_TRANSPORT_H_
#define FUSEBOX_REDIS_SRC_TRANSPORT_H_

#include <cstddef>
#include <memory>
#include <string_view>

#include "fusebox/clock.h"
#include "fusebox/redis/options.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox::redis::internal {

class Transport {
 public:
  // Resolves and connects to options.host:port, then runs the TLS handshake
  // when options.tls. Each wait is bounded by options.connect_timeout.
  // kUnavailable on failure (kInvalidArgument for TLS settings that cannot
  // be loaded, e.g. a key that does not match its certificate).
  static Result<std::unique_ptr<Transport>> Connect(const ConnectionOptions& options);

  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Writes all of `data`; each wait for the socket is bounded by `timeout`.
  virtual Status WriteAll(std::string_view data, Duration timeout) = 0;
  // Reads at least one byte into buf[0..capacity) and returns how many; the
  // wait is bounded by `timeout`. kUnavailable on timeout, EOF or error.
  virtual Result<std::size_t> Read(char* buf, std::size_t capacity, Duration timeout) = 0;
  // True when bytes are already buffered below this layer (TLS records
  // decrypted or received but not yet read), so a poll() on fd() would
  // wrongly say "nothing".
  virtual bool HasBuffered() const = 0;
  // Waits up to `timeout` for something to read; false when nothing came.
  // Errors count as readable (the next Read() reports them).
  bool WaitReadable(Duration timeout) const;

  int fd() const { return fd_; }
  // True once a wait for the server ran out (rather than the server closing
  // the connection or an I/O error): whether a command may have been slow
  // rather than lost.
  bool timed_out() const { return timed_out_; }

 protected:
  explicit Transport(int fd) : fd_(fd) {}
  // Closes the socket.
  void CloseFd();
  // The timeout's status, remembered by timed_out().
  Status RanOut(Duration timeout);

  int fd_;
  bool timed_out_ = false;
};

}  // namespace fusebox::redis::internal

#endif  // FUSEBOX_REDIS_SRC_TRANSPORT_H_
