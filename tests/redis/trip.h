// Tripping a breaker in the Redis tests, and the fleet of breakers the
// Sentinel and Cluster tests share a circuit through. Header-only, because it
// asserts with GoogleTest and redis_server.cc is also linked into benchmarks.
#ifndef FUSEBOX_TESTS_REDIS_TRIP_H_
#define FUSEBOX_TESTS_REDIS_TRIP_H_

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <latch>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/shared_state.h"
#include "fusebox/testing/manual_clock.h"
#include "tests/redis/redis_server.h"

namespace fusebox::redis::testing {

// Fails calls until `b` opens (at most a window of four's worth).
inline void Trip(CircuitBreaker& b) {
  for (int i = 0; i < 4 && b.state() == State::kClosed; ++i) {
    auto p = b.TryAcquire();
    ASSERT_TRUE(p.has_value());
    p->Failure(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(b.state(), State::kOpen);
}

// A breaker of `circuit` sharing `store`: a window of four, one probe, OPEN
// for `open`, the probe lease 5 s.
inline std::unique_ptr<CircuitBreaker> FleetBreaker(std::shared_ptr<SharedState> store,
                                                    std::string_view circuit, Duration open,
                                                    Clock& clock) {
  CircuitBreakerConfig c;
  c.sliding_window_size = 4;
  c.minimum_number_of_calls = 4;
  c.permitted_number_of_calls_in_half_open_state = 1;
  c.wait_duration_in_open_state = open;
  c.shared_state = std::move(store);
  c.shared_probe_lease = std::chrono::seconds(5);
  return *CircuitBreaker::Create(std::string(circuit), std::move(c), clock);
}

// One successful call, if admitted: a new breaker reads its circuit.
inline void Warm(CircuitBreaker& b) {
  auto p = b.TryAcquire();
  if (p) p->Success(std::chrono::milliseconds(1));
}

// Once Redis holds the circuit HALF_OPEN (`half_open_in_redis`), every
// breaker of `fleet` tries at once after the recovery time `open`: exactly
// one probes, and its success closes them all.
inline void OneProbeClosesTheFleet(std::vector<CircuitBreaker*> fleet,
                                   fusebox::testing::ManualClock& clock, Duration open,
                                   const std::function<bool()>& half_open_in_redis) {
  ASSERT_TRUE(PollUntil(half_open_in_redis));
  clock.Advance(open + std::chrono::milliseconds(1));
  std::optional<Permit> permit;
  int probes = 0;
  for (CircuitBreaker* b : fleet) {
    auto p = b->TryAcquire();
    if (!p) continue;
    ++probes;
    permit.emplace(std::move(*p));
  }
  ASSERT_EQ(probes, 1) << "one probe per recovery";
  permit->Success(std::chrono::milliseconds(3));
  EXPECT_TRUE(PollUntil([&] {
    for (CircuitBreaker* b : fleet)
      if (b->state() != State::kClosed) return false;
    return true;
  }));
}

// Holds the store's worker in OnSharedRefresh() (called there right after
// Subscribe()) until Release(): whatever is queued meanwhile waits.
class HeldWorker final : public SharedStateListener {
 public:
  void OnSharedOpen(Duration) override {}
  void OnSharedClosed() override {}
  void OnSharedResync() override {}
  void OnSharedRefresh() override {
    holding_.count_down();
    released_.wait();
  }
  void AwaitHeld() { holding_.wait(); }
  void Release() { released_.count_down(); }

 private:
  std::latch holding_{1}, released_{1};
};

}  // namespace fusebox::redis::testing

#endif  // FUSEBOX_TESTS_REDIS_TRIP_H_
