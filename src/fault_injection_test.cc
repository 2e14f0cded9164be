// Seed 003's fault-injection list ("장애 주입"), as one scenario on a
// ManualClock:
//
//   1. the dependency's answers are delayed by 5 s;
//   2. until the minimum number of calls, the timeout bounds every call;
//   3. past the failure-rate threshold the breaker opens;
//   4. while it is OPEN, no request reaches the dependency;
//   5. after the wait, only the probe calls pass;
//   6. once the dependency recovers, the breaker closes again.
//
// A fake dependency whose latency is a function of (virtual) time serves one
// request per second through a pipeline of bulkhead, breaker and timeout.
// The dependency honours its stop token, as a well-behaved client would; it
// takes time by advancing the clock in 100 ms steps, so the timeout's
// watchdog fires inside the call exactly at the deadline. Every phase counts
// the calls that reached the dependency.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "fusebox/bulkhead.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/pipeline.h"
#include "fusebox/testing/manual_clock.h"
#include "fusebox/timeout.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;

constexpr TimePoint kEpoch = ManualClock::kEpoch;

// Healthy (100 ms) except during [slow_from, slow_until), when it takes 5 s.
class FakeDependency {
 public:
  FakeDependency(ManualClock& clock, Duration slow_from, Duration slow_until)
      : clock_(clock), slow_from_(slow_from), slow_until_(slow_until) {}

  Status Serve(const std::stop_token& stop) {
    ++calls_;
    const TimePoint start = clock_.Now();
    const Duration t = start - kEpoch;
    const Duration latency = (t >= slow_from_ && t < slow_until_) ? 5s : 100ms;
    for (Duration done = 0ns; done < latency; done += 100ms) {
      if (stop.stop_requested()) break;
      clock_.Advance(100ms);
    }
    durations_.push_back(clock_.Now() - start);
    if (stop.stop_requested()) return Status::Unavailable("cancelled");
    return Status();
  }

  int calls() const { return calls_; }
  const std::vector<Duration>& durations() const { return durations_; }

 private:
  ManualClock& clock_;
  const Duration slow_from_;
  const Duration slow_until_;
  int calls_ = 0;
  std::vector<Duration> durations_;
};

struct Phase {
  int requests = 0;
  int dependency_calls = 0;
  std::map<StatusCode, int> codes;
};

TEST(FaultInjection, Seed003Scenario) {
  ManualClock clock;
  CircuitBreakerConfig config;
  config.failure_rate_threshold = 50;
  config.slow_call_duration_threshold = 2s;
  config.permitted_number_of_calls_in_half_open_state = 3;
  config.sliding_window_type = SlidingWindowType::kCountBased;
  config.sliding_window_size = 10;
  config.minimum_number_of_calls = 10;
  config.wait_duration_in_open_state = 30s;
  std::shared_ptr<CircuitBreaker> breaker =
      *CircuitBreaker::Create("recommendations", config, clock);
  std::shared_ptr<Bulkhead> bulkhead = *Bulkhead::Create({.max_concurrent_calls = 10}, clock);
  std::shared_ptr<Timeout> timeout = *Timeout::Create({.timeout_duration = 1s}, clock);
  auto pipeline = *Pipeline::Builder()
                       .WithBulkhead(bulkhead)
                       .WithCircuitBreaker(breaker)
                       .WithTimeout(timeout)
                       .Build();
  FakeDependency dependency(clock, /*slow_from=*/20s, /*slow_until=*/90s);

  // The phases, by the second at which a request is sent; worked out from the
  // configuration above (see each assertion).
  auto phase_of = [](int s) -> std::string {
    if (s < 20) return "1 healthy";
    if (s < 25) return "2 slow, closed";
    if (s < 56) return "3 open";
    if (s < 59) return "4 half-open probes";
    if (s < 90) return "5 reopened";
    if (s < 93) return "6 recovered, probes";
    return "7 closed again";
  };
  std::map<std::string, Phase> phases;
  std::map<int, State> state_after;
  for (int s = 0; s < 110; ++s) {
    // One request a second; a request never starts before the previous ended.
    if (clock.Now() < kEpoch + std::chrono::seconds(s)) clock.Set(kEpoch + std::chrono::seconds(s));
    const int before = dependency.calls();
    Status status =
        pipeline->Execute([&](const std::stop_token& stop) { return dependency.Serve(stop); });
    Phase& p = phases[phase_of(s)];
    ++p.requests;
    p.dependency_calls += dependency.calls() - before;
    ++p.codes[status.code()];
    state_after[s] = breaker->state();
    EXPECT_EQ(bulkhead->available_permits(), 10) << "second " << s;
  }

  // Each phase: how many requests, how many reached the dependency, and the
  // one answer all of them got.
  struct Expected {
    const char* phase;
    int requests;
    int dependency_calls;
    StatusCode code;
  };
  const Expected expected[] = {
      // 1. Healthy: every request reaches the dependency and succeeds.
      {"1 healthy", 20, 20, StatusCode::kOk},
      // 2. Slow, before the threshold: each request reaches the dependency and
      // is cut off by the timeout (after exactly 1 s, not 5 s: see below). The
      // window (10 calls) held 10 successes; the 5th timeout makes 5 failures
      // in 10, and 50 % opens it.
      {"2 slow, closed", 5, 5, StatusCode::kTimeout},
      // 3. Open from 25 s (the end of the 5th timeout) to 55 s inclusive (OPEN
      // ends strictly after its wait): nothing reaches the dependency.
      {"3 open", 31, 0, StatusCode::kCircuitOpen},
      // 4. After the wait, only the 3 permitted probes pass; the dependency is
      // still slow, they time out, and the 3rd result reopens it (at 59 s).
      {"4 half-open probes", 3, 3, StatusCode::kTimeout},
      // 5. Reopened until 89 s: nothing reaches the dependency.
      {"5 reopened", 31, 0, StatusCode::kCircuitOpen},
      // 6. The dependency recovered at 90 s: the 3 probes succeed and close it.
      {"6 recovered, probes", 3, 3, StatusCode::kOk},
      // 7. Closed again: everything passes.
      {"7 closed again", 17, 17, StatusCode::kOk},
  };
  int total_calls = 0;
  for (const Expected& e : expected) {
    const Phase& p = phases[e.phase];
    EXPECT_EQ(p.requests, e.requests) << e.phase;
    EXPECT_EQ(p.dependency_calls, e.dependency_calls) << e.phase;
    EXPECT_EQ(p.codes.size(), 1u) << e.phase;
    EXPECT_EQ(p.codes.count(e.code) ? p.codes.at(e.code) : 0, e.requests) << e.phase;
    total_calls += e.dependency_calls;
  }
  EXPECT_EQ(dependency.calls(), total_calls);  // 48 of 110 requests.

  // The timeouts held: the slow dependency was cut off at 1 s every time.
  for (int i = 20; i < 25; ++i) EXPECT_EQ(dependency.durations()[i], 1s) << "call " << i;
  for (int i = 25; i < 28; ++i) EXPECT_EQ(dependency.durations()[i], 1s) << "call " << i;
  // The transitions, by the second of the request after which they showed.
  EXPECT_EQ(state_after[23], State::kClosed);
  EXPECT_EQ(state_after[24], State::kOpen);
  EXPECT_EQ(state_after[56], State::kHalfOpen);
  EXPECT_EQ(state_after[58], State::kOpen);
  EXPECT_EQ(state_after[91], State::kHalfOpen);
  EXPECT_EQ(state_after[92], State::kClosed);
  EXPECT_EQ(breaker->state(), State::kClosed);
}

}  // namespace
}  // namespace fusebox
