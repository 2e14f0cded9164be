// Tests for fusebox/config_names.h: Resilience4j's property names and
// durations.

#include "fusebox/config_names.h"

#include <gtest/gtest.h>

#include <chrono>
#include <initializer_list>
#include <set>
#include <string>
#include <utility>

#include "fusebox/testing/status_macros.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;

// Each text parses to its duration. Fatal on the first that does not parse,
// so an error fails this test rather than aborting the binary.
void ExpectParses(std::initializer_list<std::pair<const char*, Duration>> cases) {
  for (const auto& [text, want] : cases) {
    FUSEBOX_ASSERT_OK_AND_ASSIGN(const Duration got, ParseDuration(text));
    EXPECT_EQ(got, want) << '"' << text << '"';
  }
}

TEST(ParseDuration, ReadsEveryUnit) {
  ExpectParses({{"5s", 5s},
                {"250ms", 250ms},
                {"1m", 1min},
                {"2h", 2h},
                {"1d", 24h},
                {"15us", 15us},
                {"7ns", 7ns},
                {" 3s ", 3s}});
}

TEST(ParseDuration, ReadsSpringsSimpleStyleInAnyCaseAndIso8601) {
  ExpectParses({{"10S", 10s},
                {"500MS", 500ms},
                {"+5s", 5s},
                {"PT5S", 5s},
                {"pt5s", 5s},
                {"PT0.5S", 500ms},
                {"PT0,25S", 250ms},
                {"P1D", 24h},
                {"P1DT2H3M4.000000005S", 24h + 2h + 3min + 4s + 5ns},
                {"PT1M30S", 90s},
                {"PT0S", Duration::zero()}});
}

TEST(ParseDuration, BareIntegerIsMilliseconds) {
  ExpectParses({{"5000", 5s}, {"0", Duration::zero()}});
}

TEST(ParseDuration, RejectsWhatSpringWouldNotRead) {
  for (const char* bad : {"",
                          "s",
                          "-5s",
                          "1.5s",
                          "5 s",
                          "5sec",
                          "1m30s",
                          "ms250",
                          "99999999999999999999",
                          "9999999999d",
                          "P",
                          "PT",
                          "-PT5S",
                          "PT-5S",
                          "P1W",
                          "P1M",
                          "PT1D",
                          "PT5",
                          "PT5S5M",
                          "PT1.5M",
                          "PT0.1234567891S",
                          "P1DT",
                          "PT5SX",
                          "P106752D"}) {
    Result<Duration> d = ParseDuration(bad);
    ASSERT_FALSE(d.has_value()) << bad;
    EXPECT_EQ(d.error().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(d.error().message().find(std::string("\"") + bad + "\""), std::string::npos)
        << d.error().message();
  }
}

TEST(ParseDuration, OverflowBoundary) {
  // 9223372036 s is the largest whole number of seconds a nanosecond int64 holds.
  ExpectParses({{"9223372036s", 9223372036s}});
  EXPECT_FALSE(ParseDuration("9223372037s").has_value());
}

TEST(FormatDuration, LargestExactUnit) {
  EXPECT_EQ(FormatDuration(5s), "5s");
  EXPECT_EQ(FormatDuration(250ms), "250ms");
  EXPECT_EQ(FormatDuration(60s), "1m");
  EXPECT_EQ(FormatDuration(1500us), "1500us");
  EXPECT_EQ(FormatDuration(Duration::zero()), "0ms");
  EXPECT_EQ(FormatDuration(90s), "90s");
  for (Duration d :
       {Duration(1ns), Duration(999ms), Duration(3600s), Duration(86400s), Duration(1001us)}) {
    FUSEBOX_ASSERT_OK_AND_ASSIGN(const Duration back, ParseDuration(FormatDuration(d)));
    EXPECT_EQ(back, d) << FormatDuration(d);
  }
}

TEST(ConfigNames, SeedApplicationYml) {
  CircuitBreakerConfig config;
  ASSERT_TRUE(SetConfigProperty(config, "slidingWindowSize", "10").ok());
  ASSERT_TRUE(SetConfigProperty(config, "minimumNumberOfCalls", "10").ok());
  ASSERT_TRUE(SetConfigProperty(config, "failureRateThreshold", "50").ok());
  ASSERT_TRUE(SetConfigProperty(config, "waitDurationInOpenState", "5s").ok());
  ASSERT_TRUE(SetConfigProperty(config, "permittedNumberOfCallsInHalfOpenState", "3").ok());
  EXPECT_EQ(config.sliding_window_size, 10);
  EXPECT_EQ(config.minimum_number_of_calls, 10);
  EXPECT_EQ(config.failure_rate_threshold, 50.0f);
  EXPECT_EQ(config.wait_duration_in_open_state, 5s);
  EXPECT_EQ(config.permitted_number_of_calls_in_half_open_state, 3);
  EXPECT_TRUE(ValidateConfigProperties(config).ok());
}

TEST(ConfigNames, EveryPropertySetsItsField) {
  CircuitBreakerConfig c;
  const auto set = [&](const char* name, const char* value) {
    Status s = SetConfigProperty(c, name, value);
    EXPECT_TRUE(s.ok()) << name << ": " << s;
  };
  set("slowCallRateThreshold", "80");
  set("slowCallDurationThreshold", "2s");
  set("maxWaitDurationInHalfOpenState", "250");
  set("transitionToStateAfterWaitDuration", "CLOSED");
  set("slidingWindowType", "time-based");
  set("automaticTransitionFromOpenToHalfOpenEnabled", "true");
  set("consecutiveFailureThreshold", "4");
  set("openDurationJitter", "0.25");
  set("jitterSeed", "18446744073709551615");
  set("halfOpenPolicy", "any_failure_reopens");
  set("compatibility", "resilience4j");
  set("callTiming", "precise");
  set("outcomeOrder", "relaxed");
  EXPECT_EQ(c.slow_call_rate_threshold, 80.0f);
  EXPECT_EQ(c.slow_call_duration_threshold, 2s);
  EXPECT_EQ(c.max_wait_duration_in_half_open_state, 250ms);
  EXPECT_EQ(c.transition_to_state_after_wait_duration, State::kClosed);
  EXPECT_EQ(c.sliding_window_type, SlidingWindowType::kTimeBased);
  EXPECT_TRUE(c.automatic_transition_from_open_to_half_open_enabled);
  EXPECT_EQ(c.consecutive_failure_threshold, 4);
  EXPECT_EQ(c.open_duration_jitter, 0.25);
  EXPECT_EQ(c.jitter_seed, 18446744073709551615u);
  EXPECT_EQ(c.half_open_policy, HalfOpenPolicy::kAnyFailureReopens);
  EXPECT_EQ(c.compatibility, Compatibility::kResilience4j);
  EXPECT_EQ(c.call_timing, CallTiming::kPrecise);
  EXPECT_EQ(c.outcome_order, OutcomeOrder::kRelaxed);
}

TEST(ConfigNames, OutcomeOrder) {
  CircuitBreakerConfig c;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(std::string order, GetConfigProperty(c, "outcomeOrder"));
  EXPECT_EQ(order, "LINEARIZABLE");  // the default
  ASSERT_TRUE(SetConfigProperty(c, "outcomeOrder", "RELAXED").ok());
  EXPECT_EQ(c.outcome_order, OutcomeOrder::kRelaxed);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(order, GetConfigProperty(c, "outcomeOrder"));
  EXPECT_EQ(order, "RELAXED");
  ASSERT_TRUE(SetConfigProperty(c, "outcomeOrder", " Linearizable ").ok());
  EXPECT_EQ(c.outcome_order, OutcomeOrder::kLinearizable);
  EXPECT_EQ(SetConfigProperty(c, "outcomeOrder", "FAST").message(),
            "outcomeOrder: expected LINEARIZABLE or RELAXED, got \"FAST\"");
  EXPECT_EQ(c.outcome_order, OutcomeOrder::kLinearizable);
  c.outcome_order = static_cast<OutcomeOrder>(7);
  EXPECT_EQ(ValidateConfigProperties(c).message(),
            "outcomeOrder (outcome_order) must be kLinearizable or kRelaxed");
}

TEST(ConfigNames, ThresholdIsParsedAsFloat) {
  // Semantics note point 17: 33.3333334 is the float 33.333332, exactly 1 in 3.
  CircuitBreakerConfig c;
  ASSERT_TRUE(SetConfigProperty(c, "failureRateThreshold", "33.3333334").ok());
  EXPECT_EQ(c.failure_rate_threshold, 1 * 100.0f / 3);
}

TEST(ConfigNames, BadValueNamesPropertyAndValue) {
  CircuitBreakerConfig c;
  Status s = SetConfigProperty(c, "waitDurationInOpenState", "5 seconds");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "waitDurationInOpenState: expected a duration such as 5s, 250ms or 1m (a bare integer "
            "is milliseconds), got \"5 seconds\"");
  s = SetConfigProperty(c, "slidingWindowSize", "ten");
  EXPECT_EQ(s.message(), "slidingWindowSize: expected an integer >= 1, got \"ten\"");
  s = SetConfigProperty(c, "failureRateThreshold", "nan");
  EXPECT_EQ(s.message(), "failureRateThreshold: expected a number in (0, 100], got \"nan\"");
  s = SetConfigProperty(c, "slidingWindowType", "SLIDING");
  EXPECT_EQ(s.message(), "slidingWindowType: expected COUNT_BASED or TIME_BASED, got \"SLIDING\"");
  s = SetConfigProperty(c, "automaticTransitionFromOpenToHalfOpenEnabled", "yes");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = SetConfigProperty(c, "transitionToStateAfterWaitDuration", "HALF_OPEN");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  s = SetConfigProperty(c, "slidingWindowSize", "99999999999");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
}

TEST(ConfigNames, UnknownNameSuggestsTheRightOne) {
  CircuitBreakerConfig c;
  EXPECT_EQ(SetConfigProperty(c, "ringBufferSize", "10").message(),
            "unknown property \"ringBufferSize\"");
  EXPECT_EQ(SetConfigProperty(c, "failureratethreshold", "10").message(),
            "unknown property \"failureratethreshold\" (did you mean \"failureRateThreshold\"?)");
  EXPECT_EQ(SetConfigProperty(c, "sliding_window_size", "10").message(),
            "unknown property \"sliding_window_size\" (did you mean \"slidingWindowSize\"?)");
}

TEST(ConfigNames, ValidationSpeaksInPropertyNames) {
  CircuitBreakerConfig c;
  ASSERT_TRUE(SetConfigProperty(c, "slidingWindowSize", "0").ok());
  Status s = ValidateConfigProperties(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("slidingWindowSize (sliding_window_size) must be >= 1", 0), 0u)
      << s.message();
}

// A size from a file or a flag reaches the window allocator only through
// Validate(): 2147483647 seconds of TIME_BASED buckets (86 GB) used to abort
// `fusebox replay` and `sim` with bad_alloc while `config check` passed.
TEST(ConfigNames, WindowSizesHaveAMaximum) {
  CircuitBreakerConfig c;
  ASSERT_TRUE(SetConfigProperty(c, "slidingWindowType", "TIME_BASED").ok());
  ASSERT_TRUE(SetConfigProperty(c, "slidingWindowSize", "2147483647").ok());
  Status s = ValidateConfigProperties(c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "slidingWindowSize (sliding_window_size) must be <= 86400 (seconds, TIME_BASED), "
            "got 2147483647");
  c.sliding_window_size = CircuitBreakerConfig::kMaxTimeBasedWindowSeconds;
  EXPECT_TRUE(ValidateConfigProperties(c).ok());
  // The same count is fine as calls, up to its own maximum.
  ASSERT_TRUE(SetConfigProperty(c, "slidingWindowType", "COUNT_BASED").ok());
  c.sliding_window_size = CircuitBreakerConfig::kMaxCountBasedWindowSize;
  EXPECT_TRUE(ValidateConfigProperties(c).ok());
  c.sliding_window_size = CircuitBreakerConfig::kMaxCountBasedWindowSize + 1;
  EXPECT_EQ(ValidateConfigProperties(c).message(),
            "slidingWindowSize (sliding_window_size) must be <= 1000000 (calls, COUNT_BASED), "
            "got 1000001");
  // Half-open probes fill a count-based window of their own.
  c.sliding_window_size = 100;
  c.permitted_number_of_calls_in_half_open_state = 2147483647;
  EXPECT_EQ(ValidateConfigProperties(c).message().rfind(
                "permittedNumberOfCallsInHalfOpenState (permitted_number_of_calls_in_half_open_"
                "state) must be <= 1000000",
                0),
            0u);
  // And CircuitBreaker::Create, the path every tool takes, refuses before
  // allocating.
  c.permitted_number_of_calls_in_half_open_state = 10;
  c.sliding_window_type = SlidingWindowType::kTimeBased;
  c.sliding_window_size = 2147483647;
  EXPECT_EQ(CircuitBreaker::Create("huge", c).error().code(), StatusCode::kInvalidArgument);
}

TEST(ConfigNames, GetReadsBackWhatSetWrote) {
  CircuitBreakerConfig c;
  c.failure_rate_threshold = 33.3333334f;
  c.slow_call_duration_threshold = 1500ms;
  c.sliding_window_type = SlidingWindowType::kTimeBased;
  c.transition_to_state_after_wait_duration = State::kClosed;
  c.automatic_transition_from_open_to_half_open_enabled = true;
  c.open_duration_jitter = 0.125;
  c.half_open_policy = HalfOpenPolicy::kAnyFailureReopens;
  c.compatibility = Compatibility::kResilience4j;
  c.call_timing = CallTiming::kCoarse;
  c.outcome_order = OutcomeOrder::kRelaxed;
  CircuitBreakerConfig copy;
  for (const ConfigProperty& p : ConfigProperties()) {
    Result<std::string> value = GetConfigProperty(c, p.name);
    ASSERT_TRUE(value.has_value()) << p.name;
    ASSERT_TRUE(SetConfigProperty(copy, p.name, *value).ok()) << p.name << "=" << *value;
    FUSEBOX_ASSERT_OK_AND_ASSIGN(const std::string copied, GetConfigProperty(copy, p.name));
    EXPECT_EQ(copied, *value) << p.name;
  }
  EXPECT_EQ(copy.failure_rate_threshold, c.failure_rate_threshold);
  EXPECT_EQ(copy.outcome_order, OutcomeOrder::kRelaxed);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const std::string slow,
                               GetConfigProperty(c, "slowCallDurationThreshold"));
  EXPECT_EQ(slow, "1500ms");
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const std::string type, GetConfigProperty(c, "slidingWindowType"));
  EXPECT_EQ(type, "TIME_BASED");
  EXPECT_EQ(GetConfigProperty(c, "nope").error().code(), StatusCode::kInvalidArgument);
}

TEST(ConfigNames, TableIsConsistent) {
  std::set<std::string_view> names, fields;
  for (const ConfigProperty& p : ConfigProperties()) {
    EXPECT_TRUE(names.insert(p.name).second) << p.name;
    EXPECT_TRUE(fields.insert(p.field).second) << p.field;
    EXPECT_EQ(FindConfigProperty(p.name), &p);
    EXPECT_FALSE(p.expects.empty());
  }
  // The eleven names of the replay format are all there.
  for (const char* name :
       {"slidingWindowType", "slidingWindowSize", "minimumNumberOfCalls", "failureRateThreshold",
        "slowCallRateThreshold", "slowCallDurationThreshold", "waitDurationInOpenState",
        "permittedNumberOfCallsInHalfOpenState", "maxWaitDurationInHalfOpenState",
        "transitionToStateAfterWaitDuration", "automaticTransitionFromOpenToHalfOpenEnabled",
        "compatibility"}) {
    EXPECT_NE(FindConfigProperty(name), nullptr) << name;
  }
  EXPECT_EQ(FindConfigProperty("nope"), nullptr);
}

}  // namespace
}  // namespace fusebox
