#include "apps/fusebox/trace.h"

#include <array>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "fusebox/config_names.h"
#ifdef FUSEBOX_APP_WITH_YAML
#include "fusebox/yaml/config.h"
#endif

namespace fusebox::app {
namespace {

using nlohmann::json;

// nlohmann throws on bad input; the exception stops here. Its message reads
// "[json.exception.parse_error.101] parse error at line 1, column 7: <what>":
// keep "at column 7: <what>" (the trace's own line number is ours).
Result<json> ParseJson(std::string_view line, int line_number) {
  std::string detail;
  try {
    return json::parse(line.begin(), line.end());
  } catch (const json::parse_error& e) {
    detail = e.what();
    const std::size_t at = detail.find("parse error");
    if (at != std::string::npos) detail = detail.substr(at);
    const std::size_t column = detail.find("column ");
    if (column != std::string::npos) {
      const std::size_t colon = detail.find(": ", column);
      if (colon != std::string::npos) {
        detail = "at " + detail.substr(column, colon - column) + ": " + detail.substr(colon + 2);
      }
    }
  } catch (const json::exception& e) {
    detail = e.what();
  }
  return LineError(line_number, "broken JSON (" + detail + ")");
}

// A config value as the text SetConfigProperty reads.
bool ValueText(const json& v, std::string& out) {
  if (v.is_string()) {
    out = v.get<std::string>();
  } else if (v.is_boolean()) {
    out = v.get<bool>() ? "true" : "false";
  } else if (v.is_number_unsigned()) {
    out = std::to_string(v.get<std::uint64_t>());
  } else if (v.is_number_integer()) {
    out = std::to_string(v.get<std::int64_t>());
  } else if (v.is_number_float()) {
    out = v.dump();  // The shortest spelling that reads back as the same double.
  } else {
    return false;
  }
  return true;
}

// The text of every floating-point number directly inside the config object,
// by key, as written. nlohmann reads a number into a double; a threshold must
// be read from its text straight to float, as Java's Float.parseFloat does
// ("50.000001907348633" is 50.000004f, while the double nearest to it lies
// exactly halfway between two floats and rounds to 50).
class FloatTexts : public nlohmann::json_sax<json> {
 public:
  std::map<std::string, std::string> texts;

  bool null() override { return true; }
  bool boolean(bool /*val*/) override { return true; }
  bool number_integer(number_integer_t /*val*/) override { return true; }
  bool number_unsigned(number_unsigned_t /*val*/) override { return true; }
  bool number_float(number_float_t /*val*/, const string_t& text) override {
    if (depth_ == 2) texts[key_] = text;
    return true;
  }
  bool string(string_t& /*val*/) override { return true; }
  bool binary(binary_t& /*val*/) override { return true; }
  bool start_object(std::size_t /*elements*/) override {
    ++depth_;
    return true;
  }
  bool key(string_t& val) override {
    if (depth_ == 2) key_ = val;
    return true;
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t /*elements*/) override {
    ++depth_;
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& /*ex*/) override {
    return false;
  }

 private:
  // 1 inside the line's object, 2 inside "config".
  int depth_ = 0;
  std::string key_;
};

#ifdef FUSEBOX_APP_WITH_YAML
// Through the yaml module: every property of a file's breaker instance.
using ConfigSettings = yaml::CircuitBreakerSettings;
CircuitBreakerConfig& ConfigOf(ConfigSettings& s) { return s.config; }
Status SetProperty(ConfigSettings& s, const std::string& name, const std::string& text) {
  Status st = yaml::SetCircuitBreakerProperty(s, name, text);
  // No such property: config_names.h's message, with its suggestion.
  if (st.code() == StatusCode::kNotFound) return SetConfigProperty(s.config, name, text);
  return st;
}
Status FinishSettings(ConfigSettings& s) { return yaml::FinishCircuitBreakerSettings(s); }
#else
using ConfigSettings = CircuitBreakerConfig;
CircuitBreakerConfig& ConfigOf(ConfigSettings& s) { return s; }
Status SetProperty(ConfigSettings& s, const std::string& name, const std::string& text) {
  return SetConfigProperty(s, name, text);
}
Status FinishSettings(ConfigSettings& /*s*/) { return Status(); }
#endif

constexpr std::array<std::pair<std::string_view, OperatorAction>, 7> kOperatorActions{{
    {"transitionToForcedOpenState", OperatorAction::kTransitionToForcedOpenState},
    {"transitionToDisabledState", OperatorAction::kTransitionToDisabledState},
    {"transitionToMetricsOnlyState", OperatorAction::kTransitionToMetricsOnlyState},
    {"transitionToClosedState", OperatorAction::kTransitionToClosedState},
    {"transitionToOpenState", OperatorAction::kTransitionToOpenState},
    {"transitionToHalfOpenState", OperatorAction::kTransitionToHalfOpenState},
    {"reset", OperatorAction::kReset},
}};

bool NonNegativeInteger(const json& v, std::int64_t& out) {
  if (v.is_number_unsigned()) {
    const std::uint64_t u = v.get<std::uint64_t>();
    if (u > static_cast<std::uint64_t>(INT64_MAX / 1000000)) return false;  // ms -> ns must fit
    out = static_cast<std::int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    out = v.get<std::int64_t>();
    return out >= 0 && out <= INT64_MAX / 1000000;
  }
  return false;
}

}  // namespace

std::string_view TraceEventKindName(TraceEventKind kind) {
  switch (kind) {
    case TraceEventKind::kAcquire:
      return "acquire";
    case TraceEventKind::kComplete:
      return "complete";
    case TraceEventKind::kCall:
      return "call";
    case TraceEventKind::kTick:
      return "tick";
    case TraceEventKind::kOperator:
      return "operator";
  }
  return "unknown";
}

std::string_view OperatorActionName(OperatorAction action) {
  for (const auto& [name, a] : kOperatorActions) {
    if (a == action) return name;
  }
  return "unknown";
}

Status LineError(int line_number, const std::string& what) {
  return Status::InvalidArgument("line " + std::to_string(line_number) + ": " + what);
}

bool IsBlankLine(std::string_view line) {
  for (char c : line) {
    if (!std::isspace(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

Result<CircuitBreakerConfig> ParseTraceConfigLine(std::string_view line, int line_number) {
  Result<json> parsed = ParseJson(line, line_number);
  if (!parsed) return parsed.error();
  const json& root = *parsed;
  if (!root.is_object() || root.size() != 1 || !root.contains("config")) {
    return LineError(line_number,
                     "the first line must be {\"config\": {...}} with Resilience4j's property "
                     "names (slidingWindowSize, failureRateThreshold, ...)");
  }
  const json& config_json = root["config"];
  if (!config_json.is_object()) return LineError(line_number, "config must be an object");
  // The line parsed once already, so this second pass cannot fail.
  FloatTexts floats;
  (void)json::sax_parse(line.begin(), line.end(), &floats);
  ConfigSettings settings;
  for (const auto& [name, value] : config_json.items()) {
    std::string text;
    if (!ValueText(value, text)) {
      const ConfigProperty* p = FindConfigProperty(name);
      return LineError(line_number, "config: " + name + ": expected " +
                                        std::string(p ? p->expects : "a scalar") + ", got " +
                                        value.dump());
    }
    if (value.is_number_float()) {
      if (auto written = floats.texts.find(name); written != floats.texts.end()) {
        text = written->second;
      }
    }
    if (Status s = SetProperty(settings, name, text); !s.ok()) {
      return LineError(line_number, "config: " + std::string(s.message()));
    }
  }
  if (Status s = ValidateConfigProperties(ConfigOf(settings)); !s.ok()) {
    return LineError(line_number, "config: " + std::string(s.message()));
  }
  if (Status s = FinishSettings(settings); !s.ok()) {
    return LineError(line_number, "config: " + std::string(s.message()));
  }
  return std::move(ConfigOf(settings));
}

Result<TraceEvent> ParseTraceEventLine(std::string_view line, int line_number) {
  Result<json> parsed = ParseJson(line, line_number);
  if (!parsed) return parsed.error();
  const json& root = *parsed;
  if (!root.is_object()) return LineError(line_number, "an event must be a JSON object");
  if (root.contains("config")) {
    return LineError(line_number, "config is only allowed on the first line");
  }

  TraceEvent e;
  e.line = line_number;
  static constexpr std::array<std::pair<std::string_view, TraceEventKind>, 5> kKinds{{
      {"acquire", TraceEventKind::kAcquire},
      {"complete", TraceEventKind::kComplete},
      {"call", TraceEventKind::kCall},
      {"tick", TraceEventKind::kTick},
      {"operator", TraceEventKind::kOperator},
  }};
  int kinds = 0;
  for (const auto& [name, kind] : kKinds) {
    if (root.contains(name)) {
      ++kinds;
      e.kind = kind;
    }
  }
  if (kinds != 1) {
    return LineError(line_number,
                     std::string(kinds == 0 ? "no event: " : "several events on one line: ") +
                         "give exactly one of acquire, complete, call, tick, operator");
  }
  const bool has_outcome = e.kind == TraceEventKind::kComplete || e.kind == TraceEventKind::kCall;
  for (const auto& [name, value] : root.items()) {
    const bool known = name == "t" || name == TraceEventKindName(e.kind) ||
                       (has_outcome && (name == "outcome" || name == "durationMs"));
    if (!known) {
      const bool elsewhere = name == "outcome" || name == "durationMs";
      return LineError(
          line_number,
          elsewhere ? "field \"" + name + "\" does not belong to a" +
                          (e.kind == TraceEventKind::kAcquire || e.kind == TraceEventKind::kOperator
                               ? "n "
                               : " ") +
                          std::string(TraceEventKindName(e.kind)) + " event"
                    : "unknown field \"" + name + "\"");
    }
  }
  if (!root.contains("t")) return LineError(line_number, "missing field \"t\" (milliseconds)");
  if (!NonNegativeInteger(root["t"], e.t_ms)) {
    return LineError(line_number,
                     "t must be a non-negative integer of milliseconds, got " + root["t"].dump());
  }
  const json& subject = root[std::string(TraceEventKindName(e.kind))];
  if (e.kind == TraceEventKind::kTick) {
    if (subject != true) return LineError(line_number, "tick must be true");
    return e;
  }
  if (e.kind == TraceEventKind::kOperator) {
    for (const auto& [name, action] : kOperatorActions) {
      if (subject == name) {
        e.action = action;
        return e;
      }
    }
    std::string names;
    for (const auto& [name, action] : kOperatorActions) {
      names += (names.empty() ? "" : ", ") + std::string(name);
    }
    return LineError(line_number, "operator must be one of Resilience4j's methods " + names +
                                      ", got " + subject.dump());
  }
  if (!subject.is_string() || subject.get<std::string>().empty()) {
    return LineError(line_number, std::string(TraceEventKindName(e.kind)) +
                                      " must be a non-empty string (the call's id), got " +
                                      subject.dump());
  }
  e.call = subject.get<std::string>();
  if (!has_outcome) return e;
  if (!root.contains("outcome")) {
    return LineError(line_number, "missing field \"outcome\" (success, failure or ignored)");
  }
  const json& outcome = root["outcome"];
  if (outcome == "success") {
    e.outcome = OutcomeKind::kSuccess;
  } else if (outcome == "failure") {
    e.outcome = OutcomeKind::kFailure;
  } else if (outcome == "ignored") {
    e.outcome = OutcomeKind::kIgnored;
  } else {
    return LineError(line_number, "outcome must be \"success\", \"failure\" or \"ignored\", got " +
                                      outcome.dump());
  }
  if (root.contains("durationMs") && !NonNegativeInteger(root["durationMs"], e.duration_ms)) {
    return LineError(line_number,
                     "durationMs must be a non-negative integer, got " + root["durationMs"].dump());
  }
  return e;
}

}  // namespace fusebox::app
