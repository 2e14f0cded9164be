// docs/configuration.md, "Inheritance": an entry that names nothing gets
// fusebox's defaults (Resilience4j's, except the rate limiter's 1 s period and
// 0 timeout). Each test here loads an entry from YAML, builds the real policy
// from it on a ManualClock and drives it: once with nothing set (the defaults
// decide) and once with the keys set (the file decides). A loader that dropped
// a key, or a default that moved, changes what the policy does.

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "fusebox/bulkhead.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/rate_limiter.h"
#include "fusebox/registry.h"
#include "fusebox/retry.h"
#include "fusebox/testing/manual_clock.h"
#include "fusebox/testing/status_macros.h"
#include "fusebox/timeout.h"
#include "fusebox/yaml/config.h"

namespace fusebox::yaml {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

// The "payment" circuit breaker of `yaml`, applied to a registry on `clock`,
// as the service would get it.
Result<std::shared_ptr<CircuitBreaker>> PaymentBreaker(std::string_view yaml,
                                                       testing::ManualClock& clock,
                                                       std::unique_ptr<Registry>& registry,
                                                       const std::string& key) {
  Result<Configuration> c = LoadConfig(yaml, "app.yml");
  if (!c) return c.error();
  if (!registry) {
    Result<std::unique_ptr<Registry>> r = Registry::Create({.clock = &clock});
    if (!r) return r.error();
    registry = *std::move(r);
    if (Status s = ApplyToRegistry(*c, *registry); !s.ok()) return s;
  }
  return registry->Get(key, "payment");
}

// Records `pattern` on `breaker`, one call per character: 'F' a failure, 'S'
// a success, 'L' a success of 61 s (slow by default), 's' a success of 3 s.
void Drive(CircuitBreaker& breaker, std::string_view pattern) {
  for (char c : pattern) {
    FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit p, breaker.TryAcquire());
    if (c == 'F') p.Failure(milliseconds(1));
    if (c == 'S') p.Success(milliseconds(1));
    if (c == 'L') p.Success(seconds(61));
    if (c == 's') p.Success(seconds(3));
  }
}

constexpr std::string_view kEmptyBreaker = R"(
resilience4j.circuitbreaker.instances:
  payment:
)";

constexpr std::string_view kSetBreaker = R"(
resilience4j.circuitbreaker.instances:
  payment:
    slidingWindowSize: 4
    minimumNumberOfCalls: 4
    failureRateThreshold: 75
    waitDurationInOpenState: 2s
    permittedNumberOfCallsInHalfOpenState: 2
    slowCallDurationThreshold: 2s
    slowCallRateThreshold: 50
)";

// Defaults: a window of 100 calls, 100 needed, opens at 50 % failures, stays
// open 60 s, 10 probes; a call of more than 60 s is slow, and only 100 % slow
// calls open it.
TEST(YamlDefaults, AnEmptyBreakerEntryBehavesAsResilience4jsDefaults) {
  testing::ManualClock clock;
  std::unique_ptr<Registry> registry;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto breaker, PaymentBreaker(kEmptyBreaker, clock, registry, "a"));
  ASSERT_NO_FATAL_FAILURE(Drive(*breaker, std::string(50, 'F') + std::string(49, 'S')));
  EXPECT_EQ(breaker->state(), State::kClosed);  // 99 calls: below the minimum of 100
  ASSERT_NO_FATAL_FAILURE(Drive(*breaker, "S"));
  EXPECT_EQ(breaker->state(), State::kOpen);  // 50 of 100: the threshold, inclusive
  clock.Advance(seconds(60) - milliseconds(1));
  EXPECT_FALSE(breaker->TryAcquire().has_value());
  clock.Advance(milliseconds(2));
  std::vector<Permit> probes;
  for (int i = 0; i < 10; ++i) {
    FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit p, breaker->TryAcquire());
    probes.push_back(std::move(p));
  }
  EXPECT_EQ(breaker->state(), State::kHalfOpen);
  EXPECT_FALSE(breaker->TryAcquire().has_value());  // the 11th probe

  // 49 failures of 100 stay closed.
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto b, PaymentBreaker(kEmptyBreaker, clock, registry, "b"));
  ASSERT_NO_FATAL_FAILURE(Drive(*b, std::string(49, 'F') + std::string(51, 'S')));
  EXPECT_EQ(b->state(), State::kClosed);
  // Slow calls: 99 of 100 over 60 s do not open it, 100 of 100 do; 3 s is not slow.
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto slow, PaymentBreaker(kEmptyBreaker, clock, registry, "c"));
  ASSERT_NO_FATAL_FAILURE(Drive(*slow, std::string(99, 'L') + "S"));
  EXPECT_EQ(slow->state(), State::kClosed);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto slower, PaymentBreaker(kEmptyBreaker, clock, registry, "d"));
  ASSERT_NO_FATAL_FAILURE(Drive(*slower, std::string(100, 's')));
  EXPECT_EQ(slower->state(), State::kClosed);
  ASSERT_NO_FATAL_FAILURE(Drive(*slower, std::string(100, 'L')));
  EXPECT_EQ(slower->state(), State::kOpen);
}

TEST(YamlDefaults, TheBreakerKeysSetInTheFileDecideInstead) {
  testing::ManualClock clock;
  std::unique_ptr<Registry> registry;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto breaker, PaymentBreaker(kSetBreaker, clock, registry, "a"));
  ASSERT_NO_FATAL_FAILURE(Drive(*breaker, "FFF"));
  EXPECT_EQ(breaker->state(), State::kClosed);  // 3 calls: below the minimum of 4
  ASSERT_NO_FATAL_FAILURE(Drive(*breaker, "S"));
  EXPECT_EQ(breaker->state(), State::kOpen);  // 3 of 4 = 75 %
  clock.Advance(seconds(2) - milliseconds(1));
  EXPECT_FALSE(breaker->TryAcquire().has_value());
  clock.Advance(milliseconds(2));
  std::vector<Permit> probes;
  for (int i = 0; i < 2; ++i) {
    FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit p, breaker->TryAcquire());
    probes.push_back(std::move(p));
  }
  EXPECT_FALSE(breaker->TryAcquire().has_value());  // the 3rd probe

  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto half, PaymentBreaker(kSetBreaker, clock, registry, "b"));
  ASSERT_NO_FATAL_FAILURE(Drive(*half, "FFSS"));
  EXPECT_EQ(half->state(), State::kClosed);  // 50 % < 75 %
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto slow, PaymentBreaker(kSetBreaker, clock, registry, "c"));
  ASSERT_NO_FATAL_FAILURE(Drive(*slow, "ssSS"));
  EXPECT_EQ(slow->state(), State::kOpen);  // 2 of 4 over 2 s: 50 %
}

// Retry defaults: 3 attempts, 500 ms apart.
TEST(YamlDefaults, RetryAttemptsAndWaitFromTheFileOrTheDefaults) {
  Result<Configuration> c = LoadConfig(R"(
resilience4j.retry.instances:
  empty:
  set:
    maxAttempts: 5
    waitDuration: 2s
)",
                                       "app.yml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  for (const auto& [name, attempts, waited] :
       {std::tuple{"empty", 3, milliseconds(1000)}, std::tuple{"set", 5, milliseconds(8000)}}) {
    SCOPED_TRACE(name);
    testing::ManualClock clock({.auto_advance = true});
    FUSEBOX_ASSERT_OK_AND_ASSIGN(auto retry,
                                 Retry::Create(c->retries.instance(name)->options, clock));
    int calls = 0;
    const TimePoint start = clock.Now();
    Result<int> r = retry->Execute([&]() -> Result<int> {
      ++calls;
      return Status::Unavailable("down");
    });
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), StatusCode::kRetriesExhausted);
    EXPECT_EQ(calls, attempts);
    EXPECT_EQ(clock.Now() - start, waited);
  }
}

// Bulkhead default: 25 concurrent calls.
TEST(YamlDefaults, BulkheadSizeFromTheFileOrTheDefault) {
  Result<Configuration> c = LoadConfig(R"(
resilience4j.bulkhead.instances:
  empty:
  set:
    maxConcurrentCalls: 2
)",
                                       "app.yml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  for (const auto& [name, size] : {std::tuple{"empty", 25}, std::tuple{"set", 2}}) {
    SCOPED_TRACE(name);
    testing::ManualClock clock;
    FUSEBOX_ASSERT_OK_AND_ASSIGN(auto bulkhead,
                                 Bulkhead::Create(*c->bulkheads.instance(name), clock));
    std::vector<BulkheadPermit> held;
    for (int i = 0; i < size; ++i) {
      FUSEBOX_ASSERT_OK_AND_ASSIGN(BulkheadPermit p, bulkhead->TryAcquire());
      held.push_back(std::move(p));
    }
    Result<BulkheadPermit> over = bulkhead->Acquire();  // maxWaitDuration 0: refused at once
    ASSERT_FALSE(over.has_value());
    EXPECT_EQ(over.error().code(), StatusCode::kBulkheadFull);
  }
}

// Rate limiter defaults (fusebox's): 50 a second, a permit every 20 ms after
// the burst, and no waiting (timeoutDuration 0).
TEST(YamlDefaults, RateLimiterFromTheFileOrFuseboxsDefaults) {
  Result<Configuration> c = LoadConfig(R"(
resilience4j.ratelimiter.instances:
  empty:
  set:
    limitForPeriod: 2
    limitRefreshPeriod: 10s
    timeoutDuration: 20s
)",
                                       "app.yml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  for (const auto& [name, burst, every, waits] : {std::tuple{"empty", 50, milliseconds(20), false},
                                                  std::tuple{"set", 2, milliseconds(5000), true}}) {
    SCOPED_TRACE(name);
    testing::ManualClock clock({.auto_advance = true});
    FUSEBOX_ASSERT_OK_AND_ASSIGN(auto limiter,
                                 RateLimiter::Create(*c->rate_limiters.instance(name), clock));
    const TimePoint start = clock.Now();
    for (int i = 0; i < burst; ++i) ASSERT_TRUE(limiter->TryAcquire().ok()) << i;
    const Status refused = limiter->TryAcquire();
    ASSERT_EQ(refused.code(), StatusCode::kRateLimited);
    EXPECT_EQ(refused.retry_at(), start + every);
    const Status waited = limiter->Acquire();
    EXPECT_EQ(waited.ok(), waits);
    EXPECT_EQ(clock.Now() - start, waits ? Duration(every) : Duration::zero());
  }
}

// Time limiter defaults: 1 s, and the deadline stops the call's token
// (cancelRunningFuture: true).
TEST(YamlDefaults, TimeLimiterFromTheFileOrTheDefaults) {
  Result<Configuration> c = LoadConfig(R"(
resilience4j.timelimiter.instances:
  empty:
  set:
    timeoutDuration: 250ms
    cancelRunningFuture: false
)",
                                       "app.yml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  for (const auto& [name, limit, stops] : {std::tuple{"empty", milliseconds(1000), true},
                                           std::tuple{"set", milliseconds(250), false}}) {
    SCOPED_TRACE(name);
    // A copy: clang 14 cannot capture a structured binding in a lambda.
    const Duration deadline = limit;
    testing::ManualClock clock;
    FUSEBOX_ASSERT_OK_AND_ASSIGN(auto timeout,
                                 Timeout::Create(*c->time_limiters.instance(name), clock));
    Result<int> in_time = timeout->Execute([&](const std::stop_token&) -> Result<int> {
      clock.Advance(deadline - nanoseconds(1));
      return 1;
    });
    EXPECT_TRUE(in_time.has_value());
    bool stopped = false;
    Result<int> late = timeout->Execute([&](const std::stop_token& stop) -> Result<int> {
      clock.Advance(deadline);
      stopped = stop.stop_requested();
      return 1;
    });
    ASSERT_FALSE(late.has_value());
    EXPECT_EQ(late.error().code(), StatusCode::kTimeout);
    EXPECT_EQ(stopped, stops);
  }
}

// docs/configuration.md, "Errors": a loader returns every error, each once,
// up to 100; after 100 a last line says how many more there were.
TEST(YamlLimits, AfterOneHundredErrorsALastLineCountsTheRest) {
  std::string text = "resilience4j.circuitbreaker.instances:\n";
  for (int i = 0; i < 102; ++i) {
    text += "  p" + std::to_string(i) + ":\n    failureRateThreshold: 0\n";
  }
  Result<Configuration> c = LoadConfig(text, "app.yml");
  ASSERT_FALSE(c.has_value());
  const std::string message(c.error().message());
  std::vector<std::string> lines;
  for (std::size_t at = 0, end = 0; at <= message.size(); at = end + 1) {
    end = message.find('\n', at);
    if (end == std::string::npos) end = message.size();
    lines.push_back(message.substr(at, end - at));
  }
  ASSERT_EQ(lines.size(), 101u) << message;
  EXPECT_EQ(lines[0],
            "app.yml:3:27: resilience4j.circuitbreaker.instances.p0.failureRateThreshold: must be "
            "in (0, 100], got 0");
  EXPECT_EQ(lines[100], "app.yml: 2 more errors not shown");
}

}  // namespace
}  // namespace fusebox::yaml
