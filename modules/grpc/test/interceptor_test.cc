// fusebox::grpc::MakeInterceptorFactory() on a real channel to the loopback
// ProbeServer: a CLOSED call reaches the server and is recorded; transient
// codes open the method's breaker; an OPEN circuit is refused by hijacking
// the call, with the server seeing nothing and the hint in the message and as
// a grpc-retry-pushback-ms trailer; RESOURCE_EXHAUSTED's pushback opens it for
// exactly that long; the caller's faults are ignored; the key function picks
// the breaker; the callback API is guarded alike; calls from several threads
// are all recorded. Breaker time is a ManualClock.
#include "fusebox/grpc/interceptor.h"

#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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

constexpr char kMethod[] = "fuseboxtest.Probe/Ask";

// The trailer `key` of a finished call, or nullopt.
std::optional<std::string> Trailer(const ::grpc::ClientContext& context, const std::string& key) {
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto it = trailers.find(key);
  if (it == trailers.end()) return std::nullopt;
  return std::string(it->second.data(), it->second.size());
}

class GrpcInterceptorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.ok());
    RegistryOptions options;
    options.clock = &clock_;
    options.default_config = TwoStrikes();
    auto registry = Registry::Create(std::move(options));
    ASSERT_TRUE(registry.has_value()) << registry.error();
    registry_ = std::move(*registry);
    Connect();
  }

  void Connect(InterceptorOptions options = {}) {
    std::vector<std::unique_ptr<::grpc::experimental::ClientInterceptorFactoryInterface>> factories;
    factories.push_back(MakeInterceptorFactory(registry_, std::move(options)));
    channel_ = ::grpc::experimental::CreateCustomChannelWithInterceptors(
        server_.address(), ::grpc::InsecureChannelCredentials(), ::grpc::ChannelArguments(),
        std::move(factories));
    stub_ = fuseboxtest::Probe::NewStub(channel_);
  }

  // One Ask through the intercepted channel; `context` is kept for its
  // trailers.
  ::grpc::Status Ask(int code, std::optional<std::string> pushback = std::nullopt,
                     fuseboxtest::AskReply* reply_out = nullptr) {
    fuseboxtest::AskRequest request;
    request.set_code(code);
    if (pushback) request.set_pushback(*pushback);
    fuseboxtest::AskReply reply;
    context_ = std::make_unique<::grpc::ClientContext>();
    context_->set_deadline(gpr_time_from_seconds(30, GPR_TIMESPAN));
    ::grpc::Status s = stub_->Ask(context_.get(), request, &reply);
    if (reply_out != nullptr) *reply_out = reply;
    return s;
  }

  std::shared_ptr<CircuitBreaker> Breaker(std::string_view key = kMethod) {
    return registry_->Find(key);
  }
  std::int64_t Count(OutcomeKind kind, std::string_view key = kMethod) {
    return Breaker(key)->totals().calls[static_cast<int>(kind)];
  }

  ManualClock clock_;
  testing::ProbeServer server_;
  std::shared_ptr<Registry> registry_;
  std::shared_ptr<::grpc::Channel> channel_;
  std::unique_ptr<fuseboxtest::Probe::Stub> stub_;
  std::unique_ptr<::grpc::ClientContext> context_;
};

TEST_F(GrpcInterceptorTest, ClosedCallReachesTheServerAndIsRecorded) {
  fuseboxtest::AskReply reply;
  const ::grpc::Status s = Ask(0, std::nullopt, &reply);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(reply.calls(), 1);  // the server's answer reached the caller
  EXPECT_EQ(server_.calls(), 1);
  ASSERT_NE(Breaker(), nullptr) << "one breaker per method, keyed by its name";
  EXPECT_EQ(Count(OutcomeKind::kSuccess), 1);
  EXPECT_EQ(Breaker()->state(), State::kClosed);
}

TEST_F(GrpcInterceptorTest, TransientFailuresOpenTheMethodsBreaker) {
  EXPECT_EQ(Ask(14).error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(Breaker()->state(), State::kClosed);
  const ::grpc::Status s = Ask(13);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::INTERNAL);
  EXPECT_EQ(s.error_message(), "probe answers as asked");  // the server's own status
  EXPECT_EQ(Breaker()->state(), State::kOpen);
  EXPECT_EQ(Count(OutcomeKind::kFailure), 2);
  EXPECT_EQ(server_.calls(), 2);
}

TEST_F(GrpcInterceptorTest, OpenCircuitRefusesLocallyWithTheHint) {
  (void)Ask(14);
  (void)Ask(14);
  ASSERT_EQ(Breaker()->state(), State::kOpen);
  clock_.Advance(10s);
  fuseboxtest::AskReply reply;
  const ::grpc::Status s = Ask(0, std::nullopt, &reply);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("circuit 'fuseboxtest.Probe/Ask' is open"));
  EXPECT_THAT(s.error_message(), HasSubstr("retry in 20000 ms (grpc-retry-pushback-ms: 20000)"));
  EXPECT_EQ(Trailer(*context_, "grpc-retry-pushback-ms"), "20000");
  EXPECT_EQ(reply.calls(), 0);    // no message was made up
  EXPECT_EQ(server_.calls(), 2);  // the server never saw it
  EXPECT_EQ(Breaker()->totals().not_permitted_calls, 1);
  EXPECT_EQ(Count(OutcomeKind::kFailure), 2);  // the refusal itself records nothing

  // Refused again and again, the server still untouched; then, after the
  // wait, one probe goes through and closes the circuit.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Ask(0).error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(server_.calls(), 2);
  clock_.Advance(20s + 1ms);
  const ::grpc::Status probe = Ask(0);
  EXPECT_TRUE(probe.ok()) << probe.error_message();
  EXPECT_EQ(server_.calls(), 3);
  EXPECT_EQ(Breaker()->state(), State::kClosed);
}

// No network traffic at all: a fresh channel whose only calls are refused
// never leaves IDLE (it has not even tried to connect).
TEST_F(GrpcInterceptorTest, RefusedCallsLeaveAFreshChannelIdle) {
  (void)Ask(14);
  (void)Ask(14);
  ASSERT_EQ(Breaker()->state(), State::kOpen);
  Connect();  // a new channel, the same registry
  ASSERT_EQ(channel_->GetState(false), GRPC_CHANNEL_IDLE);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Ask(0).error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(channel_->GetState(false), GRPC_CHANNEL_IDLE);
  EXPECT_EQ(server_.calls(), 2);
  // The same channel connects once the circuit lets a call through.
  clock_.Advance(30s + 1ms);
  EXPECT_TRUE(Ask(0).ok());
  EXPECT_NE(channel_->GetState(false), GRPC_CHANNEL_IDLE);
}

TEST_F(GrpcInterceptorTest, PushbackOpensTheBreakerForExactlyThatLong) {
  const ::grpc::Status s = Ask(8, "2500");
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(Trailer(*context_, "grpc-retry-pushback-ms"), "2500");  // the server's own
  EXPECT_EQ(Breaker()->state(), State::kOpen);
  EXPECT_EQ(Breaker()->metrics().retry_at, clock_.Now() + 2500ms);
  clock_.Advance(1000ms);
  const ::grpc::Status refused = Ask(0);
  EXPECT_EQ(refused.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(refused.error_message(), HasSubstr("retry in 1500 ms"));
  EXPECT_EQ(Trailer(*context_, "grpc-retry-pushback-ms"), "1500");
  EXPECT_EQ(server_.calls(), 1);
  clock_.Advance(1501ms);
  EXPECT_TRUE(Ask(0).ok());
  EXPECT_EQ(Breaker()->state(), State::kClosed);
}

TEST_F(GrpcInterceptorTest, RateLimitIsAPlainFailureWhenItMayNotOpenTheBreaker) {
  InterceptorOptions options;
  options.call.rate_limit_opens_breaker = false;
  Connect(std::move(options));
  (void)Ask(8, "2500");
  EXPECT_EQ(Breaker()->state(), State::kClosed);
  (void)Ask(8, "2500");
  EXPECT_EQ(Breaker()->state(), State::kOpen);
  EXPECT_EQ(Breaker()->metrics().retry_at, clock_.Now() + 30s);  // the breaker's own wait
}

TEST_F(GrpcInterceptorTest, CallersFaultsAreIgnored) {
  for (const int code : {3, 5, 7, 16, 9}) {
    EXPECT_EQ(static_cast<int>(Ask(code).error_code()), code);
  }
  EXPECT_EQ(Breaker()->state(), State::kClosed);
  EXPECT_EQ(Count(OutcomeKind::kIgnored), 5);
  EXPECT_EQ(Count(OutcomeKind::kFailure), 0);
}

TEST_F(GrpcInterceptorTest, ExpiredDeadlineIsAFailure) {
  fuseboxtest::AskRequest request;
  request.set_hang(true);
  for (int i = 0; i < 2; ++i) {
    fuseboxtest::AskReply reply;
    ::grpc::ClientContext context;
    context.set_deadline(gpr_time_from_millis(200, GPR_TIMESPAN));
    EXPECT_EQ(stub_->Ask(&context, request, &reply).error_code(),
              ::grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  server_.Release();
  EXPECT_EQ(Breaker()->state(), State::kOpen);
  EXPECT_EQ(Count(OutcomeKind::kFailure), 2);
}

TEST_F(GrpcInterceptorTest, KeyFunctionPicksTheBreakerAndTheTemplate) {
  CircuitBreakerConfig one_strike = TwoStrikes();
  one_strike.sliding_window_size = 1;
  one_strike.minimum_number_of_calls = 1;
  ASSERT_TRUE(registry_->AddConfig("one-strike", one_strike).ok());
  InterceptorOptions options;
  options.key = [](std::string_view method) { return "tenant-a:" + std::string(method); };
  options.call.config_name = "one-strike";
  Connect(std::move(options));
  (void)Ask(14);
  const std::string key = std::string("tenant-a:") + kMethod;
  ASSERT_NE(Breaker(key), nullptr);
  EXPECT_EQ(Breaker(key)->state(), State::kOpen);  // one failure: the template's window
  EXPECT_EQ(Breaker(kMethod), nullptr);
}

TEST_F(GrpcInterceptorTest, KeyTheRegistryRefusesFailsLocally) {
  InterceptorOptions options;
  options.key = [](std::string_view) { return std::string(); };
  Connect(std::move(options));
  const ::grpc::Status s = Ask(0);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("fusebox: "));
  EXPECT_EQ(Trailer(*context_, "grpc-retry-pushback-ms"), std::nullopt);
  EXPECT_EQ(server_.calls(), 0);
}

// The callback API runs a unary call as two batches (send, then receive); the
// hijack answers the second.
TEST_F(GrpcInterceptorTest, CallbackApiIsGuardedAlike) {
  const auto ask_async = [&](int code, ::grpc::ClientContext& context) {
    fuseboxtest::AskRequest request;
    request.set_code(code);
    fuseboxtest::AskReply reply;
    std::mutex mu;
    std::condition_variable cv;
    std::optional<::grpc::Status> result;
    stub_->async()->Ask(&context, &request, &reply, [&](::grpc::Status s) {
      const std::lock_guard lock(mu);
      result = std::move(s);
      cv.notify_all();
    });
    std::unique_lock lock(mu);
    // Bounded: the call's own 30 s deadline ends it first.
    cv.wait_for(lock, 60s, [&] { return result.has_value(); });
    return result.value_or(::grpc::Status(::grpc::StatusCode::INTERNAL, "no callback"));
  };
  for (int i = 0; i < 2; ++i) {
    ::grpc::ClientContext context;
    context.set_deadline(gpr_time_from_seconds(30, GPR_TIMESPAN));
    EXPECT_EQ(ask_async(14, context).error_code(), ::grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_EQ(Breaker()->state(), State::kOpen);
  ::grpc::ClientContext context;
  context.set_deadline(gpr_time_from_seconds(30, GPR_TIMESPAN));
  const ::grpc::Status s = ask_async(0, context);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("retry in 30000 ms"));
  EXPECT_EQ(Trailer(context, "grpc-retry-pushback-ms"), "30000");
  EXPECT_EQ(server_.calls(), 2);
}

// The completion-queue API: the same refusal, delivered through the queue.
TEST_F(GrpcInterceptorTest, CompletionQueueApiIsGuardedAlike) {
  const auto ask_cq = [&](int code, ::grpc::ClientContext& context) {
    fuseboxtest::AskRequest request;
    request.set_code(code);
    fuseboxtest::AskReply reply;
    ::grpc::CompletionQueue cq;
    ::grpc::Status status;
    auto rpc = stub_->AsyncAsk(&context, request, &cq);
    int tag = 1;
    rpc->Finish(&reply, &status, &tag);
    void* got = nullptr;
    bool ok = false;
    // Bounded by the call's own 30 s deadline.
    EXPECT_TRUE(cq.Next(&got, &ok));
    EXPECT_EQ(got, &tag);
    cq.Shutdown();
    while (cq.Next(&got, &ok)) {
    }
    return status;
  };
  for (int i = 0; i < 2; ++i) {
    ::grpc::ClientContext context;
    context.set_deadline(gpr_time_from_seconds(30, GPR_TIMESPAN));
    EXPECT_EQ(ask_cq(14, context).error_code(), ::grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_EQ(Count(OutcomeKind::kFailure), 2);
  EXPECT_EQ(Breaker()->state(), State::kOpen);
  ::grpc::ClientContext context;
  context.set_deadline(gpr_time_from_seconds(30, GPR_TIMESPAN));
  const ::grpc::Status s = ask_cq(0, context);
  EXPECT_EQ(s.error_code(), ::grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("retry in 30000 ms"));
  EXPECT_EQ(Trailer(context, "grpc-retry-pushback-ms"), "30000");
  EXPECT_EQ(server_.calls(), 2);
}

TEST_F(GrpcInterceptorTest, ConcurrentCallsAreAllRecorded) {
  constexpr int kThreads = 4;
  constexpr int kCalls = 25;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        fuseboxtest::AskRequest request;
        fuseboxtest::AskReply reply;
        ::grpc::ClientContext context;
        context.set_deadline(gpr_time_from_seconds(30, GPR_TIMESPAN));
        if (stub_->Ask(&context, request, &reply).ok()) ++ok;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), kThreads * kCalls);
  EXPECT_EQ(Count(OutcomeKind::kSuccess), kThreads * kCalls);
  EXPECT_EQ(server_.calls(), kThreads * kCalls);
}

}  // namespace
}  // namespace fusebox::grpc
