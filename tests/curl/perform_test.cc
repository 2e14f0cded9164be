// fusebox::curl::Perform against a real HTTP server on 127.0.0.1 (the
// gateway's fake upstream), with real libcurl: classification of real
// responses, Retry-After reaching the breaker, and a Timeout's stop aborting
// a transfer that the server holds open.
#include "fusebox/curl/perform.h"

#include <curl/curl.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stop_token>
#include <string>
#include <thread>

#include "apps/gateway/fake_upstream.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/http/classify.h"
#include "fusebox/pipeline.h"
#include "fusebox/testing/manual_clock.h"
#include "fusebox/timeout.h"

namespace fusebox::curl {
namespace {

using gateway::FakeResponse;
using gateway::FakeUpstream;
using std::chrono::seconds;

class CurlPerformTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto up = FakeUpstream::Start({.clock = &upstream_clock_});
    ASSERT_TRUE(up.has_value()) << up.error().message();
    upstream_ = std::move(*up);
    easy_ = curl_easy_init();
    ASSERT_NE(easy_, nullptr);
    // A generous bound for a loaded machine; the tests never reach it.
    curl_easy_setopt(easy_, CURLOPT_TIMEOUT_MS, 60000L);
  }
  void TearDown() override {
    if (easy_ != nullptr) curl_easy_cleanup(easy_);
  }

  void Route(std::vector<FakeResponse> responses) {
    ASSERT_TRUE(upstream_->SetRoute({"GET", "/item", std::move(responses)}).ok());
    Url("/item");
  }
  void Url(const std::string& path) {
    url_ = upstream_->url() + path;
    curl_easy_setopt(easy_, CURLOPT_URL, url_.c_str());
  }
  Status Get(Reply& reply, const std::stop_token& stop = {}) {
    return Perform(easy_, stop, reply, {.clock = &clock_});
  }

  testing::ManualClock upstream_clock_;
  testing::ManualClock clock_;
  std::unique_ptr<FakeUpstream> upstream_;
  CURL* easy_ = nullptr;
  std::string url_;
};

TEST_F(CurlPerformTest, SuccessKeepsStatusHeadersAndBody) {
  Route({{.status = 200, .headers = {{"X-Thing", "  42 "}}, .body = R"({"ok":true})"}});
  Reply reply;
  const Status s = Get(reply);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, R"({"ok":true})");
  EXPECT_EQ(reply.Header("x-thing"), "42");
  EXPECT_EQ(reply.classification.kind, http::Kind::kSuccess);
  Result<Reply> fetched = Fetch(easy_, {}, {.clock = &clock_});
  ASSERT_TRUE(fetched.has_value());
  EXPECT_EQ(fetched->body, R"({"ok":true})") << "the easy handle is reusable";
}

TEST_F(CurlPerformTest, RateLimitCarriesRetryAfterAsRetryAt) {
  Route({{.status = 429, .headers = {{"Retry-After", "30"}}}});
  Reply reply;
  const Status s = Get(reply);
  EXPECT_EQ(s.code(), StatusCode::kRateLimited);
  ASSERT_TRUE(s.retry_at().has_value());
  EXPECT_EQ(*s.retry_at(), clock_.Now() + seconds(30));
  EXPECT_EQ(reply.status, 429) << "the reply of a failure is kept";
}

TEST_F(CurlPerformTest, ServerAnswersMapThroughTheHttpClassifier) {
  const struct {
    FakeResponse response;
    StatusCode code;
  } cases[] = {
      {{.status = 503, .headers = {{"Retry-After", "12"}}}, StatusCode::kRateLimited},
      {{.status = 503}, StatusCode::kUnavailable},
      {{.status = 500}, StatusCode::kUnavailable},
      {{.status = 408}, StatusCode::kUnavailable},
      {{.status = 401}, StatusCode::kUnauthenticated},
      {{.status = 403}, StatusCode::kPermissionDenied},
      {{.status = 404}, StatusCode::kNotFound},
      {{.status = 422}, StatusCode::kInvalidArgument},
      {{.status = 301, .headers = {{"Location", "/elsewhere"}}}, StatusCode::kOk},
  };
  for (const auto& c : cases) {
    Route({c.response});
    Reply reply;
    EXPECT_EQ(Get(reply).code(), c.code) << c.response.status;
    EXPECT_EQ(reply.status, c.response.status);
  }
}

TEST_F(CurlPerformTest, ADroppedConnectionIsAReset) {
  Route({{.drop = true}});
  Reply reply;
  const Status s = Get(reply);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.message();
  ASSERT_TRUE(reply.classification.transport.has_value());
  EXPECT_EQ(*reply.classification.transport, http::Transport::kReset);
}

TEST_F(CurlPerformTest, ARefusedConnectionIsAConnectFailure) {
  const std::string url = upstream_->url() + "/item";
  upstream_->Stop();  // nothing listens on the port any more
  curl_easy_setopt(easy_, CURLOPT_URL, url.c_str());
  Reply reply;
  const Status s = Get(reply);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.message();
  ASSERT_TRUE(reply.classification.transport.has_value());
  EXPECT_EQ(*reply.classification.transport, http::Transport::kConnect);
  EXPECT_EQ(reply.status, 0);
}

TEST_F(CurlPerformTest, ABodyOverTheLimitFailsTheCall) {
  Route({{.status = 200, .body = std::string(4096, 'x')}});
  Reply reply;
  const Status s = Perform(easy_, {}, reply, {.clock = &clock_, .max_body_bytes = 1000});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("too large"), std::string::npos) << s.message();
  EXPECT_LE(reply.body.size(), 1000U);
}

TEST_F(CurlPerformTest, HeadersOverTheLimitFailTheCall) {
  Route({{.status = 200, .headers = {{"X-Big", std::string(2000, 'h')}}, .body = "small"}});
  Reply reply;
  const Status s = Perform(easy_, {}, reply, {.clock = &clock_, .max_header_bytes = 1000});
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("too large"), std::string::npos) << s.message();
  Route({{.status = 200, .headers = {{"X-Big", std::string(2000, 'h')}}, .body = "small"}});
  EXPECT_TRUE(Perform(easy_, {}, reply, {.clock = &clock_, .max_header_bytes = 4000}).ok())
      << "under the limit the same reply passes";
}

// libcurl's own timeout (CURLOPT_TIMEOUT_MS) is a deadline: kTimeout, and
// the transport named so, not a generic failure.
TEST_F(CurlPerformTest, LibcurlsOwnTimeoutIsADeadline) {
  Route({{.status = 200, .latency = std::chrono::hours(1)}});
  curl_easy_setopt(easy_, CURLOPT_TIMEOUT_MS, 200L);
  Reply reply;
  const Status s = Get(reply);
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.message();
  ASSERT_TRUE(reply.classification.transport.has_value());
  EXPECT_EQ(*reply.classification.transport, http::Transport::kDeadline);
}

// An HTTP-date Retry-After without a Date header (the fake upstream sends
// none) and no rules.now is measured against the wall clock: a date far in
// the future saturates to max_wait (24 h), not the 60 s default wait.
TEST_F(CurlPerformTest, AnHttpDateRetryAfterWithoutDateIsMeasuredAgainstTheWallClock) {
  Route({{.status = 429, .headers = {{"Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"}}}});
  Reply reply;
  const Status s = Get(reply);
  EXPECT_EQ(s.code(), StatusCode::kRateLimited);
  ASSERT_TRUE(s.retry_at().has_value());
  EXPECT_EQ(*s.retry_at(), clock_.Now() + std::chrono::hours(24));
}

TEST_F(CurlPerformTest, AStopRequestedBeforehandSendsNothing) {
  Route({{.status = 200}});
  std::stop_source source;
  source.request_stop();
  Reply reply;
  const Status s = Get(reply, source.get_token());
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(upstream_->TotalCalls(), 0);
}

// Waits (bounded, generously) until the upstream has received `n` requests.
void AwaitCalls(const FakeUpstream& upstream, std::int64_t n) {
  for (int i = 0; i < 60000 && upstream.TotalCalls() < n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE(upstream.TotalCalls(), n) << "the request never reached the upstream";
}

// The upstream holds the response for an hour of its (manual) clock: only the
// stop can end the call, and it does, well before libcurl's own 60 s bound.
TEST_F(CurlPerformTest, AStopAbortsATransferInFlight) {
  Route({{.status = 200, .latency = std::chrono::hours(1)}});
  std::stop_source source;
  std::thread stopper([&] {
    AwaitCalls(*upstream_, 1);
    source.request_stop();
  });
  Reply reply;
  const Status s = Get(reply, source.get_token());
  stopper.join();
  EXPECT_FALSE(s.ok());
  ASSERT_TRUE(reply.classification.transport.has_value());
  EXPECT_EQ(*reply.classification.transport, http::Transport::kCancelled);
  EXPECT_EQ(reply.status, 0);
}

// The same through a Timeout on a manual clock: advancing past the deadline
// stops the token, the transfer ends, and the caller gets kTimeout.
TEST_F(CurlPerformTest, ATimeoutsDeadlineAbortsTheTransfer) {
  Route({{.status = 200, .latency = std::chrono::hours(1)}});
  std::shared_ptr<Timeout> timeout =
      std::move(*Timeout::Create({.timeout_duration = seconds(2)}, clock_));
  std::thread advancer([&] {
    AwaitCalls(*upstream_, 1);
    clock_.Advance(seconds(3));
  });
  Reply reply;
  const Status s = timeout->Execute([&](const std::stop_token& stop) { return Get(reply, stop); });
  advancer.join();
  EXPECT_EQ(s.code(), StatusCode::kTimeout) << s.message();
}

// Retry-After honoured end to end: a 429 with Retry-After 30 opens the
// pipeline's breaker for 30 s, so the next call never reaches the server; a
// 404 (the caller's fault) never counts against it.
TEST_F(CurlPerformTest, APipelinesBreakerHonoursRetryAfter) {
  CircuitBreakerConfig config;
  config.minimum_number_of_calls = 2;
  config.sliding_window_size = 2;
  std::shared_ptr<CircuitBreaker> breaker =
      std::move(*CircuitBreaker::Create("dep", config, clock_));
  std::unique_ptr<Pipeline> pipeline =
      std::move(*Pipeline::Builder()
                     .WithCircuitBreaker(breaker)
                     .WithOutcomeClassifier(&http::BreakerOutcomeKind)
                     .Build());
  Reply reply;
  const auto call = [&] {
    return pipeline->Execute([&](const std::stop_token& stop) { return Get(reply, stop); });
  };
  ASSERT_TRUE(upstream_->SetRoute({"GET", "/missing", {{.status = 404}}}).ok());
  Url("/missing");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(call().code(), StatusCode::kNotFound);
  EXPECT_EQ(breaker->state(), State::kClosed) << "404s are ignored";

  Route({{.status = 429, .headers = {{"Retry-After", "30"}}}, {.status = 200}});
  EXPECT_EQ(call().code(), StatusCode::kRateLimited);
  const Status open = call();
  EXPECT_EQ(open.code(), StatusCode::kCircuitOpen);
  ASSERT_TRUE(open.retry_at().has_value());
  EXPECT_EQ(*open.retry_at(), clock_.Now() + seconds(30));
  EXPECT_EQ(upstream_->Calls("GET", "/item"), 1) << "the open breaker kept the call local";
  clock_.Advance(seconds(31));
  EXPECT_TRUE(call().ok()) << "after Retry-After the probe goes through";
  EXPECT_EQ(upstream_->Calls("GET", "/item"), 2);
}

}  // namespace
}  // namespace fusebox::curl
