#include "apps/fusebox/sim.h"

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>

#include "apps/fusebox/step_clock.h"

namespace fusebox::app {
namespace {

using namespace std::chrono_literals;

Json JsonSeconds(Duration d) {
  if (d.count() % 1000000000 == 0) return static_cast<long long>(d.count() / 1000000000);
  return static_cast<double>(d.count()) / 1e9;
}

}  // namespace

std::string_view CallResultName(CallResult result) {
  switch (result) {
    case CallResult::kSuccess:
      return "success";
    case CallResult::kFailure:
      return "failure";
    case CallResult::kRejected:
      return "rejected";
  }
  return "unknown";
}

std::vector<Transition> CallRecord::AllTransitions() const {
  std::vector<Transition> all = on_clock;
  all.insert(all.end(), on_acquire.begin(), on_acquire.end());
  all.insert(all.end(), on_outcome.begin(), on_outcome.end());
  return all;
}

Result<SimRun> Simulate(const Scenario& scenario) {
  if (Status s = scenario.Validate(); !s.ok()) return s;
  SimRun run;
  run.scenario = scenario;
  run.hair = std::clamp<Duration>(scenario.interval / (2 * scenario.calls), 1ns, 1ms);

  StepClock clock;
  Result<std::unique_ptr<CircuitBreaker>> created =
      CircuitBreaker::Create("payment", scenario.breaker, clock);
  if (!created) return created.error();
  std::unique_ptr<CircuitBreaker> breaker = std::move(*created);
  if (!scenario.breaker_enabled) {
    // No breaker: a DISABLED one lets everything through and records nothing.
    breaker->Disable({.reason = "no breaker", .actor = "fusebox sim"});
  }
  auto log = std::make_shared<TransitionLog>(StepClock::kStart);
  breaker->AddListener(log);

  // One draw per call, from a generator whose output the standard fixes, turned
  // into [0, 1) by hand (the standard distributions differ between libraries).
  std::mt19937_64 rng(scenario.seed);
  SimSummary& sum = run.summary;
  sum.states.push_back(breaker->state());
  int probes = 0;
  for (int k = 1; k <= scenario.calls; ++k) {
    CallRecord rec;
    rec.call = k;
    rec.nominal = scenario.NominalTime(k);
    rec.at = rec.nominal + k * run.hair;
    rec.answer = scenario.AnswerAt(k, static_cast<double>(rng() >> 11) * 0x1.0p-53);

    clock.AdvanceTo(StepClock::kStart + rec.at);
    rec.on_clock = log->Take();
    Result<Permit> permit = breaker->TryAcquire();
    rec.on_acquire = log->Take();
    for (const auto* group : {&rec.on_clock, &rec.on_acquire}) {
      for (const Transition& t : *group) {
        if (t.to == State::kHalfOpen) probes = 0;
      }
    }
    if (!permit) {
      rec.result = CallResult::kRejected;
      rec.reject_reason = permit.error().reason();
      ++sum.rejections;
    } else {
      if (breaker->state() == State::kHalfOpen) rec.probe = ++probes;
      const Duration d = rec.answer.duration;
      rec.slow = d > scenario.breaker.slow_call_duration_threshold;
      if (rec.answer.healthy()) {
        rec.result = CallResult::kSuccess;
        ++sum.successes;
        permit->Success(d);
      } else {
        rec.result = CallResult::kFailure;
        ++sum.failures;
        ++sum.calls_to_down_dependency;
        permit->Failure(d);
      }
      sum.thread_time += d;
      rec.on_outcome = log->Take();
    }
    sum.thread_time_without_breaker += rec.answer.duration;
    if (!rec.answer.healthy()) ++sum.calls_to_down_dependency_without_breaker;
    rec.metrics = breaker->metrics();
    for (const Transition& t : rec.AllTransitions()) sum.states.push_back(t.to);
    run.calls.push_back(std::move(rec));
  }
  return run;
}

void WriteSimJson(const SimRun& run, std::ostream& out) {
  for (const CallRecord& rec : run.calls) {
    Json transitions = Json::array();
    for (const Transition& t : rec.AllTransitions()) transitions.push_back(TransitionLabel(t));
    Json line = {
        {"t", JsonMillis(rec.at)},
        {"call", rec.call},
        {"result", CallResultName(rec.result)},
        {"state", StateName(rec.metrics.state)},
        {"transitions", std::move(transitions)},
    };
    out << line.dump() << '\n';
  }
  const SimSummary& s = run.summary;
  Json states = Json::array();
  for (State st : s.states) states.push_back(StateName(st));
  Json summary = {
      {"scenario", run.scenario.name},
      {"breaker", run.scenario.breaker_enabled},
      {"calls", static_cast<int>(run.calls.size())},
      {"states", std::move(states)},
      {"successes", s.successes},
      {"failures", s.failures},
      {"rejections", s.rejections},
      {"threadSeconds", JsonSeconds(s.thread_time)},
      {"threadSecondsWithoutBreaker", JsonSeconds(s.thread_time_without_breaker)},
      {"threadSecondsSaved", JsonSeconds(s.thread_time_without_breaker - s.thread_time)},
      {"callsToDownDependency", s.calls_to_down_dependency},
      {"callsToDownDependencyWithoutBreaker", s.calls_to_down_dependency_without_breaker},
  };
  out << Json{{"summary", std::move(summary)}}.dump() << '\n';
}

}  // namespace fusebox::app
