#include "apps/fusebox/compare.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>

#include "apps/fusebox/narration.h"
#include "fusebox/config_names.h"

namespace fusebox::app {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string SettingsOf(const Candidate& c) {
  Scenario s;
  s.breaker_enabled = c.breaker_enabled;
  s.breaker = c.config;
  return BreakerSettingsText(s);
}

std::string DurationCell(const std::optional<Duration>& d, const std::string& otherwise) {
  return d ? SecondsText(*d) + " s" : otherwise;
}

}  // namespace

Result<Candidate> ParseCandidate(std::string_view spec, const Candidate& base) {
  if (spec == "input") {
    Candidate c = base;
    c.label = "input";
    return c;
  }
  if (Result<Scenario> preset = FindPreset(spec); preset) {
    return Candidate{std::string(spec), preset->breaker_enabled, preset->breaker};
  }
  if (EndsWith(spec, ".yaml") || EndsWith(spec, ".yml")) {
    Result<Scenario> file = LoadScenarioFile(std::string(spec));
    if (!file) return file.error();
    return Candidate{std::filesystem::path(spec).stem().string(), file->breaker_enabled,
                     file->breaker};
  }
  const std::size_t eq = spec.find('=');
  if (eq == std::string_view::npos) {
    return Status::InvalidArgument("configuration \"" + std::string(spec) +
                                   "\": not input, a preset, a .yaml file or name=value settings");
  }
  Candidate c = base;
  c.breaker_enabled = true;
  c.label = std::string(spec);
  std::string_view settings = spec;
  if (const std::size_t colon = spec.find(':'); colon != std::string_view::npos && colon < eq) {
    c.label = std::string(spec.substr(0, colon));
    settings = spec.substr(colon + 1);
  }
  while (!settings.empty()) {
    const std::size_t comma = settings.find(',');
    const std::string_view assignment = settings.substr(0, comma);
    if (Status s = ApplyBreakerAssignment(c.config, assignment); !s.ok()) {
      return Status::InvalidArgument("configuration \"" + std::string(spec) +
                                     "\": " + std::string(s.message()));
    }
    if (comma == std::string_view::npos) break;
    settings.remove_prefix(comma + 1);
  }
  if (Status s = ValidateConfigProperties(c.config); !s.ok()) {
    return Status::InvalidArgument("configuration \"" + std::string(spec) +
                                   "\": " + std::string(s.message()));
  }
  // The growing OPEN duration of a trace's config line was built from its own
  // first wait; a changed one would be silently ignored.
  if (c.config.wait_interval_function &&
      c.config.wait_duration_in_open_state != base.config.wait_duration_in_open_state) {
    return Status::InvalidArgument(
        "configuration \"" + std::string(spec) +
        "\": waitDurationInOpenState cannot change here: the input's OPEN duration grows "
        "(enableExponentialBackoff or enableRandomizedWait) from its own; change the trace's "
        "config line instead");
  }
  return c;
}

std::vector<Candidate> PresetCandidates() {
  std::vector<Candidate> out;
  for (std::string_view name : PresetNames()) {
    Scenario s = FindPreset(name).value();
    out.push_back(Candidate{std::string(name), s.breaker_enabled, s.breaker});
  }
  return out;
}

RunFacts FactsFromSim(const SimRun& run) {
  RunFacts facts;
  facts.breaker_enabled = run.scenario.breaker_enabled;
  // Times in nominal terms: a transition a call caused is at the call's
  // nominal time; one a timer caused is at its clock time less the hair of the
  // call that started the state it ends (whose deadline the timer kept).
  int cause = 0;
  for (const CallRecord& rec : run.calls) {
    for (Transition t : rec.on_clock) {
      t.at -= cause * run.hair;
      facts.transitions.push_back(t);
    }
    for (const auto* group : {&rec.on_acquire, &rec.on_outcome}) {
      for (Transition t : *group) {
        t.at = rec.nominal;
        cause = rec.call;
        facts.transitions.push_back(t);
      }
    }
    CallFact f;
    f.decided_at = f.reported_at = rec.nominal;
    f.permitted = rec.result != CallResult::kRejected;
    f.outcome = rec.answer.healthy() ? OutcomeKind::kSuccess : OutcomeKind::kFailure;
    facts.calls.push_back(f);
  }
  return facts;
}

Result<RunFacts> FactsFromTrace(const Trace& trace, const Candidate& candidate) {
  // The outcome the trace gives each acquire: that of the next complete of
  // the same id.
  std::map<std::size_t, std::pair<OutcomeKind, Duration>> outcome_of;
  std::map<std::string, std::size_t> open_acquire;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    if (e.kind == TraceEventKind::kAcquire) open_acquire[e.call] = i;
    if (e.kind == TraceEventKind::kComplete) {
      if (auto a = open_acquire.find(e.call); a != open_acquire.end()) {
        outcome_of[a->second] = {e.outcome, std::chrono::milliseconds(e.t_ms)};
        open_acquire.erase(a);
      }
    }
  }
  Result<std::unique_ptr<Replayer>> replayer =
      Replayer::Create(candidate.config, candidate.breaker_enabled, Replayer::Mode::kSkipRejected);
  if (!replayer) return replayer.error();
  RunFacts facts;
  facts.breaker_enabled = candidate.breaker_enabled;
  for (std::size_t i = 0; i < trace.events.size(); ++i) {
    const TraceEvent& e = trace.events[i];
    Result<ReplayStep> step = (*replayer)->Apply(e);
    if (!step) return step.error();
    facts.transitions.insert(facts.transitions.end(), step->transitions.begin(),
                             step->transitions.end());
    if (!step->permitted) continue;
    CallFact f;
    f.decided_at = f.reported_at = std::chrono::milliseconds(e.t_ms);
    f.permitted = *step->permitted;
    if (e.kind == TraceEventKind::kCall) {
      f.outcome = e.outcome;
    } else if (auto o = outcome_of.find(i); o != outcome_of.end()) {
      f.outcome = o->second.first;
      f.reported_at = o->second.second;
    }
    facts.calls.push_back(f);
  }
  return facts;
}

CompareRow Measure(const RunFacts& facts) {
  CompareRow row;
  std::optional<Duration> first_failure, last_failure;
  for (const CallFact& c : facts.calls) {
    (c.permitted ? row.permitted : row.rejected) += 1;
    if (c.outcome == OutcomeKind::kFailure) {
      if (c.permitted) ++row.calls_to_dead;
      if (!first_failure || c.reported_at < *first_failure) first_failure = c.reported_at;
      if (!last_failure || c.reported_at > *last_failure) last_failure = c.reported_at;
    }
    if (!c.permitted && c.outcome == OutcomeKind::kSuccess) ++row.rejected_while_healthy;
  }
  if (first_failure) {
    for (const Transition& t : facts.transitions) {
      if (t.to == State::kOpen && t.at >= *first_failure) {
        row.failure_to_open = t.at - *first_failure;
        break;
      }
    }
  }
  if (!facts.breaker_enabled) {
    row.recovery_note = "no breaker";
    return row;
  }
  if (!last_failure) {
    row.recovery_note = "no failure";
    return row;
  }
  std::optional<Duration> recovery;
  for (const CallFact& c : facts.calls) {
    if (c.outcome == OutcomeKind::kSuccess && c.reported_at > *last_failure &&
        (!recovery || c.reported_at < *recovery)) {
      recovery = c.reported_at;
    }
  }
  if (!recovery) {
    row.recovery_note = "not recovered";
    return row;
  }
  State state = State::kClosed;
  for (const Transition& t : facts.transitions) {
    if (t.at < *recovery) state = t.to;
  }
  if (state == State::kClosed) {
    row.recovery_to_closed = Duration::zero();
    return row;
  }
  for (const Transition& t : facts.transitions) {
    if (t.at >= *recovery) {
      state = t.to;
      if (state == State::kClosed) {
        row.recovery_to_closed = t.at - *recovery;
        return row;
      }
    }
  }
  row.recovery_note = "still " + std::string(StateName(state)) + " at the end";
  return row;
}

Result<std::vector<CompareRow>> CompareOnScenario(const Scenario& scenario,
                                                  const std::vector<Candidate>& candidates) {
  std::vector<CompareRow> rows;
  for (const Candidate& c : candidates) {
    Scenario s = scenario;
    s.breaker_enabled = c.breaker_enabled;
    s.breaker = c.config;
    Result<SimRun> run = Simulate(s);
    if (!run) {
      return Status::InvalidArgument(c.label + ": " + std::string(run.error().message()));
    }
    CompareRow row = Measure(FactsFromSim(*run));
    row.label = c.label;
    row.settings = SettingsOf(c);
    rows.push_back(std::move(row));
  }
  return rows;
}

Result<std::vector<CompareRow>> CompareOnTrace(const Trace& trace,
                                               const std::vector<Candidate>& candidates) {
  std::vector<CompareRow> rows;
  for (const Candidate& c : candidates) {
    Result<RunFacts> facts = FactsFromTrace(trace, c);
    if (!facts)
      return Status::InvalidArgument(c.label + ": " + std::string(facts.error().message()));
    CompareRow row = Measure(*facts);
    row.label = c.label;
    row.settings = SettingsOf(c);
    rows.push_back(std::move(row));
  }
  return rows;
}

void WriteCompareTable(const std::string& title, const std::vector<CompareRow>& rows,
                       std::ostream& out) {
  std::vector<std::pair<std::string, std::vector<std::string>>> table = {
      {"", {}},
      {"first failure -> OPEN", {}},
      {"calls to the dead dependency", {}},
      {"rejected while healthy", {}},
      {"recovery -> CLOSED", {}},
      {"let through / rejected", {}},
  };
  for (const CompareRow& r : rows) {
    table[0].second.push_back(r.label);
    table[1].second.push_back(DurationCell(r.failure_to_open, "never"));
    table[2].second.push_back(std::to_string(r.calls_to_dead));
    table[3].second.push_back(std::to_string(r.rejected_while_healthy));
    table[4].second.push_back(DurationCell(r.recovery_to_closed, r.recovery_note));
    table[5].second.push_back(std::to_string(r.permitted) + " / " + std::to_string(r.rejected));
  }
  std::size_t head = 0;
  for (const auto& [name, cells] : table) head = std::max(head, name.size());
  std::vector<std::size_t> width(rows.size(), 0);
  for (const auto& [name, cells] : table) {
    for (std::size_t i = 0; i < cells.size(); ++i) width[i] = std::max(width[i], cells[i].size());
  }
  out << title << "\n\n";
  for (const auto& [name, cells] : table) {
    std::string line = name + std::string(head - name.size(), ' ');
    for (std::size_t i = 0; i < cells.size(); ++i) {
      line += "  " + std::string(width[i] - cells[i].size(), ' ') + cells[i];
    }
    out << line << '\n';
  }
  out << '\n';
  for (const CompareRow& r : rows) out << r.label << ": " << r.settings << '\n';
}

void WriteCompareJson(const std::vector<CompareRow>& rows, std::ostream& out) {
  auto millis = [](const std::optional<Duration>& d) -> Json {
    if (!d) return nullptr;
    return JsonMillis(*d);
  };
  for (const CompareRow& r : rows) {
    Json line = {
        {"config", r.label},
        {"settings", r.settings},
        {"firstFailureToOpenMs", millis(r.failure_to_open)},
        {"callsToDeadDependency", r.calls_to_dead},
        {"rejectedWhileHealthy", r.rejected_while_healthy},
        {"recoveryToClosedMs", millis(r.recovery_to_closed)},
        {"permitted", r.permitted},
        {"rejected", r.rejected},
    };
    if (!r.recovery_to_closed) line["recoveryNote"] = r.recovery_note;
    out << line.dump() << '\n';
  }
}

}  // namespace fusebox::app
