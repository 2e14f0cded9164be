// Private helpers for the JSON lines of event_log.cc and audit_log.cc and the
// label values of prometheus.cc: string escaping, UTF-8 repair, numbers and
// RFC 3339 times, written into a caller's std::string without iostreams.
#ifndef FUSEBOX_SRC_JSON_LINE_H_
#define FUSEBOX_SRC_JSON_LINE_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "fusebox/clock.h"

namespace fusebox::internal {

// A steady time point, and a duration, in whole milliseconds (truncated).
std::int64_t SteadyMs(TimePoint t);
std::int64_t Ms(Duration d);

// `t`, a time of `clock`, as wall-clock time: `wall` read now, plus the
// distance from clock.Now() to `t`.
std::chrono::system_clock::time_point ToWall(
    const std::function<std::chrono::system_clock::time_point()>& wall, Clock& clock, TimePoint t);

// The length (1 to 4) of the well-formed UTF-8 sequence starting at s[i], or 0
// when the bytes there are not one (stray continuation byte, overlong form,
// surrogate, beyond U+10FFFF, truncated).
std::size_t Utf8SequenceLength(std::string_view s, std::size_t i) noexcept;

// Appends `s` as a JSON string, quotes included: '"' and '\\' escaped,
// control characters as \n, \t, ... or \u00XX, valid UTF-8 kept as it is,
// each invalid byte replaced with U+FFFD so that the line stays valid UTF-8.
void AppendJsonString(std::string& out, std::string_view s);

void AppendInt(std::string& out, std::int64_t v);
void AppendUint(std::string& out, std::uint64_t v);
// Shortest round-trip form; "null" for NaN and infinities (JSON has none).
void AppendJsonNumber(std::string& out, double v);

// "2025-08-19T10:00:30.000Z": UTC, millisecond precision.
void AppendRfc3339(std::string& out, std::chrono::system_clock::time_point t);

// Builds one JSON object, keys in the order added. Keys are trusted
// identifiers written as they are; values are escaped.
class JsonObject {
 public:
  JsonObject() { out_.push_back('{'); }
  JsonObject& Str(std::string_view key, std::string_view value) {
    Key(key);
    AppendJsonString(out_, value);
    return *this;
  }
  JsonObject& Int(std::string_view key, std::int64_t value) {
    Key(key);
    AppendInt(out_, value);
    return *this;
  }
  JsonObject& Uint(std::string_view key, std::uint64_t value) {
    Key(key);
    AppendUint(out_, value);
    return *this;
  }
  JsonObject& Num(std::string_view key, double value) {
    Key(key);
    AppendJsonNumber(out_, value);
    return *this;
  }
  JsonObject& Time(std::string_view key, std::chrono::system_clock::time_point t) {
    Key(key);
    out_.push_back('"');
    AppendRfc3339(out_, t);
    out_.push_back('"');
    return *this;
  }
  // The object, closed.
  std::string Done() && {
    out_.push_back('}');
    return std::move(out_);
  }

 private:
  void Key(std::string_view key) {
    if (out_.size() > 1) out_.push_back(',');
    out_.push_back('"');
    out_.append(key);
    out_.append("\":");
  }
  std::string out_;
};

}  // namespace fusebox::internal

#endif  // FUSEBOX_SRC_JSON_LINE_H_
