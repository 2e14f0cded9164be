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
      "transitions":[],"failureRate":-1,"slowCallRate":-1,"numberOfBufferedCalls":0,
      "numberOfFailedCalls":0,"numberOfSlowCalls":0,"numberOfSlowSuccessfulCalls":0,
      "numberOfSlowFailedCalls":0,"numberOfSuccessfulCalls":0,"numberOfNotPermittedCalls":0})"));
  // complete: no "permitted".
  EXPECT_EQ(r.lines[2], json::parse(R"({"t":1500,"call":"c1","state":"CLOSED","transitions":[],
      "failureRate":-1,"slowCallRate":-1,"numberOfBufferedCalls":2,"numberOfFailedCalls":0,
      "numberOfSlowCalls":0,"numberOfSlowSuccessfulCalls":0,"numberOfSlowFailedCalls":0,
      "numberOfSuccessfulCalls":2,"numberOfNotPermittedCalls":0})"));
  // The 4th recorded outcome (c3 was ignored): 2 failures in 4 trip at 50 %;
  // c4 took 3 s > slowCallDurationThreshold 2 s: 1 slow call in 4.
  EXPECT_EQ(r.lines[6]["transitions"], json::array({"CLOSED>OPEN"}));
  EXPECT_EQ(r.lines[6]["failureRate"], 50);
  EXPECT_EQ(r.lines[6]["slowCallRate"], 25);
  EXPECT_EQ(r.lines[7]["permitted"], false);
  // tick: no "call", no "permitted". At 6000 nothing is due (OPEN until 9000).
  // The counts are the tripped window's, and CLOSED's rejection count goes on
  // into OPEN (c6).
  EXPECT_EQ(r.lines[8], json::parse(R"({"t":6000,"state":"OPEN","transitions":[],
      "failureRate":50,"slowCallRate":25,"numberOfBufferedCalls":4,"numberOfFailedCalls":2,
      "numberOfSlowCalls":1,"numberOfSlowSuccessfulCalls":0,"numberOfSlowFailedCalls":1,
      "numberOfSuccessfulCalls":2,"numberOfNotPermittedCalls":1})"));
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

// Replays `name` from testdata with its "compatibility" replaced by `mode`.
Replayed ReplayIn(const std::string& name, const std::string& mode) {
  std::string trace = testing::ReadFile(testing::TestData(name));
  const std::string r4j = R"("compatibility": "resilience4j")";
  const std::size_t at = trace.find(r4j);
  EXPECT_NE(at, std::string::npos) << name;
  if (at != std::string::npos) {
    trace.replace(at, r4j.size(), R"("compatibility": ")" + mode + '"');
  }
  return Replay(trace);
}

TEST(Replay, OperatorEventsCallResilience4jsMethods) {
  // testdata/operator_events.jsonl, in compatibility: resilience4j; its whole
  // output is testdata/operator_events.out.jsonl (ctest app.cli.replay_operator_events).
  Replayed r = ReplayIn("operator_events.jsonl", "resilience4j");
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.lines.size(), 21u);
  // CLOSED -> HALF_OPEN is illegal: refused, state and window kept.
  EXPECT_EQ(r.lines[1]["operator"], "transitionToHalfOpenState");
  EXPECT_EQ(r.lines[1]["refused"],
            "illegal state transition from CLOSED to HALF_OPEN (breaker \"replay\")");
  EXPECT_EQ(r.lines[1]["state"], "CLOSED");
  EXPECT_EQ(r.lines[1]["numberOfFailedCalls"], 1);
  EXPECT_FALSE(r.lines[1].contains("call"));
  // CLOSED -> CLOSED: a fresh window, no event.
  EXPECT_EQ(r.lines[2]["transitions"], json::array());
  EXPECT_EQ(r.lines[2]["numberOfBufferedCalls"], 0);
  EXPECT_EQ(r.lines[4]["transitions"], json::array({"CLOSED>FORCED_OPEN"}));
  EXPECT_EQ(r.lines[5]["permitted"], false);
  EXPECT_EQ(r.lines[5]["numberOfNotPermittedCalls"], 1);
  EXPECT_EQ(r.lines[6]["transitions"], json::array());  // FORCED_OPEN again
  EXPECT_EQ(r.lines[7]["transitions"], json::array({"FORCED_OPEN>DISABLED"}));
  EXPECT_EQ(r.lines[8]["numberOfBufferedCalls"], 0);  // DISABLED records nothing
  EXPECT_EQ(r.lines[9]["transitions"], json::array({"DISABLED>METRICS_ONLY"}));
  // METRICS_ONLY records (a slow failure) and never trips.
  EXPECT_EQ(r.lines[10]["numberOfSlowFailedCalls"], 1);
  EXPECT_EQ(r.lines[10]["state"], "METRICS_ONLY");
  // METRICS_ONLY -> OPEN and -> HALF_OPEN are illegal too.
  EXPECT_EQ(r.lines[11]["refused"],
            "illegal state transition from METRICS_ONLY to OPEN (breaker \"replay\")");
  EXPECT_EQ(r.lines[12]["refused"],
            "illegal state transition from METRICS_ONLY to HALF_OPEN (breaker \"replay\")");
  // reset from METRICS_ONLY is a transition; from CLOSED it is none.
  EXPECT_EQ(r.lines[13]["transitions"], json::array({"METRICS_ONLY>CLOSED"}));
  EXPECT_EQ(r.lines[14]["transitions"], json::array());
  // transitionToOpenState keeps the window it trips from.
  EXPECT_EQ(r.lines[16]["transitions"], json::array({"CLOSED>OPEN"}));
  EXPECT_EQ(r.lines[16]["numberOfFailedCalls"], 1);
  EXPECT_EQ(r.lines[17]["permitted"], false);
  EXPECT_EQ(r.lines[18]["transitions"], json::array({"OPEN>HALF_OPEN"}));
  EXPECT_EQ(r.lines[19]["permitted"], true);
  EXPECT_EQ(r.lines[20]["transitions"], json::array({"HALF_OPEN>OPEN"}));
}

TEST(Replay, OperatorEventsInTheDefaultModeTakeEveryMove) {
  Replayed r = ReplayIn("operator_events.jsonl", "default");
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.lines.size(), 21u);
  for (const json& line : r.lines) EXPECT_FALSE(line.contains("refused")) << line;
  EXPECT_EQ(r.lines[1]["transitions"], json::array({"CLOSED>HALF_OPEN"}));
  EXPECT_EQ(r.lines[2]["transitions"], json::array({"HALF_OPEN>CLOSED"}));
  EXPECT_EQ(r.lines[6]["transitions"], json::array({"FORCED_OPEN>FORCED_OPEN"}));
  EXPECT_EQ(r.lines[11]["transitions"], json::array({"METRICS_ONLY>OPEN"}));
  EXPECT_EQ(r.lines[14]["transitions"], json::array({"CLOSED>CLOSED"}));
}

TEST(Replay, ExponentialWaitIsWholeMillisecondsInResilience4jMode) {
  // 7 ms x 1.3: Resilience4j waits 7, 9, 11, 14 ms, so OPEN ends at 44 and
  // the call at 45 is admitted; the exact waits (15.379 ms for the fourth)
  // keep the default mode OPEN until 45.379.
  Replayed r4j = ReplayIn("exponential_wait.jsonl", "resilience4j");
  ASSERT_TRUE(r4j.status.ok()) << r4j.status;
  std::vector<bool> permitted;
  for (const json& line : r4j.lines) permitted.push_back(line["permitted"]);
  EXPECT_EQ(permitted, (std::vector<bool>{true, true, false, true, false, true, false, true}));
  EXPECT_EQ(r4j.lines[7]["transitions"], json::array({"OPEN>HALF_OPEN", "HALF_OPEN>CLOSED"}));

  Replayed exact = ReplayIn("exponential_wait.jsonl", "default");
  ASSERT_TRUE(exact.status.ok()) << exact.status;
  EXPECT_EQ(exact.lines[7]["permitted"], false);
  EXPECT_EQ(exact.lines[7]["state"], "OPEN");
}

TEST(Replay, RandomizedWaitIsReproducibleBySeed) {
  const std::string config =
      R"({"config": {"slidingWindowSize": 1, "minimumNumberOfCalls": 1, "waitDurationInOpenState": "1s", "enableRandomizedWait": true, "randomizedWaitFactor": 0.5, "jitterSeed": 42, "compatibility": "resilience4j"}})"
      "\n";
  // Probe every millisecond from 500 to 1500 after the trip: the first one
  // admitted ends the wait, which is whole milliseconds in [500, 1500).
  std::string trace = config + R"({"t": 0, "call": "trip", "outcome": "failure"})" + "\n";
  for (int t = 500; t <= 1500; ++t) {
    trace += R"({"t": )" + std::to_string(t) + R"(, "call": "p)" + std::to_string(t) +
             R"(", "outcome": "success"})" + "\n";
  }
  Replayed a = Replay(trace);
  Replayed b = Replay(trace);
  ASSERT_TRUE(a.status.ok()) << a.status;
  int first = -1;
  for (std::size_t i = 1; i < a.lines.size(); ++i) {
    if (a.lines[i]["permitted"] == true) {
      first = a.lines[i]["t"];
      break;
    }
  }
  EXPECT_GT(first, 500);
  EXPECT_LE(first, 1500);
  EXPECT_EQ(a.lines, b.lines);
}

TEST(Replay, ThresholdIsReadFromItsTextAsJavasFloatParseFloat) {
  // 50.000001907348633 is Float.parseFloat's 50.000004: 1 failure in 2 (50 %)
  // stays below it. Read through a double it would be 50, and trip.
  for (const char* mode : {"resilience4j", "default"}) {
    Replayed r = ReplayIn("float_threshold.jsonl", mode);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.lines[1]["failureRate"], 50) << mode;
    EXPECT_EQ(r.lines[1]["state"], "CLOSED") << mode;
  }
}

TEST(Replay, BackoffPropertiesAreCheckedAsInAFile) {
  EXPECT_EQ(
      ErrorOf(
          R"({"config": {"waitDurationInOpenState": "1s", "enableExponentialBackoff": true, "exponentialBackoffMultiplier": 0.5}})"
          "\n"),
      "line 1: config: exponentialBackoffMultiplier (open_backoff.multiplier) must be >= 1, got "
      "0.5");
  EXPECT_EQ(ErrorOf(R"({"config": {"enableExponentialBackoff": "yes"}})"
                    "\n"),
            "line 1: config: enableExponentialBackoff: expected true or false, got \"yes\"");
  EXPECT_EQ(ErrorOf(std::string(kSmall) + R"({"t": 1, "operator": "forceOpen"})" + "\n"),
            "line 2: operator must be one of Resilience4j's methods transitionToForcedOpenState, "
            "transitionToDisabledState, transitionToMetricsOnlyState, transitionToClosedState, "
            "transitionToOpenState, transitionToHalfOpenState, reset, got \"forceOpen\"");
  EXPECT_EQ(ErrorOf(std::string(kSmall) + R"({"t": 1, "operator": "reset", "outcome": "failure"})" +
                    "\n"),
            "line 2: field \"outcome\" does not belong to an operator event");
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
  EXPECT_NE(out.str().find(R"("failureRate":33.333332,"slowCallRate":0,)"), std::string::npos)
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
      "line 2: several events on one line: give exactly one of acquire, complete, call, tick, "
      "operator");
  EXPECT_EQ(ErrorOf(c + R"({"t": 1})"),
            "line 2: no event: give exactly one of acquire, complete, call, tick, operator");
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

// CompareWithRecorded(): `fusebox replay --expect`.
struct Compared {
  Result<int> differences = 0;
  std::string report;
};

Compared CompareLines(const std::string& replayed, const std::string& recorded) {
  std::istringstream a(replayed), b(recorded);
  std::ostringstream report;
  Compared c;
  c.differences = CompareWithRecorded(a, b, report);
  c.report = report.str();
  return c;
}

TEST(Replay, ExpectComparesEveryFieldPresentInBoth) {
  const std::string ours =
      R"({"t":1,"call":"a","permitted":true,"state":"CLOSED","transitions":[],"failureRate":33.333332,"slowCallRate":-1,"numberOfFailedCalls":1,"numberOfBufferedCalls":3})"
      "\n";
  // The same, the rate spelled as Java's double of the float, and a recording
  // made before the counts were printed.
  const std::string same =
      R"({"t":1,"call":"a","permitted":true,"state":"CLOSED","transitions":[],"failureRate":33.33333206176758,"slowCallRate":-1})"
      "\n";
  Compared c = CompareLines(ours, same);
  ASSERT_TRUE(c.differences.has_value()) << c.differences.error();
  EXPECT_EQ(*c.differences, 0) << c.report;

  const std::string other =
      R"({"t":1,"call":"a","permitted":true,"state":"OPEN","transitions":["CLOSED>OPEN"],"failureRate":33.333332,"slowCallRate":-1,"numberOfFailedCalls":2,"numberOfBufferedCalls":3})"
      "\n";
  c = CompareLines(ours, other);
  ASSERT_TRUE(c.differences.has_value()) << c.differences.error();
  EXPECT_EQ(*c.differences, 3);
  EXPECT_EQ(c.report,
            "line 1: state: fusebox \"CLOSED\", recorded \"OPEN\"\n"
            "line 1: transitions: fusebox [], recorded [\"CLOSED>OPEN\"]\n"
            "line 1: numberOfFailedCalls: fusebox 1, recorded 2\n");
}

TEST(Replay, ExpectReportsAnEventOnOneSideOnly) {
  const std::string line = R"({"t":1,"state":"CLOSED"})"
                           "\n";
  Compared c = CompareLines(line + line, line);
  ASSERT_TRUE(c.differences.has_value());
  EXPECT_EQ(*c.differences, 1);
  EXPECT_EQ(c.report, "line 2: only fusebox has this event\n");
  c = CompareLines(line, "\n[1]\n");
  ASSERT_FALSE(c.differences.has_value());
  EXPECT_EQ(c.differences.error().message(), "line 2: recorded: not a JSON object");
}

}  // namespace
}  // namespace fusebox::app
