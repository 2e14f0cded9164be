// Tests for Simulate() and its JSON lines: the five presets of seed 004 give
// the timelines src/seed004_scenarios_test.cc derives for the core breaker.
#include "apps/fusebox/sim.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "apps/fusebox/test_util.h"
#include "fusebox/testing/status_macros.h"

namespace fusebox::app {
namespace {

using namespace std::chrono_literals;

// The run of preset `name` (FUSEBOX_ASSERT_OK_AND_ASSIGN fails the test if
// there is none or it does not run).
Result<SimRun> RunPreset(const std::string& name) {
  Result<Scenario> preset = FindPreset(name);
  if (!preset) return preset.error();
  return Simulate(*preset);
}

// One character per call: S success, F failure, R rejected; and the state
// after it: C, O, H (D for DISABLED).
std::pair<std::string, std::string> Timeline(const SimRun& run) {
  std::string result, state;
  for (const CallRecord& rec : run.calls) {
    result += "SFR"[static_cast<int>(rec.result)];
    switch (rec.metrics.state) {
      case State::kClosed:
        state += 'C';
        break;
      case State::kOpen:
        state += 'O';
        break;
      case State::kHalfOpen:
        state += 'H';
        break;
      case State::kDisabled:
        state += 'D';
        break;
      default:
        state += '?';
    }
  }
  return {result, state};
}

std::string States(const SimSummary& s) {
  std::string out;
  for (State st : s.states) out += (out.empty() ? "" : ">") + std::string(StateName(st));
  return out;
}

TEST(Sim, DefaultPresetIsTheSeedsTimeline) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run, RunPreset("default"));
  EXPECT_EQ(Timeline(run).first, "SSSSSSSSSSFFFFFRRRRFFFRRRRSSSSSSSSSSSSSS");
  EXPECT_EQ(Timeline(run).second, "CCCCCCCCCCCCCCOOOOOHHOOOOOHHCCCCCCCCCCCC");
  EXPECT_EQ(States(run.summary), "CLOSED>OPEN>HALF_OPEN>OPEN>HALF_OPEN>CLOSED");
  EXPECT_EQ(run.summary.successes, 24);
  EXPECT_EQ(run.summary.failures, 8);
  EXPECT_EQ(run.summary.rejections, 8);
  EXPECT_EQ(run.summary.thread_time, 24s);
  EXPECT_EQ(run.summary.thread_time_without_breaker, 45s);
  EXPECT_EQ(run.summary.calls_to_down_dependency, 8);
  EXPECT_EQ(run.summary.calls_to_down_dependency_without_breaker, 15);
  // The timing model: call k at k s + k ms.
  EXPECT_EQ(run.hair, 1ms);
  EXPECT_EQ(run.calls[19].at, 20s + 20ms);
  EXPECT_EQ(run.calls[19].probe, 1);
  EXPECT_EQ(run.calls[21].probe, 3);
}

TEST(Sim, OtherPresets) {
  struct Want {
    const char* name;
    const char* result;
    const char* state;
    const char* states;
    int successes, failures, rejections;
  };
  for (const Want& w : {
           Want{"threshold-30", "SSSSSSSSSSFFFRRRRFFFRRRRFSSRRRRSSSSSSSSS",
                "CCCCCCCCCCCCOOOOOHHOOOOOHHOOOOOHHCCCCCCC",
                "CLOSED>OPEN>HALF_OPEN>OPEN>HALF_OPEN>OPEN>HALF_OPEN>CLOSED", 21, 7, 12},
           Want{"wait-10s", "SSSSSSSSSSFFFFFRRRRRRRRRFSSSSSSSSSSSSSSS",
                "CCCCCCCCCCCCCCOOOOOOOOOOHHCCCCCCCCCCCCCC", "CLOSED>OPEN>HALF_OPEN>CLOSED", 25, 6,
                9},
           Want{"short-outage", "SSSSSSSSSSFFFFFSSSSSSSSSSSSSSSSSSSSSSSSS",
                "CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCC", "CLOSED", 35, 5, 0},
           Want{"no-breaker", "SSSSSSSSSSFFFFFFFFFFFFFFFSSSSSSSSSSSSSSS",
                "DDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDD", "DISABLED", 25, 15, 0},
       }) {
    FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run, RunPreset(w.name));
    EXPECT_EQ(Timeline(run).first, w.result) << w.name;
    EXPECT_EQ(Timeline(run).second, w.state) << w.name;
    EXPECT_EQ(States(run.summary), w.states) << w.name;
    EXPECT_EQ(run.summary.successes, w.successes) << w.name;
    EXPECT_EQ(run.summary.failures, w.failures) << w.name;
    EXPECT_EQ(run.summary.rejections, w.rejections) << w.name;
  }
}

// A call exactly as long as slowCallDurationThreshold is not slow (as the
// breaker counts it); a millisecond more is.
TEST(Sim, ACallAtTheSlowThresholdIsNotSlow) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Scenario s, FindPreset("default"));
  s.outages.clear();
  s.breaker.slow_call_duration_threshold = std::chrono::seconds(1);
  s.latency = std::chrono::seconds(1);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun at, Simulate(s));
  ASSERT_FALSE(at.calls.empty());
  for (const CallRecord& rec : at.calls) EXPECT_FALSE(rec.slow);
  s.latency = std::chrono::seconds(1) + std::chrono::milliseconds(1);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun over, Simulate(s));
  ASSERT_FALSE(over.calls.empty());
  EXPECT_TRUE(over.calls.front().slow);
}

TEST(Sim, JsonLinesSchema) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run, RunPreset("default"));
  std::ostringstream out;
  WriteSimJson(run, out);
  const std::vector<std::string> lines = testing::Lines(out.str());
  ASSERT_EQ(lines.size(), 41u);
  for (int k = 1; k <= 40; ++k) {
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(lines[k - 1]);
    std::vector<std::string> keys;
    for (const auto& [key, value] : j.items()) keys.push_back(key);
    EXPECT_EQ(keys, (std::vector<std::string>{"t", "call", "result", "state", "transitions"}));
    EXPECT_EQ(j["t"], k * 1000 + k);
    EXPECT_EQ(j["call"], k);
    EXPECT_TRUE(std::set<std::string>({"success", "failure", "rejected"}).count(j["result"]));
    EXPECT_TRUE(j["state"].is_string());
    EXPECT_TRUE(j["transitions"].is_array());
  }
  const nlohmann::json line15 = nlohmann::json::parse(lines[14]);
  EXPECT_EQ(line15["result"], "failure");
  EXPECT_EQ(line15["state"], "OPEN");
  EXPECT_EQ(line15["transitions"], nlohmann::json::array({"CLOSED>OPEN"}));
  const nlohmann::json line20 = nlohmann::json::parse(lines[19]);
  EXPECT_EQ(line20["transitions"], nlohmann::json::array({"OPEN>HALF_OPEN"}));
  const nlohmann::json summary = nlohmann::json::parse(lines[40])["summary"];
  EXPECT_EQ(summary["states"],
            nlohmann::json::array({"CLOSED", "OPEN", "HALF_OPEN", "OPEN", "HALF_OPEN", "CLOSED"}));
  EXPECT_EQ(summary["successes"], 24);
  EXPECT_EQ(summary["failures"], 8);
  EXPECT_EQ(summary["rejections"], 8);
  EXPECT_EQ(summary["threadSeconds"], 24);
  EXPECT_EQ(summary["threadSecondsWithoutBreaker"], 45);
  EXPECT_EQ(summary["threadSecondsSaved"], 21);
  EXPECT_EQ(summary["callsToDownDependency"], 8);
  EXPECT_EQ(summary["callsToDownDependencyWithoutBreaker"], 15);
}

TEST(Sim, HairStaysBelowHalfAnIntervalForFastCallRates) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Scenario s, FindPreset("default"));
  s.interval = 10ms;
  s.calls = 1000;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run, Simulate(s));
  EXPECT_EQ(run.hair, 5us);
  EXPECT_LE(run.calls.back().at - run.calls.back().nominal, s.interval / 2);
}

TEST(Sim, ErrorDrawsAreSeededAndIndependentOfTheBreaker) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Scenario s, FindPreset("default"));
  s.outages.clear();
  s.failure_probability = 0.3;
  s.seed = 7;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun a, Simulate(s));
  s.breaker_enabled = false;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun b, Simulate(s));
  EXPECT_EQ(a.summary.calls_to_down_dependency_without_breaker,
            b.summary.calls_to_down_dependency_without_breaker);
  for (std::size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].answer.kind, b.calls[i].answer.kind) << i;
  }
  s.seed = 8;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun c, Simulate(s));
  bool differs = false;
  for (std::size_t i = 0; i < a.calls.size(); ++i) {
    differs = differs || a.calls[i].answer.kind != c.calls[i].answer.kind;
  }
  EXPECT_TRUE(differs);
}

TEST(Sim, AutomaticTransitionFiresAtItsDeadlineBetweenCalls) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Scenario s, FindPreset("default"));
  s.breaker.automatic_transition_from_open_to_half_open_enabled = true;
  s.breaker.wait_duration_in_open_state = 4500ms;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run, Simulate(s));
  // OPEN at call 15 (15.015 s); the timer moves it to HALF_OPEN at 19.515 s,
  // before call 20 arrives.
  ASSERT_EQ(run.calls[19].on_clock.size(), 1u);
  EXPECT_EQ(run.calls[19].on_clock[0].to, State::kHalfOpen);
  EXPECT_EQ(run.calls[19].on_clock[0].at, 19515ms);
}

TEST(Sim, InvalidScenarioIsRejected) {
  Scenario s;
  s.calls = 0;
  EXPECT_EQ(Simulate(s).error().code(), StatusCode::kInvalidArgument);
  s = Scenario{};
  s.breaker.sliding_window_size = 0;
  EXPECT_NE(std::string(Simulate(s).error().message()).find("slidingWindowSize"),
            std::string::npos);
}

}  // namespace
}  // namespace fusebox::app
