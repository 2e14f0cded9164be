// Tests for `fusebox compare`: the five presets' breakers on the default
// scenario, a recorded trace, and candidate specs.
#include "apps/fusebox/compare.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "apps/fusebox/test_util.h"
#include "fusebox/testing/status_macros.h"

namespace fusebox::app {
namespace {

using namespace std::chrono_literals;

const CompareRow& Row(const std::vector<CompareRow>& rows, const std::string& label) {
  for (const CompareRow& r : rows) {
    if (r.label == label) return r;
  }
  ADD_FAILURE() << "no row " << label;
  return rows.front();
}

TEST(Compare, PresetsOnTheDefaultScenario) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const Scenario scenario, FindPreset("default"));
  Result<std::vector<CompareRow>> rows = CompareOnScenario(scenario, PresetCandidates());
  ASSERT_TRUE(rows.has_value()) << rows.error();
  ASSERT_EQ(rows->size(), 5u);
  // default: first failure at 11 s, OPEN at 15 s; 8 calls reach the dead
  // service; call 26 (healthy again) is rejected; recovery at 26 s, CLOSED at 29 s.
  const CompareRow& d = Row(*rows, "default");
  EXPECT_EQ(d.failure_to_open, 4s);
  EXPECT_EQ(d.calls_to_dead, 8);
  EXPECT_EQ(d.rejected_while_healthy, 1);
  EXPECT_EQ(d.recovery_to_closed, 3s);
  const CompareRow& none = Row(*rows, "no-breaker");
  EXPECT_EQ(none.failure_to_open, std::nullopt);
  EXPECT_EQ(none.calls_to_dead, 15);
  EXPECT_EQ(none.rejected_while_healthy, 0);
  EXPECT_EQ(none.recovery_note, "no breaker");
  const CompareRow& t30 = Row(*rows, "threshold-30");
  EXPECT_EQ(t30.failure_to_open, 2s);
  EXPECT_EQ(t30.calls_to_dead, 7);
  const CompareRow& w10 = Row(*rows, "wait-10s");
  EXPECT_EQ(w10.calls_to_dead, 6);
  EXPECT_EQ(w10.rejected_while_healthy, 0);
  EXPECT_EQ(w10.recovery_to_closed, 1s);
  // short-outage's breaker (threshold 80) on a 15 s outage: 8 of 10 at 18 s.
  const CompareRow& t80 = Row(*rows, "short-outage");
  EXPECT_EQ(t80.failure_to_open, 7s);
}

TEST(Compare, TableAndJson) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const Scenario scenario, FindPreset("default"));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const std::vector<CompareRow> rows,
                               CompareOnScenario(scenario, PresetCandidates()));
  std::ostringstream table;
  WriteCompareTable("title", rows, table);
  EXPECT_EQ(table.str(), testing::ReadFile(testing::TestData("compare_presets.table.txt")));
  std::ostringstream json;
  WriteCompareJson(rows, json);
  const std::vector<std::string> lines = testing::Lines(json.str());
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(
      lines[0],
      R"({"config":"default","settings":"slidingWindowSize=10 minimumNumberOfCalls=10 )"
      R"(failureRateThreshold=50 waitDurationInOpenState=5s permittedNumberOfCallsInHalfOpenState=3",)"
      R"("firstFailureToOpenMs":4000,"callsToDeadDependency":8,"rejectedWhileHealthy":1,)"
      R"("recoveryToClosedMs":3000,"permitted":32,"rejected":8})");
}

TEST(Compare, RecordedTrace) {
  std::istringstream in(testing::ReadFile(testing::TestData("incident.jsonl")));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const Trace trace, ReadTrace(in));
  const Candidate base{"trace", true, trace.config};
  FUSEBOX_ASSERT_OK_AND_ASSIGN(
      Candidate fast_candidate,
      ParseCandidate("fast:failureRateThreshold=30,waitDurationInOpenState=2s", base));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Candidate none_candidate, ParseCandidate("no-breaker", base));
  std::vector<Candidate> candidates = {base, fast_candidate, none_candidate};
  Result<std::vector<CompareRow>> rows = CompareOnTrace(trace, candidates);
  ASSERT_TRUE(rows.has_value()) << rows.error();
  const CompareRow& none = Row(*rows, "no-breaker");
  EXPECT_EQ(none.calls_to_dead, 40);  // every call from 10 s to 30 s, one per 500 ms
  EXPECT_EQ(none.rejected, 0);
  const CompareRow& recorded = Row(*rows, "trace");
  EXPECT_LT(recorded.calls_to_dead, 40);
  ASSERT_TRUE(recorded.failure_to_open.has_value());
  const CompareRow& fast = Row(*rows, "fast");
  ASSERT_TRUE(fast.failure_to_open.has_value());
  EXPECT_LE(*fast.failure_to_open, *recorded.failure_to_open);
  // Recovery: first success after the last failure; both close again.
  EXPECT_TRUE(recorded.recovery_to_closed.has_value()) << recorded.recovery_note;
  EXPECT_TRUE(fast.recovery_to_closed.has_value()) << fast.recovery_note;
}

TEST(Compare, Candidates) {
  const Candidate base{"base", true, FindPreset("default")->breaker};
  Result<Candidate> c = ParseCandidate("failureRateThreshold=20", base);
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->label, "failureRateThreshold=20");
  EXPECT_EQ(c->config.failure_rate_threshold, 20.0f);
  EXPECT_EQ(c->config.sliding_window_size, 10);  // the rest from the base
  c = ParseCandidate(testing::TestData("slow_dependency.yaml"), base);
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->label, "slow_dependency");
  EXPECT_EQ(c->config.slow_call_rate_threshold, 50.0f);
  EXPECT_EQ(ParseCandidate("nonsense", base).error().message(),
            "configuration \"nonsense\": not input, a preset, a .yaml file or name=value settings");
  EXPECT_EQ(ParseCandidate("x:slidingWindowSize=0", base).error().message(),
            "configuration \"x:slidingWindowSize=0\": slidingWindowSize (sliding_window_size) "
            "must be >= 1, got 0");
  EXPECT_EQ(ParseCandidate("x:bogus=1", base).error().message(),
            "configuration \"x:bogus=1\": unknown property \"bogus\"");
}

TEST(Compare, OperatorEventsAndAGrowingWaitInATrace) {
  std::istringstream in(testing::ReadFile(testing::TestData("exponential_wait.jsonl")) +
                        R"({"t": 46, "operator": "transitionToForcedOpenState"})" + "\n" +
                        R"({"t": 47, "call": "c9", "outcome": "success"})" + "\n");
  Result<Trace> trace = ReadTrace(in);
  ASSERT_TRUE(trace.has_value()) << trace.error();
  const Candidate base{"input", true, trace->config};
  Result<Candidate> faster = ParseCandidate("fast:failureRateThreshold=100", base);
  ASSERT_TRUE(faster.has_value()) << faster.error();
  Result<std::vector<CompareRow>> rows =
      CompareOnTrace(*trace, {base, *faster, *ParseCandidate("no-breaker", base)});
  ASSERT_TRUE(rows.has_value()) << rows.error();
  // input: c1 to c8 as replayed (4 of 8 rejected), then c9 rejected by
  // FORCED_OPEN; without a breaker the operator event changes nothing.
  EXPECT_EQ((*rows)[0].rejected, 4);
  EXPECT_EQ((*rows)[2].rejected, 0);
  EXPECT_EQ((*rows)[2].permitted, 9);
  EXPECT_EQ(ParseCandidate("x:waitDurationInOpenState=1s", base).error().message(),
            "configuration \"x:waitDurationInOpenState=1s\": waitDurationInOpenState cannot "
            "change here: the input's OPEN duration grows (enableExponentialBackoff or "
            "enableRandomizedWait) from its own; change the trace's config line instead");
}

TEST(Compare, MeasureEdgeCases) {
  RunFacts facts;
  facts.calls = {CallFact{1s, 1s, true, OutcomeKind::kSuccess}};
  EXPECT_EQ(Measure(facts).recovery_note, "no failure");
  facts.calls.push_back(CallFact{2s, 2s, true, OutcomeKind::kFailure});
  EXPECT_EQ(Measure(facts).recovery_note, "not recovered");
  facts.calls.push_back(CallFact{3s, 3s, true, OutcomeKind::kSuccess});
  EXPECT_EQ(Measure(facts).recovery_to_closed, Duration::zero());  // never left CLOSED
  Transition open;
  open.from = State::kClosed;
  open.to = State::kOpen;
  open.at = 2s;
  facts.transitions = {open};
  const CompareRow row = Measure(facts);
  EXPECT_EQ(row.failure_to_open, Duration::zero());
  EXPECT_EQ(row.recovery_note, "still OPEN at the end");
}

}  // namespace
}  // namespace fusebox::app
