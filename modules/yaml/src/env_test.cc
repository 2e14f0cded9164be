// Environment overrides, from an injected map: the process environment is
// never read or changed here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "fusebox/yaml/config.h"

namespace fusebox::yaml {
namespace {

using std::chrono::seconds;

constexpr std::string_view kFile = R"(resilience4j:
  circuitbreaker:
    configs:
      default:
        failureRateThreshold: 50
    instances:
      payment-api:
        slidingWindowSize: 10
      orders:
        baseConfig: default
)";

Result<Configuration> Load(Environment env, std::string_view text = kFile) {
  return LoadConfig(text, "app.yml", {.environment = std::move(env)});
}

TEST(YamlEnv, OverridesAnInstanceProperty) {
  Result<Configuration> c =
      Load({{"FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_API_SLIDINGWINDOWSIZE", "30"}});
  ASSERT_TRUE(c.has_value()) << c.error().message();
  EXPECT_EQ(c->circuit_breakers.instance("payment-api")->config.sliding_window_size, 30);
  EXPECT_EQ(c->circuit_breakers.instance("orders")->config.sliding_window_size, 100);
}

// Two entries whose names map to the same variable name (payment-api and
// payment_api are both PAYMENT_API): the variable is refused as ambiguous,
// never applied to one of them. Two is enough to be ambiguous.
TEST(YamlEnv, AVariableNamingTwoEntriesIsAmbiguous) {
  Result<Configuration> c =
      Load({{"FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_API_SLIDINGWINDOWSIZE", "30"}},
           R"(resilience4j.circuitbreaker.instances:
  payment-api:
    slidingWindowSize: 10
  payment_api:
    slidingWindowSize: 20
)");
  ASSERT_FALSE(c.has_value());
  EXPECT_THAT(c.error().message(),
              ::testing::HasSubstr("ambiguous: names more than one entry and property"));
  EXPECT_THAT(
      c.error().message(),
      ::testing::HasSubstr("FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_API_SLIDINGWINDOWSIZE"));
}

// An override of configs.default reaches every entry built on it.
TEST(YamlEnv, OverrideOfDefaultIsInherited) {
  Result<Configuration> c =
      Load({{"FUSEBOX_CIRCUITBREAKER_CONFIGS_DEFAULT_FAILURERATETHRESHOLD", "25"}});
  ASSERT_TRUE(c.has_value()) << c.error().message();
  EXPECT_EQ(c->circuit_breakers.instance("payment-api")->config.failure_rate_threshold, 25.0f);
  EXPECT_EQ(c->circuit_breakers.instance("orders")->config.failure_rate_threshold, 25.0f);
}

// Underscores inside the section and the property are allowed, as are the
// kebab-case dashes of Spring's own mapping (dropped).
TEST(YamlEnv, UnderscoresInSectionAndPropertyNames) {
  Result<Configuration> c =
      Load({{"FUSEBOX_CIRCUIT_BREAKER_INSTANCES_ORDERS_WAIT_DURATION_IN_OPEN_STATE", "7s"}});
  ASSERT_TRUE(c.has_value()) << c.error().message();
  EXPECT_EQ(c->circuit_breakers.instance("orders")->config.wait_duration_in_open_state, seconds(7));
}

TEST(YamlEnv, BaseConfigAndANewDefault) {
  Result<Configuration> c = Load(
      {
          {"FUSEBOX_RETRY_CONFIGS_DEFAULT_MAXATTEMPTS", "6"},
      },
      "resilience4j.retry.instances.payment.waitDuration: 1s\n");
  ASSERT_TRUE(c.has_value()) << c.error().message();
  EXPECT_EQ(c->retries.instance("payment")->options.max_attempts, 6);
  EXPECT_NE(c->retries.config("default"), nullptr);
}

TEST(YamlEnv, OtherFuseboxVariablesAreNotOurs) {
  Result<Configuration> c = Load({{"FUSEBOX_REDIS_URL", "redis://localhost"},
                                  {"FUSEBOX_LOG_LEVEL", "debug"},
                                  {"PATH", "/usr/bin"}});
  EXPECT_TRUE(c.has_value()) << c.error().message();
}

// Every error names the variable, and they are all reported together, after
// the file's.
TEST(YamlEnv, ErrorsNameTheVariable) {
  Result<Configuration> c = Load({
      {"FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_API_FAILURERATETHRESHOLD", "0"},
      {"FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_API_SLIDINGWINDOWSIZE", "ten"},
      {"FUSEBOX_CIRCUITBREAKER_INSTANCES_BILLING_SLIDINGWINDOWSIZE", "5"},
      {"FUSEBOX_CIRCUITBREAKER_INSTANCES_ORDERS_FAILURERATETRESHOLD", "5"},
      {"FUSEBOX_CIRCUITBRAKER_INSTANCES_ORDERS_SLIDINGWINDOWSIZE", "5"},
      {"FUSEBOX_RETRY_MAXATTEMPTS", "5"},
      {"FUSEBOX_THREAD_POOL_BULKHEAD_INSTANCES_A_MAXTHREADPOOLSIZE", "5"},
  });
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().message(),
            "env FUSEBOX_CIRCUITBRAKER_INSTANCES_ORDERS_SLIDINGWINDOWSIZE: unknown section "
            "\"CIRCUITBRAKER\" (did you mean \"circuitbreaker\"?)\n"
            "env FUSEBOX_CIRCUITBREAKER_INSTANCES_BILLING_SLIDINGWINDOWSIZE: "
            "resilience4j.circuitbreaker.instances: no instances entry has this name (upper "
            "case, '-' and '.' as '_'); declared: payment-api, orders\n"
            "env FUSEBOX_CIRCUITBREAKER_INSTANCES_ORDERS_FAILURERATETRESHOLD: "
            "resilience4j.circuitbreaker.instances: no property of circuitbreaker ends the name "
            "(did you mean \"failureRateThreshold\"?)\n"
            "env FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_API_FAILURERATETHRESHOLD: "
            "resilience4j.circuitbreaker.instances.payment-api.failureRateThreshold: must be in "
            "(0, 100], got 0\n"
            "env FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_API_SLIDINGWINDOWSIZE: "
            "resilience4j.circuitbreaker.instances.payment-api.slidingWindowSize: expected an "
            "integer >= 1, got \"ten\"\n"
            "env FUSEBOX_RETRY_MAXATTEMPTS: expected "
            "FUSEBOX_RETRY_<CONFIGS|INSTANCES>_<NAME>_<PROPERTY>, e.g. "
            "FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_FAILURERATETHRESHOLD\n"
            "env FUSEBOX_THREAD_POOL_BULKHEAD_INSTANCES_A_MAXTHREADPOOLSIZE: "
            "resilience4j.thread-pool-bulkhead.instances: no instances entry has this name "
            "(upper case, '-' and '.' as '_'); declared: none");
}

// The environment wins over the file, whichever layer the file set it in.
TEST(YamlEnv, EnvironmentWinsOverTheFile) {
  Result<Configuration> c =
      Load({{"FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_API_SLIDINGWINDOWSIZE", "11"},
            {"FUSEBOX_CIRCUITBREAKER_INSTANCES_ORDERS_BASECONFIG", "default"}});
  ASSERT_TRUE(c.has_value()) << c.error().message();
  EXPECT_EQ(c->circuit_breakers.instance("payment-api")->config.sliding_window_size, 11);
}

}  // namespace
}  // namespace fusebox::yaml
