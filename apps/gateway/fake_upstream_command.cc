// `fusebox fake-upstream` (apps/gateway/fake_upstream.h).
#include <pthread.h>
#include <signal.h>

#include <charconv>
#include <ostream>
#include <string>

#include "apps/gateway/fake_upstream.h"

namespace fusebox::gateway {
namespace {

int Fail(std::ostream& err, std::string_view message) {
  err << "fusebox fake-upstream: " << message << '\n';
  return 1;
}

}  // namespace

int RunFakeUpstream(const std::string& listen, const std::string& script, int threads,
                    std::ostream& out, std::ostream& err, const std::string& tls_cert,
                    const std::string& tls_key) {
  if (tls_cert.empty() != tls_key.empty()) {
    return Fail(err, "--tls-cert and --tls-key go together");
  }
  const std::size_t colon = listen.rfind(':');
  unsigned port = 0;
  const char* port_end = listen.data() + listen.size();
  if (colon == std::string::npos ||
      std::from_chars(listen.data() + colon + 1, port_end, port).ptr != port_end ||
      colon + 1 == listen.size() || port > 65535) {
    return Fail(err, "--listen: expected HOST:PORT (port 0..65535), got \"" + listen + "\"");
  }
  FakeUpstreamOptions options{.address = listen.substr(0, colon),
                              .port = static_cast<std::uint16_t>(port),
                              .threads = threads,
                              .tls_cert_file = tls_cert,
                              .tls_key_file = tls_key};
  if (!script.empty()) {
    Result<std::vector<FakeRoute>> routes = LoadFakeScript(script);
    if (!routes) return Fail(err, routes.error().message());
    options.routes = std::move(*routes);
  }
  // Block SIGINT and SIGTERM before any thread starts (threads inherit the
  // mask), so that only sigwait() below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &signals, &previous);
  Result<std::unique_ptr<FakeUpstream>> upstream = FakeUpstream::Start(std::move(options));
  if (!upstream) {
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    return Fail(err, upstream.error().message());
  }
  out << "fusebox fake-upstream: listening on " << (*upstream)->host_port() << std::endl;
  err << "fusebox fake-upstream: " << (*upstream)->Routes().size() << " routes"
      << (script.empty() ? "" : " from " + script) << std::endl;
  int received = 0;
  sigwait(&signals, &received);
  (*upstream)->Stop();
  err << "fusebox fake-upstream: " << (received == SIGTERM ? "SIGTERM" : "SIGINT") << ", served "
      << (*upstream)->TotalCalls() << " requests, stopped" << std::endl;
  upstream->reset();
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return 0;
}

}  // namespace fusebox::gateway
