// The breaker configuration of fusebox::grpc's tests: opens after two
// failures in a window of two; OPEN lasts 30 s; one call probes HALF_OPEN.
#ifndef FUSEBOX_MODULES_GRPC_TEST_TWO_STRIKES_H_
#define FUSEBOX_MODULES_GRPC_TEST_TWO_STRIKES_H_

#include <chrono>

#include "fusebox/circuit_breaker.h"

namespace fusebox::grpc::testing {

inline CircuitBreakerConfig TwoStrikes() {
  CircuitBreakerConfig config;
  config.sliding_window_size = 2;
  config.minimum_number_of_calls = 2;
  config.failure_rate_threshold = 50;
  config.wait_duration_in_open_state = std::chrono::seconds(30);
  config.permitted_number_of_calls_in_half_open_state = 1;
  return config;
}

}  // namespace fusebox::grpc::testing

#endif  // FUSEBOX_MODULES_GRPC_TEST_TWO_STRIKES_H_
