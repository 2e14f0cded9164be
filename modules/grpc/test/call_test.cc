// fusebox::grpc::Call against a real gRPC server on loopback (ProbeServer,
// in-process on a port gRPC picks): each classification trips the breaker
// or leaves it alone, the pushback trailer is read and opens the breaker for
// exactly that long, an OPEN circuit fails locally without reaching the
// server (the server counts its calls) and says when to come back, and a
// deadline that expires counts as a failure. Breaker time is a ManualClock;
// only the deadline test waits on gRPC's own clock (a 200 ms deadline on a
// call the server holds until released).
#include "fusebox/grpc/call.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "fusebox/circuit_breaker.h"
#include "fusebox/registry.h"
#include "fusebox/testing/manual_clock.h"
#include "probe_server.h"
#include "two_strikes.h"

namespace fusebox::grpc {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;
using ::testing::HasSubstr;
using testing::TwoStrikes;

class GrpcCallTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.ok());
    stub_ = server_.NewStub();
    auto breaker = CircuitBreaker::Create("probe", TwoStrikes(), clock_);
    ASSERT_TRUE(breaker.has_value()) << breaker.error();
    breaker_ = std::move(*breaker);
  }

  // One Ask through the wrapper: the server answers `code` (and `pushback`).
  ::grpc::Status Ask(int code, std::optional<std::string> pushback = std::nullopt,
                     CallInfo* info = nullptr, const Options& options = {}) {
    fuseboxtest::AskRequest request;
    request.set_code(code);
    if (pushback) request.set_pushback(*pushback);
    fuseboxtest::AskReply reply;
    ::grpc::ClientContext context;
    context.set_deadline(gpr_time_from_seconds(30, GPR_TIMESPAN));
    return Call(
        *breaker_, context,
        [&](::grpc::ClientContext& c) { return stub_->Ask(&c, request, &reply); }, info, options);
  }

  ManualClock clock_;
  testing::ProbeServer server_;
  std::unique_ptr<fuseboxtest::Probe::Stub> stub_;
  std::unique_ptr<CircuitBreaker> breaker_;
};

TEST_F(GrpcCallTest, SuccessReachesTheServerAndCountsAsSuccess) {
  CallInfo info;
  const ::grpc::Status s = Ask(0, std::nullopt, &info);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(info.status.ok());
  EXPECT_FALSE(info.rejected);
  ASSERT_TRUE(info.classification.has_value());
  EXPECT_EQ(info.classification->kind, http::Kind::kSuccess);
  EXPECT_EQ(server_.calls(), 1);
  EXPECT_EQ(breaker_->totals().calls[static_cast<int>(OutcomeKind::kSuccess)], 1);
}

// Each transient code: two in a row open the breaker, and the caller gets the
// server's own status back each time.
class TransientCodeTest : public GrpcCallTest, public ::testing::WithParamInterface<int> {};

TEST_P(TransientCodeTest, TwoFailuresOpenTheBreaker) {
  const int code = GetParam();
  CallInfo info;
  ::grpc::Status s = Ask(code, std::nullopt, &info);
  EXPECT_EQ(static_cast<int>(s.error_code()), code);
  EXPECT_EQ(s.error_message(), "probe answers as asked");
  EXPECT_EQ(info.classification->kind, http::Kind::kTransient);
  EXPECT_EQ(breaker_->state(), State::kClosed);
  s = Ask(code);
  EXPECT_EQ(static_cast<int>(s.error_code()), code);
  EXPECT_EQ(breaker_->state(), State::kOpen);
  EXPECT_EQ(breaker_->totals().calls[static_cast<int>(OutcomeKind::kFailure)], 2);
  EXPECT_EQ(server_.calls(), 2);
}

INSTANTIATE_TEST_SUITE_P(Codes, TransientCodeTest,
                         ::testing::Values(14 /*UNAVAILABLE*/, 4 /*DEADLINE_EXCEEDED*/,
                                           13 /*INTERNAL*/, 2 /*UNKNOWN*/));

// The caller's own faults and authorization: ignored, however many.
class IgnoredCodeTest : public GrpcCallTest, public ::testing::WithParamInterface<int> {};

TEST_P(IgnoredCodeTest, NeverTripsTheBreaker) {
  const int code = GetParam();
  for (int i = 0; i < 5; ++i) {
    CallInfo info;
    const ::grpc::Status s = Ask(code, std::nullopt, &info);
    EXPECT_EQ(static_cast<int>(s.error_code()), code);
    EXPECT_FALSE(info.status.ok());
  }
  EXPECT_EQ(breaker_->state(), State::kClosed);
  EXPECT_EQ(breaker_->totals().calls[static_cast<int>(OutcomeKind::kIgnored)], 5);
  EXPECT_EQ(breaker_->totals().calls[static_cast<int>(OutcomeKind::kFailure)], 0);
  EXPECT_EQ(server_.calls(), 5);
}

INSTANTIATE_TEST_SUITE_P(Codes, IgnoredCodeTest,
                         ::testing::Values(3 /*INVALID_ARGUMENT*/, 5 /*NOT_FOUND*/,
                                           16 /*UNAUTHENTICATED*/, 7 /*PERMISSION_DENIED*/,
                                           9 /*FAILED_PRECONDITION*/, 12 /*UNIMPLEMENTED*/));

TEST_F(GrpcCallTest, AuthorizationMapsToItsOwnStatusCodes) {
  CallInfo info;
  (void)Ask(16, std::nullopt, &info);
  EXPECT_EQ(info.status.code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(info.classification->kind, http::Kind::kAuthorization);
  (void)Ask(7, std::nullopt, &info);
  EXPECT_EQ(info.status.code(), StatusCode::kPermissionDenied);
  (void)Ask(5, std::nullopt, &info);
  EXPECT_EQ(info.status.code(), StatusCode::kNotFound);
  EXPECT_EQ(info.classification->kind, http::Kind::kInvalid);
}

// RESOURCE_EXHAUSTED with grpc-retry-pushback-ms: the trailer reaches the
// classifier and the breaker opens at once for exactly that long.
TEST_F(GrpcCallTest, PushbackTrailerOpensTheBreakerForThatLong) {
  CallInfo info;
  const ::grpc::Status s = Ask(8, "2500", &info);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  ASSERT_TRUE(info.classification.has_value());
  EXPECT_EQ(info.classification->kind, http::Kind::kRateLimit);
  EXPECT_EQ(info.classification->retry_after, 2500ms);
  EXPECT_EQ(info.status.code(), StatusCode::kRateLimited);
  EXPECT_EQ(info.status.retry_at(), clock_.Now() + 2500ms);
  // One rate limit is enough: no window needed.
  EXPECT_EQ(breaker_->state(), State::kOpen);
  EXPECT_EQ(breaker_->metrics().retry_at, clock_.Now() + 2500ms);

  // Refused locally until then, with the time left as the hint.
  clock_.Advance(1000ms);
  const std::int64_t calls = server_.calls();
  const ::grpc::Status refused = Ask(0, std::nullopt, &info);
  EXPECT_EQ(refused.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(refused.error_message(), HasSubstr("retry in 1500 ms"));
  EXPECT_THAT(refused.error_message(), HasSubstr("grpc-retry-pushback-ms: 1500"));
  EXPECT_EQ(info.retry_pushback, 1500ms);
  EXPECT_EQ(server_.calls(), calls);

  // At retry_at itself still refused (OPEN ends strictly after it, as in
  // Resilience4j), with the smallest hint; then one probe goes through and
  // closes it again.
  clock_.Advance(1500ms);
  EXPECT_EQ(Ask(0, std::nullopt, &info).error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(info.retry_pushback, 1ms);
  clock_.Advance(1ms);
  const ::grpc::Status probe = Ask(0);
  EXPECT_TRUE(probe.ok()) << probe.error_message();
  EXPECT_EQ(server_.calls(), calls + 1);
  EXPECT_EQ(breaker_->state(), State::kClosed);
}

TEST_F(GrpcCallTest, RateLimitWithoutUsablePushbackWaitsTheDefault) {
  Options options;
  options.rules.default_wait = 7s;
  for (const std::optional<std::string>& pushback :
       {std::optional<std::string>(), std::optional<std::string>("soon"),
        std::optional<std::string>("-1")}) {
    breaker_->Reset();
    CallInfo info;
    (void)Ask(8, pushback, &info, options);
    ASSERT_TRUE(info.classification.has_value());
    EXPECT_EQ(info.classification->retry_after, 7s) << pushback.value_or("(none)");
    EXPECT_EQ(breaker_->metrics().retry_at, clock_.Now() + 7s) << pushback.value_or("(none)");
  }
}

TEST_F(GrpcCallTest, RateLimitIsAPlainFailureWhenItMayNotOpenTheBreaker) {
  Options options;
  options.rate_limit_opens_breaker = false;
  (void)Ask(8, "2500", nullptr, options);
  EXPECT_EQ(breaker_->state(), State::kClosed);
  (void)Ask(8, "2500", nullptr, options);
  EXPECT_EQ(breaker_->state(), State::kOpen);
  EXPECT_EQ(breaker_->metrics().retry_at, clock_.Now() + 30s);  // the breaker's own wait
}

// An OPEN circuit: UNAVAILABLE at once, the server never asked, the hint the
// time left of the breaker's wait, the call itself not run.
TEST_F(GrpcCallTest, OpenCircuitFailsLocallyWithoutReachingTheServer) {
  (void)Ask(14);
  (void)Ask(14);
  ASSERT_EQ(breaker_->state(), State::kOpen);
  clock_.Advance(10s);
  const std::int64_t calls = server_.calls();
  bool ran = false;
  ::grpc::ClientContext context;
  CallInfo info;
  const ::grpc::Status s = Call(
      *breaker_, context,
      [&](::grpc::ClientContext&) {
        ran = true;
        return ::grpc::Status::OK;
      },
      &info);
  EXPECT_FALSE(ran);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("circuit 'probe' is open"));
  EXPECT_THAT(s.error_message(), HasSubstr("retry in 20000 ms"));
  EXPECT_TRUE(info.rejected);
  EXPECT_EQ(info.status.code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(info.status.retry_at(), clock_.Now() + 20s);
  EXPECT_EQ(info.retry_pushback, 20s);
  EXPECT_FALSE(info.classification.has_value());
  EXPECT_EQ(server_.calls(), calls);
  EXPECT_EQ(breaker_->totals().not_permitted_calls, 1);
}

// A deadline that expires on the client (the server holds the call) is
// DEADLINE_EXCEEDED, a transient failure the breaker counts.
TEST_F(GrpcCallTest, ExpiredDeadlineCountsAsAFailure) {
  fuseboxtest::AskRequest request;
  request.set_hang(true);
  for (int i = 0; i < 2; ++i) {
    fuseboxtest::AskReply reply;
    ::grpc::ClientContext context;
    context.set_deadline(gpr_time_from_millis(200, GPR_TIMESPAN));
    CallInfo info;
    const ::grpc::Status s = Call(
        *breaker_, context,
        [&](::grpc::ClientContext& c) { return stub_->Ask(&c, request, &reply); }, &info);
    EXPECT_EQ(s.error_code(), ::grpc::StatusCode::DEADLINE_EXCEEDED);
    EXPECT_EQ(info.status.code(), StatusCode::kTimeout);
  }
  server_.Release();
  EXPECT_EQ(breaker_->state(), State::kOpen);
  EXPECT_EQ(breaker_->totals().calls[static_cast<int>(OutcomeKind::kFailure)], 2);
}

// Keyed through a Registry: one breaker per key, a failing method does not
// open another's circuit.
TEST(GrpcRegistryCallTest, EachKeyHasItsOwnBreaker) {
  ManualClock clock;
  testing::ProbeServer server;
  ASSERT_TRUE(server.ok());
  auto stub = server.NewStub();
  RegistryOptions options;
  options.clock = &clock;
  options.default_config = TwoStrikes();
  auto registry = Registry::Create(std::move(options));
  ASSERT_TRUE(registry.has_value()) << registry.error();
  const auto ask = [&](std::string_view key, int code, CallInfo* info = nullptr) {
    fuseboxtest::AskRequest request;
    request.set_code(code);
    fuseboxtest::AskReply reply;
    ::grpc::ClientContext context;
    return Call(
        **registry, key, context,
        [&](::grpc::ClientContext& c) { return stub->Ask(&c, request, &reply); }, info);
  };
  (void)ask("probe/Ask:a", 14);
  (void)ask("probe/Ask:a", 14);
  EXPECT_EQ((*registry)->Find("probe/Ask:a")->state(), State::kOpen);
  EXPECT_EQ(ask("probe/Ask:a", 0).error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(ask("probe/Ask:b", 0).ok());
  EXPECT_EQ(server.calls(), 3);

  // A key the registry refuses fails locally, as its status maps to gRPC.
  CallInfo info;
  const ::grpc::Status s = ask("", 0, &info);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(info.rejected);
  EXPECT_EQ(server.calls(), 3);
}

}  // namespace
}  // namespace fusebox::grpc
