// The gateway against hostile input, over real loopback HTTP: path
// parameters that are not valid key segments, an exception while a request
// is answered, upstream replies over the size limit, ambiguous request
// framing, Expect: 100-continue, and a process out of file descriptors. The
// cases that could stop the process run the real `fusebox` binary as a child
// process; the others a gateway in-process, FakeUpstream as the upstream.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "apps/gateway/config.h"
#include "apps/gateway/fake_upstream.h"
#include "apps/gateway/gateway.h"
#include "apps/gateway/http_client.h"
#include "apps/gateway/upstream_client.h"
#include "fusebox/clock.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox::gateway {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::json;

// Routes whose provider and subject are path parameters: a cached read (its
// misses run on a worker), an uncached read and a write (on the I/O thread).
std::string RoutesYaml(const std::string& upstream_url) {
  std::string yaml = "upstreams:\n  - name: graph\n    base_url: " + upstream_url + "/v19.0\n";
  yaml += "routes:\n";
  struct R {
    const char* name;
    const char* method;
    const char* suffix;
    bool cache;
  };
  for (const R& r : {R{"insights", "GET", "insights", true}, R{"media", "GET", "media", false},
                     R{"publish", "POST", "media_publish", false}}) {
    yaml += std::string("  - name: ") + r.name + "\n    method: " + r.method +
            "\n    path: /v1/{provider}/accounts/{account}/" + r.suffix +
            "\n    upstream: graph\n    upstream_path: /{account}/" + r.suffix +
            "\n    workload: read\n    provider: \"{provider}\"\n    subject: \"{account}\"\n";
    if (r.cache) yaml += "    cache: {fresh_for: 60s, max_stale: 1h}\n";
  }
  return yaml;
}

// One client connection with a receive timeout, for what HttpFetch cannot
// do: keep-alive, an interim response, a request framed on purpose badly.
class Connection {
 public:
  explicit Connection(const std::string& address) {
    const std::size_t colon = address.rfind(':');
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
    inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{.tv_sec = 10, .tv_usec = 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
      close(fd_);
      fd_ = -1;
    }
  }
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  bool connected() const { return fd_ >= 0; }
  void Send(std::string_view text) {
    while (!text.empty()) {
      const ssize_t n = send(fd_, text.data(), text.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      text.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  // Up to and including `delimiter`; "<closed>" or "<timeout>" otherwise.
  std::string ReadUntil(std::string_view delimiter) {
    for (;;) {
      if (const std::size_t at = buffer_.find(delimiter); at != std::string::npos) {
        std::string out = buffer_.substr(0, at + delimiter.size());
        buffer_.erase(0, at + delimiter.size());
        return out;
      }
      if (!Fill()) return timed_out_ ? "<timeout>" : "<closed>";
    }
  }
  // One response: its head (status line and fields), then its body by
  // Content-Length.
  std::pair<std::string, std::string> ReadResponse() {
    std::string head = ReadUntil("\r\n\r\n");
    const std::size_t cl = head.find("Content-Length: ");
    if (cl == std::string::npos) return {head, ""};
    const std::size_t length = std::stoul(head.substr(cl + 16));
    while (buffer_.size() < length) {
      if (!Fill()) break;
    }
    std::string body = buffer_.substr(0, length);
    buffer_.erase(0, body.size());
    return {head, body};
  }

 private:
  bool Fill() {
    char chunk[65536];
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    timed_out_ = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<std::size_t>(n));
    return true;
  }
  int fd_ = -1;
  bool timed_out_ = false;
  std::string buffer_;
};

// The value of the sample `name` (with its labels, as written) in a
// Prometheus text, or -1.
double Sample(const std::string& metrics, const std::string& name) {
  const std::size_t at = metrics.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(metrics.substr(at + name.size() + 2));
}

class HostileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto up = FakeUpstream::Start({.clock = &upstream_clock_});
    ASSERT_TRUE(up.has_value()) << up.error();
    upstream_ = std::move(*up);
    ASSERT_TRUE(upstream_
                    ->SetRoutes({{"GET", "/v19.0/*/insights", {{.body = R"({"reach":1})"}}},
                                 {"GET", "/v19.0/*/media", {{.body = R"({"data":[]})"}}},
                                 {"POST", "/v19.0/*/media_publish", {{.body = R"({"id":"1"})"}}}})
                    .ok());
  }

  void Start(std::function<void(std::string_view, bool)> hook = nullptr) {
    Result<GatewayConfig> config = ParseGatewayConfig(
        "listen: 127.0.0.1:0\nio_threads: 2\nworkers: 2\n" + RoutesYaml(upstream_->url()),
        "hostile.yaml", [](std::string_view) { return std::nullopt; });
    ASSERT_TRUE(config.has_value()) << config.error();
    auto gw = Gateway::Create({.config = *config,
                               .clock = &clock_,
                               .log = &log_,
                               .before_handling_for_testing = std::move(hook)});
    ASSERT_TRUE(gw.has_value()) << gw.error();
    gateway_ = std::move(*gw);
  }

  void TearDown() override {
    if (gateway_) gateway_->Shutdown();
  }

  HttpReply Fetch(std::string_view method, const std::string& target, std::string body = "") {
    Result<HttpReply> r = HttpFetch(gateway_->address(), method, target, {.body = std::move(body)});
    EXPECT_TRUE(r.has_value()) << r.error();
    return r.has_value() ? *r : HttpReply{};
  }
  static Json Error(const HttpReply& r) {
    return Json::parse(r.body, nullptr, false).value("error", Json::object());
  }
  std::string Metrics() { return Fetch("GET", "/metrics").body; }

  testing::ManualClock clock_;
  testing::ManualClock upstream_clock_;
  std::ostringstream log_;
  std::unique_ptr<FakeUpstream> upstream_;
  std::unique_ptr<Gateway> gateway_;
};

// Hostile path parameters, on each path the handler answers from: the cached
// route's (a worker's), the uncached read's and the write's (the I/O thread's).
TEST_F(HostileTest, AParameterThatIsNotAValidKeySegmentIs400NamingIt) {
  Start();
  struct Case {
    std::string segment;
    std::string why;
  };
  const std::vector<Case> cases = {
      {"%ff", "is not valid UTF-8"},
      {"%C0%AF", "is not valid UTF-8"},
      {"a%00b", "holds a control character"},
      {"%1b%5b31m", "holds a control character"},
      {"a%2Fb", "holds a '/'"},
      {"..", "is a dot segment"},
      {"%2e%2E", "is a dot segment"},
      {".", "is a dot segment"},
      {std::string(300, '9'), "is longer than 256 bytes"},
  };
  for (const char* route : {"insights", "media"}) {
    for (const Case& c : cases) {
      const std::string target = std::string("/v1/instagram/accounts/") + c.segment + "/" + route;
      HttpReply r = Fetch("GET", target);
      EXPECT_EQ(r.status, 400) << target;
      EXPECT_EQ(Error(r)["code"], "INVALID_PATH_PARAMETER") << target;
      EXPECT_THAT(Error(r).value("message", ""), HasSubstr("path parameter {account} " + c.why))
          << target;
    }
  }
  HttpReply provider = Fetch("POST", "/v1/%ff/accounts/1/media_publish", "{}");
  EXPECT_EQ(provider.status, 400);
  EXPECT_THAT(Error(provider).value("message", ""), HasSubstr("path parameter {provider}"));
  EXPECT_EQ(upstream_->TotalCalls(), 0);
  // And the gateway goes on serving.
  EXPECT_EQ(Fetch("GET", "/v1/instagram/accounts/178/media").status, 200);
  EXPECT_EQ(Fetch("GET", "/v1/instagram/accounts/caf%C3%A9/insights").status, 200);
}

TEST_F(HostileTest, AnExceptionWhileAnsweringIsA500AndOtherConnectionsAreServed) {
  Start([](std::string_view target, bool worker) {
    if (!worker && target.find("/boom-io/") != std::string_view::npos) {
      throw std::runtime_error("boom on the I/O thread \xff\n");
    }
    if (worker && target.find("/boom-worker/") != std::string_view::npos) {
      throw std::runtime_error("boom on a worker");
    }
  });
  // A keep-alive connection opened before, used after.
  Connection other(gateway_->address());
  ASSERT_TRUE(other.connected());

  HttpReply io = Fetch("GET", "/v1/instagram/accounts/boom-io/media");
  EXPECT_EQ(io.status, 500);
  EXPECT_EQ(Error(io)["code"], "INTERNAL_ERROR");
  // A cached miss goes to a worker (the in-memory store has no snapshot).
  HttpReply worker = Fetch("GET", "/v1/instagram/accounts/boom-worker/insights");
  EXPECT_EQ(worker.status, 500);
  EXPECT_EQ(Error(worker)["code"], "INTERNAL_ERROR");

  other.Send("GET /v1/instagram/accounts/178/media HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(other.ReadResponse().first, StartsWith("HTTP/1.1 200"));
  EXPECT_EQ(Fetch("GET", "/v1/instagram/accounts/178/insights").status, 200);
  EXPECT_EQ(Sample(Metrics(), "fusebox_gateway_internal_errors_total"), 2);

  gateway_->Shutdown();  // the log is read once the gateway's threads are gone
  // One line (the second came within the same second): the message escaped,
  // never the request's target.
  EXPECT_THAT(log_.str(), HasSubstr("internal error answering a request (answered 500 "
                                    "INTERNAL_ERROR): boom on the I/O thread \\xff\\x0a\n"));
  EXPECT_THAT(log_.str(), ::testing::Not(HasSubstr("boom-io")));
}

// Valid JSON (so that only the reply's own limit can refuse it) of 20 MB
// and 40 MB, with a Content-Length: both passed before. On both upstream
// clients (the worker's for the cached route, the event loop's for the
// other).
TEST_F(HostileTest, AnUpstreamReplyOverTheLimitIs502TooLarge) {
  const std::string twenty = "\"" + std::string(20'000'000, 'x') + "\"";
  const std::string forty = "\"" + std::string(40'000'000, 'x') + "\"";
  ASSERT_TRUE(upstream_
                  ->SetRoutes({{"GET", "/v19.0/*/insights", {{.body = twenty}}},
                               {"GET", "/v19.0/*/media", {{.body = forty}}}})
                  .ok());
  Start();
  for (const char* route : {"insights", "media"}) {
    HttpReply r = Fetch("GET", std::string("/v1/instagram/accounts/178/") + route);
    EXPECT_EQ(r.status, 502) << route;
    EXPECT_EQ(Error(r)["code"], "UPSTREAM_REPLY_TOO_LARGE") << route;
    EXPECT_EQ(Error(r)["circuit"], "provider:instagram:read:178");
    EXPECT_LT(r.body.size(), 1024u);
  }
  EXPECT_THAT(
      Metrics(),
      HasSubstr("fusebox_gateway_upstream_replies_too_large_total{upstream=\"graph\"} 2\n"));
}

// A non-JSON body is a JSON string in the envelope, where a control byte
// takes six: the envelope is bounded as the reply is.
TEST_F(HostileTest, ANonJsonBodyWhoseEnvelopeWouldExceedTheLimitIs502) {
  const std::string controls(3u << 20, '\x01');  // 3 MiB -> 18 MiB escaped
  const std::string fits(2u << 20, '\x01');      // 2 MiB -> 12 MiB escaped
  ASSERT_TRUE(upstream_
                  ->SetRoutes({{"GET",
                                "/v19.0/big/media",
                                {{.headers = {{"Content-Type", "text/plain"}}, .body = controls}}},
                               {"GET",
                                "/v19.0/small/media",
                                {{.headers = {{"Content-Type", "text/plain"}}, .body = fits}}}})
                  .ok());
  Start();
  HttpReply big = Fetch("GET", "/v1/instagram/accounts/big/media");
  EXPECT_EQ(big.status, 502);
  EXPECT_EQ(Error(big)["code"], "UPSTREAM_REPLY_TOO_LARGE");
  EXPECT_LT(big.body.size(), 1024u);
  HttpReply small = Fetch("GET", "/v1/instagram/accounts/small/media");
  EXPECT_EQ(small.status, 200);
  EXPECT_LE(small.body.size(), UpstreamPool::kMaxReplyBytes + 64);
  EXPECT_EQ(Json::parse(small.body)["data"], fits);
}

// RFC 9112 section 6.1: Beast would read "gzip" + Content-Length by the
// length, and "gzip" alone as no body (its bytes a second request).
TEST_F(HostileTest, TransferEncodingOtherThanChunkedIs400) {
  Start();
  for (const char* framing :
       {"Transfer-Encoding: gzip\r\nContent-Length: 2\r\n", "Transfer-Encoding: gzip\r\n",
        "Transfer-Encoding: gzip, chunked\r\nContent-Length: 2\r\n",
        "Content-Length: 2\r\nTransfer-Encoding: identity\r\n"}) {
    Connection c(gateway_->address());
    c.Send(std::string("POST /v1/instagram/accounts/1/media_publish HTTP/1.1\r\nHost: x\r\n") +
           framing + "\r\n{}");
    const auto [head, body] = c.ReadResponse();
    EXPECT_THAT(head, StartsWith("HTTP/1.1 400")) << framing;
    EXPECT_THAT(head, HasSubstr("Connection: close")) << framing;
    EXPECT_EQ(c.ReadUntil("\r\n"), "<closed>") << framing;
  }
  EXPECT_EQ(upstream_->TotalCalls(), 0);
}

TEST_F(HostileTest, Expect100ContinueGetsTheInterimResponseBeforeTheBodyIsSent) {
  Start();
  Connection c(gateway_->address());
  c.Send(
      "POST /v1/instagram/accounts/1/media_publish HTTP/1.1\r\nHost: x\r\n"
      "Content-Type: application/json\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(c.ReadUntil("\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  c.Send("{}");
  const auto [head, body] = c.ReadResponse();
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200"));
  EXPECT_EQ(Json::parse(body)["data"]["id"], "1");
  // Another expectation is refused.
  Connection other(gateway_->address());
  other.Send(
      "POST /v1/instagram/accounts/1/media_publish HTTP/1.1\r\nHost: x\r\n"
      "Content-Length: 2\r\nExpect: something-else\r\n\r\n");
  EXPECT_THAT(other.ReadResponse().first, StartsWith("HTTP/1.1 417"));
  EXPECT_EQ(upstream_->TotalCalls(), 1);
}

// --- The real binary ----------------------------------------------------------

// `fusebox gateway --config <path>` as a child process, with at most
// `max_files` descriptors when not zero; killed (SIGKILL) when destroyed.
class GatewayProcess {
 public:
  GatewayProcess(const std::string& config_path, rlim_t max_files = 0) {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      if (max_files != 0) {
        const rlimit limit{.rlim_cur = max_files, .rlim_max = max_files};
        if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(126);
      }
      dup2(out[1], 1);
      close(out[0]);
      execl(FUSEBOX_CLI, FUSEBOX_CLI, "gateway", "--config", config_path.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    out_ = fdopen(out[0], "r");
    char line[256] = {};
    if (pid_ < 0 || fgets(line, sizeof(line), out_) == nullptr) return;
    const std::string text = line;
    const std::string prefix = "fusebox gateway: listening on ";
    if (text.rfind(prefix, 0) == 0)
      address_ = text.substr(prefix.size(), text.size() - prefix.size() - 1);
  }
  ~GatewayProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ != nullptr) fclose(out_);
  }
  GatewayProcess(const GatewayProcess&) = delete;
  GatewayProcess& operator=(const GatewayProcess&) = delete;

  // "127.0.0.1:port", or "" when it did not start.
  const std::string& address() const { return address_; }
  // Still running (not exited, not killed by a signal).
  bool running() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }
  // User plus system CPU time so far, in clock ticks (/proc/<pid>/stat).
  long CpuTicks() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    std::string field;
    long utime = 0;
    long stime = 0;
    // Fields 3..13 (state .. cmajflt), then utime (14) and stime (15).
    for (int i = 3; i <= 13; ++i) rest >> field;
    rest >> utime >> stime;
    return utime + stime;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
  std::string address_;
};

std::string WriteConfig(const std::string& name, const std::string& yaml) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << yaml;
  return path;
}

TEST(HostileProcess, NoPathParameterStopsTheProcess) {
  testing::ManualClock upstream_clock;
  auto up = FakeUpstream::Start({.clock = &upstream_clock});
  ASSERT_TRUE(up.has_value());
  ASSERT_TRUE((*up)->SetRoute({"GET", "/v19.0/*/media", {{.body = "{}"}}}).ok());
  GatewayProcess gw(
      WriteConfig("hostile_params.yaml", "listen: 127.0.0.1:0\n" + RoutesYaml((*up)->url())));
  ASSERT_FALSE(gw.address().empty());
  // The issue's request first: it aborted the process (the error envelope's
  // JSON threw on the circuit key).
  for (const char* target :
       {"/v1/instagram/accounts/%ff/insights", "/v1/instagram/accounts/%ff/media",
        "/v1/%ff/accounts/1/insights", "/v1/instagram/accounts/%C3%28/insights",
        "/v1/instagram/accounts/%ED%A0%80/media", "/v1/instagram/accounts/%00/insights",
        "/v1/instagram/accounts/%2e%2e/media", "/v1/instagram/accounts/../insights"}) {
    Result<HttpReply> r = HttpFetch(gw.address(), "GET", target);
    ASSERT_TRUE(r.has_value()) << target << ": " << r.error();
    EXPECT_EQ(r->status, 400) << target;
    Result<HttpReply> health = HttpFetch(gw.address(), "GET", "/healthz");
    ASSERT_TRUE(health.has_value()) << "after " << target << ": " << health.error();
    EXPECT_EQ(health->status, 200);
  }
  Result<HttpReply> ok = HttpFetch(gw.address(), "GET", "/v1/instagram/accounts/178/media");
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->status, 200);
  EXPECT_TRUE(gw.running());
  EXPECT_EQ((*up)->TotalCalls(), 1);
}

// Out of descriptors, accept fails at once while the connection waits in the
// listen queue: the loop must pause (50 ms doubling to 1 s), not spin.
TEST(HostileProcess, OutOfDescriptorsTheAcceptLoopPausesInsteadOfSpinning) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // A sanitized process out of descriptors reports false errors: UBSan
  // checks that memory is readable through a pipe it cannot open. The
  // release build runs this test.
  GTEST_SKIP() << "sanitizers need descriptors of their own";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  GTEST_SKIP() << "sanitizers need descriptors of their own";
#endif
#endif
  GatewayProcess gw(WriteConfig("hostile_emfile.yaml",
                                "listen: 127.0.0.1:0\nio_threads: 1\nworkers: 1\n"
                                "upstreams: []\nroutes: []\n"),
                    /*max_files=*/48);
  ASSERT_FALSE(gw.address().empty());
  Connection watcher(gw.address());  // accepted while descriptors are left
  ASSERT_TRUE(watcher.connected());
  auto metrics = [&] {
    watcher.Send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    return watcher.ReadResponse().second;
  };
  ASSERT_EQ(Sample(metrics(), "fusebox_gateway_accept_errors_total{reason=\"exhausted\"}"), 0);

  // More connections than descriptors: the kernel completes them all, the
  // gateway accepts until none is left.
  std::vector<std::unique_ptr<Connection>> flood;
  for (int i = 0; i < 64; ++i) flood.push_back(std::make_unique<Connection>(gw.address()));
  double errors = 0;
  for (int i = 0; i < 200 && errors == 0; ++i) {
    errors = Sample(metrics(), "fusebox_gateway_accept_errors_total{reason=\"exhausted\"}");
    if (errors == 0) SystemClock().SleepFor(std::chrono::milliseconds(10));
  }
  ASSERT_GT(errors, 0) << "the descriptors were never exhausted";

  // Over one second of that: a spinning loop fails accept() hundreds of
  // thousands of times and burns the CPU it gets; a pausing one a few times.
  const long ticks_before = gw.CpuTicks();
  // A real process over real time: what is measured is its CPU, not a timeout.
  const TimePoint t0 = SystemClock().Now();
  SystemClock().SleepFor(std::chrono::seconds(1));
  const std::string after = metrics();
  const double seconds = std::chrono::duration<double>(SystemClock().Now() - t0).count();
  const double cpu =
      static_cast<double>(gw.CpuTicks() - ticks_before) / static_cast<double>(sysconf(_SC_CLK_TCK));
  const double more =
      Sample(after, "fusebox_gateway_accept_errors_total{reason=\"exhausted\"}") - errors;
  EXPECT_LE(more, 25 * seconds) << "accept errors in " << seconds << " s";
  EXPECT_LT(cpu, 0.3 * seconds) << "CPU seconds used in " << seconds << " s";
  EXPECT_GT(Sample(after, "fusebox_gateway_accept_pauses_total"), 0);
  std::cout << "out of descriptors: " << more << " accept errors and " << cpu << " CPU seconds in "
            << seconds << " s\n";

  // Descriptors back: new connections are served again (after at most one
  // pause of 1 s).
  flood.clear();
  Result<HttpReply> r = HttpFetch(gw.address(), "GET", "/healthz");
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->status, 200);
  EXPECT_TRUE(gw.running());
}

}  // namespace
}  // namespace fusebox::gateway
