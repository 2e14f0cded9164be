// Uses fusebox through its public API only; built by the packaging tests
// (tests/consumer via find_package, tests/add_subdirectory via add_subdirectory).
// Exits 0 when a fresh breaker admits a call, records its success and is CLOSED.

#include <fusebox/circuit_breaker.h>
#include <fusebox/testing/manual_clock.h>

#include <chrono>
#include <cstdio>

int main() {
  fusebox::testing::ManualClock clock;
  auto cb = fusebox::CircuitBreaker::Create("consumer", fusebox::CircuitBreakerConfig{}, clock);
  if (!cb.has_value()) {
    std::fputs("consumer: CircuitBreaker::Create failed\n", stderr);
    return 1;
  }
  auto permit = (*cb)->TryAcquire();
  if (!permit.has_value()) {
    std::fputs("consumer: TryAcquire was rejected\n", stderr);
    return 1;
  }
  permit->Success(std::chrono::milliseconds(1));
  if ((*cb)->state() != fusebox::State::kClosed) {
    std::fputs("consumer: breaker is not CLOSED\n", stderr);
    return 1;
  }
  std::puts("consumer: ok");
  return 0;
}
