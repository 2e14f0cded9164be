// Real Spring Boot application.yml files load: testdata/spring/*.yml are
// modelled on public ones (kebab-case, camelCase, snake_case, Java class
// names and predicates, thread-pool-bulkhead, profiles in "---" documents,
// the starter's own keys). Each test checks what the file says reached the
// settings, and, for the names, that a registered name changes behaviour.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <latch>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "fusebox/registry.h"
#include "fusebox/testing/manual_clock.h"
#include "fusebox/thread_pool_bulkhead.h"
#include "fusebox/timeout.h"
#include "fusebox/yaml/config.h"

namespace fusebox::yaml {
namespace {

using namespace std::chrono_literals;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kSpring = std::string(FUSEBOX_YAML_TESTDATA) + "/spring/";

Configuration MustLoad(const std::string& file, LoadOptions options = {}) {
  Result<Configuration> c = LoadConfigFile(kSpring + file, options);
  EXPECT_TRUE(c.has_value()) << (c.has_value() ? "" : c.error().message());
  return c.has_value() ? std::move(*c) : Configuration{};
}

// True when some line of `lines` contains every one of `parts`.
bool AnyLineHas(const std::vector<std::string>& lines, std::vector<std::string> parts) {
  for (const std::string& line : lines) {
    bool all = true;
    for (const std::string& p : parts) all = all && line.find(p) != std::string::npos;
    if (all) return true;
  }
  return false;
}

TEST(SpringFiles, KebabCaseWithEveryDurationForm) {
  const Configuration c = MustLoad("kebab_case.yml");
  const CircuitBreakerSettings* inventory = c.circuit_breakers.instance("inventory");
  ASSERT_NE(inventory, nullptr);
  EXPECT_EQ(inventory->config.sliding_window_size, 10);
  EXPECT_EQ(inventory->config.minimum_number_of_calls, 5);
  EXPECT_EQ(inventory->config.wait_duration_in_open_state, 10s);  // "10S"
  EXPECT_EQ(inventory->config.slow_call_duration_threshold, 2s);  // "PT2S"
  EXPECT_EQ(inventory->config.slow_call_rate_threshold, 80.0f);
  EXPECT_TRUE(inventory->config.automatic_transition_from_open_to_half_open_enabled);
  const CircuitBreakerSettings* payment = c.circuit_breakers.instance("payment");
  ASSERT_NE(payment, nullptr);
  EXPECT_EQ(payment->config.wait_duration_in_open_state, 500ms);         // "PT0.5S"
  EXPECT_EQ(payment->config.max_wait_duration_in_half_open_state, 24h);  // "P1D"
  const RetrySettings* retry = c.retries.instance("inventory");
  ASSERT_NE(retry, nullptr);
  EXPECT_EQ(retry->options.wait_duration, 500ms);
  EXPECT_TRUE(retry->backoff.exponential);
  EXPECT_EQ(retry->backoff.multiplier, 2.0);
  const TimeoutOptions* timeout = c.time_limiters.instance("inventory");
  ASSERT_NE(timeout, nullptr);
  EXPECT_FALSE(timeout->cancel_running_future);
  EXPECT_EQ(timeout->timeout_duration, 2s);
  // The starter's keys: notes for what has no meaning here by design,
  // warnings for what the file expected to do something.
  EXPECT_TRUE(AnyLineHas(c.notes, {"kebab_case.yml:13:5", "circuit-breaker-aspect-order"}));
  EXPECT_TRUE(AnyLineHas(c.notes, {"kebab_case.yml:14:5", "circuitbreaker.metrics", "ignored"}));
  EXPECT_TRUE(AnyLineHas(c.notes, {"retry-aspect-order"}));
  EXPECT_TRUE(AnyLineHas(c.warnings, {"register-health-indicator", "ignored"}));
}

TEST(SpringFiles, SnakeCase) {
  const Configuration c = MustLoad("snake_case.yml");
  const CircuitBreakerSettings* user = c.circuit_breakers.instance("user_service");
  ASSERT_NE(user, nullptr);
  EXPECT_EQ(user->config.sliding_window_size, 20);
  EXPECT_EQ(user->config.failure_rate_threshold, 40.0f);
  EXPECT_EQ(user->config.wait_duration_in_open_state, 30s);
  EXPECT_THAT(user->names.at("recordExceptions"), ElementsAre("java.net.ConnectException"));
  const RetrySettings* retry = c.retries.instance("user_service");
  ASSERT_NE(retry, nullptr);
  EXPECT_EQ(retry->options.max_attempts, 4);
  EXPECT_EQ(retry->options.wait_duration, 1s);
  EXPECT_THAT(retry->names.at("retryExceptions"), ElementsAre("java.net.SocketTimeoutException"));
  const ThreadPoolBulkheadOptions* pool = c.thread_pool_bulkheads.instance("user_service");
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(pool->core_thread_pool_size, 2);
  EXPECT_EQ(pool->queue_capacity, 10);
  EXPECT_EQ(pool->keep_alive_duration, 20ms);
}

TEST(SpringFiles, StartersExecutorAndThreadKeysAreNotes) {
  const Configuration c = MustLoad("scheduled_and_thread.yml");
  EXPECT_TRUE(AnyLineHas(c.notes, {"scheduled_and_thread.yml:3:3", "resilience4j.scheduled"}));
  EXPECT_TRUE(AnyLineHas(c.notes, {"scheduled_and_thread.yml:8:3", "resilience4j.thread"}));
  EXPECT_TRUE(AnyLineHas(c.notes, {"bulkheadAspectOrder"}));
  EXPECT_TRUE(AnyLineHas(c.notes, {"ratelimiter.metrics"}));
  ASSERT_NE(c.bulkheads.instance("search"), nullptr);
  EXPECT_EQ(c.bulkheads.instance("search")->max_wait_duration, 10ms);
  ASSERT_NE(c.rate_limiters.instance("search"), nullptr);
  EXPECT_EQ(c.rate_limiters.instance("search")->limit_for_period, 50);
}

// --- Names ------------------------------------------------------------------

// What the camel_case_exceptions.yml service registers: two Java names as C++
// exception types, one as a StatusCode, one predicate.
NameRegistry DemoNames() {
  NameRegistry names;
  names.AddException<std::system_error>("java.io.IOException", "std::system_error")
      .AddException<std::invalid_argument>("io.github.robwin.exception.BusinessException",
                                           "std::invalid_argument")
      .AddStatusCode("java.util.concurrent.TimeoutException", StatusCode::kTimeout)
      .Add(
          "io.github.robwin.exception.RecordFailurePredicate",
          {.description = "runtime_error or kUnavailable",
           .matches_exception =
               [](const std::exception_ptr& e) {
                 try {
                   std::rethrow_exception(e);
                 } catch (const std::runtime_error&) {
                   return true;
                 } catch (...) {
                   return false;
                 }
               },
           .matches_status = [](const Status& s) { return s.code() == StatusCode::kUnavailable; }});
  return names;
}

TEST(SpringNames, FileWithJavaNamesLoadsAndKeepsThem) {
  const Configuration c = MustLoad("camel_case_exceptions.yml");
  const CircuitBreakerSettings* a = c.circuit_breakers.instance("backendA");
  ASSERT_NE(a, nullptr);
  // Inherited from configs.default, as written.
  EXPECT_THAT(a->names.at("recordExceptions"),
              ElementsAre("org.springframework.web.client.HttpServerErrorException",
                          "java.io.IOException", "java.util.concurrent.TimeoutException"));
  EXPECT_EQ(a->config.wait_duration_in_open_state, 5s);  // a bare number: milliseconds
  const CircuitBreakerSettings* b = c.circuit_breakers.instance("backendB");
  ASSERT_NE(b, nullptr);
  // A comma-separated scalar is a list, as Spring binds one.
  EXPECT_THAT(b->names.at("ignoreExceptions"),
              ElementsAre("io.github.robwin.exception.BusinessException",
                          "java.lang.IllegalArgumentException"));
  // Nothing means anything until resolved: no classifier yet.
  EXPECT_FALSE(a->config.exception_classifier);
}

TEST(SpringNames, UnregisteredNamesAreWarningsNamingTheInstance) {
  Configuration c = MustLoad("camel_case_exceptions.yml");
  const ResolvedNames r = ResolveNames(c, DemoNames());
  EXPECT_THAT(r.warnings,
              Contains("resilience4j.circuitbreaker.instances.backendA.recordExceptions: "
                       "\"org.springframework.web.client.HttpServerErrorException\" is not "
                       "registered (NameRegistry); left out"));
  EXPECT_TRUE(AnyLineHas(r.warnings, {"retry.instances.backendB.intervalBiFunction",
                                      "io.github.robwin.retry.CustomIntervalBiFunction"}));
  bool found = false;
  for (const NameResolution& n : r.resolutions) {
    if (n.path == "resilience4j.circuitbreaker.instances.backendA.recordExceptions" &&
        n.name == "java.io.IOException") {
      EXPECT_EQ(n.meaning, "C++ exception std::system_error");
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

// Throws `e` through the breaker `n` times; returns the breaker's state.
template <typename E>
State ThrowThrough(CircuitBreaker& breaker, int n, const E& e) {
  for (int i = 0; i < n; ++i) {
    try {
      (void)breaker.Call([&]() -> Status { throw e; });
    } catch (const std::exception&) {
    }
  }
  return breaker.state();
}

// The point of it all: which failures count follows the file once the names
// are resolved. backendB records only what RecordFailurePredicate matches and
// ignores BusinessException; unresolved, everything thrown is a failure.
TEST(SpringNames, RegisteredNamesChangeWhichOutcomesCount) {
  testing::ManualClock clock;
  for (bool resolve : {false, true}) {
    SCOPED_TRACE(resolve ? "resolved" : "unresolved");
    Configuration c = MustLoad("camel_case_exceptions.yml");
    if (resolve) (void)ResolveNames(c, DemoNames());
    auto registry = Registry::Create({.clock = &clock});
    ASSERT_TRUE(registry.has_value());
    ASSERT_TRUE(ApplyToRegistry(c, **registry).ok());
    auto breaker = (*registry)->Get("b", "backendB");
    ASSERT_TRUE(breaker.has_value());
    CircuitBreaker& cb = **breaker;
    // Ten BusinessExceptions (std::invalid_argument): ignored when resolved.
    EXPECT_EQ(ThrowThrough(cb, 10, std::invalid_argument("bad input")),
              resolve ? State::kClosed : State::kOpen);
    if (!resolve) continue;
    EXPECT_EQ(cb.metrics().buffered_calls, 0);
    // Ten logic_errors, not recorded: successes.
    EXPECT_EQ(ThrowThrough(cb, 10, std::logic_error("not recorded")), State::kClosed);
    EXPECT_EQ(cb.metrics().failed_calls, 0);
    // Ten runtime_errors match the predicate: the breaker opens.
    EXPECT_EQ(ThrowThrough(cb, 10, std::runtime_error("down")), State::kOpen);
  }
}

TEST(SpringNames, StatusClassifierAndRetryOn) {
  Configuration c = MustLoad("camel_case_exceptions.yml");
  (void)ResolveNames(c, DemoNames());
  const CircuitBreakerSettings* b = c.circuit_breakers.instance("backendB");
  ASSERT_TRUE(b->status_classifier);
  // backendB: the predicate (kUnavailable), and configs.default's
  // recordExceptions (TimeoutException: kTimeout), which it inherits.
  EXPECT_EQ(b->status_classifier(Status(StatusCode::kUnavailable, "down")), OutcomeKind::kFailure);
  EXPECT_EQ(b->status_classifier(Status(StatusCode::kTimeout, "slow")), OutcomeKind::kFailure);
  EXPECT_EQ(b->status_classifier(Status(StatusCode::kInvalidArgument, "bad")),
            OutcomeKind::kSuccess);
  const CircuitBreakerSettings* a = c.circuit_breakers.instance("backendA");
  // backendA records java.util.concurrent.TimeoutException, a StatusCode here.
  EXPECT_EQ(a->status_classifier(Status(StatusCode::kTimeout, "slow")), OutcomeKind::kFailure);
  EXPECT_EQ(a->status_classifier(Status(StatusCode::kUnavailable, "down")), OutcomeKind::kSuccess);
  // Retry: retryExceptions of configs.default name TimeoutException.
  const RetrySettings* retry = c.retries.instance("backendA");
  ASSERT_TRUE(retry->options.retry_on);
  EXPECT_TRUE(retry->options.retry_on(Status(StatusCode::kTimeout, "slow")));
  EXPECT_FALSE(retry->options.retry_on(Status(StatusCode::kUnavailable, "down")));
}

TEST(SpringNames, IntervalFunctionByName) {
  Configuration c = MustLoad("camel_case_exceptions.yml");
  NameRegistry names = DemoNames();
  names.Add("io.github.robwin.retry.CustomIntervalBiFunction",
            {.description = "fixed 42 ms", .interval = [](int) -> Duration { return 42ms; }});
  const ResolvedNames r = ResolveNames(c, names);
  const RetrySettings* retry = c.retries.instance("backendB");
  ASSERT_TRUE(retry->options.interval_function);
  EXPECT_EQ(retry->options.interval_function(1), 42ms);
  EXPECT_FALSE(AnyLineHas(r.warnings, {"CustomIntervalBiFunction"}));
}

// The formatted configuration keeps the names, and loads back to itself.
TEST(SpringNames, FormatKeepsNames) {
  const Configuration c = MustLoad("camel_case_exceptions.yml");
  const std::string text = FormatConfig(c);
  EXPECT_THAT(text, HasSubstr("recordExceptions: [org.springframework.web.client."
                              "HttpServerErrorException, java.io.IOException, "
                              "java.util.concurrent.TimeoutException]\n"));
  Result<Configuration> again = LoadConfig(text, "again.yml");
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_EQ(FormatConfig(*again), text);
}

// --- thread-pool-bulkhead -------------------------------------------------------

TEST(SpringThreadPool, LoadsAndBuildsAPoolThatRefusesWhenFull) {
  const Configuration c = MustLoad("camel_case_exceptions.yml");
  const ThreadPoolBulkheadOptions* a = c.thread_pool_bulkheads.instance("backendA");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->max_thread_pool_size, 4);
  EXPECT_EQ(a->core_thread_pool_size, 2);
  EXPECT_EQ(a->queue_capacity, 2);
  const ThreadPoolBulkheadOptions* b = c.thread_pool_bulkheads.instance("backendB");
  ASSERT_NE(b, nullptr);
  std::latch release(1);  // before the pool: its destructor runs what waits on it
  auto pool = ThreadPoolBulkhead::Create(*b);
  ASSERT_TRUE(pool.has_value());
  auto blocked = [&] { release.wait(); };
  EXPECT_TRUE((*pool)->Enqueue(blocked).ok());  // the one thread
  EXPECT_TRUE((*pool)->Enqueue(blocked).ok());  // the one queue slot
  const Status full = (*pool)->Enqueue(blocked);
  EXPECT_EQ(full.code(), StatusCode::kBulkheadFull);
  release.count_down();
}

TEST(SpringThreadPool, CoreAboveMaxIsAnErrorAtItsLine) {
  Result<Configuration> c = LoadConfig(R"(resilience4j:
  thread-pool-bulkhead:
    instances:
      reports:
        coreThreadPoolSize: 4
        maxThreadPoolSize: 2
)",
                                       "app.yml");
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().message(),
            "app.yml:6:28: resilience4j.thread-pool-bulkhead.instances.reports.maxThreadPoolSize: "
            "must be >= core_thread_pool_size (4), got 2");
}

// --- Profiles -----------------------------------------------------------------

TEST(SpringProfiles, NoProfileAppliesOnlyUnconditionedAndNegatedDocuments) {
  const Configuration c = MustLoad("profiles.yml");
  EXPECT_THAT(c.profiles, ElementsAre("default"));
  const CircuitBreakerSettings* payment = c.circuit_breakers.instance("payment");
  ASSERT_NE(payment, nullptr);
  EXPECT_EQ(payment->config.sliding_window_size, 10);
  EXPECT_EQ(payment->config.failure_rate_threshold, 50.0f);
  EXPECT_EQ(c.circuit_breakers.instance("ledger"), nullptr);
  ASSERT_NE(c.retries.instance("payment"), nullptr);  // "!prod"
  EXPECT_EQ(c.retries.instance("payment")->options.max_attempts, 5);
  EXPECT_TRUE(AnyLineHas(c.notes, {"profiles.yml:14:19", "document 2 skipped"}))
      << ::testing::PrintToString(c.notes);
}

TEST(SpringProfiles, ProdOverridesKeyByKeyInFileOrder) {
  const Configuration c = MustLoad("profiles.yml", {.profiles = {"prod"}});
  const CircuitBreakerSettings* payment = c.circuit_breakers.instance("payment");
  ASSERT_NE(payment, nullptr);
  EXPECT_EQ(payment->config.sliding_window_size, 100);
  // wait-duration-in-open-state overrides waitDurationInOpenState.
  EXPECT_EQ(payment->config.wait_duration_in_open_state, 30s);
  // "staging | prod", a later document.
  EXPECT_EQ(payment->config.failure_rate_threshold, 30.0f);
  ASSERT_NE(c.circuit_breakers.instance("ledger"), nullptr);
  EXPECT_EQ(c.retries.instance("payment"), nullptr);
  EXPECT_TRUE(AnyLineHas(c.notes, {"document 2 applied", "active profiles: prod"}));
}

TEST(SpringProfiles, FromSpringProfilesActiveAndTheOlderSpringProfilesKey) {
  Configuration c = MustLoad("profiles.yml", {.environment = {{"SPRING_PROFILES_ACTIVE", "dev"}}});
  EXPECT_THAT(c.profiles, ElementsAre("dev"));
  EXPECT_EQ(c.circuit_breakers.instance("payment")->config.failure_rate_threshold, 90.0f);
  c = MustLoad("profiles.yml", {.environment = {{"SPRING_PROFILES_ACTIVE", " staging , x "}}});
  EXPECT_THAT(c.profiles, ElementsAre("staging", "x"));
  EXPECT_EQ(c.circuit_breakers.instance("payment")->config.failure_rate_threshold, 30.0f);
  // The option wins over the variable.
  c = MustLoad("profiles.yml",
               {.environment = {{"SPRING_PROFILES_ACTIVE", "dev"}}, .profiles = {"prod"}});
  EXPECT_EQ(c.circuit_breakers.instance("payment")->config.sliding_window_size, 100);
}

TEST(SpringProfiles, ProfilesActiveInTheFileItself) {
  const Configuration c = MustLoad("profiles.yml");  // none set in it
  EXPECT_THAT(c.profiles, ElementsAre("default"));
  Result<Configuration> d = LoadConfig(R"(spring.profiles.active: fast
resilience4j.circuitbreaker.instances.a.slidingWindowSize: 10
---
spring.config.activate.on-profile: fast
resilience4j.circuitbreaker.instances.a.slidingWindowSize: 5
)",
                                       "app.yml");
  ASSERT_TRUE(d.has_value()) << d.error().message();
  EXPECT_EQ(d->circuit_breakers.instance("a")->config.sliding_window_size, 5);
}

TEST(SpringProfiles, ExpressionsAndTheirErrors) {
  auto size_with = [](std::string expression, std::vector<std::string> profiles) {
    Result<Configuration> c = LoadConfig(
        "resilience4j.circuitbreaker.instances.a.slidingWindowSize: 10\n---\n"
        "spring.config.activate.on-profile: \"" +
            expression + "\"\nresilience4j.circuitbreaker.instances.a.slidingWindowSize: 5\n",
        "app.yml", {.profiles = std::move(profiles)});
    return c.has_value() ? c->circuit_breakers.instance("a")->config.sliding_window_size : -1;
  };
  EXPECT_EQ(size_with("a & b", {"a", "b"}), 5);
  EXPECT_EQ(size_with("a & b", {"a"}), 10);
  EXPECT_EQ(size_with("a | b", {"b"}), 5);
  EXPECT_EQ(size_with("!a", {"b"}), 5);
  EXPECT_EQ(size_with("(a | b) & !c", {"b", "c"}), 10);
  EXPECT_EQ(size_with("(a | b) & !c", {"b"}), 5);
  EXPECT_EQ(size_with("x, a", {"a"}), 5);
  EXPECT_EQ(size_with("a & b | c", {"a"}), -1);  // Spring wants parentheses
  EXPECT_EQ(size_with("(a", {"a"}), -1);
  EXPECT_EQ(size_with("", {"a"}), -1);
}

// A wrong key in a later document is still an error, at its own line.
TEST(SpringProfiles, ErrorsInLaterDocumentsKeepTheirPosition) {
  Result<Configuration> c =
      LoadConfig(R"(resilience4j.circuitbreaker.instances.a.slidingWindowSize: 10
---
spring.config.activate.on-profile: prod
resilience4j:
  circuitbreaker:
    instances:
      a:
        slidingWindowSise: 5
)",
                 "app.yml", {.profiles = {"prod"}});
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().message(),
            "app.yml:8:9: resilience4j.circuitbreaker.instances.a.slidingWindowSise: unknown "
            "property of circuitbreaker (did you mean \"slidingWindowSize\"?)");
}

// --- Environment in Spring's form --------------------------------------------

TEST(SpringEnvironment, Resilience4jVariablesOverrideLikeFuseboxOnes) {
  const Configuration c =
      MustLoad("camel_case_exceptions.yml",
               {.environment = {
                    {"RESILIENCE4J_CIRCUITBREAKER_INSTANCES_BACKENDA_FAILURERATETHRESHOLD", "30"},
                    {"RESILIENCE4J_THREADPOOLBULKHEAD_INSTANCES_BACKENDB_QUEUECAPACITY", "7"},
                    {"RESILIENCE4J_CIRCUITBREAKER_METRICS_ENABLED", "false"}}});
  EXPECT_EQ(c.circuit_breakers.instance("backendA")->config.failure_rate_threshold, 30.0f);
  EXPECT_EQ(c.thread_pool_bulkheads.instance("backendB")->queue_capacity, 7);
  EXPECT_TRUE(AnyLineHas(c.notes, {"RESILIENCE4J_CIRCUITBREAKER_METRICS_ENABLED", "ignored"}));
}

TEST(SpringEnvironment, BadValueIsAnErrorNamingTheVariable) {
  Result<Configuration> c = LoadConfigFile(
      kSpring + "camel_case_exceptions.yml",
      {.environment = {{"RESILIENCE4J_CIRCUITBREAKER_INSTANCES_BACKENDA_SLIDINGWINDOWSIZE", "x"}}});
  ASSERT_FALSE(c.has_value());
  EXPECT_THAT(std::string(c.error().message()),
              HasSubstr("env RESILIENCE4J_CIRCUITBREAKER_INSTANCES_BACKENDA_SLIDINGWINDOWSIZE: "));
}

}  // namespace
}  // namespace fusebox::yaml
