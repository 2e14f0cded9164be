// Seed 004 ("서킷 브레이커": an order service calls a payment service once a
// second while the payment service goes silent for a while) replayed on the
// real CircuitBreaker and a ManualClock, one test per preset of the seed's
// page: default, no-breaker, threshold-30, wait-10s, short-outage.
//
// The model, as the seed's own simulator has it:
//   - call k (k = 1..40) happens at second k;
//   - a call during the outage fails with a 3 s timeout; it is acquired and
//     recorded at the same instant, as a Failure lasting 3 s (3 s is far below
//     the default 60 s slow-call threshold, so it is never slow);
//   - every other call succeeds at once;
//   - a rejected call costs no thread time and runs the fallback.
//
// When each call arrives inside its second. The seed's page says its screen
// assumes each call comes a hair after the whole second, so that the call 5 s
// after a trip is already past the strict OPEN boundary (semantics note point
// 1: a call exactly at opened_at + wait is still rejected). Because a call is
// acquired and recorded at one instant, a constant hair would not do: the trip
// at 15 s + h ends its wait at exactly 20 s + h, where call 20 lands. So the
// hair grows by 1 ms a call: call k arrives at k s + k ms. Every call that
// lands on a "wait ends" second is then (5 or 10) ms past the boundary, and no
// call is ever near any other boundary. DefaultPresetOnExactWholeSeconds below
// shows what Resilience4j itself does when the calls land exactly on the
// seconds (the one difference the seed's page admits).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/status.h"
#include "fusebox/testing/manual_clock.h"
#include "fusebox/testing/status_macros.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;

constexpr int kCalls = 40;
constexpr Duration kTimeout = 3s;

// The seed's application.yml.
CircuitBreakerConfig SeedConfig() {
  CircuitBreakerConfig config;
  config.sliding_window_type = SlidingWindowType::kCountBased;
  config.sliding_window_size = 10;                          // slidingWindowSize: 10
  config.minimum_number_of_calls = 10;                      // minimumNumberOfCalls: 10
  config.failure_rate_threshold = 50;                       // failureRateThreshold: 50
  config.wait_duration_in_open_state = 5s;                  // waitDurationInOpenState: 5s
  config.permitted_number_of_calls_in_half_open_state = 3;  // permittedNumberOf...: 3
  return config;
}

class TransitionRecorder : public CircuitBreakerListener {
 public:
  void OnTransition(const TransitionEvent& e) override {
    if (states.empty()) states.push_back(e.from);
    states.push_back(e.to);
  }
  std::vector<State> states;
};

// One character per call.
//   result: S success, F failure (3 s timeout), R rejected (fallback at once)
//   state after the call: C CLOSED, O OPEN, H HALF_OPEN
struct Timeline {
  const char* result;
  const char* state;
};

struct Totals {
  int successes = 0;
  int failures = 0;
  int rejections = 0;
  Duration thread_time = Duration::zero();  // time request threads spent waiting
};

char StateChar(State s) {
  switch (s) {
    case State::kClosed:
      return 'C';
    case State::kOpen:
      return 'O';
    case State::kHalfOpen:
      return 'H';
    default:
      return '?';
  }
}

std::string StateSequence(const std::vector<State>& states) {
  std::string out;
  for (State s : states) {
    if (!out.empty()) out += '>';
    out += StateName(s);
  }
  return out;
}

struct ScenarioRun {
  std::string result;  // one char per call, as Timeline
  std::string state;
  Totals totals;
  std::vector<State> transitions;
};

// Drives calls 1..40 through a breaker built from `config`. The payment
// service is down for calls [outage_first, outage_last]. Calls arrive at
// kEpoch + k s + k * hair (see the file comment).
// An error if the breaker cannot be made (FUSEBOX_ASSERT_OK_AND_ASSIGN).
Result<ScenarioRun> Drive(const CircuitBreakerConfig& config, int outage_first, int outage_last,
                          Duration hair = 1ms) {
  ManualClock clock;
  auto created = CircuitBreaker::Create("payment", config, clock);
  if (!created) return created.error();
  std::unique_ptr<CircuitBreaker> breaker = std::move(created).value();
  auto recorder = std::make_shared<TransitionRecorder>();
  breaker->AddListener(recorder);

  ScenarioRun run;
  for (int k = 1; k <= kCalls; ++k) {
    clock.Set(ManualClock::kEpoch + std::chrono::seconds(k) + k * hair);
    const bool down = k >= outage_first && k <= outage_last;
    Result<Permit> permit = breaker->TryAcquire();
    if (!permit) {
      EXPECT_EQ(permit.error().code(), StatusCode::kCircuitOpen) << "call " << k;
      EXPECT_EQ(permit.error().reason(), "open") << "call " << k;
      run.result += 'R';
      ++run.totals.rejections;
    } else if (down) {
      permit->Failure(kTimeout);
      run.result += 'F';
      ++run.totals.failures;
      run.totals.thread_time += kTimeout;
    } else {
      permit->Success(20ms);
      run.result += 'S';
      ++run.totals.successes;
    }
    run.state += StateChar(breaker->state());
  }
  run.transitions = recorder->states;
  return run;
}

void ExpectTimeline(const ScenarioRun& run, const Timeline& want) {
  ASSERT_EQ(std::string(want.result).size(), static_cast<size_t>(kCalls));
  ASSERT_EQ(std::string(want.state).size(), static_cast<size_t>(kCalls));
  for (int i = 0; i < kCalls; ++i) {
    EXPECT_EQ(run.result[i], want.result[i]) << "result of call " << i + 1;
    EXPECT_EQ(run.state[i], want.state[i]) << "state after call " << i + 1;
  }
  // The whole lines too, for a readable diff when something is off.
  EXPECT_EQ(run.result, want.result);
  EXPECT_EQ(run.state, want.state);
}

// --- default -----------------------------------------------------------------
// The seed spells this one out per second:
//   1-10  succeed; after 10 the window holds 10 calls at 0 %.
//   11-15 fail (10 %, 20 %, 30 %, 40 %); 15 makes 5 of 10 = 50 % >= 50: OPEN,
//         wait 5 s.
//   16-19 rejected.
//   20    the wait is over: HALF_OPEN, probe 1/3 fails; 21 probe 2/3 fails;
//   22    probe 3/3 fails: 3 of 3 = 100 % >= 50: OPEN again, wait 5 s.
//   23-26 rejected (the service is back from 26 on, but nobody asks).
//   27    HALF_OPEN, probe 1/3 succeeds; 28 probe 2/3;
//   29    probe 3/3 succeeds: 0 % < 50: CLOSED, with an empty window.
//   30-40 succeed.
//                                   1111111111222222222233333333334
//                          1234567890123456789012345678901234567890
constexpr Timeline kDefault{"SSSSSSSSSSFFFFFRRRRFFFRRRRSSSSSSSSSSSSSS",
                            "CCCCCCCCCCCCCCOOOOOHHOOOOOHHCCCCCCCCCCCC"};

TEST(Seed004, DefaultPreset) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const ScenarioRun run, Drive(SeedConfig(), 11, 25));
  ExpectTimeline(run, kDefault);
  EXPECT_EQ(StateSequence(run.transitions), "CLOSED>OPEN>HALF_OPEN>OPEN>HALF_OPEN>CLOSED");
  EXPECT_EQ(run.totals.successes, 24);
  EXPECT_EQ(run.totals.failures, 8);
  EXPECT_EQ(run.totals.rejections, 8);
  // 8 timeouts of 3 s instead of the 15 (45 s) without a breaker.
  EXPECT_EQ(run.totals.thread_time, 24s);
}

TEST(Seed004, DefaultPresetRejectionsCarryTheEndOfTheWait) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto breaker,
                               CircuitBreaker::Create("payment", SeedConfig(), clock));
  for (int k = 1; k <= 16; ++k) {
    clock.Set(ManualClock::kEpoch + std::chrono::seconds(k) + k * 1ms);
    Result<Permit> permit = breaker->TryAcquire();
    if (k <= 15) {
      ASSERT_TRUE(permit.has_value()) << "call " << k << ": " << permit.error();
      if (k <= 10) {
        permit->Success(20ms);
      } else {
        permit->Failure(kTimeout);
      }
      continue;
    }
    // Call 16: the trip was recorded when call 15 reported (15 s + 15 ms, note
    // point 3), so OPEN ends 5 s later.
    ASSERT_FALSE(permit.has_value());
    EXPECT_EQ(permit.error().code(), StatusCode::kCircuitOpen);
    EXPECT_EQ(permit.error().reason(), "open");
    EXPECT_EQ(permit.error().retry_at(), ManualClock::kEpoch + 20s + 15ms);
  }
  const CircuitBreakerMetrics m = breaker->metrics();
  EXPECT_EQ(m.state, State::kOpen);
  EXPECT_EQ(m.failure_rate, 50.0f);
  EXPECT_EQ(m.buffered_calls, 10);
  EXPECT_EQ(m.failed_calls, 5);
  EXPECT_EQ(m.not_permitted_calls, 1);
}

// The seed's page admits one difference from Resilience4j: calls landing
// exactly on whole seconds. Then call 20 is exactly at opened_at + 5 s and is
// still rejected (note point 1), and everything after shifts by one second:
//   16-20 rejected; 21-23 probes fail, reopen at 23; 24-28 rejected;
//   29-31 probes succeed, CLOSED at 31; 32-40 succeed.
//                                                   1111111111222222222233333333334
//                                          1234567890123456789012345678901234567890
constexpr Timeline kDefaultOnWholeSeconds{"SSSSSSSSSSFFFFFRRRRRFFFRRRRRSSSSSSSSSSSS",
                                          "CCCCCCCCCCCCCCOOOOOOHHOOOOOOHHCCCCCCCCCC"};

TEST(Seed004, DefaultPresetOnExactWholeSeconds) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const ScenarioRun run,
                               Drive(SeedConfig(), 11, 25, /*hair=*/Duration::zero()));
  ExpectTimeline(run, kDefaultOnWholeSeconds);
  EXPECT_EQ(StateSequence(run.transitions), "CLOSED>OPEN>HALF_OPEN>OPEN>HALF_OPEN>CLOSED");
  EXPECT_EQ(run.totals.successes, 22);
  EXPECT_EQ(run.totals.failures, 8);
  EXPECT_EQ(run.totals.rejections, 10);
}

// --- no-breaker ----------------------------------------------------------------
// Without a breaker every outage call waits out its 3 s timeout: 15 failures,
// 45 s of request-thread time. Modelled twice: as plain counting, and through a
// DISABLED breaker (which must let everything through and record nothing).
TEST(Seed004, NoBreakerPreset) {
  Totals counted;
  for (int k = 1; k <= kCalls; ++k) {
    if (k >= 11 && k <= 25) {
      ++counted.failures;
      counted.thread_time += kTimeout;
    } else {
      ++counted.successes;
    }
  }
  EXPECT_EQ(counted.successes, 25);
  EXPECT_EQ(counted.failures, 15);
  EXPECT_EQ(counted.thread_time, 45s);

  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto breaker,
                               CircuitBreaker::Create("payment", SeedConfig(), clock));
  breaker->Disable({.reason = "no-breaker preset", .actor = "seed004"});
  Totals disabled;
  for (int k = 1; k <= kCalls; ++k) {
    clock.Set(ManualClock::kEpoch + std::chrono::seconds(k) + k * 1ms);
    Result<Permit> permit = breaker->TryAcquire();
    ASSERT_TRUE(permit.has_value()) << "call " << k << ": " << permit.error();
    if (k >= 11 && k <= 25) {
      permit->Failure(kTimeout);
      ++disabled.failures;
      disabled.thread_time += kTimeout;
    } else {
      permit->Success(20ms);
      ++disabled.successes;
    }
    EXPECT_EQ(breaker->state(), State::kDisabled) << "after call " << k;
  }
  EXPECT_EQ(disabled.successes, 25);
  EXPECT_EQ(disabled.failures, 15);
  EXPECT_EQ(disabled.rejections, 0);
  EXPECT_EQ(disabled.thread_time, 45s);
  EXPECT_EQ(breaker->metrics().buffered_calls, 0);
}

// --- threshold-30 ------------------------------------------------------------
// failure_rate_threshold 30, the rest as the seed's yml. Derived by hand from
// the semantics note (points 1, 3, 5, 6, 13):
//   1-10  succeed (0 %).
//   11 F 10 %, 12 F 20 %, 13 F 30 % >= 30: OPEN at 13, wait until 18 (+hair).
//   14-17 rejected.
//   18    HALF_OPEN, probe fails; 19 fails; 20 fails: 100 % >= 30: OPEN at 20.
//   21-24 rejected.
//   25    HALF_OPEN, probe fails (25 is the last outage call);
//   26, 27 probes succeed: 1 of 3 = 33.333332 % >= 30: OPEN at 27 (point 5: the
//         verdict is a rate over the 3 probes, not "all succeeded").
//   28-31 rejected.
//   32-34 probes succeed: 0 %: CLOSED at 34.
//   35-40 succeed.
//                                        1111111111222222222233333333334
//                               1234567890123456789012345678901234567890
constexpr Timeline kThreshold30{"SSSSSSSSSSFFFRRRRFFFRRRRFSSRRRRSSSSSSSSS",
                                "CCCCCCCCCCCCOOOOOHHOOOOOHHOOOOOHHCCCCCCC"};

TEST(Seed004, Threshold30Preset) {
  CircuitBreakerConfig config = SeedConfig();
  config.failure_rate_threshold = 30;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const ScenarioRun run, Drive(config, 11, 25));
  ExpectTimeline(run, kThreshold30);
  EXPECT_EQ(StateSequence(run.transitions),
            "CLOSED>OPEN>HALF_OPEN>OPEN>HALF_OPEN>OPEN>HALF_OPEN>CLOSED");
  EXPECT_EQ(run.totals.successes, 21);
  EXPECT_EQ(run.totals.failures, 7);
  EXPECT_EQ(run.totals.rejections, 12);
  EXPECT_EQ(run.totals.thread_time, 21s);
}

// --- wait-10s ------------------------------------------------------------------
// wait_duration_in_open_state 10 s. Derived by hand:
//   1-10  succeed; 11-15 fail, OPEN at 15 (50 %), wait until 25 (+hair).
//   16-24 rejected (9 calls).
//   25    HALF_OPEN, probe fails (last outage call);
//   26, 27 probes succeed: 1 of 3 = 33 % < 50: CLOSED at 27 (point 5).
//   28-40 succeed.
// Only one probe hits the outage, against three (then three more) with 5 s.
//                                     1111111111222222222233333333334
//                            1234567890123456789012345678901234567890
constexpr Timeline kWait10s{"SSSSSSSSSSFFFFFRRRRRRRRRFSSSSSSSSSSSSSSS",
                            "CCCCCCCCCCCCCCOOOOOOOOOOHHCCCCCCCCCCCCCC"};

TEST(Seed004, Wait10sPreset) {
  CircuitBreakerConfig config = SeedConfig();
  config.wait_duration_in_open_state = 10s;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const ScenarioRun run, Drive(config, 11, 25));
  ExpectTimeline(run, kWait10s);
  EXPECT_EQ(StateSequence(run.transitions), "CLOSED>OPEN>HALF_OPEN>CLOSED");
  EXPECT_EQ(run.totals.successes, 25);
  EXPECT_EQ(run.totals.failures, 6);
  EXPECT_EQ(run.totals.rejections, 9);
  EXPECT_EQ(run.totals.thread_time, 18s);
}

// --- short-outage ----------------------------------------------------------------
// A 5 s outage (calls 11-15) and failure_rate_threshold 80. The window of the
// last 10 calls never holds more than 5 failures: 10 %..50 % while the outage
// lasts, 50 % at calls 15-20, then falling. 50 % < 80 %: it never opens.
//                                         1111111111222222222233333333334
//                                1234567890123456789012345678901234567890
constexpr Timeline kShortOutage{"SSSSSSSSSSFFFFFSSSSSSSSSSSSSSSSSSSSSSSSS",
                                "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC"};

TEST(Seed004, ShortOutagePreset) {
  CircuitBreakerConfig config = SeedConfig();
  config.failure_rate_threshold = 80;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const ScenarioRun run, Drive(config, 11, 15));
  ExpectTimeline(run, kShortOutage);
  EXPECT_TRUE(run.transitions.empty()) << StateSequence(run.transitions);
  EXPECT_EQ(run.totals.successes, 35);
  EXPECT_EQ(run.totals.failures, 5);
  EXPECT_EQ(run.totals.rejections, 0);
  EXPECT_EQ(run.totals.thread_time, 15s);
}

TEST(Seed004, ShortOutagePeaksAtFiftyPercent) {
  CircuitBreakerConfig config = SeedConfig();
  config.failure_rate_threshold = 80;
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto breaker, CircuitBreaker::Create("payment", config, clock));
  float peak = -1;
  for (int k = 1; k <= kCalls; ++k) {
    clock.Set(ManualClock::kEpoch + std::chrono::seconds(k) + k * 1ms);
    Result<Permit> permit = breaker->TryAcquire();
    ASSERT_TRUE(permit.has_value()) << "call " << k << ": " << permit.error();
    if (k >= 11 && k <= 15) {
      permit->Failure(kTimeout);
    } else {
      permit->Success(20ms);
    }
    const float rate = breaker->metrics().failure_rate;
    if (k < 10) {
      EXPECT_EQ(rate, -1.0f) << "call " << k;
    }
    if (rate > peak) peak = rate;
  }
  EXPECT_EQ(peak, 50.0f);
  EXPECT_EQ(breaker->metrics().failure_rate, 0.0f);
}

}  // namespace
}  // namespace fusebox
