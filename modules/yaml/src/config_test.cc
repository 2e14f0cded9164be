#include "fusebox/yaml/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "fusebox/registry.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox::yaml {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kTestdata = FUSEBOX_YAML_TESTDATA;

Configuration MustLoad(std::string_view text, const LoadOptions& options = {}) {
  Result<Configuration> c = LoadConfig(text, "app.yml", options);
  EXPECT_TRUE(c.has_value()) << c.error().message();
  return c.has_value() ? std::move(*c) : Configuration{};
}

std::string ErrorOf(std::string_view text, const LoadOptions& options = {}) {
  Result<Configuration> c = LoadConfig(text, "app.yml", options);
  EXPECT_FALSE(c.has_value());
  if (c.has_value()) return "";
  EXPECT_EQ(c.error().code(), StatusCode::kInvalidArgument);
  return std::string(c.error().message());
}

// Seed 004's application.yml, exactly as the seed prints it (dotted key,
// Korean comments), gives the simulator's breaker; everything it does not say
// is Resilience4j's default.
TEST(YamlConfig, Seed004ApplicationYmlLoadsUnchanged) {
  Result<Configuration> c = LoadConfigFile(kTestdata + "/seed004_application.yml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  ASSERT_EQ(c->circuit_breakers.instances.size(), 1u);
  EXPECT_TRUE(c->circuit_breakers.configs.empty());
  EXPECT_EQ(c->circuit_breakers.instances[0].name, "payment");
  const CircuitBreakerSettings* payment = c->circuit_breakers.instance("payment");
  ASSERT_NE(payment, nullptr);
  const CircuitBreakerConfig& b = payment->config;
  EXPECT_EQ(b.sliding_window_size, 10);
  EXPECT_EQ(b.minimum_number_of_calls, 10);
  EXPECT_EQ(b.failure_rate_threshold, 50.0f);
  EXPECT_EQ(b.wait_duration_in_open_state, seconds(5));
  EXPECT_EQ(b.permitted_number_of_calls_in_half_open_state, 3);
  // Defaults.
  EXPECT_EQ(b.sliding_window_type, SlidingWindowType::kCountBased);
  EXPECT_EQ(b.slow_call_rate_threshold, 100.0f);
  EXPECT_EQ(b.slow_call_duration_threshold, seconds(60));
  EXPECT_EQ(b.max_wait_duration_in_half_open_state, Duration::zero());
  EXPECT_FALSE(b.automatic_transition_from_open_to_half_open_enabled);
  EXPECT_FALSE(b.wait_interval_function);
  EXPECT_TRUE(c->retries.empty());
  EXPECT_TRUE(c->warnings.empty());
}

// The resolved form of seed 004's file, every property: what `fusebox config
// check` prints (docs/configuration.md shows it).
TEST(YamlConfig, Seed004FormatsEveryProperty) {
  Result<Configuration> c = LoadConfigFile(kTestdata + "/seed004_application.yml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  EXPECT_EQ(FormatConfig(*c),
            "resilience4j:\n"
            "  circuitbreaker:\n"
            "    instances:\n"
            "      payment:\n"
            "        failureRateThreshold: 50\n"
            "        slowCallRateThreshold: 100\n"
            "        slowCallDurationThreshold: 1m\n"
            "        permittedNumberOfCallsInHalfOpenState: 3\n"
            "        maxWaitDurationInHalfOpenState: 0ms\n"
            "        transitionToStateAfterWaitDuration: OPEN\n"
            "        slidingWindowType: COUNT_BASED\n"
            "        slidingWindowSize: 10\n"
            "        minimumNumberOfCalls: 10\n"
            "        waitDurationInOpenState: 5s\n"
            "        automaticTransitionFromOpenToHalfOpenEnabled: false\n"
            "        consecutiveFailureThreshold: 0\n"
            "        openDurationJitter: 0\n"
            "        jitterSeed: 0\n"
            "        halfOpenPolicy: FAILURE_RATE\n"
            "        compatibility: default\n"
            "        callTiming: AUTO\n"
            "        outcomeOrder: LINEARIZABLE\n"
            "        enableExponentialBackoff: false\n"
            "        exponentialBackoffMultiplier: 1.5\n"
            "        exponentialMaxWaitDurationInOpenState: 0ms\n"
            "        enableRandomizedWait: false\n"
            "        randomizedWaitFactor: 0.5\n");
}

constexpr std::string_view kInheritance = R"(
resilience4j:
  circuitbreaker:
    configs:
      default:
        slidingWindowSize: 20
        failureRateThreshold: 40
      slow:
        baseConfig: default
        slowCallDurationThreshold: 2s
        slowCallRateThreshold: 80
      slower:
        baseConfig: slow
        slowCallDurationThreshold: 5s
    instances:
      payment:
        baseConfig: slower
        minimumNumberOfCalls: 5
      inventory:
        waitDurationInOpenState: 10s
      reports:
        baseConfig: slow
        failureRateThreshold: 70
)";

// baseConfig chains resolve root first: default <- slow <- slower <- payment,
// each layer overriding only what it names.
TEST(YamlConfig, BaseConfigChainsResolveInOrder) {
  const Configuration c = MustLoad(kInheritance);
  const CircuitBreakerConfig& payment = c.circuit_breakers.instance("payment")->config;
  EXPECT_EQ(payment.sliding_window_size, 20);                   // default
  EXPECT_EQ(payment.failure_rate_threshold, 40.0f);             // default
  EXPECT_EQ(payment.slow_call_rate_threshold, 80.0f);           // slow
  EXPECT_EQ(payment.slow_call_duration_threshold, seconds(5));  // slower over slow
  EXPECT_EQ(payment.minimum_number_of_calls, 5);                // its own
  EXPECT_EQ(payment.wait_duration_in_open_state, seconds(60));  // built-in default
  const CircuitBreakerConfig& reports = c.circuit_breakers.instance("reports")->config;
  EXPECT_EQ(reports.failure_rate_threshold, 70.0f);
  EXPECT_EQ(reports.slow_call_duration_threshold, seconds(2));
}

// Resilience4j: an instance (or template) that names no baseConfig is built on
// configs.default when there is one.
TEST(YamlConfig, NoBaseConfigMeansDefault) {
  const Configuration c = MustLoad(kInheritance);
  const CircuitBreakerConfig& inventory = c.circuit_breakers.instance("inventory")->config;
  EXPECT_EQ(inventory.sliding_window_size, 20);
  EXPECT_EQ(inventory.failure_rate_threshold, 40.0f);
  EXPECT_EQ(inventory.wait_duration_in_open_state, seconds(10));
  // Templates are resolved too, in file order.
  ASSERT_EQ(c.circuit_breakers.configs.size(), 3u);
  EXPECT_EQ(c.circuit_breakers.configs[0].name, "default");
  EXPECT_EQ(c.circuit_breakers.configs[2].name, "slower");
  EXPECT_EQ(c.circuit_breakers.config("slower")->config.slow_call_rate_threshold, 80.0f);
  EXPECT_EQ(c.circuit_breakers.instances[0].name, "payment");
}

// Spring's relaxed binding: kebab-case and camelCase name the same property,
// and the section names may be written either way too.
TEST(YamlConfig, KebabCaseIsAccepted) {
  const Configuration c = MustLoad(R"(
resilience4j:
  circuit-breaker:
    instances:
      payment-api:
        failure-rate-threshold: 30
        wait-duration-in-open-state: 2s
        sliding-window-type: time-based
  rate-limiter:
    instances:
      search:
        limit-for-period: 10
)");
  const CircuitBreakerConfig& b = c.circuit_breakers.instance("payment-api")->config;
  EXPECT_EQ(b.failure_rate_threshold, 30.0f);
  EXPECT_EQ(b.wait_duration_in_open_state, seconds(2));
  EXPECT_EQ(b.sliding_window_type, SlidingWindowType::kTimeBased);
  EXPECT_EQ(c.rate_limiters.instance("search")->limit_for_period, 10);
}

// fusebox's own breaker properties load through the same table, e.g. the
// outcome order (fusebox/config_names.h).
TEST(YamlConfig, OutcomeOrderLoads) {
  const Configuration c = MustLoad(R"(
resilience4j:
  circuitbreaker:
    instances:
      payment:
        outcomeOrder: RELAXED
      inventory:
        outcome-order: linearizable
      reports:
)");
  EXPECT_EQ(c.circuit_breakers.instance("payment")->config.outcome_order, OutcomeOrder::kRelaxed);
  EXPECT_EQ(c.circuit_breakers.instance("inventory")->config.outcome_order,
            OutcomeOrder::kLinearizable);
  EXPECT_EQ(c.circuit_breakers.instance("reports")->config.outcome_order,
            OutcomeOrder::kLinearizable);
}

// A file of fusebox's own may leave out the resilience4j: level.
TEST(YamlConfig, TopLevelSectionsWithoutResilience4j) {
  const Configuration c = MustLoad(R"(
circuitbreaker:
  instances:
    payment:
      failureRateThreshold: 25
retry.instances.payment.maxAttempts: 5
)");
  EXPECT_EQ(c.circuit_breakers.instance("payment")->config.failure_rate_threshold, 25.0f);
  EXPECT_EQ(c.retries.instance("payment")->options.max_attempts, 5);
}

// In an application.yml, everything outside resilience4j belongs to someone
// else (Spring, the server) and is left alone.
TEST(YamlConfig, OtherTopLevelKeysOfAnApplicationYmlAreIgnored) {
  const Configuration c = MustLoad(R"(
spring:
  application:
    name: orders
server.port: 8080
resilience4j.circuitbreaker.instances.payment.minimumNumberOfCalls: 7
)");
  EXPECT_EQ(c.circuit_breakers.instance("payment")->config.minimum_number_of_calls, 7);
  EXPECT_TRUE(c.warnings.empty());
}

// Dotted keys and nested maps meet in one tree, in any mix.
TEST(YamlConfig, DottedAndNestedKeysMerge) {
  const Configuration c = MustLoad(R"(
resilience4j.circuitbreaker.instances.payment:
  slidingWindowSize: 10
resilience4j:
  circuitbreaker.instances.payment.minimumNumberOfCalls: 4
  retry:
    instances.payment:
      maxAttempts: 2
)");
  const CircuitBreakerConfig& b = c.circuit_breakers.instance("payment")->config;
  EXPECT_EQ(b.sliding_window_size, 10);
  EXPECT_EQ(b.minimum_number_of_calls, 4);
  EXPECT_EQ(c.retries.instance("payment")->options.max_attempts, 2);
}

// Every policy, every Resilience4j name that maps onto fusebox.
TEST(YamlConfig, EveryPolicyMapsItsNames) {
  const Configuration c = MustLoad(R"(
resilience4j:
  retry:
    instances:
      payment:
        maxAttempts: 4
        waitDuration: 200ms
        maxDuration: 5s
        retryOnRateLimited: true
  bulkhead:
    instances:
      payment:
        maxConcurrentCalls: 8
        maxWaitDuration: 20ms
        maxWaitingCalls: 3
        fairCallHandlingStrategyEnabled: false
  ratelimiter:
    instances:
      payment:
        limitForPeriod: 100
        limitRefreshPeriod: 1s
        timeoutDuration: 0
        callTiming: precise
  timelimiter:
    instances:
      payment:
        timeoutDuration: 3s
        cancelRunningFuture: true
        watchSlots: 16
)");
  const RetryOptions& r = c.retries.instance("payment")->options;
  EXPECT_EQ(r.max_attempts, 4);
  EXPECT_EQ(r.wait_duration, milliseconds(200));
  EXPECT_EQ(r.max_duration, seconds(5));
  EXPECT_TRUE(r.retry_on_rate_limited);
  EXPECT_FALSE(r.retry_on_bulkhead_full);
  EXPECT_FALSE(r.interval_function);
  const BulkheadOptions& b = *c.bulkheads.instance("payment");
  EXPECT_EQ(b.max_concurrent_calls, 8);
  EXPECT_EQ(b.max_wait_duration, milliseconds(20));
  EXPECT_EQ(b.max_waiting_calls, 3);
  const RateLimiterOptions& l = *c.rate_limiters.instance("payment");
  EXPECT_EQ(l.limit_for_period, 100);
  EXPECT_EQ(l.limit_refresh_period, seconds(1));
  EXPECT_EQ(l.timeout_duration, Duration::zero());
  EXPECT_EQ(l.timing, CallTiming::kPrecise);
  const TimeoutOptions& t = *c.time_limiters.instance("payment");
  EXPECT_EQ(t.timeout_duration, seconds(3));
  EXPECT_EQ(t.watch_slots, 16);
}

// enableExponentialBackoff and enableRandomizedWait build the breaker's
// interval function from waitDurationInOpenState, as Resilience4j does.
TEST(YamlConfig, BreakerExponentialBackoffBuildsTheIntervalFunction) {
  const Configuration c = MustLoad(R"(
resilience4j.circuitbreaker.instances.payment:
  waitDurationInOpenState: 1s
  enableExponentialBackoff: true
  exponentialBackoffMultiplier: 2
  exponentialMaxWaitDurationInOpenState: 5s
)");
  const CircuitBreakerSettings& s = *c.circuit_breakers.instance("payment");
  EXPECT_TRUE(s.open_backoff.exponential);
  EXPECT_EQ(s.open_backoff.max_wait, seconds(5));
  ASSERT_TRUE(s.config.wait_interval_function);
  EXPECT_EQ(s.config.wait_interval_function(1), seconds(1));
  EXPECT_EQ(s.config.wait_interval_function(2), seconds(2));
  EXPECT_EQ(s.config.wait_interval_function(3), seconds(4));
  EXPECT_EQ(s.config.wait_interval_function(4), seconds(5));  // capped
}

// compatibility: resilience4j builds it with Resilience4j's arithmetic, whole
// milliseconds truncated at every step (docs/semantics.md, point 18); the
// default mode keeps the exact waits.
TEST(YamlConfig, BreakerBackoffIsWholeMillisecondsInResilience4jMode) {
  const Configuration c = MustLoad(R"(
resilience4j.circuitbreaker.configs.default:
  waitDurationInOpenState: 7ms
  enableExponentialBackoff: true
  exponentialBackoffMultiplier: 1.3
resilience4j.circuitbreaker.instances:
  r4j:
    compatibility: resilience4j
  exact:
    compatibility: default
)");
  const IntervalFunction& r4j = c.circuit_breakers.instance("r4j")->config.wait_interval_function;
  ASSERT_TRUE(r4j);
  EXPECT_EQ(r4j(3), milliseconds(11));
  EXPECT_EQ(r4j(4), milliseconds(14));
  const IntervalFunction& exact =
      c.circuit_breakers.instance("exact")->config.wait_interval_function;
  ASSERT_TRUE(exact);
  const double exact_us = std::chrono::duration<double, std::micro>(exact(4)).count();
  EXPECT_NEAR(exact_us, 15379, 0.01);
}

// The properties without the file: what `fusebox replay` reads its config with.
TEST(YamlConfig, OneBreakersPropertiesWithoutAFile) {
  CircuitBreakerSettings s;
  ASSERT_TRUE(SetCircuitBreakerProperty(s, "wait-duration-in-open-state", "2s").ok());
  ASSERT_TRUE(SetCircuitBreakerProperty(s, "enableExponentialBackoff", "true").ok());
  ASSERT_TRUE(SetCircuitBreakerProperty(s, "exponential_backoff_multiplier", "3").ok());
  EXPECT_EQ(SetCircuitBreakerProperty(s, "recordExceptions", "java.io.IOException").code(),
            StatusCode::kNotFound);
  EXPECT_EQ(SetCircuitBreakerProperty(s, "enableRandomizedWait", "yes").message(),
            "enableRandomizedWait: expected true or false, got \"yes\"");
  ASSERT_TRUE(FinishCircuitBreakerSettings(s).ok());
  ASSERT_TRUE(s.config.wait_interval_function);
  EXPECT_EQ(s.config.wait_interval_function(2), seconds(6));

  ASSERT_TRUE(SetCircuitBreakerProperty(s, "randomizedWaitFactor", "2").ok());
  EXPECT_EQ(FinishCircuitBreakerSettings(s).message(),
            "randomizedWaitFactor (open_backoff.randomized_factor) must be in [0, 1], got 2");
}

// The bounds include their limits: a multiplier of exactly 1 (a constant
// wait) and a randomized factor of exactly 1 are valid.
TEST(YamlConfig, BackoffMultiplierOneAndRandomizedFactorOneAreAccepted) {
  Result<Configuration> c = LoadConfig(R"(
resilience4j.circuitbreaker.instances.payment:
  waitDurationInOpenState: 1s
  enableExponentialBackoff: true
  exponentialBackoffMultiplier: 1
resilience4j.retry.instances.payment:
  waitDuration: 100ms
  enableRandomizedWait: true
  randomizedWaitFactor: 1
)",
                                       "app.yml");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  const CircuitBreakerSettings& s = *c->circuit_breakers.instance("payment");
  ASSERT_TRUE(s.config.wait_interval_function);
  EXPECT_EQ(s.config.wait_interval_function(1), seconds(1));
  EXPECT_EQ(s.config.wait_interval_function(5), seconds(1));
  const RetrySettings& r = *c->retries.instance("payment");
  ASSERT_TRUE(r.options.interval_function);
  for (int attempt = 1; attempt <= 20; ++attempt) {
    EXPECT_LE(r.options.interval_function(attempt), milliseconds(200));
  }
}

// The bound excludes its limit: a first wait of exactly 0 with a growing or
// randomized wait is refused (the core's Retry accepts a 0 wait, so only the
// loader's check stands between it and a backoff that never waits), naming
// the field.
TEST(YamlConfig, AZeroFirstWaitWithExponentialOrRandomizedBackoffIsRefused) {
  for (const char* kind : {"enableExponentialBackoff", "enableRandomizedWait"}) {
    Result<Configuration> c = LoadConfig(std::string(R"(
resilience4j.retry.instances.payment:
  waitDuration: 0ms
  )") + kind + ": true\n",
                                         "app.yml");
    ASSERT_FALSE(c.has_value()) << kind;
    EXPECT_EQ(c.error().message(),
              "app.yml:3:17: resilience4j.retry.instances.payment.waitDuration: must be > 0 with "
              "exponential or randomized backoff, got 0ms")
        << kind;
  }
}

TEST(YamlConfig, RetryRandomizedWaitStaysWithinItsFactor) {
  const Configuration c = MustLoad(R"(
resilience4j.retry.instances.payment:
  waitDuration: 100ms
  enableRandomizedWait: true
  randomizedWaitFactor: 0.5
)");
  const RetrySettings& s = *c.retries.instance("payment");
  ASSERT_TRUE(s.options.interval_function);
  for (int attempt = 1; attempt <= 20; ++attempt) {
    const Duration d = s.options.interval_function(attempt);
    EXPECT_GE(d, milliseconds(50));
    EXPECT_LE(d, milliseconds(150));
  }
}

// YAML merge keys, which yaml-cpp leaves to us: explicit keys win.
TEST(YamlConfig, MergeKeysApply) {
  const Configuration c = MustLoad(R"(
shared: &shared
  slidingWindowSize: 30
  failureRateThreshold: 60
resilience4j.circuitbreaker.instances:
  payment:
    <<: *shared
    failureRateThreshold: 20
)");
  const CircuitBreakerConfig& b = c.circuit_breakers.instance("payment")->config;
  EXPECT_EQ(b.sliding_window_size, 30);
  EXPECT_EQ(b.failure_rate_threshold, 20.0f);
}

// Spring Boot settings with no effect in fusebox load, with a warning each;
// the aspect order, which has no meaning here by design, with a note.
TEST(YamlConfig, SpringOnlyKeysAreWarnings) {
  const Configuration c = MustLoad(R"(
resilience4j.circuitbreaker:
  circuitBreakerAspectOrder: 1
  instances:
    payment:
      registerHealthIndicator: true
      eventConsumerBufferSize: 10
)");
  EXPECT_THAT(
      c.notes,
      ElementsAre("app.yml:3:3: resilience4j.circuitbreaker.circuitBreakerAspectOrder: ignored: "
                  "Spring's aspect order; fusebox composes policies in one order "
                  "(docs/policies.md)"));
  EXPECT_THAT(
      c.warnings,
      ElementsAre("app.yml:6:7: resilience4j.circuitbreaker.instances.payment."
                  "registerHealthIndicator: ignored: a Spring Boot actuator setting; fusebox has "
                  "no health endpoint",
                  "app.yml:7:7: resilience4j.circuitbreaker.instances.payment."
                  "eventConsumerBufferSize: ignored: a Spring Boot event buffer; fusebox has "
                  "listeners instead"));
}

// An entry with no properties is the defaults (or configs.default).
TEST(YamlConfig, EmptyInstanceIsItsBase) {
  const Configuration c = MustLoad(R"(
resilience4j.circuitbreaker:
  configs.default.minimumNumberOfCalls: 3
  instances:
    payment:
)");
  EXPECT_EQ(c.circuit_breakers.instance("payment")->config.minimum_number_of_calls, 3);
}

// What FormatConfig prints loads back to the same configuration.
TEST(YamlConfig, FormatLoadsBackUnchanged) {
  const std::string text = std::string(kInheritance) + R"(
  retry.instances.payment:
    enableExponentialBackoff: true
    waitDuration: 100ms
    exponentialBackoffMultiplier: 3
  bulkhead.configs.default.maxConcurrentCalls: 4
  ratelimiter.instances:
    "[v1.search]":
      limitForPeriod: 7
  timelimiter.instances.payment.timeoutDuration: 800ms
)";
  const Configuration first = MustLoad(text);
  const std::string formatted = FormatConfig(first);
  const Configuration second = MustLoad(formatted);
  EXPECT_EQ(FormatConfig(second), formatted);
  EXPECT_EQ(second.rate_limiters.instance("v1.search")->limit_for_period, 7);
  EXPECT_THAT(formatted, HasSubstr("      \"[v1.search]\":\n        limitForPeriod: 7\n"));
  EXPECT_EQ(second.retries.instance("payment")->options.interval_function(3), milliseconds(900));
}

// YAML caps an implicit key at 1024 characters. A 400-byte name of control
// characters is 1,599 once escaped and quoted: as an implicit key it did not
// load back (found by yaml_config_fuzzer); it is an explicit "? key" instead.
TEST(YamlConfig, FormatWritesAVeryLongNameAsAnExplicitKey) {
  const std::string name = "a" + std::string(399, '\x07');
  std::string escaped = "a";
  for (int i = 0; i < 399; ++i) escaped += "\\x07";
  const std::string text = "resilience4j.circuitbreaker.instances:\n  ? \"" + escaped +
                           "\"\n  :\n    slidingWindowSize: 7\n";
  const Configuration first = MustLoad(text);
  ASSERT_NE(first.circuit_breakers.instance(name), nullptr);
  const std::string formatted = FormatConfig(first);
  EXPECT_THAT(formatted, HasSubstr("      ? \"a\\x07\\x07"));
  const Configuration second = MustLoad(formatted);
  ASSERT_NE(second.circuit_breakers.instance(name), nullptr);
  EXPECT_EQ(second.circuit_breakers.instance(name)->config.sliding_window_size, 7);
  EXPECT_EQ(FormatConfig(second), formatted);
}

// Every fault in the file is reported, in file order, not only the first;
// and nothing is returned.
TEST(YamlConfig, ReportsEveryErrorAtOnce) {
  EXPECT_EQ(ErrorOf(R"(
resilience4j.circuitbreaker.instances:
  payment:
    failureRateThreshold: 0
    slowCallRateThreshold: 101
    minimumNumberOfCalls: many
  orders:
    baseConfig: nothing
resilience4j.retry.instances.payment.maxAttempts: 0
)"),
            "app.yml:4:27: resilience4j.circuitbreaker.instances.payment.failureRateThreshold: "
            "must be in (0, 100], got 0\n"
            "app.yml:5:28: resilience4j.circuitbreaker.instances.payment.slowCallRateThreshold: "
            "must be in (0, 100], got 101\n"
            "app.yml:6:27: resilience4j.circuitbreaker.instances.payment.minimumNumberOfCalls: "
            "expected an integer >= 1, got \"many\"\n"
            "app.yml:8:17: resilience4j.circuitbreaker.instances.orders.baseConfig: no template "
            "\"nothing\" in resilience4j.circuitbreaker.configs\n"
            "app.yml:9:51: resilience4j.retry.instances.payment.maxAttempts: must be >= 1, got 0");
}

// A bad value in configs.default is reported once, where it is written, not
// once per instance built on it.
TEST(YamlConfig, AnInheritedFaultIsReportedOnceWhereWritten) {
  EXPECT_EQ(ErrorOf(R"(
resilience4j.circuitbreaker:
  configs.default.slidingWindowSize: 0
  instances:
    a:
    b:
)"),
            "app.yml:3:38: resilience4j.circuitbreaker.configs.default.slidingWindowSize: must "
            "be >= 1, got 0");
}

TEST(YamlConfig, ApplyToRegistryAddsTemplatesAndInstances) {
  const Configuration c = MustLoad(kInheritance);
  testing::ManualClock clock;
  auto registry = Registry::Create({.clock = &clock});
  ASSERT_TRUE(registry.has_value()) << registry.error().message();
  ASSERT_TRUE(ApplyToRegistry(c, **registry).ok());
  auto payment = (*registry)->Get("payment:charge:eu", "payment");
  ASSERT_TRUE(payment.has_value()) << payment.error().message();
  EXPECT_EQ((*payment)->config().minimum_number_of_calls, 5);
  EXPECT_EQ((*payment)->config().slow_call_duration_threshold, seconds(5));
  auto slow = (*registry)->Get("reports:daily", "slow");
  ASSERT_TRUE(slow.has_value());
  EXPECT_EQ((*slow)->config().slow_call_rate_threshold, 80.0f);
  // configs.default replaced the registry's default.
  auto other = (*registry)->Get("anything");
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ((*other)->config().sliding_window_size, 20);
}

TEST(YamlConfig, UnreadableFileIsAnError) {
  Result<Configuration> c = LoadConfigFile(kTestdata + "/no-such-file.yml");
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.error().message(), kTestdata + "/no-such-file.yml: cannot read the file");
}

}  // namespace
}  // namespace fusebox::yaml
