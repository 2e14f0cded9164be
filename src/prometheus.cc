// Prometheus text exposition of a MetricsSnapshot.
//
// Built for a registry of thousands of breakers on every scrape (target:
// 10,000 breakers in <= 20 ms, bench/metrics_benchmark.cc): one output string
// grown in place, numbers through std::to_chars, each group's escaped name
// label computed once, no iostreams and no per-line allocation.
#include "fusebox/prometheus.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <tuple>
#include <unordered_map>

#include "json_line.h"

namespace fusebox {
namespace {

constexpr State kAllStates[] = {State::kClosed,      State::kOpen,       State::kHalfOpen,
                                State::kDisabled,    State::kForcedOpen, State::kMetricsOnly,
                                State::kForcedClosed};
constexpr const char* kKinds[] = {"successful", "failed", "ignored"};

bool ValidPrefix(std::string_view p) {
  if (p.empty()) return false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

// Label value escaping of the text format: backslash, double quote and line
// feed; the value must also be valid UTF-8, so invalid bytes become U+FFFD.
void AppendLabelValue(std::string& out, std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const std::size_t n = internal::Utf8SequenceLength(s, i);
      if (n == 0) {
        out.append("\xEF\xBF\xBD");
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '"') {
      out.append("\\\"");
    } else if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(static_cast<char>(c));
    }
    ++i;
  }
}

void AppendNumber(std::string& out, double v) {
  if (std::isnan(v)) {
    out.append("NaN");
  } else if (std::isinf(v)) {
    out.append(v > 0 ? "+Inf" : "-Inf");
  } else {
    char buf[32];
    out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  }
}

void AppendNumber(std::string& out, float v) {
  char buf[32];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void AppendNumber(std::string& out, std::uint64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void AppendNumber(std::string& out, std::int64_t v) {
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

double Seconds(Duration d) { return static_cast<double>(d.count()) / 1e9; }

auto TransitionKey(const TransitionCount& t) {
  return std::make_tuple(static_cast<int>(t.from), static_cast<int>(t.to),
                         static_cast<int>(t.reason));
}

// The breakers reported under one name label.
struct Group {
  // `name="..."`, escaped.
  std::string name_label;
  std::int64_t members = 0;
  std::int64_t in_state[7] = {};
  int state_code = 0;
  std::int64_t buffered_failed = 0;
  std::int64_t buffered_successful = 0;
  std::int64_t window_slow_successful = 0;
  std::int64_t window_slow_failed = 0;
  float failure_rate = -1;
  float slow_call_rate = -1;
  BreakerCounters counters;
};

void Merge(Group& g, const BreakerSample& s) {
  const CircuitBreakerMetrics& w = s.window;
  const int code = StateCode(w.state);
  g.in_state[static_cast<int>(w.state)] += 1;
  g.state_code = g.members == 0 ? code : std::max(g.state_code, code);
  ++g.members;
  g.buffered_failed += w.failed_calls;
  g.buffered_successful += w.successful_calls;
  g.window_slow_successful += w.slow_successful_calls;
  g.window_slow_failed += w.slow_failed_calls;
  g.failure_rate = std::max(g.failure_rate, w.failure_rate);
  g.slow_call_rate = std::max(g.slow_call_rate, w.slow_call_rate);
  if (!s.observed) return;
  BreakerCounters& c = g.counters;
  const BreakerCounters& d = s.counters;
  for (int i = 0; i < 3; ++i) {
    c.calls[i] += d.calls[i];
    c.call_duration[i] += d.call_duration[i];
    c.probes[i] += d.probes[i];
  }
  c.slow_successful += d.slow_successful;
  c.slow_failed += d.slow_failed;
  c.not_permitted += d.not_permitted;
  c.time_open += d.time_open;
  if (c.transitions.empty()) {
    c.transitions = d.transitions;
    return;
  }
  for (const TransitionCount& t : d.transitions) {
    auto it = std::lower_bound(c.transitions.begin(), c.transitions.end(), t,
                               [](const TransitionCount& a, const TransitionCount& b) {
                                 return TransitionKey(a) < TransitionKey(b);
                               });
    if (it != c.transitions.end() && TransitionKey(*it) == TransitionKey(t)) {
      it->count += t.count;
    } else {
      c.transitions.insert(it, t);
    }
  }
}

std::vector<Group> GroupBreakers(const std::vector<BreakerSample>& samples,
                                 const LabelFunction& label) {
  std::vector<Group> groups;
  groups.reserve(samples.size());
  std::unordered_map<std::string, std::size_t> index;
  index.reserve(samples.size());
  for (const BreakerSample& s : samples) {
    std::string value = label ? label(s.name) : s.name;
    auto [it, inserted] = index.try_emplace(std::move(value), groups.size());
    if (inserted) {
      Group& g = groups.emplace_back();
      g.name_label.reserve(it->first.size() + 8);
      g.name_label.append("name=\"");
      AppendLabelValue(g.name_label, it->first);
      g.name_label.push_back('"');
    }
    Merge(groups[it->second], s);
  }
  // Sorted by name, so that two scrapes of the same state are the same text
  // (a registry's iteration order is its hash order).
  std::sort(groups.begin(), groups.end(),
            [](const Group& a, const Group& b) { return a.name_label < b.name_label; });
  return groups;
}

class Writer {
 public:
  Writer(std::string& out, std::string_view prefix) : out_(out), prefix_(prefix) {}

  // "# HELP <prefix>_<name> <help>\n# TYPE <prefix>_<name> <type>\n".
  void Header(std::string_view name, std::string_view type, std::string_view help) {
    out_.append("# HELP ");
    Name(name);
    out_.push_back(' ');
    out_.append(help);
    out_.append("\n# TYPE ");
    Name(name);
    out_.push_back(' ');
    out_.append(type);
    out_.push_back('\n');
  }

  // `<prefix>_<name>{` then labels, joined by the caller.
  void Open(std::string_view name) {
    Name(name);
    out_.push_back('{');
  }
  template <typename V>
  void Close(V value) {
    out_.append("} ");
    AppendNumber(out_, value);
    out_.push_back('\n');
  }
  // A label `key="value"` (value escaped), with a leading comma unless first.
  void Label(std::string_view key, std::string_view value, bool first = false) {
    if (!first) out_.push_back(',');
    out_.append(key);
    out_.append("=\"");
    AppendLabelValue(out_, value);
    out_.push_back('"');
  }
  // A label whose value is known not to need escaping.
  void RawLabel(std::string_view key, std::string_view value, bool first = false) {
    if (!first) out_.push_back(',');
    out_.append(key);
    out_.append("=\"");
    out_.append(value);
    out_.push_back('"');
  }
  void NameLabel(const Group& g, bool first) {
    if (!first) out_.push_back(',');
    out_.append(g.name_label);
  }
  template <typename V>
  void Unlabelled(std::string_view name, V value) {
    Name(name);
    out_.push_back(' ');
    AppendNumber(out_, value);
    out_.push_back('\n');
  }

 private:
  void Name(std::string_view name) {
    out_.append(prefix_);
    out_.push_back('_');
    out_.append(name);
  }
  std::string& out_;
  std::string_view prefix_;
};

void WriteBreakers(Writer& w, const std::vector<Group>& groups, bool extensions, bool aggregated) {
  if (groups.empty()) return;

  // --- Resilience4j's Micrometer families (TaggedCircuitBreakerMetrics). ---
  w.Header("circuitbreaker_state", "gauge", "The states of the circuit breaker");
  for (const Group& g : groups) {
    for (State s : kAllStates) {
      w.Open("circuitbreaker_state");
      w.NameLabel(g, true);
      w.RawLabel("state", StateLabel(s));
      w.Close(g.in_state[static_cast<int>(s)]);
    }
  }

  w.Header("circuitbreaker_calls_seconds", "summary", "Total number of calls by kind");
  for (const Group& g : groups) {
    for (int k = 0; k < 3; ++k) {
      w.Open("circuitbreaker_calls_seconds_count");
      w.RawLabel("kind", kKinds[k], true);
      w.NameLabel(g, false);
      w.Close(g.counters.calls[k]);
      w.Open("circuitbreaker_calls_seconds_sum");
      w.RawLabel("kind", kKinds[k], true);
      w.NameLabel(g, false);
      w.Close(Seconds(g.counters.call_duration[k]));
    }
  }

  w.Header("circuitbreaker_not_permitted_calls_total", "counter",
           "Total number of not permitted calls");
  for (const Group& g : groups) {
    w.Open("circuitbreaker_not_permitted_calls_total");
    w.RawLabel("kind", "not_permitted", true);
    w.NameLabel(g, false);
    w.Close(g.counters.not_permitted);
  }

  w.Header("circuitbreaker_buffered_calls", "gauge",
           "The number of buffered calls stored in the sliding window");
  for (const Group& g : groups) {
    w.Open("circuitbreaker_buffered_calls");
    w.RawLabel("kind", "failed", true);
    w.NameLabel(g, false);
    w.Close(g.buffered_failed);
    w.Open("circuitbreaker_buffered_calls");
    w.RawLabel("kind", "successful", true);
    w.NameLabel(g, false);
    w.Close(g.buffered_successful);
  }

  w.Header("circuitbreaker_slow_calls", "gauge",
           "The number of slow calls in the sliding window, slower than the threshold");
  for (const Group& g : groups) {
    w.Open("circuitbreaker_slow_calls");
    w.RawLabel("kind", "successful", true);
    w.NameLabel(g, false);
    w.Close(g.window_slow_successful);
    w.Open("circuitbreaker_slow_calls");
    w.RawLabel("kind", "failed", true);
    w.NameLabel(g, false);
    w.Close(g.window_slow_failed);
  }

  w.Header("circuitbreaker_failure_rate", "gauge",
           "The failure rate of the circuit breaker in percent, -1 below the minimum number of "
           "calls");
  for (const Group& g : groups) {
    w.Open("circuitbreaker_failure_rate");
    w.NameLabel(g, true);
    w.Close(g.failure_rate);
  }

  w.Header("circuitbreaker_slow_call_rate", "gauge",
           "The slow call rate of the circuit breaker in percent, -1 below the minimum number of "
           "calls");
  for (const Group& g : groups) {
    w.Open("circuitbreaker_slow_call_rate");
    w.NameLabel(g, true);
    w.Close(g.slow_call_rate);
  }

  if (!extensions) return;

  // --- fusebox's own. ---
  w.Header("circuitbreaker_state_code", "gauge",
           "The state as a number: closed=0, half_open=1, open=2, disabled=3, metrics_only=4, "
           "forced_open=5, forced_closed=6 (aggregated series: the highest member's)");
  for (const Group& g : groups) {
    w.Open("circuitbreaker_state_code");
    w.NameLabel(g, true);
    w.Close(static_cast<std::int64_t>(g.state_code));
  }

  if (aggregated) {
    w.Header("circuitbreaker_instances", "gauge",
             "The number of circuit breakers reported under this name label");
    for (const Group& g : groups) {
      w.Open("circuitbreaker_instances");
      w.NameLabel(g, true);
      w.Close(g.members);
    }
  }

  bool any_transition = false;
  for (const Group& g : groups) any_transition = any_transition || !g.counters.transitions.empty();
  if (any_transition) {
    w.Header("circuitbreaker_transitions_total", "counter",
             "State transitions by from, to and reason");
    for (const Group& g : groups) {
      for (const TransitionCount& t : g.counters.transitions) {
        w.Open("circuitbreaker_transitions_total");
        w.RawLabel("from", StateLabel(t.from), true);
        w.NameLabel(g, false);
        w.RawLabel("reason", TransitionReasonName(t.reason));
        w.RawLabel("to", StateLabel(t.to));
        w.Close(t.count);
      }
    }
  }

  w.Header("circuitbreaker_open_seconds_total", "counter", "Time spent in the OPEN state");
  for (const Group& g : groups) {
    w.Open("circuitbreaker_open_seconds_total");
    w.NameLabel(g, true);
    w.Close(Seconds(g.counters.time_open));
  }

  w.Header("circuitbreaker_half_open_probes_total", "counter",
           "Outcomes of the calls admitted as half-open probes, by kind");
  for (const Group& g : groups) {
    for (int k = 0; k < 3; ++k) {
      w.Open("circuitbreaker_half_open_probes_total");
      w.RawLabel("kind", kKinds[k], true);
      w.NameLabel(g, false);
      w.Close(g.counters.probes[k]);
    }
  }

  w.Header("circuitbreaker_slow_call_outcomes_total", "counter",
           "Calls slower than the slow call threshold, by kind, since observed");
  for (const Group& g : groups) {
    w.Open("circuitbreaker_slow_call_outcomes_total");
    w.RawLabel("kind", "successful", true);
    w.NameLabel(g, false);
    w.Close(g.counters.slow_successful);
    w.Open("circuitbreaker_slow_call_outcomes_total");
    w.RawLabel("kind", "failed", true);
    w.NameLabel(g, false);
    w.Close(g.counters.slow_failed);
  }
}

void WriteRegistry(Writer& w, const RegistrySample& r) {
  w.Header("circuitbreaker_registry_size", "gauge", "Circuit breakers held by the registry");
  w.Unlabelled("circuitbreaker_registry_size", static_cast<std::uint64_t>(r.breakers));
  w.Header("circuitbreaker_registry_events_total", "counter",
           "Registry events: breakers created, evicted (idle, lru), removed, capacity exceeded");
  constexpr RegistryEvent::Kind kinds[] = {
      RegistryEvent::Kind::kCreated, RegistryEvent::Kind::kEvictedIdle,
      RegistryEvent::Kind::kEvictedLru, RegistryEvent::Kind::kRemoved,
      RegistryEvent::Kind::kCapacityExceeded};
  for (RegistryEvent::Kind k : kinds) {
    w.Open("circuitbreaker_registry_events_total");
    w.RawLabel("kind", RegistryEventKindName(k), true);
    w.Close(r.events[static_cast<int>(k)]);
  }
}

template <typename Sample, typename Value>
void WriteGauge(Writer& w, const std::vector<Sample>& samples, std::string_view name,
                std::string_view help, Value value) {
  if (samples.empty()) return;
  w.Header(name, "gauge", help);
  for (const Sample& s : samples) {
    w.Open(name);
    w.Label("name", s.name, true);
    w.Close(static_cast<std::int64_t>(value(s)));
  }
}

template <typename Sample, typename Value>
void WriteCounter(Writer& w, const std::vector<Sample>& samples, std::string_view name,
                  std::string_view help, Value value) {
  if (samples.empty()) return;
  w.Header(name, "counter", help);
  for (const Sample& s : samples) {
    w.Open(name);
    w.Label("name", s.name, true);
    w.Close(static_cast<std::uint64_t>(value(s)));
  }
}

void WritePolicies(Writer& w, const MetricsSnapshot& s, bool extensions) {
  WriteGauge(w, s.bulkheads, "bulkhead_available_concurrent_calls",
             "The number of available permissions",
             [](const BulkheadSample& b) { return b.available_concurrent_calls; });
  WriteGauge(w, s.bulkheads, "bulkhead_max_allowed_concurrent_calls",
             "The maximum number of available permissions",
             [](const BulkheadSample& b) { return b.max_allowed_concurrent_calls; });
  if (extensions) {
    WriteGauge(w, s.bulkheads, "bulkhead_waiting_calls", "Callers waiting for a permission",
               [](const BulkheadSample& b) { return b.waiting_calls; });
    WriteCounter(w, s.bulkheads, "bulkhead_rejected_calls_total",
                 "Calls the bulkhead refused (full, too many waiting, wait ran out)",
                 [](const BulkheadSample& b) { return b.rejected_calls; });
  }
  WriteGauge(w, s.rate_limiters, "ratelimiter_available_permissions",
             "The number of available permissions",
             [](const RateLimiterSample& r) { return r.available_permissions; });
  if (extensions) {
    WriteGauge(w, s.rate_limiters, "ratelimiter_limit_for_period",
               "Permits per refresh period, the largest burst",
               [](const RateLimiterSample& r) { return r.limit_for_period; });
    WriteCounter(w, s.rate_limiters, "ratelimiter_rejected_calls_total",
                 "Requests the rate limiter refused (no permit in time)",
                 [](const RateLimiterSample& r) { return r.rejected_calls; });
  }
  if (!s.retries.empty()) {
    w.Header("retry_calls_total", "counter", "The number of retry loops by how they ended");
    for (const RetrySample& r : s.retries) {
      const std::pair<const char*, std::uint64_t> kinds[] = {
          {"failed_with_retry", r.failed_with_retry},
          {"failed_without_retry", r.failed_without_retry},
          {"successful_with_retry", r.successful_with_retry},
          {"successful_without_retry", r.successful_without_retry},
      };
      for (const auto& [kind, count] : kinds) {
        w.Open("retry_calls_total");
        w.RawLabel("kind", kind, true);
        w.Label("name", r.name);
        w.Close(count);
      }
    }
  }
}

void WriteSharedStates(Writer& w, const std::vector<SharedStateSample>& states) {
  if (states.empty()) return;
  WriteGauge(w, states, "shared_state_up",
             "1 while the shared state is reachable and its pushes arrive, else 0 (fail-open)",
             [](const SharedStateSample& s) { return s.health.healthy ? 1 : 0; });
  struct Family {
    const char* name;
    const char* help;
    std::int64_t SharedStateHealth::*field;
  };
  static constexpr Family kFamilies[] = {
      {"shared_state_errors_total", "Commands to the shared state that failed",
       &SharedStateHealth::errors},
      {"shared_state_fail_open_periods_total",
       "Times the shared state was given up for a while after repeated failures",
       &SharedStateHealth::fail_open_periods},
      {"shared_state_refused_calls_total",
       "Calls answered unavailable without contacting the shared state",
       &SharedStateHealth::refused_calls},
      {"shared_state_leases_granted_total", "Probe leases this instance was granted",
       &SharedStateHealth::leases_granted},
      {"shared_state_lease_contention_total",
       "Probe leases asked for while another instance held one",
       &SharedStateHealth::lease_contention},
      {"shared_state_events_total", "Changes pushed to this instance", &SharedStateHealth::events},
      {"shared_state_dropped_total", "Trips, closes, releases or overrides that could not be sent",
       &SharedStateHealth::dropped},
  };
  for (const Family& f : kFamilies) {
    w.Header(f.name, "counter", f.help);
    for (const SharedStateSample& s : states) {
      w.Open(f.name);
      w.Label("name", s.name, true);
      w.Close(static_cast<std::uint64_t>(s.health.*f.field));
    }
  }
}

}  // namespace

LabelFunction MaskKeySegments(std::vector<int> indexes, char separator) {
  std::sort(indexes.begin(), indexes.end());
  return [indexes = std::move(indexes), separator](std::string_view name) {
    std::string out;
    out.reserve(name.size());
    int segment = 0;
    std::size_t start = 0;
    while (true) {
      const std::size_t end = name.find(separator, start);
      const std::string_view part =
          name.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
      if (std::binary_search(indexes.begin(), indexes.end(), segment)) {
        out.push_back('*');
      } else {
        out.append(part);
      }
      if (end == std::string_view::npos) break;
      out.push_back(separator);
      start = end + 1;
      ++segment;
    }
    return out;
  };
}

Status ValidatePrometheusOptions(const PrometheusOptions& options) {
  if (!ValidPrefix(options.prefix)) {
    return Status::InvalidArgument("prefix must match [a-zA-Z_:][a-zA-Z0-9_:]*, got '" +
                                   options.prefix + "'");
  }
  return Status();
}

void AppendPrometheus(const MetricsSnapshot& snapshot, const PrometheusOptions& options,
                      std::string& out) {
  assert(ValidPrefix(options.prefix) && "invalid PrometheusOptions::prefix");
  Writer w(out, options.prefix);
  const std::vector<Group> groups = GroupBreakers(snapshot.breakers, options.name_label);
  // Reserve what the text will take, a little more rather than less: one
  // regrowth of a 30 MB string (10,000 breakers) costs as much as rendering
  // it, and pages reserved but never written cost nothing.
  std::size_t estimate = 4096 + 256 * (snapshot.bulkheads.size() + snapshot.rate_limiters.size() +
                                       4 * snapshot.retries.size());
  for (const Group& g : groups) {
    const std::size_t lines = 36 + g.counters.transitions.size();
    estimate += lines * (options.prefix.size() + g.name_label.size() + 96);
  }
  out.reserve(out.size() + estimate);
  WriteBreakers(w, groups, options.fusebox_extensions, options.name_label != nullptr);
  if (snapshot.registry && options.fusebox_extensions) WriteRegistry(w, *snapshot.registry);
  WritePolicies(w, snapshot, options.fusebox_extensions);
  if (options.fusebox_extensions) WriteSharedStates(w, snapshot.shared_states);
}

std::string RenderPrometheus(const MetricsSnapshot& snapshot, const PrometheusOptions& options) {
  std::string out;
  AppendPrometheus(snapshot, options, out);
  return out;
}

}  // namespace fusebox
