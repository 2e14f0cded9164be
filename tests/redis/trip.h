// Tripping a breaker in the Redis tests: the step both the fleet store's
// tests and the Sentinel tests begin from. Header-only, because it asserts
// with GoogleTest and redis_server.cc is also linked into benchmarks.
#ifndef FUSEBOX_TESTS_REDIS_TRIP_H_
#define FUSEBOX_TESTS_REDIS_TRIP_H_

#include <gtest/gtest.h>

#include <chrono>

#include "fusebox/circuit_breaker.h"

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

}  // namespace fusebox::redis::testing

#endif  // FUSEBOX_TESTS_REDIS_TRIP_H_
