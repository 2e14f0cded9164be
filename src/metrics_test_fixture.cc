#include "metrics_test_fixture.h"

#include <chrono>
#include <memory>

#include "fusebox/bulkhead.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/metrics.h"
#include "fusebox/observer.h"
#include "fusebox/prometheus.h"
#include "fusebox/rate_limiter.h"
#include "fusebox/registry.h"
#include "fusebox/testing/in_process_shared_state.h"
#include "fusebox/testing/manual_clock.h"
#include "fusebox/timeout.h"

namespace fusebox::testing {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string RenderMetricsFixture() {
  ManualClock clock;
  auto metrics = std::make_shared<MetricsCollector>(MetricsCollectorOptions{.time_calls = true});
  RegistryOptions options{.clock = &clock};
  options.default_config = CircuitBreakerConfig{
      .slow_call_duration_threshold = seconds(1),
      .permitted_number_of_calls_in_half_open_state = 2,
      .sliding_window_size = 4,
      .minimum_number_of_calls = 4,
      .wait_duration_in_open_state = seconds(10),
  };
  ObserveRegistry(options, {metrics});
  auto registry = std::move(*Registry::Create(std::move(options)));

  // payment: two successes and two failures (one slow) open it at 50 %; three
  // rejections; ten seconds and a millisecond OPEN; two probes close it.
  auto payment = *registry->Get("payment");
  payment->TryAcquire()->Success(milliseconds(100));
  payment->TryAcquire()->Success(milliseconds(200));
  payment->TryAcquire()->Failure(milliseconds(300));
  payment->TryAcquire()->Failure(seconds(2));
  for (int i = 0; i < 3; ++i) (void)payment->TryAcquire();
  clock.Advance(seconds(10) + milliseconds(1));  // OPEN ends strictly after its wait
  payment->TryAcquire()->Success(milliseconds(50));
  payment->TryAcquire()->Success(milliseconds(50));
  // The fresh window: one failure; one call ignored.
  payment->TryAcquire()->Failure(milliseconds(5));
  payment->TryAcquire()->Ignore();

  // inventory: forced open by an operator, one rejection.
  auto inventory = *registry->Get("inventory");
  inventory->ForceOpen({.reason = "incident 42", .actor = "alice"});
  (void)inventory->TryAcquire();

  // A name no exporter should trust: quote, backslash, newline, non-ASCII and
  // a byte that is not UTF-8.
  auto weird = *registry->Get("we\"ird\\name\nline-\xC3\xBC-\xFF");
  weird->TryAcquire()->Success(milliseconds(1));

  auto bulkhead = std::move(*Bulkhead::Create({.max_concurrent_calls = 5}, clock));
  auto held = bulkhead->TryAcquire();
  metrics->AddBulkhead("payment", *bulkhead);

  // A time limiter: two successes, a failure and a call that ran past its
  // 1 s deadline. Before the rate limiter: its 2 s would refill
  // the limiter's period.
  auto timeout = std::move(*Timeout::Create({.timeout_duration = seconds(1)}, clock));
  (void)timeout->Execute([] { return Status(); });
  (void)timeout->Execute([] { return Status(); });
  (void)timeout->Execute([] { return Status::Unavailable("down"); });
  (void)timeout->Execute([&clock] {
    clock.Advance(seconds(2));
    return Status();
  });
  metrics->AddTimeLimiter("payment", *timeout);

  auto limiter = std::move(*RateLimiter::Create({.limit_for_period = 10}, clock));
  (void)limiter->TryAcquire(3);
  metrics->AddRateLimiter("meta", *limiter);

  // A fleet store (on a clock of its own) that granted one probe lease,
  // refused another, and is now down: every call refused, fail-open.
  ManualClock fleet_clock;
  auto fleet = std::make_shared<InProcessSharedState>(fleet_clock);
  fleet->Trip("payment", seconds(1), "failure_rate_exceeded");
  fleet_clock.Advance(seconds(2));
  (void)fleet->AcquireProbe("payment", seconds(30));
  (void)fleet->AcquireProbe("payment", seconds(30));
  fleet->SetAvailable(false);
  (void)fleet->Read("payment");
  metrics->AddSharedState("fleet", fleet);

  RetryCounters& retry = metrics->RetryCountersFor("payment");
  retry.Record(/*succeeded=*/true, /*attempts=*/1);
  retry.Record(true, 1);
  retry.Record(true, 3);
  retry.Record(false, 3);

  return RenderPrometheus(metrics->Collect(*registry));
}

}  // namespace fusebox::testing
