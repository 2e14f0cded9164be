#include "apps/fusebox/trace.h"

#include <array>
#include <cctype>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "fusebox/config_names.h"

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
  CircuitBreakerConfig config;
  for (const auto& [name, value] : config_json.items()) {
    std::string text;
    if (!ValueText(value, text)) {
      const ConfigProperty* p = FindConfigProperty(name);
      return LineError(line_number, "config: " + name + ": expected " +
                                        std::string(p ? p->expects : "a scalar") + ", got " +
                                        value.dump());
    }
    if (Status s = SetConfigProperty(config, name, text); !s.ok()) {
      return LineError(line_number, "config: " + std::string(s.message()));
    }
  }
  if (Status s = ValidateConfigProperties(config); !s.ok()) {
    return LineError(line_number, "config: " + std::string(s.message()));
  }
  return config;
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
  static constexpr std::array<std::pair<std::string_view, TraceEventKind>, 4> kKinds{{
      {"acquire", TraceEventKind::kAcquire},
      {"complete", TraceEventKind::kComplete},
      {"call", TraceEventKind::kCall},
      {"tick", TraceEventKind::kTick},
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
                         "give exactly one of acquire, complete, call, tick");
  }
  const bool has_outcome = e.kind == TraceEventKind::kComplete || e.kind == TraceEventKind::kCall;
  for (const auto& [name, value] : root.items()) {
    const bool known = name == "t" || name == TraceEventKindName(e.kind) ||
                       (has_outcome && (name == "outcome" || name == "durationMs"));
    if (!known) {
      const bool elsewhere = name == "outcome" || name == "durationMs";
      return LineError(line_number, elsewhere
                                        ? "field \"" + name + "\" does not belong to a" +
                                              (e.kind == TraceEventKind::kAcquire ? "n " : " ") +
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
