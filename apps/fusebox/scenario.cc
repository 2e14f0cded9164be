#include "apps/fusebox/scenario.h"

#include <yaml-cpp/yaml.h>

#include <array>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "fusebox/config_names.h"

namespace fusebox::app {
namespace {

using namespace std::chrono_literals;

constexpr std::array<std::string_view, 5> kPresetNames = {"default", "no-breaker", "threshold-30",
                                                          "wait-10s", "short-outage"};

bool ParseProbability(std::string_view text, double& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty() && out >= 0 && out <= 1;
}

// Splits "a:b:c" into exactly `n` parts.
bool SplitColons(std::string_view text, std::size_t n, std::vector<std::string_view>& parts) {
  parts.clear();
  for (;;) {
    const std::size_t colon = text.find(':');
    parts.push_back(text.substr(0, colon));
    if (colon == std::string_view::npos) break;
    text.remove_prefix(colon + 1);
  }
  return parts.size() == n;
}

Result<Duration> FlagDuration(std::string_view flag_text, std::string_view part) {
  Result<Duration> d = ParseDuration(part);
  if (!d) {
    return Status::InvalidArgument("\"" + std::string(flag_text) +
                                   "\": " + std::string(d.error().message()));
  }
  return d;
}

}  // namespace

Answer Scenario::AnswerAt(int k, double draw) const {
  const Duration t = NominalTime(k);
  Answer a;
  for (const TimeWindow& w : outages) {
    if (w.Contains(t)) {
      a.kind = Answer::Kind::kTimeout;
      a.duration = timeout;
      a.outage = true;
      return a;
    }
  }
  Duration d = latency;
  for (const Slowdown& s : slowdowns) {
    if (s.window.Contains(t)) d += s.latency;
  }
  if (d >= timeout) {
    a.kind = Answer::Kind::kTimeout;
    a.duration = timeout;
    return a;
  }
  double p = failure_probability;
  for (const ErrorBurst& b : error_bursts) {
    if (b.window.Contains(t)) p = b.probability;
  }
  a.kind = draw < p ? Answer::Kind::kError : Answer::Kind::kOk;
  a.duration = d;
  return a;
}

Status Scenario::Validate() const {
  if (calls < 1) return Status::InvalidArgument("calls must be >= 1, got " + std::to_string(calls));
  if (calls > 1000000) {
    return Status::InvalidArgument("calls must be <= 1000000, got " + std::to_string(calls));
  }
  if (interval <= Duration::zero()) return Status::InvalidArgument("interval must be > 0");
  if (timeout <= Duration::zero()) return Status::InvalidArgument("timeout must be > 0");
  if (!(failure_probability >= 0 && failure_probability <= 1)) {
    return Status::InvalidArgument("failureProbability must be in [0, 1]");
  }
  for (const ErrorBurst& b : error_bursts) {
    if (!(b.probability >= 0 && b.probability <= 1)) {
      return Status::InvalidArgument("an error burst's probability must be in [0, 1]");
    }
  }
  return ValidateConfigProperties(breaker);
}

CircuitBreakerConfig SeedBreakerConfig() {
  // Field by field: CircuitBreakerConfig's std::function members make a
  // designated initializer list trip -Wmissing-field-initializers.
  CircuitBreakerConfig config;
  config.sliding_window_type = SlidingWindowType::kCountBased;
  config.sliding_window_size = 10;
  config.minimum_number_of_calls = 10;
  config.failure_rate_threshold = 50;
  config.wait_duration_in_open_state = 5s;
  config.permitted_number_of_calls_in_half_open_state = 3;
  return config;
}

std::span<const std::string_view> PresetNames() { return kPresetNames; }

Result<Scenario> FindPreset(std::string_view name) {
  // Seed 004: one call a second for 40 s, the payment service silent from
  // second 11 (15 s, or 5 s for short-outage), a 3 s timeout. Descriptions are
  // the seed's "이렇게 바꿔 보세요" list, and its English rendering.
  Scenario s;
  s.name = std::string(name);
  s.breaker = SeedBreakerConfig();
  s.outages = {TimeWindow{11s, 15s}};
  if (name == "default") {
    s.description_ko =
        "처음 설정으로 — 장애 15초. 실패가 쌓이면 차단하고, 주기적으로 회복됐는지 떠봅니다.";
    s.description_en =
        "The initial settings — a 15 s outage. Failures pile up, the breaker opens, and now and "
        "then it probes whether the service has recovered.";
  } else if (name == "no-breaker") {
    s.breaker_enabled = false;
    s.description_ko = "서킷 브레이커가 없다면 — 장애 내내 매 호출이 3초씩 기다리다 실패합니다.";
    s.description_en =
        "Without a circuit breaker — all through the outage every call waits 3 s and fails.";
  } else if (name == "threshold-30") {
    s.breaker.failure_rate_threshold = 30;
    s.description_ko = "임계치를 낮추면 — 30%. 더 빨리 차단합니다.";
    s.description_en = "A lower threshold — 30%. The breaker opens sooner.";
  } else if (name == "wait-10s") {
    s.breaker.wait_duration_in_open_state = 10s;
    s.description_ko = "차단 시간을 길게 — 10초. 장애 중에 회복됐는지 떠보는 횟수가 줄어듭니다.";
    s.description_en = "A longer open state — 10 s. Fewer probes of the service during the outage.";
  } else if (name == "short-outage") {
    s.outages = {TimeWindow{11s, 5s}};
    s.breaker.failure_rate_threshold = 80;
    s.description_ko =
        "짧은 장애 — 장애 5초에 임계치 80%. 실패율이 임계치에 닿지 않아 서킷이 열리지 않습니다.";
    s.description_en =
        "A short outage — 5 s, with an 80% threshold. The failure rate never reaches the "
        "threshold, so the circuit never opens.";
  } else {
    std::string names;
    for (std::string_view n : kPresetNames) names += (names.empty() ? "" : ", ") + std::string(n);
    return Status::InvalidArgument("unknown preset \"" + std::string(name) +
                                   "\" (presets: " + names + ")");
  }
  return s;
}

Result<TimeWindow> ParseWindowFlag(std::string_view text) {
  std::vector<std::string_view> parts;
  if (!SplitColons(text, 2, parts)) {
    return Status::InvalidArgument("\"" + std::string(text) +
                                   "\": expected START:DURATION, e.g. 11s:15s");
  }
  Result<Duration> start = FlagDuration(text, parts[0]);
  if (!start) return start.error();
  Result<Duration> duration = FlagDuration(text, parts[1]);
  if (!duration) return duration.error();
  return TimeWindow{*start, *duration};
}

Result<Slowdown> ParseSlowdownFlag(std::string_view text) {
  std::vector<std::string_view> parts;
  if (!SplitColons(text, 3, parts)) {
    return Status::InvalidArgument("\"" + std::string(text) +
                                   "\": expected START:DURATION:LATENCY, e.g. 30s:5s:2s");
  }
  Result<TimeWindow> w = ParseWindowFlag(text.substr(0, parts[0].size() + 1 + parts[1].size()));
  if (!w) return w.error();
  Result<Duration> latency = FlagDuration(text, parts[2]);
  if (!latency) return latency.error();
  return Slowdown{*w, *latency};
}

Result<ErrorBurst> ParseErrorBurstFlag(std::string_view text) {
  std::vector<std::string_view> parts;
  if (!SplitColons(text, 3, parts)) {
    return Status::InvalidArgument("\"" + std::string(text) +
                                   "\": expected START:DURATION:PROBABILITY, e.g. 5s:10s:0.5");
  }
  Result<TimeWindow> w = ParseWindowFlag(text.substr(0, parts[0].size() + 1 + parts[1].size()));
  if (!w) return w.error();
  double p = 0;
  if (!ParseProbability(parts[2], p)) {
    return Status::InvalidArgument("\"" + std::string(text) + "\": probability must be in [0, 1]");
  }
  return ErrorBurst{*w, p};
}

Status ApplyBreakerAssignment(CircuitBreakerConfig& config, std::string_view assignment) {
  const std::size_t eq = assignment.find('=');
  if (eq == std::string_view::npos) {
    return Status::InvalidArgument("\"" + std::string(assignment) +
                                   "\": expected NAME=VALUE, e.g. failureRateThreshold=30");
  }
  return SetConfigProperty(config, assignment.substr(0, eq), assignment.substr(eq + 1));
}

// --- YAML --------------------------------------------------------------------------
//
// yaml-cpp throws; every exception stops here and becomes kInvalidArgument with
// the line and column.

namespace {

class YamlReader {
 public:
  explicit YamlReader(std::string_view source) : source_(source) {}

  Status Error(const YAML::Mark& mark, const std::string& what) const {
    std::string where(source_);
    if (!mark.is_null()) {
      where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
    }
    return Status::InvalidArgument(where + ": " + what);
  }

  Status Scalar(const YAML::Node& node, std::string_view key, std::string& out) const {
    if (!node.IsScalar()) return Error(node.Mark(), std::string(key) + " must be a scalar");
    out = node.Scalar();
    return Status();
  }

  Status DurationOf(const YAML::Node& node, std::string_view key, Duration& out) const {
    std::string text;
    if (Status s = Scalar(node, key, text); !s.ok()) return s;
    Result<Duration> d = ParseDuration(text);
    if (!d) return Error(node.Mark(), std::string(key) + ": " + std::string(d.error().message()));
    out = *d;
    return Status();
  }

  Status NumberOf(const YAML::Node& node, std::string_view key, double& out) const {
    std::string text;
    if (Status s = Scalar(node, key, text); !s.ok()) return s;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, out);
    if (ec != std::errc() || ptr != end || text.empty() || !std::isfinite(out)) {
      return Error(node.Mark(), std::string(key) + ": expected a number, got \"" + text + "\"");
    }
    return Status();
  }

  template <typename Int>
  Status IntegerOf(const YAML::Node& node, std::string_view key, Int& out) const {
    std::string text;
    if (Status s = Scalar(node, key, text); !s.ok()) return s;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, out);
    if (ec != std::errc() || ptr != end || text.empty()) {
      return Error(node.Mark(), std::string(key) + ": expected an integer, got \"" + text + "\"");
    }
    return Status();
  }

  // A list of maps with exactly the keys start, duration and `extra`.
  template <typename Fn>
  Status Windows(const YAML::Node& list, std::string_view key, std::string_view extra,
                 Fn&& on_item) const {
    if (!list.IsSequence()) {
      return Error(list.Mark(), std::string(key) + " must be a list of {start, duration" +
                                    (extra.empty() ? "" : ", " + std::string(extra)) + "}");
    }
    for (const YAML::Node& item : list) {
      if (!item.IsMap()) return Error(item.Mark(), std::string(key) + ": each item must be a map");
      TimeWindow w;
      bool has_start = false, has_duration = false;
      YAML::Node extra_node;
      for (const auto& kv : item) {
        const std::string k = kv.first.Scalar();
        if (k == "start") {
          has_start = true;
          if (Status s = DurationOf(kv.second, "start", w.start); !s.ok()) return s;
        } else if (k == "duration") {
          has_duration = true;
          if (Status s = DurationOf(kv.second, "duration", w.duration); !s.ok()) return s;
        } else if (!extra.empty() && k == extra) {
          extra_node = kv.second;
        } else {
          return Error(kv.first.Mark(), std::string(key) + ": unknown key \"" + k + "\"");
        }
      }
      if (!has_start || !has_duration || (!extra.empty() && !extra_node)) {
        return Error(item.Mark(), std::string(key) + ": each item needs start, duration" +
                                      (extra.empty() ? "" : " and " + std::string(extra)));
      }
      if (Status s = on_item(w, extra_node); !s.ok()) return s;
    }
    return Status();
  }

  // Over 80 lines on purpose: one branch per scenario key (the keys of
  // docs/cli.md's scenario file, in its order), each a line or two.
  Result<Scenario> Read(const YAML::Node& root) const {
    if (!root.IsMap()) return Error(root.Mark(), "a scenario must be a map of keys");
    Scenario s;
    s.breaker = CircuitBreakerConfig{};
    if (const YAML::Node preset = root["preset"]) {
      std::string name;
      if (Status st = Scalar(preset, "preset", name); !st.ok()) return st;
      Result<Scenario> p = FindPreset(name);
      if (!p) return Error(preset.Mark(), std::string(p.error().message()));
      s = std::move(*p);
    }
    bool has_interval = false, has_rate = false;
    for (const auto& kv : root) {
      const std::string key = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      Status st;
      if (key == "preset") {
        continue;
      } else if (key == "name") {
        st = Scalar(v, key, s.name);
        s.description_en.clear();
        s.description_ko.clear();
      } else if (key == "calls") {
        st = IntegerOf(v, key, s.calls);
      } else if (key == "interval") {
        has_interval = true;
        st = DurationOf(v, key, s.interval);
      } else if (key == "rate") {
        has_rate = true;
        double rate = 0;
        st = NumberOf(v, key, rate);
        if (st.ok() && !(rate > 0 && rate <= 1e9)) {
          st = Error(v.Mark(), "rate: calls per second must be > 0");
        }
        if (st.ok()) s.interval = Duration(static_cast<Duration::rep>(std::llround(1e9 / rate)));
      } else if (key == "timeout") {
        st = DurationOf(v, key, s.timeout);
      } else if (key == "latency") {
        st = DurationOf(v, key, s.latency);
      } else if (key == "failureProbability") {
        st = NumberOf(v, key, s.failure_probability);
      } else if (key == "seed") {
        st = IntegerOf(v, key, s.seed);
      } else if (key == "outages") {
        s.outages.clear();
        st = Windows(v, key, "", [&](const TimeWindow& w, const YAML::Node&) {
          s.outages.push_back(w);
          return Status();
        });
      } else if (key == "slowdowns") {
        s.slowdowns.clear();
        st = Windows(v, key, "latency", [&](const TimeWindow& w, const YAML::Node& extra) {
          Slowdown sd{w, Duration::zero()};
          Status e = DurationOf(extra, "latency", sd.latency);
          if (e.ok()) s.slowdowns.push_back(sd);
          return e;
        });
      } else if (key == "errorBursts") {
        s.error_bursts.clear();
        st = Windows(v, key, "probability", [&](const TimeWindow& w, const YAML::Node& extra) {
          ErrorBurst b{w, 0};
          Status e = NumberOf(extra, "probability", b.probability);
          if (e.ok() && !(b.probability >= 0 && b.probability <= 1)) {
            e = Error(extra.Mark(), "probability must be in [0, 1]");
          }
          if (e.ok()) s.error_bursts.push_back(b);
          return e;
        });
      } else if (key == "breaker") {
        st = Breaker(v, s);
      } else {
        st = Error(kv.first.Mark(), "unknown key \"" + key + "\"");
      }
      if (!st.ok()) return st;
    }
    if (has_interval && has_rate) {
      return Error(root.Mark(), "give interval or rate, not both");
    }
    if (Status st = s.Validate(); !st.ok()) {
      return Error(YAML::Mark::null_mark(), std::string(st.message()));
    }
    return s;
  }

 private:
  Status Breaker(const YAML::Node& v, Scenario& s) const {
    if (v.IsScalar() && (v.Scalar() == "none" || v.Scalar() == "off")) {
      s.breaker_enabled = false;
      return Status();
    }
    if (!v.IsMap()) {
      return Error(v.Mark(), "breaker must be \"none\" or a map of Resilience4j properties");
    }
    s.breaker_enabled = true;
    for (const auto& kv : v) {
      std::string value;
      const std::string name = kv.first.Scalar();
      if (Status st = Scalar(kv.second, name, value); !st.ok()) return st;
      if (Status st = SetConfigProperty(s.breaker, name, value); !st.ok()) {
        return Error(FindConfigProperty(name) ? kv.second.Mark() : kv.first.Mark(),
                     std::string(st.message()));
      }
    }
    return Status();
  }

  std::string_view source_;
};

}  // namespace

Result<Scenario> ParseScenarioYaml(std::string_view text, std::string_view source) {
  YamlReader reader(source);
  try {
    const YAML::Node root = YAML::Load(std::string(text));
    return reader.Read(root);
  } catch (const YAML::Exception& e) {
    return reader.Error(e.mark, e.msg);
  }
}

Result<Scenario> LoadScenarioFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot read scenario file \"" + path + "\"");
  // One byte past the limit is enough to refuse the file: no more is read.
  std::string text(kMaxScenarioBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return Status::InvalidArgument("cannot read scenario file \"" + path + "\"");
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxScenarioBytes) {
    return Status::InvalidArgument("scenario file \"" + path + "\" is larger than 1 MiB");
  }
  return ParseScenarioYaml(text, path);
}

}  // namespace fusebox::app
