// apps/fusebox/scenario.h: what `fusebox sim` simulates.
//
// A Scenario is seed 004's story made general: a caller sends `calls` calls,
// one every `interval`, to a dependency whose behaviour changes over time
// (outages, slowdowns, bursts of errors, a background error probability), with
// a circuit breaker (or none) in between. The five presets of the seed are
// Presets(); a YAML file (LoadScenarioFile) or command-line flags describe any
// other.
//
// The dependency model, per call at its nominal time t = k * interval:
//   - inside an outage window it does not answer: the call fails after
//     `timeout` (a timeout);
//   - otherwise it answers after `latency` plus the latency of every slowdown
//     window covering t; an answer slower than `timeout` is a timeout too;
//   - an answer is an error with probability `failure_probability` (or the
//     probability of the error burst covering t), drawn from a generator seeded
//     with `seed`, one draw per call whether or not the breaker lets it through,
//     so that every configuration meets the same dependency.
// Windows are half-open, [start, start + duration), on nominal times.
//
// Thread-compatible.
#ifndef FUSEBOX_APPS_FUSEBOX_SCENARIO_H_
#define FUSEBOX_APPS_FUSEBOX_SCENARIO_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox::app {

// [start, start + duration) on the scenario's nominal time line.
struct TimeWindow {
  Duration start = Duration::zero();
  Duration duration = Duration::zero();
  bool Contains(Duration t) const { return t >= start && t - start < duration; }
};

// The dependency answers `latency` slower inside `window`.
struct Slowdown {
  TimeWindow window;
  Duration latency = Duration::zero();
};

// Inside `window`, each answer is an error with `probability`.
struct ErrorBurst {
  TimeWindow window;
  double probability = 0;
};

// What the dependency does with one call, whatever the breaker decides.
struct Answer {
  enum class Kind : std::uint8_t { kOk, kError, kTimeout };
  Kind kind = Kind::kOk;
  // How long the caller waits for it: the latency, or the timeout.
  Duration duration = Duration::zero();
  // True inside an outage window (no answer at all).
  bool outage = false;
  bool healthy() const { return kind == Kind::kOk; }
};

struct Scenario {
  // A preset's name, the file's `name`, or "custom".
  std::string name = "custom";
  // One line each, shown above the timeline; empty for custom scenarios.
  std::string description_en;
  std::string description_ko;

  // Number of calls. Default: 40.
  int calls = 40;
  // Time between calls (> 0). Default: 1 s.
  Duration interval = std::chrono::seconds(1);
  // How long a caller waits for an answer (> 0). Default: 3 s.
  Duration timeout = std::chrono::seconds(3);
  // A healthy answer's latency. Default: 0.
  Duration latency = Duration::zero();
  // Probability that an answer outside every error burst is an error.
  // Default: 0.
  double failure_probability = 0;
  // Seed of the error draws. Default: 1.
  std::uint64_t seed = 1;
  std::vector<TimeWindow> outages;
  std::vector<Slowdown> slowdowns;
  std::vector<ErrorBurst> error_bursts;

  // False: no breaker at all (a DISABLED breaker that records nothing).
  bool breaker_enabled = true;
  // The breaker. A scenario starts from Resilience4j's defaults; the presets
  // from the seed's application.yml.
  CircuitBreakerConfig breaker;

  // Nominal time of call k (1-based): k * interval.
  Duration NominalTime(int k) const { return k * interval; }

  // What the dependency does with call k; `draw` is the call's uniform draw in
  // [0, 1).
  Answer AnswerAt(int k, double draw) const;

  // OK, or kInvalidArgument naming the field at fault (breaker settings in
  // their Resilience4j names).
  Status Validate() const;
};

// The seed's application.yml: slidingWindowSize 10, minimumNumberOfCalls 10,
// failureRateThreshold 50, waitDurationInOpenState 5s,
// permittedNumberOfCallsInHalfOpenState 3 (COUNT_BASED).
CircuitBreakerConfig SeedBreakerConfig();

// default, no-breaker, threshold-30, wait-10s, short-outage: seed 004's five.
std::span<const std::string_view> PresetNames();

// The preset named `name`, or kInvalidArgument listing the presets.
Result<Scenario> FindPreset(std::string_view name);

// Parses a scenario from YAML `text`. `source` names it in messages
// ("file.yaml:3:5: unknown key \"calz\""). Keys:
//   preset: default        # start from a preset instead of the defaults
//   name, calls, interval (or rate: calls per second), timeout, latency,
//   failureProbability, seed,
//   outages:    [{start: 11s, duration: 15s}]
//   slowdowns:  [{start: 30s, duration: 5s, latency: 2s}]
//   errorBursts: [{start: 5s, duration: 10s, probability: 0.5}]
//   breaker: none | {<Resilience4j property>: value, ...}
Result<Scenario> ParseScenarioYaml(std::string_view text, std::string_view source);

// A scenario file larger than this is refused unread (a scenario is a few
// hundred bytes; the configuration loader's limit, fusebox/yaml/config.h).
inline constexpr std::size_t kMaxScenarioBytes = 1 << 20;

// Reads and parses the file at `path`.
Result<Scenario> LoadScenarioFile(const std::string& path);

// "11s:15s" (start:duration) as given to --outage.
Result<TimeWindow> ParseWindowFlag(std::string_view text);
// "30s:5s:2s" (start:duration:latency) as given to --slowdown.
Result<Slowdown> ParseSlowdownFlag(std::string_view text);
// "5s:10s:0.5" (start:duration:probability) as given to --error-burst.
Result<ErrorBurst> ParseErrorBurstFlag(std::string_view text);

// Applies "name=value" (a Resilience4j property) to `config`.
Status ApplyBreakerAssignment(CircuitBreakerConfig& config, std::string_view assignment);

}  // namespace fusebox::app

#endif  // FUSEBOX_APPS_FUSEBOX_SCENARIO_H_
