#include "apps/fusebox/replay.h"

#include <chrono>
#include <string>
#include <utility>

namespace fusebox::app {
namespace {

// Reads lines, counting them, skipping blank ones, refusing one longer than
// kMaxTraceLineBytes before it is buffered whole.
class LineReader {
 public:
  explicit LineReader(std::istream& in) : in_(in) {}
  // False at the end of the input or on a line that is too long, in which
  // case status() says so.
  bool Next(std::string& line) {
    std::streambuf* const buf = in_.rdbuf();
    if (buf == nullptr) return false;
    while (true) {
      line.clear();
      int c = buf->sbumpc();
      if (c == std::char_traits<char>::eof()) return false;
      ++number_;
      for (; c != std::char_traits<char>::eof() && c != '\n'; c = buf->sbumpc()) {
        if (line.size() == kMaxTraceLineBytes) {
          status_ = LineError(number_, "longer than " + std::to_string(kMaxTraceLineBytes) +
                                           " bytes, the maximum for a trace line");
          return false;
        }
        line.push_back(static_cast<char>(c));
      }
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (!IsBlankLine(line)) return true;
    }
  }
  int number() const { return number_; }
  // OK unless Next() stopped at a line that is too long.
  const Status& status() const { return status_; }

 private:
  std::istream& in_;
  int number_ = 0;
  Status status_;
};

// The first line, {"config": {...}}, read into `line`.
Result<CircuitBreakerConfig> ReadConfigLine(LineReader& lines, std::string& line) {
  if (!lines.Next(line)) {
    if (!lines.status().ok()) return lines.status();
    return LineError(lines.number() + 1, "empty trace: no config line");
  }
  return ParseTraceConfigLine(line, lines.number());
}

}  // namespace

Replayer::Replayer(std::unique_ptr<CircuitBreaker> breaker, std::shared_ptr<TransitionLog> log,
                   Mode mode, bool breaker_enabled)
    : mode_(mode),
      breaker_enabled_(breaker_enabled),
      breaker_(std::move(breaker)),
      log_(std::move(log)) {}

Result<std::unique_ptr<Replayer>> Replayer::Create(const CircuitBreakerConfig& config,
                                                   bool breaker_enabled, Mode mode) {
  // The clock must outlive the breaker: built first, handed over, and declared
  // before breaker_ in the class so that it is destroyed after it.
  auto clock = std::make_unique<StepClock>();
  Result<std::unique_ptr<CircuitBreaker>> created =
      CircuitBreaker::Create("replay", config, *clock);
  if (!created) return created.error();
  std::unique_ptr<CircuitBreaker> breaker = std::move(*created);
  if (!breaker_enabled) breaker->Disable({.reason = "no breaker", .actor = "fusebox"});
  auto log = std::make_shared<TransitionLog>(StepClock::kStart);
  breaker->AddListener(log);
  std::unique_ptr<Replayer> r(
      new Replayer(std::move(breaker), std::move(log), mode, breaker_enabled));
  r->clock_ = std::move(clock);
  return r;
}

Status Replayer::ApplyOperator(OperatorAction action) {
  const OverrideOptions by_trace{.reason = std::string(OperatorActionName(action)),
                                 .actor = "trace"};
  switch (action) {
    case OperatorAction::kTransitionToForcedOpenState:
      breaker_->ForceOpen(by_trace);
      return Status();
    case OperatorAction::kTransitionToDisabledState:
      breaker_->Disable(by_trace);
      return Status();
    case OperatorAction::kTransitionToMetricsOnlyState:
      breaker_->MetricsOnly(by_trace);
      return Status();
    case OperatorAction::kTransitionToClosedState:
      breaker_->TransitionToClosed();
      return Status();
    case OperatorAction::kTransitionToOpenState:
      return breaker_->TransitionToOpen();
    case OperatorAction::kTransitionToHalfOpenState:
      return breaker_->TransitionToHalfOpen();
    case OperatorAction::kReset:
      breaker_->Reset(by_trace.reason, by_trace.actor);
      return Status();
  }
  return Status();
}

Result<ReplayStep> Replayer::Apply(const TraceEvent& e) {
  if (e.t_ms < last_t_ms_) {
    return LineError(e.line, "t goes backwards: " + std::to_string(e.t_ms) + " after " +
                                 std::to_string(last_t_ms_));
  }
  last_t_ms_ = e.t_ms;
  ReplayStep step;
  step.event = e;
  clock_->AdvanceTo(StepClock::kStart + std::chrono::milliseconds(e.t_ms));
  const Duration duration = std::chrono::milliseconds(e.duration_ms);

  auto record = [&](Permit& permit) {
    switch (e.outcome) {
      case OutcomeKind::kSuccess:
        permit.Success(duration);
        break;
      case OutcomeKind::kFailure:
        permit.Failure(duration);
        break;
      case OutcomeKind::kIgnored:
        permit.Ignore();
        break;
    }
  };
  auto acquire = [&]() -> Status {
    if (auto held = pending_.find(e.call); held != pending_.end()) {
      return LineError(e.line, "call \"" + e.call + "\" already holds a permit (acquired at line " +
                                   std::to_string(held->second.line) + ")");
    }
    Result<Permit> permit = breaker_->TryAcquire();
    step.permitted = permit.has_value();
    if (!permit) {
      rejected_[e.call] = e.line;
      return Status();
    }
    rejected_.erase(e.call);
    if (e.kind == TraceEventKind::kCall) {
      record(*permit);
    } else {
      pending_.emplace(e.call, Held{std::move(*permit), e.line});
    }
    return Status();
  };

  switch (e.kind) {
    case TraceEventKind::kTick:
      break;
    case TraceEventKind::kOperator:
      if (!breaker_enabled_) {
        step.skipped = true;
      } else if (Status s = ApplyOperator(e.action); !s.ok()) {
        step.refused = std::string(s.message());
      }
      break;
    case TraceEventKind::kAcquire:
    case TraceEventKind::kCall:
      if (Status s = acquire(); !s.ok()) return s;
      break;
    case TraceEventKind::kComplete: {
      auto held = pending_.find(e.call);
      if (held != pending_.end()) {
        record(held->second.permit);
        pending_.erase(held);
        break;
      }
      auto rejected = rejected_.find(e.call);
      if (rejected == rejected_.end()) {
        return LineError(e.line, "complete of unknown call \"" + e.call +
                                     "\": no acquire for it holds a permit");
      }
      if (mode_ == Mode::kStrict) {
        return LineError(e.line, "complete of call \"" + e.call +
                                     "\", which was rejected at line " +
                                     std::to_string(rejected->second) + " and holds no permit");
      }
      rejected_.erase(rejected);
      step.skipped = true;
      break;
    }
  }
  step.transitions = log_->Take();
  step.metrics = breaker_->metrics();
  return step;
}

std::vector<std::string> Replayer::PendingCalls() const {
  std::vector<std::string> ids;
  for (const auto& [id, held] : pending_) ids.push_back(id);
  return ids;
}

Json ReplayStepJson(const ReplayStep& step) {
  Json line;
  line["t"] = step.event.t_ms;
  if (step.event.kind == TraceEventKind::kOperator) {
    line["operator"] = OperatorActionName(step.event.action);
  } else if (step.event.kind != TraceEventKind::kTick) {
    line["call"] = step.event.call;
  }
  if (step.permitted) line["permitted"] = *step.permitted;
  if (step.refused) line["refused"] = *step.refused;
  const CircuitBreakerMetrics& m = step.metrics;
  line["state"] = StateName(m.state);
  Json transitions = Json::array();
  for (const Transition& t : step.transitions) transitions.push_back(TransitionLabel(t));
  line["transitions"] = std::move(transitions);
  line["failureRate"] = JsonFloat(m.failure_rate);
  line["slowCallRate"] = JsonFloat(m.slow_call_rate);
  line["numberOfBufferedCalls"] = m.buffered_calls;
  line["numberOfFailedCalls"] = m.failed_calls;
  line["numberOfSlowCalls"] = m.slow_calls;
  line["numberOfSlowSuccessfulCalls"] = m.slow_successful_calls;
  line["numberOfSlowFailedCalls"] = m.slow_failed_calls;
  line["numberOfSuccessfulCalls"] = m.successful_calls;
  line["numberOfNotPermittedCalls"] = m.not_permitted_calls;
  return line;
}

Result<Trace> ReadTrace(std::istream& in) {
  LineReader lines(in);
  std::string line;
  Trace trace;
  Result<CircuitBreakerConfig> config = ReadConfigLine(lines, line);
  if (!config) return config.error();
  trace.config = std::move(*config);
  while (lines.Next(line)) {
    Result<TraceEvent> e = ParseTraceEventLine(line, lines.number());
    if (!e) return e.error();
    trace.events.push_back(std::move(*e));
  }
  if (!lines.status().ok()) return lines.status();
  return trace;
}

Status ReplayTrace(std::istream& in, std::ostream& out, std::ostream& notes) {
  LineReader lines(in);
  std::string line;
  Result<CircuitBreakerConfig> config = ReadConfigLine(lines, line);
  if (!config) return config.error();
  Result<std::unique_ptr<Replayer>> replayer =
      Replayer::Create(*config, /*breaker_enabled=*/true, Replayer::Mode::kStrict);
  if (!replayer) return LineError(lines.number(), std::string(replayer.error().message()));
  while (lines.Next(line)) {
    Result<TraceEvent> e = ParseTraceEventLine(line, lines.number());
    if (!e) return e.error();
    Result<ReplayStep> step = (*replayer)->Apply(*e);
    if (!step) return step.error();
    out << ReplayStepJson(*step).dump() << '\n';
  }
  if (!lines.status().ok()) return lines.status();
  const std::vector<std::string> pending = (*replayer)->PendingCalls();
  if (!pending.empty()) {
    std::string ids;
    for (const std::string& id : pending) ids += (ids.empty() ? "" : ", ") + id;
    notes << "note: " << pending.size() << " call(s) acquired and never completed: " << ids << '\n';
  }
  return Status();
}

Result<int> CompareWithRecorded(std::istream& replayed, std::istream& recorded,
                                std::ostream& report) {
  // A line as JSON; `what` names the file in errors.
  auto parse = [](const std::string& line, int number, const char* what) -> Result<Json> {
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) {
      return LineError(number, std::string(what) + ": not a JSON object");
    }
    return j;
  };
  auto same = [](const std::string& field, const Json& a, const Json& b) {
    if ((field == "failureRate" || field == "slowCallRate") && a.is_number() && b.is_number()) {
      return static_cast<float>(a.get<double>()) == static_cast<float>(b.get<double>());
    }
    return a == b;
  };
  LineReader ours(replayed), theirs(recorded);
  std::string a, b;
  int differences = 0;
  for (int event = 1;; ++event) {
    const bool has_a = ours.Next(a);
    const bool has_b = theirs.Next(b);
    if (!theirs.status().ok()) return theirs.status();
    if (!has_a && !has_b) break;
    if (has_a != has_b) {
      report << "line " << event << ": " << (has_a ? "only fusebox" : "only recorded")
             << " has this event\n";
      ++differences;
      break;
    }
    Result<Json> mine = parse(a, event, "replayed");
    if (!mine) return mine.error();
    Result<Json> reference = parse(b, theirs.number(), "recorded");
    if (!reference) return reference.error();
    for (const auto& [field, value] : mine->items()) {
      const auto other = reference->find(field);
      if (other == reference->end() || same(field, value, *other)) continue;
      report << "line " << event << ": " << field << ": fusebox " << value.dump() << ", recorded "
             << other->dump() << '\n';
      ++differences;
    }
  }
  return differences;
}

}  // namespace fusebox::app
