// MetricsServer with real clients over 127.0.0.1: libcurl for scrapes,
// raw Boost.Asio sockets for hostile requests.
#include "fusebox/prometheus_http/metrics_server.h"

#include <curl/curl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/metrics.h"
#include "fusebox/registry.h"

namespace fusebox::prometheus_http {
namespace {

using ::testing::HasSubstr;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct Got {
  long status = 0;  // NOLINT(google-runtime-int): libcurl's type
  std::string body;
  std::string content_type;
};

std::size_t Append(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

Got CurlGet(const std::string& url, bool head = false) {
  Got got;
  CURL* easy = curl_easy_init();
  curl_easy_setopt(easy, CURLOPT_URL, url.c_str());
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &got.body);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, 60000L);
  if (head) curl_easy_setopt(easy, CURLOPT_NOBODY, 1L);
  if (curl_easy_perform(easy) == CURLE_OK) {
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &got.status);
    char* type = nullptr;
    curl_easy_getinfo(easy, CURLINFO_CONTENT_TYPE, &type);
    if (type != nullptr) got.content_type = type;
  }
  curl_easy_cleanup(easy);
  return got;
}

// Sends `request` raw and reads until the server closes: the whole answer.
std::string Raw(std::uint16_t port, const std::string& request) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  boost::system::error_code ec;
  asio::write(socket, asio::buffer(request), ec);
  std::string answer;
  std::vector<char> buf(4096);
  while (true) {
    const std::size_t n = socket.read_some(asio::buffer(buf), ec);
    answer.append(buf.data(), n);
    if (ec) break;
  }
  return answer;
}

std::unique_ptr<MetricsServer> StartServer(std::function<std::string()> render,
                                           MetricsServerOptions options = {}) {
  options.port = 0;
  auto s = MetricsServer::Start(std::move(render), std::move(options));
  if (!s) throw std::runtime_error(std::string(s.error().message()));
  return std::move(*s);
}

TEST(MetricsServer, OneLineServesTheCollectorsText) {
  auto metrics = std::make_shared<MetricsCollector>();
  RegistryOptions registry_options;
  ObserveRegistry(registry_options, {metrics});
  auto registry = std::move(*Registry::Create(std::move(registry_options)));
  ASSERT_TRUE(registry->Get("payments").has_value());
  auto server = MetricsServer::Start(*metrics, *registry, {.port = 0});
  ASSERT_TRUE(server.has_value()) << server.error().message();
  const Got got = CurlGet((*server)->url());
  EXPECT_EQ(got.status, 200);
  EXPECT_EQ(got.content_type, kPrometheusContentType);
  EXPECT_THAT(got.body,
              HasSubstr("resilience4j_circuitbreaker_state{name=\"payments\",state=\"closed\"} 1"));
  EXPECT_EQ((*server)->scrapes(), 1U);
}

TEST(MetricsServer, PathMethodAndQuery) {
  auto server = StartServer([] { return std::string("x 1\n"); });
  const std::string base = "http://127.0.0.1:" + std::to_string(server->port());
  EXPECT_EQ(CurlGet(base + "/metrics?name=x").body, "x 1\n") << "the query is ignored";
  EXPECT_EQ(CurlGet(base + "/metrics", true).status, 200);
  EXPECT_EQ(CurlGet(base + "/other").status, 404);
  EXPECT_EQ(CurlGet(base + "/metrics/").status, 404);
  EXPECT_THAT(Raw(server->port(), "DELETE /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), HasSubstr("405"));
  EXPECT_EQ(server->scrapes(), 2U);
}

TEST(MetricsServer, HostileRequestsAreRefused) {
  auto server = StartServer([] { return std::string("x 1\n"); },
                            {.read_timeout = std::chrono::milliseconds(200)});
  const std::uint16_t port = server->port();
  EXPECT_THAT(Raw(port, "GARBAGE\r\n\r\n"), HasSubstr("400"));
  const std::string huge = "GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n";
  EXPECT_THAT(Raw(port, huge), HasSubstr("400")) << "headers over 8 KiB";
  EXPECT_THAT(Raw(port, "POST /metrics HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789"),
              HasSubstr("400"))
      << "a body over max_body_bytes (0)";
  // A client that never finishes its request is closed after read_timeout;
  // Raw() returns when the server closes (bounded by the test's timeout).
  EXPECT_EQ(Raw(port, "GET /metrics HTTP/1.1\r\n"), "");
  EXPECT_EQ(CurlGet(server->url()).status, 200) << "still serving";
}

TEST(MetricsServer, AHeadAnswerHasTheGetsLengthAndNoBody) {
  auto server = StartServer([] { return std::string("x 1\n"); });
  const std::string answer = Raw(server->port(), "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(answer, HasSubstr("200"));
  EXPECT_THAT(answer, HasSubstr("Content-Length: 4\r\n"));
  ASSERT_GE(answer.size(), 4U);
  EXPECT_EQ(answer.substr(answer.size() - 4), "\r\n\r\n") << "nothing after the headers";
}

// max_connections open at once: one more is closed unanswered, and served
// again once one of them has gone.
TEST(MetricsServer, ConnectionsOverTheBoundAreClosedUnanswered) {
  auto server = StartServer([] { return std::string("x 1\n"); },
                            {.read_timeout = std::chrono::seconds(60), .max_connections = 1});
  asio::io_context io;
  tcp::socket idle(io);  // connected, sends nothing: holds the one connection
  idle.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), server->port()));
  EXPECT_EQ(Raw(server->port(), "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  EXPECT_EQ(server->scrapes(), 0U);
  // Once the idle client hangs up and the server has closed its side (read
  // to EOF: the session is gone), a scrape is served again.
  boost::system::error_code ec;
  idle.shutdown(tcp::socket::shutdown_send, ec);
  std::vector<char> buf(64);
  while (!ec) idle.read_some(asio::buffer(buf), ec);
  EXPECT_EQ(CurlGet(server->url()).status, 200);
}

TEST(MetricsServer, ARenderExceptionIsA500) {
  auto server = StartServer([]() -> std::string { throw std::runtime_error("boom"); });
  EXPECT_EQ(CurlGet(server->url()).status, 500);
}

TEST(MetricsServer, BadOptionsAreNamed) {
  const auto render = [] { return std::string(); };
  auto r = MetricsServer::Start(render, {.address = "not-an-ip", .port = 0});
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message(), HasSubstr("address"));
  r = MetricsServer::Start(render, {.port = 0, .path = "metrics"});
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message(), HasSubstr("path"));
  r = MetricsServer::Start(render, {.port = 0, .max_connections = 0});
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message(), HasSubstr("max_connections"));
  auto first = StartServer(render);
  r = MetricsServer::Start(render, {.port = first->port()});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace fusebox::prometheus_http
