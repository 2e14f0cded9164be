#include "fusebox/meta/provider_call.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

#include "fusebox/stale_cache.h"
#include "fusebox/testing/in_process_shared_state.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox::meta {
namespace {

using std::chrono::seconds;

// A fake provider: each call returns the next scripted answer and counts.
class ProviderCallTest : public ::testing::Test {
 protected:
  ProviderCallTest() {
    RegistryOptions o;
    o.clock = &clock_;
    registry_ = std::move(*Registry::Create(std::move(o)));
    key_ = *ProviderCircuitKey("instagram", Workload::kRead, "17841400008460056");
  }

  ProviderResult<std::string> Call(const ProviderResult<std::string>& answer,
                                   const std::string& key = {}) {
    return RunProviderCall(*registry_, key.empty() ? key_ : key,
                           [&]() -> ProviderResult<std::string> {
                             ++calls_;
                             return answer;
                           });
  }

  static ProviderError Err(ConnCode code, int status, std::optional<seconds> retry = {}) {
    return ProviderError{.code = code, .http_status = status, .retry_after = retry};
  }

  State StateOf(const std::string& suffix) { return registry_->Find(key_ + ":" + suffix)->state(); }

  testing::ManualClock clock_;
  std::unique_ptr<Registry> registry_;
  std::string key_;
  int calls_ = 0;
};

TEST_F(ProviderCallTest, KeysFollowSeed000) {
  EXPECT_EQ(key_, "provider:instagram:read:17841400008460056");
  EXPECT_EQ(*ProviderCircuitKey("threads", Workload::kTokenRefresh, "9"),
            "provider:threads:token-refresh:9");
  EXPECT_EQ(WorkloadName(Workload::kPublish), "publish");
  EXPECT_EQ(WorkloadName(Workload::kReply), "reply");
  EXPECT_EQ(ProviderCircuitKey("", Workload::kRead, "1").error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ProviderCircuitKey("a:b", Workload::kRead, "1").error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ProviderCircuitKey("meta", Workload::kRead, "").error().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(ProviderCallTest, QuotaOpensOnFirstRateLimitForTheRecoveryTime) {
  ProviderResult<std::string> r = Call(Err(ConnCode::kConn008RateLimit, 429, seconds(90)));
  ASSERT_FALSE(r.has_value());
  EXPECT_FALSE(r.error().circuit_open);  // the provider's own answer
  EXPECT_EQ(calls_, 1);
  EXPECT_EQ(StateOf("quota"), State::kOpen);
  EXPECT_EQ(StateOf("transient"), State::kClosed);

  clock_.Advance(seconds(90) - Duration(1));
  r = Call(std::string("posts"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ConnCode::kConn008RateLimit);
  EXPECT_TRUE(r.error().circuit_open);
  EXPECT_EQ(r.error().retry_after, seconds(1));
  EXPECT_EQ(calls_, 1);  // not called

  clock_.Advance(Duration(2));
  r = Call(std::string("posts"));  // the probe
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, "posts");
  EXPECT_EQ(calls_, 2);
  EXPECT_EQ(StateOf("quota"), State::kClosed);
}

TEST_F(ProviderCallTest, RejectIfOpenGivesRunProviderCallsRefusalWithoutACall) {
  EXPECT_EQ(RejectIfOpen(*registry_, key_), std::nullopt);  // no circuits yet
  (void)Call(std::string("posts"));
  EXPECT_EQ(RejectIfOpen(*registry_, key_), std::nullopt);  // both CLOSED
  (void)Call(Err(ConnCode::kConn008RateLimit, 429, seconds(90)));
  clock_.Advance(seconds(30));
  const std::optional<ProviderError> fast = RejectIfOpen(*registry_, key_);
  ASSERT_TRUE(fast.has_value());
  const ProviderResult<std::string> slow = Call(std::string("posts"));
  ASSERT_FALSE(slow.has_value());
  for (const ProviderError& e : {*fast, slow.error()}) {
    EXPECT_EQ(e.code, ConnCode::kConn008RateLimit);
    EXPECT_TRUE(e.circuit_open);
    EXPECT_EQ(e.retry_after, seconds(60));
  }
  EXPECT_EQ(calls_, 2);
  // Both refusals are counted by the quota circuit; the transient circuit,
  // whose permit a quota refusal does not take, saw the two calls made only.
  const auto quota = registry_->Find(key_ + ":quota");
  const auto transient = registry_->Find(key_ + ":transient");
  EXPECT_EQ(quota->totals().not_permitted_calls, 2);
  const CircuitBreakerTotals t = transient->totals();
  EXPECT_EQ(t.calls[0] + t.calls[1] + t.calls[2], 2);
  EXPECT_EQ(t.not_permitted_calls, 0);
  // The wait is over: the probe is RunProviderCall's to take.
  clock_.Advance(seconds(60) + Duration(1));
  EXPECT_EQ(RejectIfOpen(*registry_, key_), std::nullopt);
  EXPECT_TRUE(Call(std::string("posts")).has_value());
  EXPECT_EQ(StateOf("quota"), State::kClosed);
}

TEST_F(ProviderCallTest, ProviderCallInTwoHalvesRecordsWhatRunProviderCallRecords) {
  // A rate limit finished later opens the quota circuit for its recovery time.
  auto started = ProviderCall::Start(*registry_, key_);
  ASSERT_TRUE(std::holds_alternative<ProviderCall>(started));
  clock_.Advance(seconds(2));
  const ProviderError limited = Err(ConnCode::kConn008RateLimit, 429, seconds(90));
  std::get<ProviderCall>(std::move(started)).Finish(&limited);
  EXPECT_EQ(StateOf("quota"), State::kOpen);
  EXPECT_EQ(StateOf("transient"), State::kClosed);  // Meta answered
  const CircuitBreakerTotals transient = registry_->Find(key_ + ":transient")->totals();
  EXPECT_EQ(transient.calls[static_cast<int>(OutcomeKind::kSuccess)], 1);
  EXPECT_EQ(transient.call_time[static_cast<int>(OutcomeKind::kSuccess)], seconds(2));
  // Refused now, as RunProviderCall would be.
  auto refused = ProviderCall::Start(*registry_, key_);
  ASSERT_TRUE(std::holds_alternative<ProviderError>(refused));
  EXPECT_EQ(std::get<ProviderError>(refused).code, ConnCode::kConn008RateLimit);
  EXPECT_TRUE(std::get<ProviderError>(refused).circuit_open);

  // A call dropped without Finish() gives its permits back: the quota's
  // single half-open probe is free again.
  clock_.Advance(seconds(90) + Duration(1));
  {
    auto probe = ProviderCall::Start(*registry_, key_);
    ASSERT_TRUE(std::holds_alternative<ProviderCall>(probe));
    EXPECT_EQ(StateOf("quota"), State::kHalfOpen);
  }
  auto again = ProviderCall::Start(*registry_, key_);
  ASSERT_TRUE(std::holds_alternative<ProviderCall>(again));
  std::get<ProviderCall>(std::move(again)).Finish(nullptr);
  EXPECT_EQ(StateOf("quota"), State::kClosed);
}

TEST_F(ProviderCallTest, QuotaUsesDefault120sWithoutRetryAfter) {
  (void)Call(Err(ConnCode::kConn008RateLimit, 400));
  ProviderResult<std::string> r = Call(std::string("x"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().retry_after, seconds(120));
}

// A transient failure says nothing about the quota: on the quota circuit's
// half-open probe it neither closes the circuit (the limit may still hold)
// nor reopens it; the probe's slot is freed for the next call, which decides.
TEST_F(ProviderCallTest, QuotaProbeFailingTransientlyNeitherClosesNorReopensTheQuotaCircuit) {
  (void)Call(Err(ConnCode::kConn008RateLimit, 429, seconds(10)));
  ASSERT_EQ(StateOf("quota"), State::kOpen);
  clock_.Advance(seconds(10) + Duration(1));
  ProviderResult<std::string> probe = Call(Err(ConnCode::kConn003Transient, 503));
  ASSERT_FALSE(probe.has_value());
  EXPECT_FALSE(probe.error().circuit_open);
  EXPECT_EQ(calls_, 2);
  EXPECT_EQ(StateOf("quota"), State::kHalfOpen) << "a 5xx decided the quota probe";
  const CircuitBreakerTotals quota = registry_->Find(key_ + ":quota")->totals();
  EXPECT_EQ(quota.calls[static_cast<int>(OutcomeKind::kIgnored)], 1);
  // The next call is the probe again; a rate limit reopens for its own time.
  (void)Call(Err(ConnCode::kConn008RateLimit, 429, seconds(40)));
  EXPECT_EQ(calls_, 3);
  EXPECT_EQ(StateOf("quota"), State::kOpen);
  ProviderResult<std::string> refused = Call(std::string("x"));
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().retry_after, seconds(40));
}

// A refusal never tells the caller to come back before the circuit allows:
// 89.5 s left is Retry-After 90, not 89.
TEST_F(ProviderCallTest, RefusalRetryAfterIsRoundedUp) {
  (void)Call(Err(ConnCode::kConn008RateLimit, 429, seconds(90)));
  clock_.Advance(std::chrono::milliseconds(500));
  ProviderResult<std::string> r = Call(std::string("x"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().retry_after, seconds(90));
}

// A quota refusal after the transient permit was taken (the quota's one
// probe is out) gives that permit back as ignored: Meta was not called.
TEST_F(ProviderCallTest, AQuotaRefusalRecordsTheTransientPermitAsIgnored) {
  (void)Call(Err(ConnCode::kConn008RateLimit, 429, seconds(10)));
  clock_.Advance(seconds(10) + Duration(1));
  auto probe = ProviderCall::Start(*registry_, key_);
  ASSERT_TRUE(std::holds_alternative<ProviderCall>(probe));
  ASSERT_EQ(StateOf("quota"), State::kHalfOpen);
  auto refused = ProviderCall::Start(*registry_, key_);
  ASSERT_TRUE(std::holds_alternative<ProviderError>(refused));
  EXPECT_EQ(std::get<ProviderError>(refused).code, ConnCode::kConn008RateLimit);
  const CircuitBreakerTotals t = registry_->Find(key_ + ":transient")->totals();
  EXPECT_EQ(t.calls[static_cast<int>(OutcomeKind::kIgnored)], 1);
  std::get<ProviderCall>(std::move(probe)).Finish(nullptr);
  EXPECT_EQ(StateOf("quota"), State::kClosed);
}

TEST_F(ProviderCallTest, QuotaProbeRateLimitedAgainReopens) {
  (void)Call(Err(ConnCode::kConn008RateLimit, 429, seconds(10)));
  clock_.Advance(seconds(11));
  (void)Call(Err(ConnCode::kConn008RateLimit, 429, seconds(40)));
  EXPECT_EQ(calls_, 2);
  ProviderResult<std::string> r = Call(std::string("x"));
  EXPECT_EQ(r.error().retry_after, seconds(40));
  EXPECT_EQ(calls_, 2);
}

// "More than 50 %" on at least 3 calls: the threshold is the float just above
// 50 (TransientCircuitConfig), because the breaker trips at >= threshold.
TEST_F(ProviderCallTest, TransientOneOfTwoNeverReachesMinimumCalls) {
  (void)Call(Err(ConnCode::kConn003Transient, 503));
  (void)Call(std::string("ok"));
  EXPECT_EQ(StateOf("transient"), State::kClosed);
}

TEST_F(ProviderCallTest, TransientTwoOfThreeTrips) {
  (void)Call(Err(ConnCode::kConn003Transient, 503));
  (void)Call(std::string("ok"));
  EXPECT_EQ(StateOf("transient"), State::kClosed);
  (void)Call(Err(ConnCode::kConn003Transient, 502));  // 2 of 3 = 66.7 %
  EXPECT_EQ(StateOf("transient"), State::kOpen);
  EXPECT_EQ(StateOf("quota"), State::kClosed);  // never mixed
  ProviderResult<std::string> r = Call(std::string("x"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ConnCode::kConn003Transient);
  EXPECT_TRUE(r.error().circuit_open);
  EXPECT_EQ(r.error().retry_after, seconds(30));
  EXPECT_EQ(calls_, 3);
  // Open 30 s, then one probe closes it.
  clock_.Advance(seconds(30) - Duration(1));
  EXPECT_FALSE(Call(std::string("x")).has_value());
  EXPECT_EQ(calls_, 3);
  clock_.Advance(Duration(2));
  EXPECT_TRUE(Call(std::string("x")).has_value());
  EXPECT_EQ(calls_, 4);
  EXPECT_EQ(StateOf("transient"), State::kClosed);
}

TEST_F(ProviderCallTest, TransientExactlyHalfDoesNotTrip) {
  (void)Call(std::string("ok"));
  (void)Call(Err(ConnCode::kConn003Transient, 500));
  (void)Call(std::string("ok"));
  (void)Call(Err(ConnCode::kConn003Transient, 500));  // 2 of 4 = 50 %
  EXPECT_EQ(StateOf("transient"), State::kClosed);
  (void)Call(Err(ConnCode::kConn003Transient, 500));  // 3 of 5 = 60 %
  EXPECT_EQ(StateOf("transient"), State::kOpen);
}

TEST_F(ProviderCallTest, TransientThresholdIsTheFloatAbove50) {
  const CircuitBreakerConfig c = TransientCircuitConfig();
  EXPECT_GT(c.failure_rate_threshold, 50.0f);
  EXPECT_LT(c.failure_rate_threshold, 50.001f);
  EXPECT_EQ(c.minimum_number_of_calls, 3);
  EXPECT_EQ(c.wait_duration_in_open_state, seconds(30));
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_TRUE(QuotaCircuitConfig().Validate().ok());
}

TEST_F(ProviderCallTest, AuthorizationAndInvalidNeverTripAndReachTheCallerUnchanged) {
  const ProviderError auth{.code = ConnCode::kConn009Authorization,
                           .http_status = 400,
                           .meta_code = 190,
                           .meta_subcode = 463};
  const ProviderError invalid{
      .code = ConnCode::kConn010Invalid, .http_status = 400, .meta_code = 100};
  for (int i = 0; i < 20; ++i) {
    ProviderResult<std::string> r = Call(i % 2 ? auth : invalid);
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error(), i % 2 ? auth : invalid);
  }
  EXPECT_EQ(calls_, 20);
  EXPECT_EQ(StateOf("transient"), State::kClosed);
  EXPECT_EQ(StateOf("quota"), State::kClosed);
}

TEST_F(ProviderCallTest, WorkloadsAndSubjectsAreKeptApart) {
  (void)Call(Err(ConnCode::kConn008RateLimit, 429, seconds(60)));
  const std::string publish =
      *ProviderCircuitKey("instagram", Workload::kPublish, "17841400008460056");
  const std::string other = *ProviderCircuitKey("instagram", Workload::kRead, "other");
  EXPECT_TRUE(Call(std::string("p"), publish).has_value());
  EXPECT_TRUE(Call(std::string("o"), other).has_value());
  EXPECT_FALSE(Call(std::string("r")).has_value());
  EXPECT_EQ(calls_, 3);
}

TEST_F(ProviderCallTest, ExceptionIsATransientFailureAndPropagates) {
  auto boom = [&]() -> ProviderResult<int> {
    ++calls_;
    throw std::runtime_error("network down");
  };
  for (int i = 0; i < 3; ++i) {
    EXPECT_THROW((void)RunProviderCall(*registry_, key_, boom), std::runtime_error);
  }
  EXPECT_EQ(StateOf("transient"), State::kOpen);
  EXPECT_EQ(StateOf("quota"), State::kClosed);
  EXPECT_EQ(calls_, 3);
}

TEST_F(ProviderCallTest, FromResponseMapsEachClass) {
  auto from = [](Response r) { return ProviderError::FromResponse(r); };
  const ProviderError rl = from({.status = 429, .headers = {{"Retry-After", "30"}}});
  EXPECT_EQ(rl.code, ConnCode::kConn008RateLimit);
  EXPECT_EQ(rl.retry_after, seconds(30));
  EXPECT_EQ(from({.status = 503}).code, ConnCode::kConn003Transient);
  EXPECT_EQ(from({.status = 503}).retry_after, std::nullopt);
  const ProviderError auth =
      from({.status = 400, .body = R"({"error":{"code":190,"error_subcode":463}})"});
  EXPECT_EQ(auth.code, ConnCode::kConn009Authorization);
  EXPECT_EQ(auth.meta_code, 190);
  EXPECT_EQ(auth.meta_subcode, 463);
  EXPECT_EQ(from({.status = 400}).code, ConnCode::kConn010Invalid);
  EXPECT_EQ(ConnCodeName(ConnCode::kConn003Transient), "CONN_003");
  EXPECT_EQ(ConnCodeName(ConnCode::kConn008RateLimit), "CONN_008");
  EXPECT_EQ(ConnCodeName(ConnCode::kConn009Authorization), "CONN_009");
  EXPECT_EQ(ConnCodeName(ConnCode::kConn010Invalid), "CONN_010");
}

// docs/meta.md: the transient circuit counts the calls of the last 10 s only.
TEST_F(ProviderCallTest, TransientFailuresOlderThanTenSecondsNoLongerCount) {
  (void)Call(Err(ConnCode::kConn003Transient, 503));
  (void)Call(Err(ConnCode::kConn003Transient, 503));
  clock_.Advance(seconds(11));
  (void)Call(Err(ConnCode::kConn003Transient, 503));  // 1 call in the window
  EXPECT_EQ(StateOf("transient"), State::kClosed);
  clock_.Advance(seconds(9));
  (void)Call(Err(ConnCode::kConn003Transient, 503));
  (void)Call(Err(ConnCode::kConn003Transient, 503));  // 3 of 3 within 9 s
  EXPECT_EQ(StateOf("transient"), State::kOpen);
}

TEST_F(ProviderCallTest, CustomTemplatesAreKept) {
  CircuitBreakerConfig quota = QuotaCircuitConfig();
  quota.wait_duration_in_open_state = seconds(7);
  // Only the quota template is custom; the transient one is added on first use.
  ASSERT_TRUE(registry_->AddConfig(std::string(kQuotaConfigName), quota).ok());
  (void)Call(std::string("x"));
  EXPECT_EQ(registry_->Find(key_ + ":quota")->config().wait_duration_in_open_state, seconds(7));
  EXPECT_EQ(registry_->Find(key_ + ":transient")->config().wait_duration_in_open_state,
            seconds(30));
  ASSERT_TRUE(AddProviderCircuitConfigs(*registry_).ok());
}

// A circuit that must read the fleet before it admits (a new one, or one told
// to re-read after its store reconnected) is not admitted from its CLOSED
// state alone, on RunProviderCall's inline path for two CLOSED circuits too.
TEST_F(ProviderCallTest, ACircuitThatMustReadTheFleetIsNotAdmittedOnItsLocalStateAlone) {
  auto fleet = std::make_shared<fusebox::testing::InProcessSharedState>(clock_);
  const auto join = [&](Registry& r) {
    CircuitBreakerConfig transient = TransientCircuitConfig();
    CircuitBreakerConfig quota = QuotaCircuitConfig();
    transient.shared_state = fleet;
    quota.shared_state = fleet;
    ASSERT_TRUE(r.AddConfig(std::string(kTransientConfigName), transient).ok());
    ASSERT_TRUE(r.AddConfig(std::string(kQuotaConfigName), quota).ok());
  };
  join(*registry_);
  RegistryOptions o;
  o.clock = &clock_;
  std::unique_ptr<Registry> other = std::move(*Registry::Create(std::move(o)));
  join(*other);
  int other_calls = 0;
  const auto call_other = [&] {
    return RunProviderCall(*other, key_, [&]() -> ProviderResult<std::string> {
      ++other_calls;
      return std::string("ok");
    });
  };
  ASSERT_TRUE(Call(std::string("x")).has_value());
  ASSERT_TRUE(call_other().has_value());  // both instances hold the key's circuits, CLOSED
  // This instance is rate-limited while the fleet's pushes are down: the
  // other has not heard, and its circuits are still CLOSED.
  fleet->SetPushes(false);
  (void)Call(Err(ConnCode::kConn008RateLimit, 429, seconds(90)));
  ASSERT_EQ(StateOf("quota"), State::kOpen);
  ASSERT_EQ(other->Find(key_ + ":quota")->state(), State::kClosed);
  fleet->SetPushes(true);
  fleet->Resync();  // its store reconnected: re-read before the next admission
  ProviderResult<std::string> r = call_other();
  ASSERT_FALSE(r.has_value());
  EXPECT_TRUE(r.error().circuit_open);
  EXPECT_EQ(r.error().code, ConnCode::kConn008RateLimit);
  EXPECT_EQ(other_calls, 1) << "Meta was called for a rate-limited account";
}

// A clock whose coarse reading lags: CoarseNow() is Now() rounded down to
// 10 ms, as a kernel's coarse clock ticks. Timers are the manual clock's.
// It counts its reads.
class TickingClock final : public Clock {
 public:
  TimePoint Now() const override {
    precise_reads.fetch_add(1, std::memory_order_relaxed);
    return manual.Now();
  }
  TimePoint CoarseNow() const override {
    coarse_reads.fetch_add(1, std::memory_order_relaxed);
    const Duration since = manual.Now() - testing::ManualClock::kEpoch;
    return testing::ManualClock::kEpoch + since - since % std::chrono::milliseconds(10);
  }
  void SleepUntil(TimePoint deadline) override { manual.SleepUntil(deadline); }
  TimerId ScheduleAt(TimePoint deadline, std::function<void()> fn) override {
    return manual.ScheduleAt(deadline, std::move(fn));
  }
  bool Cancel(TimerId id) override { return manual.Cancel(id); }
  testing::ManualClock manual;
  mutable std::atomic<int> precise_reads{0};
  mutable std::atomic<int> coarse_reads{0};
};

// A hot provider call reads the clock twice, coarsely: once for both
// lookups and its start, once at its end, which both records reuse (the
// transient circuit's TIME_BASED window would read it again).
TEST(ProviderCallTiming, AHotCallReadsTheCoarseClockTwice) {
  TickingClock clock;
  RegistryOptions o;
  o.clock = &clock;
  std::unique_ptr<Registry> registry = std::move(*Registry::Create(std::move(o)));
  const std::string key = *ProviderCircuitKey("instagram", Workload::kRead, "1");
  auto succeed = []() -> ProviderResult<int> { return 1; };
  const ProviderCircuitKeys keys(key);
  // Past the quota circuit's 100 calls: both windows are full and clean.
  for (int i = 0; i < 101; ++i) ASSERT_TRUE(RunProviderCall(*registry, key, succeed).has_value());
  for (const bool kept : {false, true}) {
    SCOPED_TRACE(kept ? "kept keys" : "the key's string");
    const int coarse = clock.coarse_reads.load();
    const int precise = clock.precise_reads.load();
    ASSERT_TRUE((kept ? RunProviderCall(*registry, keys, succeed)
                      : RunProviderCall(*registry, key, succeed))
                    .has_value());
    EXPECT_EQ(clock.coarse_reads.load() - coarse, 2);
    EXPECT_EQ(clock.precise_reads.load() - precise, 0);
  }
}

// A provider call is timed as the breakers' Call() would time it: on the
// coarse clock with seed 000's templates (60 s slow-call threshold), on the
// precise one as soon as one circuit wants it (a threshold under 1 s). The
// durations reach the circuits' totals, the counters a dashboard reads.
TEST(ProviderCallTiming, CoarseUnlessACircuitWantsPrecision) {
  auto success_time = [](Registry& registry, const std::string& circuit) {
    return registry.Find(circuit)->totals().call_time[static_cast<int>(OutcomeKind::kSuccess)];
  };
  for (const bool precise_quota : {false, true}) {
    SCOPED_TRACE(precise_quota ? "quota threshold 500 ms" : "seed 000's templates");
    TickingClock clock;
    clock.manual.Advance(std::chrono::milliseconds(4));  // mid-tick: coarse reads 0
    RegistryOptions o;
    o.clock = &clock;
    std::unique_ptr<Registry> registry = std::move(*Registry::Create(std::move(o)));
    if (precise_quota) {
      CircuitBreakerConfig quota = QuotaCircuitConfig();
      quota.slow_call_duration_threshold = std::chrono::milliseconds(500);
      ASSERT_TRUE(registry->AddConfig(std::string(kQuotaConfigName), quota).ok());
    }
    const std::string key = *ProviderCircuitKey("instagram", Workload::kRead, "1");
    ProviderResult<int> r = RunProviderCall(*registry, key, [&]() -> ProviderResult<int> {
      clock.manual.Advance(std::chrono::milliseconds(3));  // ends at 7 ms: coarse still 0
      return 1;
    });
    ASSERT_TRUE(r.has_value());
    const Duration expected = precise_quota ? std::chrono::milliseconds(3) : Duration::zero();
    // Both circuits record the one duration the call was timed with.
    EXPECT_EQ(success_time(*registry, key + ":quota"), expected);
    EXPECT_EQ(success_time(*registry, key + ":transient"), expected);
  }
}

// The circuit names are built on the stack for keys up to 246 bytes and in a
// string beyond: both name the same breakers as GetProviderCircuits and
// RejectIfOpen, and keep each key's circuits apart.
TEST_F(ProviderCallTest, LongKeysNameTheirCircuitsAsShortOnesDo) {
  for (std::size_t subject_size : {1u, 200u, 221u, 222u, 223u, 240u, 1000u}) {
    SCOPED_TRACE(subject_size);
    const std::string key =
        *ProviderCircuitKey("instagram", Workload::kRead, std::string(subject_size, '7'));
    const ProviderResult<std::string> r =
        Call(Err(ConnCode::kConn008RateLimit, 429, seconds(90)), key);
    ASSERT_FALSE(r.has_value());
    const std::shared_ptr<CircuitBreaker> quota = registry_->Find(key + ":quota");
    const std::shared_ptr<CircuitBreaker> transient = registry_->Find(key + ":transient");
    ASSERT_NE(quota, nullptr);
    ASSERT_NE(transient, nullptr);
    EXPECT_EQ(quota->state(), State::kOpen);
    EXPECT_EQ(transient->metrics().successful_calls, 1);  // Meta answered
    EXPECT_EQ(GetProviderCircuits(*registry_, key).quota, quota);
    EXPECT_EQ(GetProviderCircuits(*registry_, key).transient, transient);
    ASSERT_TRUE(RejectIfOpen(*registry_, key).has_value());
  }
  EXPECT_EQ(registry_->size(), 2u * 7u);
  EXPECT_EQ(calls_, 7);
}

// Kept keys (ProviderCircuitKeys) reach the circuits the key's string does,
// whichever overload a call takes: what one records the other sees, a
// circuit dropped and made again is found again, and one keys object used
// with two registries gets each registry's own circuits.
TEST_F(ProviderCallTest, KeptKeysCallTheCircuitsTheKeyNames) {
  const ProviderCircuitKeys keys(key_);
  EXPECT_EQ(keys.key(), key_);
  EXPECT_EQ(keys.transient().key(), key_ + ":transient");
  EXPECT_EQ(keys.quota().key(), key_ + ":quota");
  auto kept = [&](const ProviderResult<std::string>& answer) {
    return RunProviderCall(*registry_, keys, [&]() -> ProviderResult<std::string> {
      ++calls_;
      return answer;
    });
  };
  // Created from the templates by the kept keys' first call.
  ASSERT_FALSE(kept(Err(ConnCode::kConn008RateLimit, 429, seconds(90))).has_value());
  EXPECT_EQ(StateOf("quota"), State::kOpen);
  ProviderResult<std::string> r = Call(std::string("posts"));  // by string: refused
  ASSERT_FALSE(r.has_value());
  EXPECT_TRUE(r.error().circuit_open);
  EXPECT_EQ(r.error().retry_after, seconds(90));
  clock_.Advance(seconds(90) + Duration(1));            // OPEN ends after its wait
  ASSERT_TRUE(kept(std::string("posts")).has_value());  // the probe closes it
  EXPECT_EQ(StateOf("quota"), State::kClosed);
  EXPECT_EQ(calls_, 2);

  // Two transient failures by string, one kept: 3 of 3 trips the transient
  // circuit, which then refuses the kept keys' call with CONN_003 (past its
  // 10 s window first, which the probe's success would otherwise share).
  clock_.Advance(seconds(11));
  (void)Call(Err(ConnCode::kConn003Transient, 503));
  (void)Call(Err(ConnCode::kConn003Transient, 503));
  EXPECT_EQ(StateOf("transient"), State::kClosed);
  EXPECT_THROW((void)RunProviderCall(*registry_, keys,
                                     []() -> ProviderResult<std::string> {
                                       throw std::runtime_error("connection reset");
                                     }),
               std::runtime_error);
  EXPECT_EQ(StateOf("transient"), State::kOpen);
  r = kept(std::string("posts"));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ConnCode::kConn003Transient);
  EXPECT_EQ(calls_, 4);

  // Dropped and made again: the kept keys find the new circuits.
  ASSERT_TRUE(registry_->Remove(key_ + ":transient"));
  ASSERT_TRUE(registry_->Remove(key_ + ":quota"));
  ASSERT_TRUE(kept(std::string("posts")).has_value());
  EXPECT_EQ(registry_->Find(key_ + ":transient")->metrics().successful_calls, 1);
  EXPECT_EQ(registry_->Find(key_ + ":quota")->metrics().successful_calls, 1);

  // Another registry: its own circuits, untouched by this one's.
  RegistryOptions o;
  o.clock = &clock_;
  std::unique_ptr<Registry> other = std::move(*Registry::Create(std::move(o)));
  ASSERT_FALSE(RunProviderCall(*other, keys, [&]() -> ProviderResult<std::string> {
                 return Err(ConnCode::kConn008RateLimit, 429, seconds(60));
               }).has_value());
  EXPECT_EQ(other->Find(key_ + ":quota")->state(), State::kOpen);
  EXPECT_EQ(StateOf("quota"), State::kClosed);
  EXPECT_TRUE(kept(std::string("posts")).has_value());

  // The two halves and GetProviderCircuits take kept keys too.
  EXPECT_EQ(GetProviderCircuits(*registry_, keys).quota, registry_->Find(key_ + ":quota"));
  EXPECT_EQ(GetProviderCircuits(*registry_, keys).transient, registry_->Find(key_ + ":transient"));
  std::variant<ProviderCall, ProviderError> started = ProviderCall::Start(*registry_, keys);
  ASSERT_TRUE(std::holds_alternative<ProviderCall>(started));
  const ProviderError limited = Err(ConnCode::kConn008RateLimit, 429, seconds(45));
  std::get<ProviderCall>(std::move(started)).Finish(&limited);
  EXPECT_EQ(StateOf("quota"), State::kOpen);
  auto without_blocking = ProviderCall::StartWithoutBlocking(*registry_, keys);
  ASSERT_TRUE(std::holds_alternative<ProviderError>(without_blocking));
  EXPECT_EQ(std::get<ProviderError>(without_blocking).retry_after, seconds(45));
}

// RunProviderCall's circuits are in use while `fn` runs: a sweep past
// idle_timeout meanwhile keeps both, and the call is recorded in them; once
// the call is over the same sweep drops them.
TEST_F(ProviderCallTest, ASweepDuringACallKeepsBothCircuits) {
  // Idle after 30 s, so that a call that long is not a slow one (60 s).
  RegistryOptions o;
  o.clock = &clock_;
  o.idle_timeout = seconds(30);
  o.sweep_interval = seconds(10);
  std::unique_ptr<Registry> registry = std::move(*Registry::Create(std::move(o)));
  const CircuitBreaker* transient = nullptr;
  const CircuitBreaker* quota = nullptr;
  const ProviderResult<std::string> r =
      RunProviderCall(*registry, key_, [&]() -> ProviderResult<std::string> {
        transient = registry->Find(key_ + ":transient").get();
        quota = registry->Find(key_ + ":quota").get();
        clock_.Advance(seconds(31));
        EXPECT_EQ(registry->Sweep(), 0u);
        EXPECT_EQ(registry->Find(key_ + ":transient").get(), transient);
        EXPECT_EQ(registry->Find(key_ + ":quota").get(), quota);
        return std::string("posts");
      });
  ASSERT_TRUE(r.has_value());
  ASSERT_NE(transient, nullptr);
  ASSERT_NE(quota, nullptr);
  EXPECT_EQ(registry->Find(key_ + ":transient").get(), transient);
  EXPECT_EQ(registry->Find(key_ + ":quota").get(), quota);
  EXPECT_EQ(registry->Find(key_ + ":quota")->metrics().successful_calls, 1);
  // The transient circuit's 10 s window has rolled past the call: its totals.
  const CircuitBreakerTotals t = registry->Find(key_ + ":transient")->totals();
  EXPECT_EQ(t.calls[static_cast<int>(OutcomeKind::kSuccess)], 1);
  EXPECT_EQ(t.call_time[static_cast<int>(OutcomeKind::kSuccess)], seconds(31));
  clock_.Advance(seconds(31));
  EXPECT_EQ(registry->Sweep(), 2u);
  EXPECT_EQ(registry->Find(key_ + ":transient"), nullptr);
  EXPECT_EQ(registry->Find(key_ + ":quota"), nullptr);
}

}  // namespace
}  // namespace fusebox::meta

namespace fusebox::meta {
namespace {

TEST(ProviderErrorToStatus, MapsEachConnCodeSoThatOnlyTransientFailuresMayGoStale) {
  const TimePoint now = testing::ManualClock::kEpoch;
  ProviderError e;
  e.code = ConnCode::kConn008RateLimit;
  e.http_status = 429;
  e.retry_after = std::chrono::seconds(120);
  Status s = e.ToStatus(now);
  EXPECT_EQ(s.code(), StatusCode::kRateLimited);
  EXPECT_EQ(s.retry_at(), now + std::chrono::seconds(120));
  EXPECT_TRUE(DefaultMayServeStale(s));

  e = ProviderError{};
  e.code = ConnCode::kConn003Transient;
  e.http_status = 503;
  s = e.ToStatus(now);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_FALSE(s.retry_at().has_value());
  EXPECT_TRUE(DefaultMayServeStale(s));

  e.circuit_open = true;  // either circuit refused: whatever the code
  e.retry_after = std::chrono::seconds(30);
  s = e.ToStatus(now);
  EXPECT_EQ(s.code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(s.retry_at(), now + std::chrono::seconds(30));
  EXPECT_TRUE(DefaultMayServeStale(s));

  for (ConnCode never : {ConnCode::kConn009Authorization, ConnCode::kConn010Invalid}) {
    e = ProviderError{};
    e.code = never;
    e.http_status = never == ConnCode::kConn009Authorization ? 401 : 400;
    s = e.ToStatus(now);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(DefaultMayServeStale(s)) << "CONN_009/010 are never hidden";
    EXPECT_EQ(s.message(), e.message());
  }
}

}  // namespace
}  // namespace fusebox::meta
