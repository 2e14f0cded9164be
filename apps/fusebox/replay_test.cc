// Tests for `fusebox replay`: every event type, timers before events, and every
// kind of bad input, with its line number.
#include "apps/fusebox/replay.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "apps/fusebox/test_util.h"

namespace fusebox::app {
namespace {

using nlohmann::json;

struct Replayed {
  Status status;
  std::vector<json> lines;
  std::string notes;
};

Replayed Replay(const std::string& trace) {
  std::istringstream in(trace);
  std::ostringstream out, notes;
  Replayed r;
  r.status = ReplayTrace(in, out, notes);
  for (const std::string& line : testing::Lines(out.str())) r.lines.push_back(json::parse(line));
  r.notes = notes.str();
  return r;
}

std::string ErrorOf(const std::string& trace) {
  Replayed r = Replay(trace);
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument) << trace;
  return std::string(r.status.message());
}

const char* kSmall =
    R"({"config": {"slidingWindowSize": 2, "minimumNumberOfCalls": 2, "waitDurationInOpenState": "5s", "permittedNumberOfCallsInHalfOpenState": 1}})"
    "\n";

TEST(Replay, EveryEventType) {
  // testdata/all_events.jsonl: acquire, complete, call and tick; success,
  // failure (one slow) and ignored outcomes; both timers (automatic
  // transition, maximum wait in HALF_OPEN); Resilience4j compatibility.
  Replayed r = Replay(testing::ReadFile(testing::TestData("all_events.jsonl")));
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.lines.size(), 19u);
  // acquire: permitted, nothing recorded yet.
  EXPECT_EQ(r.lines[0], json::parse(R"({"t":1000,"call":"c1","permitted":true,"state":"CLOSED",
      "transitions":[],"failureRate":-1,"slowCallRate":-1})"));
  // complete: no "permitted".
  EXPECT_EQ(r.lines[2], json::parse(R"({"t":1500,"call":"c1","state":"CLOSED","transitions":[],
      "failureRate":-1,"slowCallRate":-1})"));
  // The 4th recorded outcome (c3 was ignored): 2 failures in 4 trip at 50 %;
  // c4 took 3 s > slowCallDurationThreshold 2 s: 1 slow call in 4.
  EXPECT_EQ(r.lines[6]["transitions"], json::array({"CLOSED>OPEN"}));
  EXPECT_EQ(r.lines[6]["failureRate"], 50);
  EXPECT_EQ(r.lines[6]["slowCallRate"], 25);
  EXPECT_EQ(r.lines[7]["permitted"], false);
  // tick: no "call", no "permitted". At 6000 nothing is due (OPEN until 9000).
  EXPECT_EQ(r.lines[8], json::parse(R"({"t":6000,"state":"OPEN","transitions":[],
      "failureRate":50,"slowCallRate":25})"));
  // At 9000 the automatic-transition timer, due at 9000, fires first.
  EXPECT_EQ(r.lines[9]["transitions"], json::array({"OPEN>HALF_OPEN"}));
  EXPECT_EQ(r.lines[9]["failureRate"], -1);
  EXPECT_EQ(r.lines[10]["permitted"], true);
  // One probe result of the 2 needed: HALF_OPEN waits; its 3 s maximum ends at
  // 12000 and forces OPEN before the acquire at 12000, which is rejected.
  EXPECT_EQ(r.lines[11]["transitions"], json::array({"HALF_OPEN>OPEN"}));
  EXPECT_EQ(r.lines[11]["permitted"], false);
  // OPEN until 17000: HALF_OPEN again, two probes in, the third rejected.
  EXPECT_EQ(r.lines[12]["transitions"], json::array({"OPEN>HALF_OPEN"}));
  EXPECT_EQ(r.lines[13]["permitted"], true);
  EXPECT_EQ(r.lines[14]["permitted"], false);
  // c10's ignored outcome gives its slot back, so c12 gets in and decides.
  EXPECT_EQ(r.lines[17]["permitted"], true);
  EXPECT_EQ(r.lines[17]["transitions"], json::array({"HALF_OPEN>CLOSED"}));
  EXPECT_EQ(r.lines[18]["state"], "CLOSED");
  EXPECT_EQ(r.notes, "");
}

TEST(Replay, ExactStateSequence) {
  // The whole run, line by line: testdata/all_events.out.jsonl is also the
  // golden file of the ctest app.cli.replay_all_events.
  std::istringstream in(testing::ReadFile(testing::TestData("all_events.jsonl")));
  std::ostringstream out, notes;
  ASSERT_TRUE(ReplayTrace(in, out, notes).ok());
  EXPECT_EQ(out.str(), testing::ReadFile(testing::TestData("all_events.out.jsonl")));
}

TEST(Replay, TimerDueAtAnEventFiresBeforeIt) {
  const std::string trace =
      std::string(
          R"({"config": {"slidingWindowSize": 2, "minimumNumberOfCalls": 2, "waitDurationInOpenState": "5s", "automaticTransitionFromOpenToHalfOpenEnabled": true}})") +
      "\n" + R"({"t": 0, "call": "a", "outcome": "failure"})" + "\n" +
      R"({"t": 0, "call": "b", "outcome": "failure"})" + "\n" +
      R"({"t": 4999, "call": "c", "outcome": "success"})" + "\n" +
      R"({"t": 5000, "call": "d", "outcome": "success"})" + "\n";
  Replayed r = Replay(trace);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.lines[1]["transitions"], json::array({"CLOSED>OPEN"}));
  EXPECT_EQ(r.lines[2]["permitted"], false);
  EXPECT_EQ(r.lines[3]["transitions"], json::array({"OPEN>HALF_OPEN"}));
  EXPECT_EQ(r.lines[3]["permitted"], true);
}

TEST(Replay, LazyTransitionIsStrictlyAfterTheWait) {
  const std::string trace = std::string(kSmall) + R"({"t": 0, "call": "a", "outcome": "failure"})" +
                            "\n" + R"({"t": 0, "call": "b", "outcome": "failure"})" + "\n" +
                            R"({"t": 5000, "call": "c", "outcome": "success"})" + "\n" +
                            R"({"t": 5001, "call": "d", "outcome": "success", "durationMs": 7})" +
                            "\n";
  Replayed r = Replay(trace);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.lines[2]["permitted"], false);
  // One event, two transitions: the acquire moves to HALF_OPEN, the probe's
  // success decides at once (1 permitted probe).
  EXPECT_EQ(r.lines[3]["transitions"], json::array({"OPEN>HALF_OPEN", "HALF_OPEN>CLOSED"}));
  EXPECT_EQ(r.lines[3]["state"], "CLOSED");
}

TEST(Replay, FloatRatesAsResilience4jReportsThem) {
  const std::string trace =
      R"({"config": {"slidingWindowSize": 3, "minimumNumberOfCalls": 3, "failureRateThreshold": 90}})"
      "\n"
      R"({"t": 1, "call": "a", "outcome": "failure"})"
      "\n"
      R"({"t": 2, "call": "b", "outcome": "success"})"
      "\n"
      R"({"t": 3, "call": "c", "outcome": "success"})"
      "\n";
  std::istringstream in(trace);
  std::ostringstream out, notes;
  ASSERT_TRUE(ReplayTrace(in, out, notes).ok());
  EXPECT_NE(out.str().find(R"("failureRate":33.333332,"slowCallRate":0})"), std::string::npos)
      << out.str();
}

TEST(Replay, UnfinishedCallsAreNoted) {
  Replayed r = Replay(std::string(kSmall) + R"({"t": 1, "acquire": "x"})" + "\n" +
                      R"({"t": 1, "acquire": "y"})" + "\n");
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.notes, "note: 2 call(s) acquired and never completed: x, y\n");
}

TEST(Replay, Errors) {
  const std::string c = kSmall;
  EXPECT_EQ(ErrorOf(""), "line 1: empty trace: no config line");
  EXPECT_EQ(ErrorOf("{\"config\": {\"slidingWindowSize\": 2}\n"),
            "line 1: broken JSON (at column 36: syntax error while parsing object - unexpected "
            "end of input; expected '}')");
  EXPECT_EQ(ErrorOf(R"({"t": 0, "tick": true})"),
            "line 1: the first line must be {\"config\": {...}} with Resilience4j's property names "
            "(slidingWindowSize, failureRateThreshold, ...)");
  EXPECT_EQ(ErrorOf(R"({"config": {"ringBufferSizeInClosedState": 5}})"),
            "line 1: config: unknown property \"ringBufferSizeInClosedState\"");
  EXPECT_EQ(ErrorOf(R"({"config": {"waitDurationInOpenState": "5 s"}})"),
            "line 1: config: waitDurationInOpenState: expected a duration such as 5s, 250ms or 1m "
            "(a bare integer is milliseconds), got \"5 s\"");
  EXPECT_EQ(ErrorOf(R"({"config": {"slidingWindowSize": [1]}})"),
            "line 1: config: slidingWindowSize: expected an integer >= 1, got [1]");
  // A window too large to allocate is refused by the config layer, not by
  // bad_alloc.
  EXPECT_EQ(
      ErrorOf(
          R"({"config": {"slidingWindowType": "TIME_BASED", "slidingWindowSize": 2147483647}})"),
      "line 1: config: slidingWindowSize (sliding_window_size) must be <= 86400 (seconds, "
      "TIME_BASED), got 2147483647");
  EXPECT_EQ(ErrorOf(R"({"config": {"failureRateThreshold": 0}})"),
            "line 1: config: failureRateThreshold (failure_rate_threshold) must be in (0, 100], "
            "got 0.000000");
  EXPECT_EQ(ErrorOf(c + "\n{\"t\": 1, \"acquire\": \"a\"\n"),
            "line 3: broken JSON (at column 24: syntax error while parsing object - unexpected "
            "end of input; expected '}')");
  EXPECT_EQ(ErrorOf(c + R"({"t": 1, "acquire": "a", "colour": "red"})"),
            "line 2: unknown field \"colour\"");
  EXPECT_EQ(ErrorOf(c + R"({"t": 1, "acquire": "a", "outcome": "success"})"),
            "line 2: field \"outcome\" does not belong to an acquire event");
  EXPECT_EQ(
      ErrorOf(c + R"({"t": 1, "acquire": "a", "tick": true})"),
      "line 2: several events on one line: give exactly one of acquire, complete, call, tick");
  EXPECT_EQ(ErrorOf(c + R"({"t": 1})"),
            "line 2: no event: give exactly one of acquire, complete, call, tick");
  EXPECT_EQ(ErrorOf(c + R"({"acquire": "a"})"), "line 2: missing field \"t\" (milliseconds)");
  EXPECT_EQ(ErrorOf(c + R"({"t": -5, "acquire": "a"})"),
            "line 2: t must be a non-negative integer of milliseconds, got -5");
  EXPECT_EQ(ErrorOf(c + R"({"t": 1.5, "acquire": "a"})"),
            "line 2: t must be a non-negative integer of milliseconds, got 1.5");
  EXPECT_EQ(ErrorOf(c + R"({"t": 1, "acquire": 7})"),
            "line 2: acquire must be a non-empty string (the call's id), got 7");
  EXPECT_EQ(ErrorOf(c + R"({"t": 1, "tick": false})"), "line 2: tick must be true");
  EXPECT_EQ(ErrorOf(c + R"({"t": 1, "call": "a"})"),
            "line 2: missing field \"outcome\" (success, failure or ignored)");
  EXPECT_EQ(ErrorOf(c + R"({"t": 1, "call": "a", "outcome": "timeout"})"),
            "line 2: outcome must be \"success\", \"failure\" or \"ignored\", got \"timeout\"");
  EXPECT_EQ(ErrorOf(c + R"({"t": 1, "call": "a", "outcome": "success", "durationMs": "5"})"),
            "line 2: durationMs must be a non-negative integer, got \"5\"");
  EXPECT_EQ(ErrorOf(c + "[1, 2]\n"), "line 2: an event must be a JSON object");
  EXPECT_EQ(ErrorOf(c + "\n\n" + R"({"t": 1, "complete": "ghost", "outcome": "success"})"),
            "line 4: complete of unknown call \"ghost\": no acquire for it holds a permit");
  EXPECT_EQ(ErrorOf(c + R"({"t": 1, "acquire": "a"})" + "\n" + R"({"t": 2, "acquire": "a"})"),
            "line 3: call \"a\" already holds a permit (acquired at line 2)");
  EXPECT_EQ(ErrorOf(c + R"({"t": 5, "tick": true})" + "\n" + R"({"t": 4, "tick": true})"),
            "line 3: t goes backwards: 4 after 5");
  EXPECT_EQ(ErrorOf(c + R"({"config": {}})"), "line 2: config is only allowed on the first line");
  // A call rejected in OPEN and completed later: an error in replay.
  EXPECT_EQ(ErrorOf(c + R"({"t": 0, "call": "a", "outcome": "failure"})" + "\n" +
                    R"({"t": 0, "call": "b", "outcome": "failure"})" + "\n" +
                    R"({"t": 1, "acquire": "c"})" + "\n" +
                    R"({"t": 2, "complete": "c", "outcome": "success"})"),
            "line 5: complete of call \"c\", which was rejected at line 4 and holds no permit");
}

TEST(Replay, LineLengthIsBounded) {
  const std::string c = kSmall;
  const std::string longest =
      R"({"t": 1, "tick": true})" + std::string(kMaxTraceLineBytes - 22, ' ');
  ASSERT_EQ(longest.size(), kMaxTraceLineBytes);
  EXPECT_TRUE(Replay(c + longest + "\n").status.ok());
  EXPECT_EQ(ErrorOf(c + "\n" + longest + " \n"),
            "line 3: longer than 65536 bytes, the maximum for a trace line");
  // On the config line, and without a newline at the end of the input.
  EXPECT_EQ(ErrorOf(std::string(10 * kMaxTraceLineBytes, '{')),
            "line 1: longer than 65536 bytes, the maximum for a trace line");
  std::istringstream in(c + std::string(kMaxTraceLineBytes + 1, 'x'));
  EXPECT_EQ(ReadTrace(in).error().message(),
            "line 2: longer than 65536 bytes, the maximum for a trace line");
}

TEST(Replay, OutputBeforeTheErrorIsKept) {
  Replayed r = Replay(std::string(kSmall) + R"({"t": 1, "tick": true})" + "\n" + "oops\n");
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.lines.size(), 1u);
  EXPECT_EQ(std::string(r.status.message()).rfind("line 3: broken JSON", 0), 0u) << r.status;
}

TEST(Replay, ReadTraceForCompare) {
  std::istringstream in(testing::ReadFile(testing::TestData("incident.jsonl")));
  Result<Trace> t = ReadTrace(in);
  ASSERT_TRUE(t.has_value()) << t.error();
  EXPECT_EQ(t->config.sliding_window_size, 20);
  EXPECT_EQ(t->events.size(), 160u);
  EXPECT_EQ(t->events[0].line, 2);
}

}  // namespace
}  // namespace fusebox::app
