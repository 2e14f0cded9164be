// FakeUpstream over real loopback HTTP: sequences, patterns, counting, the
// /_fake/ control API, keep-alive, latency on a ManualClock, bad input, and
// the example scripts in testdata/.
#include "apps/gateway/fake_upstream.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "fusebox/testing/manual_clock.h"
#include "fusebox/yaml/config.h"

namespace fusebox::gateway {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::json;

struct Reply {
  int status = 0;
  std::string body;
  http::fields headers;
  bool keep_alive = false;
};

// One keep-alive connection to the fake; a failed step fails the test.
class Client {
 public:
  explicit Client(std::uint16_t port) : socket_(ioc_) {
    beast::error_code ec;
    socket_.connect({asio::ip::make_address("127.0.0.1"), port}, ec);
    EXPECT_FALSE(ec) << ec.message();
  }

  Reply Send(http::verb method, const std::string& target, const std::string& body = "",
             bool keep_alive = true) {
    http::request<http::string_body> req{method, target, 11};
    req.set(http::field::host, "127.0.0.1");
    req.keep_alive(keep_alive);
    if (!body.empty() || method == http::verb::put || method == http::verb::post) {
      req.body() = body;
      req.prepare_payload();
    }
    beast::error_code ec;
    http::write(socket_, req, ec);
    EXPECT_FALSE(ec) << "write: " << ec.message();
    return Read();
  }

  Reply Read() {
    beast::error_code ec;
    http::response<http::string_body> res;
    http::read(socket_, buffer_, res, ec);
    EXPECT_FALSE(ec) << "read: " << ec.message();
    Reply out{static_cast<int>(res.result_int()), res.body(), {}, res.keep_alive()};
    for (const auto& f : res) out.headers.insert(f.name_string(), f.value());
    return out;
  }

  // Writes raw bytes and reads whatever comes back until the peer closes.
  std::string Raw(const std::string& bytes) {
    beast::error_code ec;
    asio::write(socket_, asio::buffer(bytes), ec);
    std::string out;
    char chunk[4096];
    while (true) {
      const std::size_t n = socket_.read_some(asio::buffer(chunk), ec);
      out.append(chunk, n);
      if (ec) break;
    }
    return out;
  }

  // True when the server has closed the connection (a read hits EOF).
  bool ClosedByPeer() {
    beast::error_code ec;
    char c;
    socket_.read_some(asio::buffer(&c, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }

 private:
  asio::io_context ioc_;
  asio::ip::tcp::socket socket_;
  beast::flat_buffer buffer_;
};

std::unique_ptr<FakeUpstream> StartFake(FakeUpstreamOptions options = {}) {
  auto fake = FakeUpstream::Start(std::move(options));
  EXPECT_TRUE(fake.has_value()) << fake.error().message();
  return fake ? std::move(*fake) : nullptr;
}

FakeRoute InsightsRoute() {
  return {"GET",
          "/v19.0/*/insights",
          {{.status = 429,
            .headers = {{"Retry-After", "60"}},
            .body = R"({"error":{"message":"Application request limit reached","code":4}})"},
           {.status = 200, .body = R"({"data":[{"name":"impressions"}]})"}}};
}

TEST(FakeUpstreamTest, AnswersTheSequenceInOrderAndRepeatsTheLast) {
  auto fake = StartFake({.routes = {InsightsRoute()}});
  ASSERT_NE(fake, nullptr);
  EXPECT_NE(fake->port(), 0);
  Client client(fake->port());

  Reply first = client.Send(http::verb::get, "/v19.0/178/insights?metric=impressions");
  EXPECT_EQ(first.status, 429);
  EXPECT_EQ(first.headers["Retry-After"], "60");
  EXPECT_EQ(first.headers[http::field::content_type], "application/json; charset=UTF-8");
  EXPECT_EQ(Json::parse(first.body)["error"]["code"], 4);
  for (int i = 0; i < 3; ++i) {
    Reply next = client.Send(http::verb::get, "/v19.0/178/insights");
    EXPECT_EQ(next.status, 200);
    EXPECT_EQ(next.body, R"({"data":[{"name":"impressions"}]})");
  }
  EXPECT_EQ(fake->Calls("GET", "/v19.0/*/insights"), 4);
  EXPECT_EQ(fake->TotalCalls(), 4);
  EXPECT_EQ(fake->UnmatchedCalls(), 0);

  fake->Reset();
  EXPECT_EQ(fake->Calls("GET", "/v19.0/*/insights"), 0);
  EXPECT_EQ(client.Send(http::verb::get, "/v19.0/178/insights").status, 429)
      << "Reset() rewinds the sequence";
}

TEST(FakeUpstreamTest, MatchesMethodAndOneSegmentPerStar) {
  auto fake = StartFake();
  ASSERT_NE(fake, nullptr);
  ASSERT_TRUE(fake->SetRoute({"GET", "/v19.0/*/media", {{.status = 200, .body = "media"}}}).ok());
  ASSERT_TRUE(fake->SetRoute({"*", "/any/**", {{.status = 204}}}).ok());
  Client client(fake->port());

  EXPECT_EQ(client.Send(http::verb::get, "/v19.0/178/media").body, "media");
  // `*` is one segment, never zero or two; the method must match.
  EXPECT_EQ(client.Send(http::verb::get, "/v19.0//media").status, 404);
  EXPECT_EQ(client.Send(http::verb::get, "/v19.0/1/2/media").status, 404);
  Reply wrong_method = client.Send(http::verb::post, "/v19.0/178/media", "{}");
  EXPECT_EQ(wrong_method.status, 404);
  EXPECT_THAT(wrong_method.body, HasSubstr("no route for POST /v19.0/178/media"));
  EXPECT_EQ(client.Send(http::verb::delete_, "/any/thing/at/all").status, 204);
  EXPECT_EQ(client.Send(http::verb::get, "/any").status, 204);

  EXPECT_EQ(fake->Calls("GET", "/v19.0/*/media"), 1);
  EXPECT_EQ(fake->Calls("*", "/any/**"), 2);
  EXPECT_EQ(fake->UnmatchedCalls(), 3);
  EXPECT_EQ(fake->TotalCalls(), 6);
}

TEST(FakePathMatchesTest, Patterns) {
  EXPECT_TRUE(FakePathMatches("/", "/"));
  EXPECT_TRUE(FakePathMatches("/a/*/c", "/a/b/c"));
  EXPECT_FALSE(FakePathMatches("/a/*/c", "/a/b/c/d"));
  EXPECT_FALSE(FakePathMatches("/a/*", "/a/"));
  EXPECT_TRUE(FakePathMatches("/a/**", "/a"));
  EXPECT_TRUE(FakePathMatches("/a/**", "/a/b/c"));
  EXPECT_FALSE(FakePathMatches("/a/**", "/ab"));
  EXPECT_TRUE(FakePathMatches("/**", "/"));
  EXPECT_FALSE(FakePathMatches("/a", "/b"));
}

TEST(FakeUpstreamTest, KeepsTheConnectionAliveUnlessAskedToClose) {
  auto fake = StartFake({.routes = {{"GET", "/ok", {{.status = 200, .body = "{}"}}}}});
  ASSERT_NE(fake, nullptr);
  Client client(fake->port());
  for (int i = 0; i < 5; ++i) {
    Reply r = client.Send(http::verb::get, "/ok");
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.keep_alive);
  }
  Reply last = client.Send(http::verb::get, "/ok", "", /*keep_alive=*/false);
  EXPECT_EQ(last.status, 200);
  EXPECT_FALSE(last.keep_alive);
  EXPECT_TRUE(client.ClosedByPeer());
  EXPECT_EQ(fake->Calls("GET", "/ok"), 6);
}

TEST(FakeUpstreamTest, ControlApiSetsRoutesCountsAndResets) {
  auto fake = StartFake();
  ASSERT_NE(fake, nullptr);
  Client client(fake->port());
  const std::string table = R"({"routes": [
      {"method": "GET", "path": "/me",
       "responses": [{"status": 500, "repeat": 2},
                     {"status": 200, "headers": {"X-Business-Use-Case-Usage": "{}"},
                      "body": {"id": "178", "name": "demo"}}]}]})";
  Reply put = client.Send(http::verb::put, "/_fake/routes", table);
  ASSERT_EQ(put.status, 200) << put.body;
  EXPECT_EQ(Json::parse(put.body)["routes"], 1);

  EXPECT_EQ(client.Send(http::verb::get, "/me").status, 500);
  EXPECT_EQ(client.Send(http::verb::get, "/me").status, 500);
  Reply ok = client.Send(http::verb::get, "/me");
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(Json::parse(ok.body), Json::parse(R"({"id": "178", "name": "demo"})"));
  EXPECT_EQ(ok.headers["X-Business-Use-Case-Usage"], "{}");

  Json calls = Json::parse(client.Send(http::verb::get, "/_fake/calls").body);
  EXPECT_EQ(calls["total"], 3) << "control requests are not counted";
  EXPECT_EQ(calls["routes"][0]["path"], "/me");
  EXPECT_EQ(calls["routes"][0]["calls"], 3);
  EXPECT_EQ(fake->Calls("GET", "/me"), 3);

  Json routes = Json::parse(client.Send(http::verb::get, "/_fake/routes").body);
  ASSERT_EQ(routes["routes"][0]["responses"].size(), 3u) << "repeat expands";
  Result<std::vector<FakeRoute>> back = ParseFakeRoutesJson(routes.dump());
  ASSERT_TRUE(back.has_value()) << back.error().message();
  EXPECT_EQ((*back)[0].responses[2].body, R"({"id":"178","name":"demo"})");

  EXPECT_EQ(client.Send(http::verb::post, "/_fake/reset").status, 200);
  EXPECT_EQ(fake->Calls("GET", "/me"), 0);
  EXPECT_EQ(client.Send(http::verb::get, "/me").status, 500);

  // POST adds beside the existing routes; DELETE removes them all.
  ASSERT_EQ(client
                .Send(http::verb::post, "/_fake/routes",
                      R"({"routes":[{"path":"/other","responses":[{"status":201}]}]})")
                .status,
            200);
  EXPECT_EQ(fake->Routes().size(), 2u);
  EXPECT_EQ(client.Send(http::verb::get, "/other").status, 201);
  EXPECT_EQ(client.Send(http::verb::delete_, "/_fake/routes").status, 200);
  EXPECT_TRUE(fake->Routes().empty());
  EXPECT_EQ(client.Send(http::verb::get, "/me").status, 404);
}

TEST(FakeUpstreamTest, ControlApiRejectsABadTableNamingTheField) {
  auto fake = StartFake({.routes = {{"GET", "/keep", {{.status = 200}}}}});
  ASSERT_NE(fake, nullptr);
  Client client(fake->port());
  Reply bad =
      client.Send(http::verb::put, "/_fake/routes",
                  R"({"routes":[{"path":"/x","responses":[{"status":200},{"status":"soon"}]}]})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(Json::parse(bad.body)["error"].get<std::string>(),
              HasSubstr("routes[0].responses[1].status: expected an integer 100..599"));
  Reply not_json = client.Send(http::verb::put, "/_fake/routes", "{routes:");
  EXPECT_EQ(not_json.status, 400);
  EXPECT_THAT(not_json.body, HasSubstr("not JSON"));
  EXPECT_EQ(client.Send(http::verb::get, "/_fake/nothing").status, 404);
  EXPECT_EQ(client.Send(http::verb::delete_, "/_fake/calls").status, 405);
  ASSERT_EQ(fake->Routes().size(), 1u) << "a rejected table changes nothing";
  EXPECT_EQ(fake->Routes()[0].path, "/keep");
}

TEST(FakeUpstreamTest, RejectsBadRoutesFromCpp) {
  auto bad_status = FakeUpstream::Start({.routes = {{"GET", "/x", {{.status = 42}}}}});
  ASSERT_FALSE(bad_status.has_value());
  EXPECT_EQ(bad_status.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_status.error().message()), HasSubstr("status 42"));

  auto fake = StartFake();
  ASSERT_NE(fake, nullptr);
  EXPECT_EQ(fake->SetRoute({"GET", "no-slash", {{}}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fake->SetRoute({"GET", "/x", {}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fake->SetRoute({"G ET", "/x", {{}}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(fake->SetRoute({"GET", "/_fake/calls", {{}}}).code(), StatusCode::kInvalidArgument);

  auto bad_address = FakeUpstream::Start({.address = "not-an-ip"});
  ASSERT_FALSE(bad_address.has_value());
  EXPECT_EQ(bad_address.error().code(), StatusCode::kInvalidArgument);
  // The port is taken: kUnavailable naming it.
  auto taken = FakeUpstream::Start({.port = fake->port()});
  ASSERT_FALSE(taken.has_value());
  EXPECT_EQ(taken.error().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(taken.error().message()), HasSubstr(fake->host_port()));
}

TEST(FakeUpstreamTest, LatencyWaitsOnTheInjectedClock) {
  testing::ManualClock clock;
  auto fake = StartFake(
      {.clock = &clock,
       .routes = {{"GET",
                   "/slow",
                   {{.status = 200, .body = "late", .latency = std::chrono::seconds(2)}}}}});
  ASSERT_NE(fake, nullptr);
  std::atomic<bool> answered{false};
  Reply reply;
  std::thread caller([&] {
    Client client(fake->port());
    reply = client.Send(http::verb::get, "/slow");
    answered = true;
  });
  // The request is in: the fake has scheduled its answer on the clock.
  for (int i = 0; i < 10'000'000 && clock.PendingTimers() == 0; ++i) std::this_thread::yield();
  ASSERT_EQ(clock.PendingTimers(), 1u);
  EXPECT_EQ(fake->Calls("GET", "/slow"), 1) << "counted when received, not when answered";
  clock.Advance(std::chrono::seconds(2) - std::chrono::nanoseconds(1));
  EXPECT_EQ(clock.PendingTimers(), 1u);
  EXPECT_FALSE(answered);
  clock.Advance(std::chrono::nanoseconds(1));
  caller.join();
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "late");
}

TEST(FakeUpstreamTest, StopDropsDelayedResponsesWithoutSendingThem) {
  testing::ManualClock clock;
  auto fake = StartFake(
      {.clock = &clock,
       .routes = {{"GET", "/slow", {{.status = 200, .latency = std::chrono::seconds(1)}}}}});
  ASSERT_NE(fake, nullptr);
  Client client(fake->port());
  std::string raw = "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n";
  std::thread sender([&] { EXPECT_EQ(client.Raw(raw), "") << "no answer, only the close"; });
  for (int i = 0; i < 10'000'000 && clock.PendingTimers() == 0; ++i) std::this_thread::yield();
  ASSERT_EQ(clock.PendingTimers(), 1u);
  fake->Stop();
  sender.join();
  EXPECT_EQ(clock.PendingTimers(), 0u) << "Stop() cancels the timer";
  clock.Advance(std::chrono::seconds(5));  // nothing left to run
}

TEST(FakeUpstreamTest, DropClosesTheConnectionWithoutAnAnswer) {
  auto fake = StartFake({.routes = {{"GET", "/reset", {{.drop = true}}}}});
  ASSERT_NE(fake, nullptr);
  Client client(fake->port());
  EXPECT_EQ(client.Raw("GET /reset HTTP/1.1\r\nHost: x\r\n\r\n"), "");
  EXPECT_EQ(fake->Calls("GET", "/reset"), 1);
}

TEST(FakeUpstreamTest, MalformedAndOversizedRequestsGetA4xxAndAClose) {
  auto fake = StartFake({.routes = {{"*", "/**", {{.status = 200}}}}});
  ASSERT_NE(fake, nullptr);
  {
    Client client(fake->port());
    EXPECT_THAT(client.Raw("NOT HTTP AT ALL\r\n\r\n"), HasSubstr("HTTP/1.1 400"));
  }
  {
    Client client(fake->port());
    EXPECT_THAT(
        client.Raw("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20'000, 'a') + "\r\n\r\n"),
        HasSubstr("HTTP/1.1 431"));
  }
  {
    Client client(fake->port());
    EXPECT_THAT(client.Raw("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n"),
                HasSubstr("HTTP/1.1 413"));
  }
  EXPECT_EQ(fake->TotalCalls(), 0);
  // Still serving.
  Client client(fake->port());
  EXPECT_EQ(client.Send(http::verb::get, "/fine").status, 200);
}

TEST(FakeUpstreamTest, ServesManyConnectionsOnSeveralThreads) {
  auto fake = StartFake({.threads = 4, .routes = {{"GET", "/ok", {{.status = 200}}}}});
  ASSERT_NE(fake, nullptr);
  std::vector<std::thread> callers;
  for (int t = 0; t < 8; ++t) {
    callers.emplace_back([&] {
      Client client(fake->port());
      for (int i = 0; i < 50; ++i) EXPECT_EQ(client.Send(http::verb::get, "/ok").status, 200);
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(fake->Calls("GET", "/ok"), 400);
}

// --- Scripts --------------------------------------------------------------------------

TEST(FakeScriptTest, YamlErrorsNameLineAndColumn) {
  auto bad = ParseFakeRoutesYaml(
      "routes:\n"
      "  - path: /x\n"
      "    responses:\n"
      "      - status: 200\n"
      "        latency_ms: soon\n");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().message(),
            "5:21: routes[0].responses[0].latency_ms: expected an integer 0..600000, got \"soon\"");
  auto unknown = ParseFakeRoutesYaml("routes:\n  - path: /x\n    respones: []\n");
  ASSERT_FALSE(unknown.has_value());
  EXPECT_THAT(std::string(unknown.error().message()),
              HasSubstr("3:15: routes[0].respones: unknown key"));
  auto syntax = ParseFakeRoutesYaml("routes: [\n");
  ASSERT_FALSE(syntax.has_value());
  EXPECT_THAT(std::string(syntax.error().message()), HasSubstr("2:1: "));
  auto missing = LoadFakeScript("/no/such/script.yaml");
  ASSERT_FALSE(missing.has_value());
  EXPECT_EQ(missing.error().message(), "/no/such/script.yaml: cannot read the file");
}

// A script is held to the configuration loader's limits (fusebox/yaml/config.h):
// yaml-cpp shares an alias's node, the JSON copy did not, so 10^8 values from
// a few lines of aliases exhausted memory.
TEST(FakeScriptTest, AliasExpansionSizeAndDepthAreBounded) {
  // Ten to the eighth values in eight lines; a seed of the fake_routes_fuzzer.
  const std::string bomb =
      std::string(FUSEBOX_GATEWAY_TESTDATA) + "/../fuzz/corpus/fake_routes_fuzzer/alias-bomb.yaml";
  auto expanded = LoadFakeScript(bomb);
  ASSERT_FALSE(expanded.has_value());
  EXPECT_THAT(std::string(expanded.error().message()), StartsWith(bomb + ":"));
  EXPECT_THAT(std::string(expanded.error().message()),
              HasSubstr(": more than 100000 values (aliases expanding?)"));

  std::string deep = "routes: " + std::string(100, '[') + std::string(100, ']') + "\n";
  auto nested = ParseFakeRoutesYaml(deep);
  ASSERT_FALSE(nested.has_value());
  EXPECT_THAT(std::string(nested.error().message()), HasSubstr("nested more than 64 levels"));

  auto large = ParseFakeRoutesYaml(std::string(yaml::kMaxYamlBytes + 1, '#'));
  ASSERT_FALSE(large.has_value());
  EXPECT_EQ(large.error().message(), "1:1: larger than 1 MiB");

  // Few values, much text: a 512 KiB body aliased 70 times.
  std::string bodies = "x: &x \"" + std::string(std::size_t{1} << 19, 'a') + "\"\nroutes: [*x";
  for (int i = 1; i < 70; ++i) bodies += ",*x";
  auto text = ParseFakeRoutesYaml(bodies + "]\n");
  ASSERT_FALSE(text.has_value());
  EXPECT_THAT(std::string(text.error().message()),
              HasSubstr(": more than 32 MiB of text (long values that aliases repeat?)"));
}

TEST(FakeScriptTest, JsonNumberTooLargeIsAnErrorNotAThrow) {
  // nlohmann reports this as out_of_range, not parse_error (found by the fuzzer).
  auto big = ParseFakeRoutesJson(R"({"routes":[{"path":"/x","responses":[{"status":1e999}]}]})");
  ASSERT_FALSE(big.has_value());
  EXPECT_EQ(big.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(big.error().message()), HasSubstr("not JSON"));
  EXPECT_THAT(std::string(big.error().message()), HasSubstr("number overflow"));
}

TEST(FakeScriptTest, QuotedScalarsStayStrings) {
  auto routes = ParseFakeRoutesYaml(
      "routes:\n"
      "  - path: /x\n"
      "    responses:\n"
      "      - status: 429\n"
      "        headers: {Retry-After: 60, X-Quoted: \"007\"}\n"
      "        body: \"123\"\n");
  ASSERT_TRUE(routes.has_value()) << routes.error().message();
  const FakeResponse& r = (*routes)[0].responses[0];
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.headers[0], (std::pair<std::string, std::string>{"Retry-After", "60"}));
  EXPECT_EQ(r.headers[1].second, "007");
  EXPECT_EQ(r.body, "123");
  EXPECT_EQ((*routes)[0].method, "GET") << "GET by default";
}

// Every example script loads, and the Meta ones answer as Meta would.
TEST(FakeScriptTest, ExampleScriptsLoadAndServe) {
  for (const char* name : {"graph_api.yaml", "graph_api_errors.yaml", "demo.yaml"}) {
    auto routes = LoadFakeScript(std::string(FUSEBOX_GATEWAY_TESTDATA) + "/" + name);
    ASSERT_TRUE(routes.has_value()) << name << ": " << routes.error().message();
    EXPECT_FALSE(routes->empty()) << name;
  }
  auto routes = LoadFakeScript(std::string(FUSEBOX_GATEWAY_TESTDATA) + "/graph_api_errors.yaml");
  ASSERT_TRUE(routes.has_value());
  auto fake = StartFake({.routes = *routes});
  ASSERT_NE(fake, nullptr);
  Client client(fake->port());
  Reply limited = client.Send(http::verb::get, "/v19.0/rate-limited-app/insights");
  EXPECT_EQ(limited.status, 429);
  EXPECT_FALSE(limited.headers["Retry-After"].empty());
  EXPECT_EQ(Json::parse(limited.body)["error"]["code"], 4);
  Reply expired = client.Send(http::verb::get, "/v19.0/expired-token/insights");
  EXPECT_EQ(expired.status, 401);
  EXPECT_EQ(Json::parse(expired.body)["error"]["code"], 190);
  Reply invalid = client.Send(http::verb::get, "/v19.0/bad-param/insights");
  EXPECT_EQ(invalid.status, 400);
  EXPECT_EQ(Json::parse(invalid.body)["error"]["code"], 100);
}

}  // namespace
}  // namespace fusebox::gateway
