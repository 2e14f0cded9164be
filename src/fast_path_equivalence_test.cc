// The lock-free paths (a success into a clean full window writes nothing, a
// success into a full window with failures is only counted, TIME_BASED
// successes go to striped counters) must decide exactly what the locked path
// decides. A breaker with a listener takes the locked path for every outcome;
// one without takes the fast paths. Driven by the same random sequence from one
// thread, they must agree on the state and every count after every step.
//
// So must OutcomeOrder::kRelaxed: it reorders only outcomes reported on
// different threads at the same time, so from one thread it decides exactly
// as kLinearizable does.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <optional>
#include <random>
#include <string>

#include "fusebox/circuit_breaker.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox {
namespace {

using std::chrono::milliseconds;
using testing::ManualClock;

class Silent : public CircuitBreakerListener {};

struct Case {
  SlidingWindowType type;
  Compatibility compatibility;
  std::uint32_t seed;
};

class FastPathEquivalence : public ::testing::TestWithParam<Case> {};

void ExpectSameMetrics(const CircuitBreaker& a, const CircuitBreaker& b, int step) {
  const CircuitBreakerMetrics ma = a.metrics();
  const CircuitBreakerMetrics mb = b.metrics();
  SCOPED_TRACE("step " + std::to_string(step));
  ASSERT_EQ(ma.state, mb.state);
  ASSERT_EQ(ma.buffered_calls, mb.buffered_calls);
  ASSERT_EQ(ma.failed_calls, mb.failed_calls);
  ASSERT_EQ(ma.slow_calls, mb.slow_calls);
  ASSERT_EQ(ma.not_permitted_calls, mb.not_permitted_calls);
  ASSERT_EQ(ma.failure_rate, mb.failure_rate);
  ASSERT_EQ(ma.slow_call_rate, mb.slow_call_rate);
  ASSERT_EQ(ma.late_outcomes, mb.late_outcomes);
}

TEST_P(FastPathEquivalence, SameDecisionsAsTheLockedPath) {
  const Case c = GetParam();
  ManualClock clock;
  CircuitBreakerConfig config;
  config.sliding_window_type = c.type;
  config.sliding_window_size = c.type == SlidingWindowType::kCountBased ? 20 : 5;
  config.minimum_number_of_calls = 10;
  config.failure_rate_threshold = 30;
  config.slow_call_rate_threshold = 50;
  config.slow_call_duration_threshold = milliseconds(100);
  config.permitted_number_of_calls_in_half_open_state = 3;
  config.wait_duration_in_open_state = std::chrono::seconds(2);
  config.compatibility = c.compatibility;
  auto fast = std::move(*CircuitBreaker::Create("fast", config, clock));
  auto locked = std::move(*CircuitBreaker::Create("locked", config, clock));
  locked->AddListener(std::make_shared<Silent>());
  config.outcome_order = OutcomeOrder::kRelaxed;
  auto relaxed = std::move(*CircuitBreaker::Create("relaxed", config, clock));
  CircuitBreaker* const breakers[] = {fast.get(), locked.get(), relaxed.get()};

  std::mt19937 rng(c.seed);
  std::uniform_int_distribution<int> pct(0, 99);
  // Long healthy stretches (so windows fill and become clean) broken by bursts
  // of failures and slow calls.
  int failure_pct = 0;
  for (int step = 0; step < 4000; ++step) {
    if (step % 200 == 0) failure_pct = pct(rng) < 50 ? 0 : pct(rng) / 2;
    clock.Advance(milliseconds(pct(rng) < 90 ? 7 : 450));
    std::optional<Permit> permits[3];
    for (int i = 0; i < 3; ++i) {
      Result<Permit> p = breakers[i]->TryAcquire();
      if (i > 0) {
        ASSERT_EQ(p.has_value(), permits[0].has_value()) << "step " << step << " #" << i;
      }
      if (p) permits[i].emplace(std::move(p).value());
    }
    if (permits[0]) {
      const int r = pct(rng);
      const milliseconds d(pct(rng) < 10 ? 150 : 5);
      for (std::optional<Permit>& p : permits) {
        if (r < failure_pct) {
          p->Failure(d);
        } else if (r < failure_pct + 3) {
          p->Ignore();
        } else {
          p->Success(d);
        }
      }
    }
    if (step % 7 == 0) {
      ExpectSameMetrics(*fast, *locked, step);
      ExpectSameMetrics(*relaxed, *locked, step);
    }
  }
  ExpectSameMetrics(*fast, *locked, -1);
  ExpectSameMetrics(*relaxed, *locked, -1);
  EXPECT_EQ(relaxed->totals().calls[1], locked->totals().calls[1]);
  EXPECT_EQ(relaxed->totals().slow_failed_calls, locked->totals().slow_failed_calls);
}

INSTANTIATE_TEST_SUITE_P(
    Windows, FastPathEquivalence,
    ::testing::Values(Case{SlidingWindowType::kCountBased, Compatibility::kDefault, 1},
                      Case{SlidingWindowType::kCountBased, Compatibility::kDefault, 2},
                      Case{SlidingWindowType::kCountBased, Compatibility::kResilience4j, 3},
                      Case{SlidingWindowType::kTimeBased, Compatibility::kDefault, 4},
                      Case{SlidingWindowType::kTimeBased, Compatibility::kDefault, 5},
                      Case{SlidingWindowType::kTimeBased, Compatibility::kResilience4j, 6}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(info.param.type == SlidingWindowType::kCountBased ? "Count" : "Time") +
             (info.param.compatibility == Compatibility::kDefault ? "Default" : "Resilience4j") +
             std::to_string(info.param.seed);
    });

}  // namespace
}  // namespace fusebox
