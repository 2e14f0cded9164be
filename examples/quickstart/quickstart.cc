// quickstart: an order service calling a flaky payment service through a
// circuit breaker, on a ManualClock so that the 40 seconds of the story run in
// an instant. Every decision and every state change is printed.
//
//   make demo            # or: ./build/release/examples/quickstart
//
// The payment service answers in 20 ms, then stops answering from second 11 to
// second 25 (each call then fails after its 3 s timeout), then recovers. The
// breaker is seed 004's: the last 10 calls, open at 50 % failures, stay open
// 5 s, let 3 probes through.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "fusebox/circuit_breaker.h"
#include "fusebox/testing/manual_clock.h"

namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Prints every state change as it happens.
class PrintTransitions : public fusebox::CircuitBreakerListener {
 public:
  void OnTransition(const fusebox::TransitionEvent& e) override {
    std::printf("        ** %s -> %s (%s", std::string(fusebox::StateName(e.from)).c_str(),
                std::string(fusebox::StateName(e.to)).c_str(),
                std::string(fusebox::TransitionReasonName(e.reason)).c_str());
    if (e.counts.failure_rate >= 0) std::printf(", failure rate %.0f%%", e.counts.failure_rate);
    std::printf(")\n");
  }
};

// The flaky dependency: down between `down_from` and `down_to` (seconds).
struct PaymentService {
  int down_from = 11;
  int down_to = 25;
  int calls = 0;
  bool Up(int second) const { return second < down_from || second > down_to; }
};

}  // namespace

int main() {
  fusebox::testing::ManualClock clock;
  const fusebox::CircuitBreakerConfig config{
      .failure_rate_threshold = 50,
      .permitted_number_of_calls_in_half_open_state = 3,
      .sliding_window_size = 10,
      .minimum_number_of_calls = 10,
      .wait_duration_in_open_state = seconds(5),
  };
  auto created = fusebox::CircuitBreaker::Create("payment", config, clock);
  if (!created) {
    std::fprintf(stderr, "bad config: %s\n", created.error().ToString().c_str());
    return 1;
  }
  std::unique_ptr<fusebox::CircuitBreaker> breaker = std::move(*created);
  breaker->AddListener(std::make_shared<PrintTransitions>());

  PaymentService payments;
  int ok = 0, failed = 0, rejected = 0;
  fusebox::Duration waited{};
  std::printf("order service -> payment service, one call a second\n\n");
  for (int second = 1; second <= 40; ++second) {
    // Each call arrives a hair after the whole second, a hair that grows by a
    // microsecond a call, and its outcome is known at the same instant (the
    // 3 s of a timeout are recorded as its duration). OPEN ends strictly after
    // its wait (docs/semantics.md), so the call 5 s after the one that opened
    // the circuit arrives just after the wait and is the first probe, as in
    // seed 004's timeline.
    clock.Set(fusebox::testing::ManualClock::kEpoch + seconds(second) +
              std::chrono::microseconds(second));
    fusebox::Result<fusebox::Permit> permit = breaker->TryAcquire();
    if (!permit) {
      ++rejected;
      std::printf("t=%2ds  rejected: circuit %s, fall back to 'pay later' at once\n", second,
                  std::string(permit.error().reason()).c_str());
      continue;
    }
    ++payments.calls;
    const char* probe = breaker->state() == fusebox::State::kHalfOpen ? " [probe]" : "";
    if (payments.Up(second)) {
      ++ok;
      std::printf("t=%2ds  payment ok (20 ms)%s\n", second, probe);
      permit->Success(milliseconds(20));
    } else {
      ++failed;
      waited += seconds(3);
      std::printf("t=%2ds  payment timed out after 3 s: a request thread was tied up%s\n", second,
                  probe);
      permit->Failure(seconds(3));
    }
  }
  const fusebox::CircuitBreakerMetrics m = breaker->metrics();
  std::printf("\n%d ok, %d failed, %d rejected; %d calls reached the payment service.\n", ok,
              failed, rejected, payments.calls);
  std::printf("Threads tied up waiting: %lld s (without a breaker: %d s).\n",
              static_cast<long long>(std::chrono::duration_cast<seconds>(waited).count()),
              3 * (payments.down_to - payments.down_from + 1));
  std::printf("Final state %s, failure rate %.0f%% over %d buffered calls.\n",
              std::string(fusebox::StateName(m.state)).c_str(), m.failure_rate, m.buffered_calls);
  return 0;
}
