// Tests for scenarios: presets, YAML files and their errors, flag syntax.
#include "apps/fusebox/scenario.h"

#include <gtest/gtest.h>

#include <string>

#include "apps/fusebox/test_util.h"
#include "fusebox/testing/status_macros.h"

namespace fusebox::app {
namespace {

using namespace std::chrono_literals;

std::string ErrorOf(std::string_view yaml) {
  Result<Scenario> s = ParseScenarioYaml(yaml, "s.yaml");
  EXPECT_FALSE(s.has_value()) << yaml;
  if (s.has_value()) return "";
  EXPECT_EQ(s.error().code(), StatusCode::kInvalidArgument);
  return std::string(s.error().message());
}

TEST(Scenario, PresetsAreTheSeeds) {
  ASSERT_EQ(PresetNames().size(), 5u);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const Scenario d, FindPreset("default"));
  EXPECT_EQ(d.calls, 40);
  EXPECT_EQ(d.interval, 1s);
  EXPECT_EQ(d.timeout, 3s);
  ASSERT_EQ(d.outages.size(), 1u);
  EXPECT_EQ(d.outages[0].start, 11s);
  EXPECT_EQ(d.outages[0].duration, 15s);
  EXPECT_EQ(d.breaker.sliding_window_size, 10);
  EXPECT_FALSE(FindPreset("no-breaker")->breaker_enabled);
  EXPECT_EQ(FindPreset("threshold-30")->breaker.failure_rate_threshold, 30.0f);
  EXPECT_EQ(FindPreset("wait-10s")->breaker.wait_duration_in_open_state, 10s);
  EXPECT_EQ(FindPreset("short-outage")->outages[0].duration, 5s);
  EXPECT_EQ(FindPreset("short-outage")->breaker.failure_rate_threshold, 80.0f);
  EXPECT_EQ(FindPreset("nope").error().message(),
            "unknown preset \"nope\" (presets: default, no-breaker, threshold-30, wait-10s, "
            "short-outage)");
}

TEST(Scenario, DependencyModel) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Scenario s, FindPreset("default"));
  s.slowdowns = {Slowdown{TimeWindow{30s, 5s}, 1s}, Slowdown{TimeWindow{32s, 5s}, 2500ms}};
  s.error_bursts = {ErrorBurst{TimeWindow{36s, 2s}, 0.5}};
  EXPECT_EQ(s.AnswerAt(10, 0.0).kind, Answer::Kind::kOk);
  EXPECT_EQ(s.AnswerAt(11, 0.9).kind, Answer::Kind::kTimeout);
  EXPECT_TRUE(s.AnswerAt(11, 0.9).outage);
  EXPECT_EQ(s.AnswerAt(25, 0.9).duration, 3s);
  EXPECT_EQ(s.AnswerAt(26, 0.9).kind, Answer::Kind::kOk);  // [11 s, 26 s)
  EXPECT_EQ(s.AnswerAt(30, 0.9).duration, 1s);
  EXPECT_EQ(s.AnswerAt(32, 0.9).kind, Answer::Kind::kTimeout);  // 1 s + 2.5 s >= 3 s
  EXPECT_FALSE(s.AnswerAt(32, 0.9).outage);
  EXPECT_EQ(s.AnswerAt(36, 0.4).kind, Answer::Kind::kError);
  EXPECT_EQ(s.AnswerAt(36, 0.6).kind, Answer::Kind::kOk);
  // A call that would take exactly the timeout times out; a millisecond less
  // does not.
  s.slowdowns = {Slowdown{TimeWindow{40s, 1s}, s.timeout - s.latency},
                 Slowdown{TimeWindow{42s, 1s}, s.timeout - s.latency - 1ms}};
  EXPECT_EQ(s.AnswerAt(40, 0.9).kind, Answer::Kind::kTimeout);
  EXPECT_EQ(s.AnswerAt(40, 0.9).duration, s.timeout);
  EXPECT_NE(s.AnswerAt(42, 0.9).kind, Answer::Kind::kTimeout);
  EXPECT_EQ(s.AnswerAt(42, 0.9).duration, s.timeout - 1ms);
}

TEST(Scenario, YamlFile) {
  Result<Scenario> s = LoadScenarioFile(testing::TestData("slow_dependency.yaml"));
  ASSERT_TRUE(s.has_value()) << s.error();
  EXPECT_EQ(s->name, "slow-payments");
  EXPECT_EQ(s->latency, 50ms);
  ASSERT_EQ(s->slowdowns.size(), 1u);
  EXPECT_EQ(s->slowdowns[0].latency, 2s);
  EXPECT_EQ(s->breaker.slow_call_rate_threshold, 50.0f);
  EXPECT_EQ(s->breaker.slow_call_duration_threshold, 1s);
  EXPECT_TRUE(s->outages.empty());
}

TEST(Scenario, YamlStartsFromPresetOrDefaults) {
  Result<Scenario> s = ParseScenarioYaml(
      "preset: wait-10s\nrate: 2\nbreaker:\n  failureRateThreshold: 40\n", "s.yaml");
  ASSERT_TRUE(s.has_value()) << s.error();
  EXPECT_EQ(s->interval, 500ms);
  EXPECT_EQ(s->breaker.wait_duration_in_open_state, 10s);
  EXPECT_EQ(s->breaker.failure_rate_threshold, 40.0f);
  EXPECT_EQ(s->outages.size(), 1u);
  Result<Scenario> plain = ParseScenarioYaml("calls: 5\nbreaker: none\n", "s.yaml");
  ASSERT_TRUE(plain.has_value()) << plain.error();
  EXPECT_FALSE(plain->breaker_enabled);
  EXPECT_EQ(plain->breaker.sliding_window_size, 100);  // Resilience4j's default
  EXPECT_TRUE(plain->outages.empty());
}

TEST(Scenario, YamlErrorsNameLineAndColumn) {
  EXPECT_EQ(testing::ReadFile(testing::TestData("bad_key.yaml")).empty(), false);
  Result<Scenario> file = LoadScenarioFile(testing::TestData("bad_key.yaml"));
  ASSERT_FALSE(file.has_value());
  EXPECT_NE(std::string(file.error().message()).find("bad_key.yaml:4:1: unknown key \"outage\""),
            std::string::npos)
      << file.error();
  EXPECT_EQ(ErrorOf("calls: 10\ntimeout: 3 seconds\n"),
            "s.yaml:2:10: timeout: bad duration \"3 seconds\": unknown unit \" seconds\" (ns, us, "
            "ms, s, m, h, d)");
  EXPECT_EQ(ErrorOf("breaker:\n  failureRateTreshold: 30\n"),
            "s.yaml:2:3: unknown property \"failureRateTreshold\"");
  EXPECT_EQ(ErrorOf("breaker:\n  slidingWindowSize: ten\n"),
            "s.yaml:2:22: slidingWindowSize: expected an integer >= 1, got \"ten\"");
  EXPECT_EQ(ErrorOf("breaker:\n  slidingWindowSize: 0\n"),
            "s.yaml: slidingWindowSize (sliding_window_size) must be >= 1, got 0");
  EXPECT_EQ(ErrorOf("outages:\n  - {start: 1s}\n"),
            "s.yaml:2:5: outages: each item needs start, duration");
  EXPECT_EQ(ErrorOf("outages: 5s\n"), "s.yaml:1:10: outages must be a list of {start, duration}");
  EXPECT_EQ(ErrorOf("interval: 1s\nrate: 3\n"), "s.yaml:1:1: give interval or rate, not both");
  EXPECT_EQ(ErrorOf("preset: nine\n"),
            "s.yaml:1:9: unknown preset \"nine\" (presets: default, no-breaker, threshold-30, "
            "wait-10s, short-outage)");
  EXPECT_EQ(ErrorOf("- 1\n- 2\n"), "s.yaml:1:1: a scenario must be a map of keys");
  // yaml-cpp's own parse errors, with its position.
  const std::string broken = ErrorOf("calls: [1, 2\n");
  EXPECT_EQ(broken.rfind("s.yaml:", 0), 0u) << broken;
  EXPECT_NE(broken.find("end of sequence"), std::string::npos) << broken;
  EXPECT_EQ(LoadScenarioFile("/nonexistent/x.yaml").error().message(),
            "cannot read scenario file \"/nonexistent/x.yaml\"");
  // Refused after 1 MiB and a byte, not read for ever.
  EXPECT_EQ(LoadScenarioFile("/dev/zero").error().message(),
            "scenario file \"/dev/zero\" is larger than 1 MiB");
}

TEST(Scenario, Flags) {
  EXPECT_EQ(ParseWindowFlag("11s:15s")->duration, 15s);
  EXPECT_EQ(ParseSlowdownFlag("30s:5s:2s")->latency, 2s);
  EXPECT_EQ(ParseErrorBurstFlag("5s:10s:0.5")->probability, 0.5);
  EXPECT_EQ(ParseWindowFlag("11s").error().message(),
            "\"11s\": expected START:DURATION, e.g. 11s:15s");
  EXPECT_EQ(ParseWindowFlag("11s:x").error().message(),
            "\"11s:x\": bad duration \"x\": expected a non-negative integer and a unit (ns, us, "
            "ms, s, m, h, d), e.g. 5s");
  EXPECT_EQ(ParseErrorBurstFlag("5s:10s:2").error().message(),
            "\"5s:10s:2\": probability must be in [0, 1]");
  CircuitBreakerConfig c;
  EXPECT_TRUE(ApplyBreakerAssignment(c, "waitDurationInOpenState=10s").ok());
  EXPECT_EQ(c.wait_duration_in_open_state, 10s);
  EXPECT_EQ(ApplyBreakerAssignment(c, "waitDurationInOpenState").code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace fusebox::app
