#include "apps/fusebox/narration.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "fusebox/config_names.h"

namespace fusebox::app {
namespace {

// The sentences of one language. Each returns one or more whole sentences;
// the narrator joins them with spaces.
class Phrasebook {
 public:
  virtual ~Phrasebook() = default;
  virtual std::string Seconds(Duration d) const = 0;  // "3 s", "3초"
  virtual std::string CallPrefix(int k, Duration t) const = 0;
  // "the last 10 calls" / "최근 10번".
  virtual std::string Window(const CircuitBreakerConfig& c) const = 0;

  virtual std::string HalfOpenEntered(Duration waited) const = 0;
  virtual std::string HalfOpenTimedOut(Duration max_wait, State to) const = 0;
  virtual std::string OtherTransition(const Transition& t) const = 0;
  virtual std::string Rejected(std::string_view reason) const = 0;
  virtual std::string Success(Duration latency) const = 0;
  virtual std::string Slow(Duration threshold) const = 0;
  virtual std::string Timeout(Duration timeout) const = 0;
  virtual std::string Error(Duration latency) const = 0;
  virtual std::string Rates(const std::string& window, float failure,
                            std::optional<float> slow) const = 0;
  virtual std::string TrippedByRate(const std::string& window, bool slow, float rate,
                                    float threshold, Duration wait) const = 0;
  virtual std::string TrippedByStreak(int failures, Duration wait) const = 0;
  virtual std::string Probe(int n, int permitted) const = 0;
  virtual std::string ProbesFailed(int probes, bool slow, float rate) const = 0;
  virtual std::string ProbeFailedAnyPolicy() const = 0;
  virtual std::string ProbesSucceeded(int probes, float rate) const = 0;

  virtual std::string Title(const Scenario& s) const = 0;
  virtual std::string Setup(const Scenario& s) const = 0;
  virtual std::string Settings(const std::string& settings) const = 0;
  virtual std::string ResultHeading() const = 0;
  virtual std::string States(const std::vector<State>& states, bool breaker) const = 0;
  virtual std::string Counts(const SimSummary& s) const = 0;
  virtual std::string ThreadTime(const SimSummary& s, bool breaker) const = 0;
  virtual std::string DownCalls(const SimSummary& s, bool breaker) const = 0;
};

std::string Arrows(const std::vector<State>& states) {
  std::string out;
  for (State s : states) {
    if (!out.empty()) out += " → ";
    out += StateName(s);
  }
  return out;
}

class English final : public Phrasebook {
 public:
  std::string Seconds(Duration d) const override { return SecondsText(d) + " s"; }
  std::string CallPrefix(int k, Duration t) const override {
    return std::to_string(k) + ". " + Seconds(t) + ": ";
  }
  std::string Window(const CircuitBreakerConfig& c) const override {
    if (c.sliding_window_type == SlidingWindowType::kTimeBased) {
      return "the last " + std::to_string(c.sliding_window_size) + " s";
    }
    return "the last " + std::to_string(c.sliding_window_size) + " calls";
  }
  std::string HalfOpenEntered(Duration waited) const override {
    return Seconds(waited) +
           " have passed since the circuit opened. A few calls are let through on trial to see "
           "whether the service has recovered (HALF_OPEN).";
  }
  std::string HalfOpenTimedOut(Duration max_wait, State to) const override {
    return "The probes reached no verdict within " + Seconds(max_wait) +
           (to == State::kClosed ? ": back to normal (CLOSED)."
                                 : ": the circuit opens again (OPEN).");
  }
  std::string OtherTransition(const Transition& t) const override {
    return "The state changes from " + std::string(StateName(t.from)) + " to " +
           std::string(StateName(t.to)) + ".";
  }
  std::string Rejected(std::string_view reason) const override {
    const std::string tail =
        " The payment service is not called; the fallback answers at once. No waiting.";
    if (reason == "half_open_full") return "All trial calls are out (HALF_OPEN)." + tail;
    if (reason == "forced_open") return "The circuit is forced open (FORCED_OPEN)." + tail;
    return "The circuit is open (OPEN)." + tail;
  }
  std::string Success(Duration latency) const override {
    if (latency == Duration::zero()) return "Payment service call succeeded.";
    return "Payment service call succeeded in " + Seconds(latency) + ".";
  }
  std::string Slow(Duration threshold) const override {
    return "It counts as a slow call (over " + Seconds(threshold) + ").";
  }
  std::string Timeout(Duration timeout) const override {
    return "The payment service does not answer. The call waits " + Seconds(timeout) +
           " and fails with a timeout. A request thread was tied up all that time.";
  }
  std::string Error(Duration latency) const override {
    return "The payment service answers with an error after " + Seconds(latency) +
           ": the call fails.";
  }
  std::string Rates(const std::string& window, float failure,
                    std::optional<float> slow) const override {
    std::string s = "Failure rate over " + window + ": " + PercentText(failure) + "%";
    if (slow) s += ", slow-call rate " + PercentText(*slow) + "%";
    return s + ".";
  }
  std::string TrippedByRate(const std::string& window, bool slow, float rate, float threshold,
                            Duration wait) const override {
    return "Over " + window + " the " + (slow ? "slow-call" : "failure") + " rate is " +
           PercentText(rate) + "%, at or above the " + PercentText(threshold) +
           "% threshold. The circuit opens (OPEN). For the next " + Seconds(wait) +
           " calls to the payment service are blocked.";
  }
  std::string TrippedByStreak(int failures, Duration wait) const override {
    return std::to_string(failures) +
           " failures in a row. The circuit opens (OPEN). For the next " + Seconds(wait) +
           " calls to the payment service are blocked.";
  }
  std::string Probe(int n, int permitted) const override {
    return "Trial call " + std::to_string(n) + "/" + std::to_string(permitted) + ".";
  }
  std::string ProbesFailed(int probes, bool slow, float rate) const override {
    return std::string("The ") + (slow ? "slow-call" : "failure") + " rate of the " +
           std::to_string(probes) + " trial calls is " + PercentText(rate) +
           "%, at or above the threshold. Not recovered yet: the circuit opens again (OPEN).";
  }
  std::string ProbeFailedAnyPolicy() const override {
    return "A trial call failed. Not recovered yet: the circuit opens again (OPEN).";
  }
  std::string ProbesSucceeded(int probes, float rate) const override {
    return "The failure rate of the " + std::to_string(probes) + " trial calls is " +
           PercentText(rate) + "%, below the threshold. Recovered: back to normal (CLOSED).";
  }
  std::string Title(const Scenario& s) const override {
    return "fusebox sim " + s.name + (s.description_en.empty() ? "" : ": " + s.description_en);
  }
  std::string Setup(const Scenario& s) const override {
    return "The order service calls the payment service every " + Seconds(s.interval) + ", " +
           std::to_string(s.calls) + " times; a call with no answer times out after " +
           Seconds(s.timeout) + ".";
  }
  std::string Settings(const std::string& settings) const override {
    return "Circuit breaker: " + settings;
  }
  std::string ResultHeading() const override { return "Result"; }
  std::string States(const std::vector<State>& states, bool breaker) const override {
    if (!breaker) return "- No circuit breaker: every call went to the payment service.";
    if (states.size() == 1) return "- The state stayed " + Arrows(states) + ".";
    return "- The state went " + Arrows(states) + ".";
  }
  std::string Counts(const SimSummary& s) const override {
    return "- " + std::to_string(s.successes) + " successes, " + std::to_string(s.failures) +
           " failures, " + std::to_string(s.rejections) + " rejections.";
  }
  std::string ThreadTime(const SimSummary& s, bool breaker) const override {
    std::string text = "- Request threads spent " + Seconds(s.thread_time) + " waiting";
    if (!breaker) return text + ".";
    return text + "; without a circuit breaker, " + Seconds(s.thread_time_without_breaker) + " (" +
           Seconds(s.thread_time_without_breaker - s.thread_time) + " saved).";
  }
  std::string DownCalls(const SimSummary& s, bool breaker) const override {
    std::string text = "- Calls sent to the payment service while it was down: " +
                       std::to_string(s.calls_to_down_dependency);
    if (!breaker) return text + ".";
    return text + "; without a circuit breaker, " +
           std::to_string(s.calls_to_down_dependency_without_breaker) + ".";
  }
};

// The seed's sentences, word for word where the seed has them.
class Korean final : public Phrasebook {
 public:
  std::string Seconds(Duration d) const override { return SecondsText(d) + "초"; }
  std::string CallPrefix(int k, Duration t) const override {
    return std::to_string(k) + ". " + Seconds(t) + ": ";
  }
  std::string Window(const CircuitBreakerConfig& c) const override {
    if (c.sliding_window_type == SlidingWindowType::kTimeBased) {
      return "최근 " + std::to_string(c.sliding_window_size) + "초";
    }
    return "최근 " + std::to_string(c.sliding_window_size) + "번";
  }
  std::string HalfOpenEntered(Duration waited) const override {
    return "차단한 지 " + Seconds(waited) +
           "가 지났습니다. 회복됐는지 확인하려고 호출을 몇 번만 시험 삼아 통과시킵니다(HALF_OPEN).";
  }
  std::string HalfOpenTimedOut(Duration max_wait, State to) const override {
    return "시험 호출의 결론이 " + Seconds(max_wait) + " 안에 나지 않았습니다. " +
           (to == State::kClosed ? "정상 상태로 돌아갑니다(CLOSED)." : "다시 차단합니다(OPEN).");
  }
  std::string OtherTransition(const Transition& t) const override {
    return "상태가 " + std::string(StateName(t.from)) + "에서 " + std::string(StateName(t.to)) +
           "(으)로 바뀝니다.";
  }
  std::string Rejected(std::string_view reason) const override {
    const std::string tail =
        " 결제 서비스를 호출하지 않고 즉시 대체 응답을 돌려줍니다. 기다리는 시간이 없습니다.";
    if (reason == "half_open_full") return "시험 호출이 모두 나가 있습니다(HALF_OPEN)." + tail;
    if (reason == "forced_open") return "서킷이 강제로 열려 있습니다(FORCED_OPEN)." + tail;
    return "서킷이 열려 있습니다(OPEN)." + tail;
  }
  std::string Success(Duration latency) const override {
    if (latency == Duration::zero()) return "결제 서비스 호출 성공.";
    return "결제 서비스 호출 성공(" + Seconds(latency) + " 걸림).";
  }
  std::string Slow(Duration threshold) const override {
    return Seconds(threshold) + "를 넘긴 느린 호출로 셉니다.";
  }
  std::string Timeout(Duration timeout) const override {
    return "결제 서비스가 응답하지 않습니다. " + Seconds(timeout) +
           "를 기다리다 타임아웃으로 실패합니다. 그동안 요청 스레드 하나가 묶여 있었습니다.";
  }
  std::string Error(Duration latency) const override {
    return "결제 서비스가 " + Seconds(latency) + " 만에 오류를 돌려줍니다. 호출 실패.";
  }
  std::string Rates(const std::string& window, float failure,
                    std::optional<float> slow) const override {
    std::string s = window + "의 실패율 " + PercentText(failure) + "%";
    if (slow) s += ", 느린 호출 비율 " + PercentText(*slow) + "%";
    return s + ".";
  }
  std::string TrippedByRate(const std::string& window, bool slow, float rate, float threshold,
                            Duration wait) const override {
    return window + " 중 " + (slow ? "느린 호출 비율이 " : "실패율이 ") + PercentText(rate) +
           "%로 임계치 " + PercentText(threshold) +
           "% 이상이 됐습니다. 서킷을 엽니다(OPEN). 이제부터 " + Seconds(wait) +
           " 동안 결제 서비스 호출을 막습니다.";
  }
  std::string TrippedByStreak(int failures, Duration wait) const override {
    return "실패가 " + std::to_string(failures) +
           "번 연달아 났습니다. 서킷을 엽니다(OPEN). 이제부터 " + Seconds(wait) +
           " 동안 결제 서비스 호출을 막습니다.";
  }
  std::string Probe(int n, int permitted) const override {
    return "시험 호출 " + std::to_string(n) + "/" + std::to_string(permitted) + ".";
  }
  std::string ProbesFailed(int probes, bool slow, float rate) const override {
    return "시험 호출 " + std::to_string(probes) + "번의 " +
           (slow ? "느린 호출 비율이 " : "실패율이 ") + PercentText(rate) +
           "%로 임계치 이상입니다. 아직 회복되지 않았다고 보고 다시 차단합니다(OPEN).";
  }
  std::string ProbeFailedAnyPolicy() const override {
    return "시험 호출이 실패했습니다. 아직 회복되지 않았다고 보고 다시 차단합니다(OPEN).";
  }
  std::string ProbesSucceeded(int probes, float rate) const override {
    return "시험 호출 " + std::to_string(probes) + "번의 실패율이 " + PercentText(rate) +
           "%로 임계치보다 낮습니다. 회복됐다고 보고 정상 상태로 돌아갑니다(CLOSED).";
  }
  std::string Title(const Scenario& s) const override {
    return "fusebox sim " + s.name + (s.description_ko.empty() ? "" : ": " + s.description_ko);
  }
  std::string Setup(const Scenario& s) const override {
    return "주문 서비스가 결제 서비스를 " + Seconds(s.interval) + "에 한 번씩, " +
           std::to_string(s.calls) + "번 호출합니다. 응답이 없으면 " + Seconds(s.timeout) +
           " 뒤 타임아웃입니다.";
  }
  std::string Settings(const std::string& settings) const override {
    return "서킷 브레이커: " + settings;
  }
  std::string ResultHeading() const override { return "실행 결과"; }
  std::string States(const std::vector<State>& states, bool breaker) const override {
    if (!breaker) return "• 서킷 브레이커가 없어 모든 호출이 결제 서비스로 갔습니다.";
    if (states.size() == 1) return "• 상태가 " + Arrows(states) + "에서 바뀌지 않았습니다.";
    return "• 상태가 " + Arrows(states) + " 순으로 바뀌었습니다.";
  }
  std::string Counts(const SimSummary& s) const override {
    return "• 성공 " + std::to_string(s.successes) + "번, 실패 " + std::to_string(s.failures) +
           "번, 차단 " + std::to_string(s.rejections) + "번.";
  }
  std::string ThreadTime(const SimSummary& s, bool breaker) const override {
    std::string text = "• 요청 스레드가 기다린 시간은 모두 " + Seconds(s.thread_time) + "입니다.";
    if (!breaker) return text;
    return text + " 서킷 브레이커가 없었다면 " + Seconds(s.thread_time_without_breaker) +
           "였습니다(" + Seconds(s.thread_time_without_breaker - s.thread_time) + " 절약).";
  }
  std::string DownCalls(const SimSummary& s, bool breaker) const override {
    std::string text = "• 장애 중인 결제 서비스로 보낸 호출은 " +
                       std::to_string(s.calls_to_down_dependency) + "번입니다.";
    if (!breaker) return text;
    return text + " 서킷 브레이커가 없었다면 " +
           std::to_string(s.calls_to_down_dependency_without_breaker) + "번이었습니다.";
  }
};

const Phrasebook& Book(Language lang) {
  static const English english;
  static const Korean korean;
  if (lang == Language::kKorean) return korean;
  return english;
}

std::string Join(const std::vector<std::string>& sentences) {
  std::string out;
  for (const std::string& s : sentences) {
    if (s.empty()) continue;
    if (!out.empty()) out += ' ';
    out += s;
  }
  return out;
}

// Narrates calls in order; remembers how long the last OPEN was meant to last,
// for "5 s have passed since the circuit opened".
class Narrator {
 public:
  Narrator(const SimRun& run, const Phrasebook& book) : run_(run), book_(book) {}

  std::string Call(const CallRecord& rec) {
    const CircuitBreakerConfig& config = run_.scenario.breaker;
    std::vector<std::string> s;
    for (const Transition& t : rec.on_clock) s.push_back(Between(t));
    for (const Transition& t : rec.on_acquire) s.push_back(Between(t));
    if (rec.result == CallResult::kRejected) {
      s.push_back(book_.Rejected(rec.reject_reason));
      return book_.CallPrefix(rec.call, rec.nominal) + Join(s);
    }
    switch (rec.answer.kind) {
      case Answer::Kind::kOk:
        s.push_back(book_.Success(rec.answer.duration));
        break;
      case Answer::Kind::kTimeout:
        s.push_back(book_.Timeout(rec.answer.duration));
        break;
      case Answer::Kind::kError:
        s.push_back(book_.Error(rec.answer.duration));
        break;
    }
    if (rec.slow && run_.scenario.breaker_enabled) {
      s.push_back(book_.Slow(config.slow_call_duration_threshold));
    }
    bool told = false;
    for (const Transition& t : rec.on_outcome) {
      s.push_back(AfterOutcome(t));
      told = true;
    }
    if (!told && rec.probe > 0) {
      s.push_back(book_.Probe(rec.probe, config.permitted_number_of_calls_in_half_open_state));
    } else if (!told && rec.metrics.state == State::kClosed && rec.metrics.failure_rate >= 0) {
      std::optional<float> slow;
      if (config.slow_call_rate_threshold < 100 || rec.metrics.slow_calls > 0) {
        slow = rec.metrics.slow_call_rate;
      }
      s.push_back(book_.Rates(book_.Window(config), rec.metrics.failure_rate, slow));
    }
    return book_.CallPrefix(rec.call, rec.nominal) + Join(s);
  }

 private:
  // A transition before the call is made: a timer, or the call's own acquire.
  std::string Between(const Transition& t) {
    if (t.from == State::kOpen && t.to == State::kHalfOpen) return book_.HalfOpenEntered(open_for_);
    if (t.from == State::kHalfOpen && t.reason == TransitionReason::kHalfOpenTimeout) {
      Note(t);
      return book_.HalfOpenTimedOut(run_.scenario.breaker.max_wait_duration_in_half_open_state,
                                    t.to);
    }
    Note(t);
    return book_.OtherTransition(t);
  }

  // A transition that the call's outcome caused.
  std::string AfterOutcome(const Transition& t) {
    const CircuitBreakerConfig& config = run_.scenario.breaker;
    Note(t);
    const Duration wait = t.lasts.value_or(Duration::zero());
    switch (t.reason) {
      case TransitionReason::kFailureRate:
        return book_.TrippedByRate(book_.Window(config), false, t.counts.failure_rate,
                                   config.failure_rate_threshold, wait);
      case TransitionReason::kSlowCallRate:
        return book_.TrippedByRate(book_.Window(config), true, t.counts.slow_call_rate,
                                   config.slow_call_rate_threshold, wait);
      case TransitionReason::kConsecutiveFailures:
        return book_.TrippedByStreak(config.consecutive_failure_threshold, wait);
      case TransitionReason::kProbesFailed: {
        if (config.half_open_policy == HalfOpenPolicy::kAnyFailureReopens) {
          return book_.ProbeFailedAnyPolicy();
        }
        const bool by_failures = t.counts.failure_rate >= config.failure_rate_threshold;
        return book_.ProbesFailed(t.counts.buffered_calls, !by_failures,
                                  by_failures ? t.counts.failure_rate : t.counts.slow_call_rate);
      }
      case TransitionReason::kProbesSucceeded:
        return book_.ProbesSucceeded(t.counts.buffered_calls,
                                     t.counts.failure_rate < 0 ? 0 : t.counts.failure_rate);
      default:
        return book_.OtherTransition(t);
    }
  }

  void Note(const Transition& t) {
    if (t.to == State::kOpen && t.lasts) open_for_ = *t.lasts;
  }

  const SimRun& run_;
  const Phrasebook& book_;
  Duration open_for_ = Duration::zero();
};

}  // namespace

Result<Language> ParseLanguage(std::string_view code) {
  if (code == "en") return Language::kEnglish;
  if (code == "ko") return Language::kKorean;
  return Status::InvalidArgument("unknown language \"" + std::string(code) + "\" (en, ko)");
}

std::string BreakerSettingsText(const Scenario& scenario) {
  if (!scenario.breaker_enabled) return "none";
  static constexpr std::string_view kAlways[] = {"slidingWindowSize", "minimumNumberOfCalls",
                                                 "failureRateThreshold", "waitDurationInOpenState",
                                                 "permittedNumberOfCallsInHalfOpenState"};
  const CircuitBreakerConfig defaults;
  std::string out;
  auto add = [&](std::string_view name) {
    if (!out.empty()) out += ' ';
    out += std::string(name) + "=" + GetConfigProperty(scenario.breaker, name).value();
  };
  for (std::string_view name : kAlways) add(name);
  for (const ConfigProperty& p : ConfigProperties()) {
    bool always = false;
    for (std::string_view name : kAlways) always = always || name == p.name;
    if (always) continue;
    if (GetConfigProperty(scenario.breaker, p.name).value() !=
        GetConfigProperty(defaults, p.name).value()) {
      add(p.name);
    }
  }
  return out;
}

std::vector<std::string> NarrateHeader(const SimRun& run, Language lang) {
  const Phrasebook& book = Book(lang);
  return {book.Title(run.scenario), book.Setup(run.scenario),
          book.Settings(BreakerSettingsText(run.scenario))};
}

std::vector<std::string> NarrateCalls(const SimRun& run, Language lang) {
  Narrator narrator(run, Book(lang));
  std::vector<std::string> lines;
  lines.reserve(run.calls.size());
  for (const CallRecord& rec : run.calls) lines.push_back(narrator.Call(rec));
  return lines;
}

std::vector<std::string> NarrateSummary(const SimRun& run, Language lang) {
  const Phrasebook& book = Book(lang);
  const bool breaker = run.scenario.breaker_enabled;
  return {book.ResultHeading(), book.States(run.summary.states, breaker), book.Counts(run.summary),
          book.ThreadTime(run.summary, breaker), book.DownCalls(run.summary, breaker)};
}

void WriteNarration(const SimRun& run, Language lang, std::ostream& out) {
  for (const std::string& line : NarrateHeader(run, lang)) out << line << '\n';
  out << '\n';
  for (const std::string& line : NarrateCalls(run, lang)) out << line << '\n';
  out << '\n';
  for (const std::string& line : NarrateSummary(run, lang)) out << line << '\n';
}

}  // namespace fusebox::app
