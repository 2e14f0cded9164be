#include "fusebox/config_names.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace fusebox {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

Status Expected(std::string_view name, std::string_view what, std::string_view value) {
  std::string message(name);
  message += ": expected ";
  message += what;
  message += ", got \"";
  message += value;
  message += '"';
  return Status::InvalidArgument(std::move(message));
}

// Parses the whole of `text` into `out`; false on anything left over or out of
// range. from_chars accepts no leading '+' or spaces, which is what we want.
template <typename T>
bool ParseWhole(std::string_view text, T& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty();
}

bool ParseFloat(std::string_view text, float& out) {
  // Floats, as Resilience4j's thresholds are (semantics note point 17): "33.3333334"
  // parsed straight to float, never through double.
  return ParseWhole(text, out) && std::isfinite(out);
}

// "COUNT_BASED", "count-based" and "Count_Based" all give "COUNT_BASED".
std::string EnumKey(std::string_view text) {
  std::string key;
  for (char c : text)
    key += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return key;
}

using Setter = Status (*)(CircuitBreakerConfig&, std::string_view name, std::string_view value);

Status SetFloat(float& field, std::string_view name, std::string_view value,
                std::string_view what) {
  float f = 0;
  if (!ParseFloat(value, f)) return Expected(name, what, value);
  field = f;
  return Status();
}

Status SetInt(int& field, std::string_view name, std::string_view value, std::string_view what) {
  int i = 0;
  if (!ParseWhole(value, i)) return Expected(name, what, value);
  field = i;
  return Status();
}

Status SetDuration(Duration& field, std::string_view name, std::string_view value) {
  Result<Duration> d = ParseDuration(value);
  if (!d)
    return Expected(name, "a duration such as 5s, 250ms or 1m (a bare integer is milliseconds)",
                    value);
  field = *d;
  return Status();
}

// Sets an enum from Resilience4j's spelling of its values (see EnumKey).
template <typename E>
Status SetEnum(E& field, std::string_view name, std::string_view value, std::string_view what,
               std::initializer_list<std::pair<std::string_view, E>> values) {
  const std::string key = EnumKey(value);
  for (const auto& [spelling, e] : values) {
    if (key == spelling) {
      field = e;
      return Status();
    }
  }
  return Expected(name, what, value);
}

constexpr std::array<ConfigProperty, 18> kProperties{{
    {"failureRateThreshold", "failure_rate_threshold", "a number in (0, 100]"},
    {"slowCallRateThreshold", "slow_call_rate_threshold", "a number in (0, 100]"},
    {"slowCallDurationThreshold", "slow_call_duration_threshold", "a duration > 0"},
    {"permittedNumberOfCallsInHalfOpenState", "permitted_number_of_calls_in_half_open_state",
     "an integer >= 1"},
    {"maxWaitDurationInHalfOpenState", "max_wait_duration_in_half_open_state",
     "a duration >= 0 (0: no limit)"},
    {"transitionToStateAfterWaitDuration", "transition_to_state_after_wait_duration",
     "OPEN or CLOSED"},
    {"slidingWindowType", "sliding_window_type", "COUNT_BASED or TIME_BASED"},
    {"slidingWindowSize", "sliding_window_size", "an integer >= 1"},
    {"minimumNumberOfCalls", "minimum_number_of_calls", "an integer >= 1"},
    {"waitDurationInOpenState", "wait_duration_in_open_state", "a duration > 0"},
    {"automaticTransitionFromOpenToHalfOpenEnabled",
     "automatic_transition_from_open_to_half_open_enabled", "true or false"},
    // fusebox's own.
    {"consecutiveFailureThreshold", "consecutive_failure_threshold", "an integer >= 0 (0: off)"},
    {"openDurationJitter", "open_duration_jitter", "a number in [0, 1)"},
    {"jitterSeed", "jitter_seed", "an unsigned integer (0: from the name)"},
    {"halfOpenPolicy", "half_open_policy", "FAILURE_RATE or ANY_FAILURE_REOPENS"},
    {"compatibility", "compatibility", "default or resilience4j"},
    {"callTiming", "call_timing", "AUTO, PRECISE or COARSE"},
    {"outcomeOrder", "outcome_order", "LINEARIZABLE or RELAXED"},
}};

// Same order as kProperties.
constexpr std::array<Setter, kProperties.size()> kSetters{{
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetFloat(c.failure_rate_threshold, n, v, kProperties[0].expects);
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetFloat(c.slow_call_rate_threshold, n, v, kProperties[1].expects);
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetDuration(c.slow_call_duration_threshold, n, v);
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetInt(c.permitted_number_of_calls_in_half_open_state, n, v, kProperties[3].expects);
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetDuration(c.max_wait_duration_in_half_open_state, n, v);
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetEnum(c.transition_to_state_after_wait_duration, n, v, kProperties[5].expects,
                     {{"OPEN", State::kOpen}, {"CLOSED", State::kClosed}});
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetEnum(c.sliding_window_type, n, v, kProperties[6].expects,
                     {{"COUNT_BASED", SlidingWindowType::kCountBased},
                      {"TIME_BASED", SlidingWindowType::kTimeBased}});
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetInt(c.sliding_window_size, n, v, kProperties[7].expects);
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetInt(c.minimum_number_of_calls, n, v, kProperties[8].expects);
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetDuration(c.wait_duration_in_open_state, n, v);
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      if (v == "true") {
        c.automatic_transition_from_open_to_half_open_enabled = true;
      } else if (v == "false") {
        c.automatic_transition_from_open_to_half_open_enabled = false;
      } else {
        return Expected(n, kProperties[10].expects, v);
      }
      return Status();
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetInt(c.consecutive_failure_threshold, n, v, kProperties[11].expects);
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      double d = 0;
      if (!ParseWhole(v, d) || !std::isfinite(d)) return Expected(n, kProperties[12].expects, v);
      c.open_duration_jitter = d;
      return Status();
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      std::uint64_t seed = 0;
      if (!ParseWhole(v, seed)) return Expected(n, kProperties[13].expects, v);
      c.jitter_seed = seed;
      return Status();
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetEnum(c.half_open_policy, n, v, kProperties[14].expects,
                     {{"FAILURE_RATE", HalfOpenPolicy::kFailureRate},
                      {"ANY_FAILURE_REOPENS", HalfOpenPolicy::kAnyFailureReopens}});
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetEnum(
          c.compatibility, n, v, kProperties[15].expects,
          {{"DEFAULT", Compatibility::kDefault}, {"RESILIENCE4J", Compatibility::kResilience4j}});
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetEnum(c.call_timing, n, v, kProperties[16].expects,
                     {{"AUTO", CallTiming::kAuto},
                      {"PRECISE", CallTiming::kPrecise},
                      {"COARSE", CallTiming::kCoarse}});
    },
    [](CircuitBreakerConfig& c, std::string_view n, std::string_view v) {
      return SetEnum(
          c.outcome_order, n, v, kProperties[17].expects,
          {{"LINEARIZABLE", OutcomeOrder::kLinearizable}, {"RELAXED", OutcomeOrder::kRelaxed}});
    },
}};

std::string FloatText(float f) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(f);
}

std::string DoubleText(double d) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(d);
}

using Getter = std::string (*)(const CircuitBreakerConfig&);

// Same order as kProperties. Enum values in Resilience4j's spelling.
constexpr std::array<Getter, kProperties.size()> kGetters{{
    [](const CircuitBreakerConfig& c) { return FloatText(c.failure_rate_threshold); },
    [](const CircuitBreakerConfig& c) { return FloatText(c.slow_call_rate_threshold); },
    [](const CircuitBreakerConfig& c) { return FormatDuration(c.slow_call_duration_threshold); },
    [](const CircuitBreakerConfig& c) {
      return std::to_string(c.permitted_number_of_calls_in_half_open_state);
    },
    [](const CircuitBreakerConfig& c) {
      return FormatDuration(c.max_wait_duration_in_half_open_state);
    },
    [](const CircuitBreakerConfig& c) {
      return std::string(StateName(c.transition_to_state_after_wait_duration));
    },
    [](const CircuitBreakerConfig& c) {
      return std::string(c.sliding_window_type == SlidingWindowType::kTimeBased ? "TIME_BASED"
                                                                                : "COUNT_BASED");
    },
    [](const CircuitBreakerConfig& c) { return std::to_string(c.sliding_window_size); },
    [](const CircuitBreakerConfig& c) { return std::to_string(c.minimum_number_of_calls); },
    [](const CircuitBreakerConfig& c) { return FormatDuration(c.wait_duration_in_open_state); },
    [](const CircuitBreakerConfig& c) {
      return std::string(c.automatic_transition_from_open_to_half_open_enabled ? "true" : "false");
    },
    [](const CircuitBreakerConfig& c) { return std::to_string(c.consecutive_failure_threshold); },
    [](const CircuitBreakerConfig& c) { return DoubleText(c.open_duration_jitter); },
    [](const CircuitBreakerConfig& c) { return std::to_string(c.jitter_seed); },
    [](const CircuitBreakerConfig& c) {
      return std::string(c.half_open_policy == HalfOpenPolicy::kAnyFailureReopens
                             ? "ANY_FAILURE_REOPENS"
                             : "FAILURE_RATE");
    },
    [](const CircuitBreakerConfig& c) {
      return std::string(c.compatibility == Compatibility::kResilience4j ? "resilience4j"
                                                                         : "default");
    },
    [](const CircuitBreakerConfig& c) {
      switch (c.call_timing) {
        case CallTiming::kPrecise:
          return std::string("PRECISE");
        case CallTiming::kCoarse:
          return std::string("COARSE");
        case CallTiming::kAuto:
          break;
      }
      return std::string("AUTO");
    },
    [](const CircuitBreakerConfig& c) {
      return std::string(c.outcome_order == OutcomeOrder::kRelaxed ? "RELAXED" : "LINEARIZABLE");
    },
}};

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

struct Unit {
  std::string_view suffix;
  Duration size;
};

// Largest first: FormatDuration picks the first unit that divides exactly.
constexpr std::array<Unit, 7> kUnits{{
    {"d", std::chrono::hours(24)},
    {"h", std::chrono::hours(1)},
    {"m", std::chrono::minutes(1)},
    {"s", std::chrono::seconds(1)},
    {"ms", std::chrono::milliseconds(1)},
    {"us", std::chrono::microseconds(1)},
    {"ns", std::chrono::nanoseconds(1)},
}};

// Adds `count` units to `total`; false on overflow.
bool AddUnits(std::int64_t count, std::int64_t unit_ns, std::int64_t& total) {
  std::int64_t part = 0;
  return !__builtin_mul_overflow(count, unit_ns, &part) &&
         !__builtin_add_overflow(total, part, &total);
}

// The rest of an ISO-8601 duration after its 'P', as Java's Duration.parse
// reads it (case-insensitive; days, then after 'T' hours, minutes, seconds
// with up to 9 fraction digits, in that order, at least one), without signs:
// a negative duration is meaningless in every property that takes one.
std::optional<Duration> ParseIsoDuration(std::string_view rest) {
  std::int64_t total = 0;
  bool any = false;
  bool in_time = false;
  int next_field = 0;  // 0: D, 1: H, 2: M, 3: S; fields must come in order.
  while (!rest.empty()) {
    if (rest.front() == 'T' || rest.front() == 't') {
      if (in_time) return std::nullopt;
      in_time = true;
      rest.remove_prefix(1);
      if (rest.empty()) return std::nullopt;  // "PT" names nothing.
      continue;
    }
    std::size_t digits = 0;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) {
      ++digits;
    }
    if (digits == 0) return std::nullopt;
    std::int64_t count = 0;
    if (!ParseWhole(rest.substr(0, digits), count)) return std::nullopt;
    rest.remove_prefix(digits);
    std::int64_t fraction_ns = -1;
    if (!rest.empty() && (rest.front() == '.' || rest.front() == ',')) {
      rest.remove_prefix(1);
      std::size_t f = 0;
      fraction_ns = 0;
      std::int64_t scale = 100'000'000;
      while (f < rest.size() && std::isdigit(static_cast<unsigned char>(rest[f]))) {
        if (f == 9) return std::nullopt;
        fraction_ns += (rest[f] - '0') * scale;
        scale /= 10;
        ++f;
      }
      rest.remove_prefix(f);
    }
    if (rest.empty()) return std::nullopt;
    const char designator =
        static_cast<char>(std::toupper(static_cast<unsigned char>(rest.front())));
    rest.remove_prefix(1);
    int field = -1;
    std::int64_t unit_ns = 0;
    if (designator == 'D' && !in_time) {
      field = 0;
      unit_ns = 86'400'000'000'000;
    } else if (designator == 'H' && in_time) {
      field = 1;
      unit_ns = 3'600'000'000'000;
    } else if (designator == 'M' && in_time) {
      field = 2;
      unit_ns = 60'000'000'000;
    } else if (designator == 'S' && in_time) {
      field = 3;
      unit_ns = 1'000'000'000;
    }
    if (field < next_field || (fraction_ns >= 0 && field != 3)) return std::nullopt;
    next_field = field + 1;
    if (!AddUnits(count, unit_ns, total)) return std::nullopt;
    if (fraction_ns > 0 && __builtin_add_overflow(total, fraction_ns, &total)) return std::nullopt;
    any = true;
  }
  if (!any) return std::nullopt;
  return Duration(total);
}

}  // namespace

Result<Duration> ParseDuration(std::string_view text) {
  const std::string_view trimmed = Trim(text);
  auto bad = [&](std::string_view why) {
    return Status::InvalidArgument("bad duration \"" + std::string(text) +
                                   "\": " + std::string(why));
  };
  if (!trimmed.empty() && (trimmed.front() == 'P' || trimmed.front() == 'p')) {
    std::optional<Duration> d = ParseIsoDuration(trimmed.substr(1));
    if (!d) {
      return bad(
          "expected ISO-8601 PnDTnHnMn.nS with at least one part, e.g. PT5S, PT0.5S, P1D "
          "(non-negative, within 292 years)");
    }
    return *d;
  }
  // Spring's simple style: an optional '+', digits, a unit in any case.
  const std::string_view unsigned_text = trimmed.starts_with('+') ? trimmed.substr(1) : trimmed;
  std::size_t digits = 0;
  while (digits < unsigned_text.size() &&
         std::isdigit(static_cast<unsigned char>(unsigned_text[digits]))) {
    ++digits;
  }
  if (digits == 0) {
    return bad("expected a non-negative integer and a unit (ns, us, ms, s, m, h, d), e.g. 5s");
  }
  std::int64_t count = 0;
  if (!ParseWhole(unsigned_text.substr(0, digits), count)) return bad("too large");
  const std::string_view suffix = unsigned_text.substr(digits);
  Duration unit = std::chrono::milliseconds(1);  // A bare integer is milliseconds.
  if (!suffix.empty()) {
    bool found = false;
    for (const Unit& u : kUnits) {
      if (EqualsIgnoreCase(suffix, u.suffix)) {
        unit = u.size;
        found = true;
        break;
      }
    }
    if (!found) return bad("unknown unit \"" + std::string(suffix) + "\" (ns, us, ms, s, m, h, d)");
  }
  if (count > std::numeric_limits<Duration::rep>::max() / unit.count()) return bad("too large");
  return Duration(count * unit.count());
}

std::string FormatDuration(Duration d) {
  if (d == Duration::zero()) return "0ms";
  for (const Unit& u : kUnits) {
    if (d.count() % u.size.count() == 0) {
      return std::to_string(d.count() / u.size.count()) + std::string(u.suffix);
    }
  }
  return std::to_string(d.count()) + "ns";  // Not reached: ns divides everything.
}

std::span<const ConfigProperty> ConfigProperties() noexcept { return kProperties; }

const ConfigProperty* FindConfigProperty(std::string_view name) noexcept {
  for (const ConfigProperty& p : kProperties) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

Status SetConfigProperty(CircuitBreakerConfig& config, std::string_view name,
                         std::string_view value) {
  for (std::size_t i = 0; i < kProperties.size(); ++i) {
    if (kProperties[i].name == name) return kSetters[i](config, name, Trim(value));
  }
  std::string message = "unknown property \"" + std::string(name) + '"';
  for (const ConfigProperty& p : kProperties) {
    if (EqualsIgnoreCase(p.name, name) || p.field == name) {
      message += " (did you mean \"" + std::string(p.name) + "\"?)";
      break;
    }
  }
  return Status::InvalidArgument(std::move(message));
}

Result<std::string> GetConfigProperty(const CircuitBreakerConfig& config, std::string_view name) {
  for (std::size_t i = 0; i < kProperties.size(); ++i) {
    if (kProperties[i].name == name) return kGetters[i](config);
  }
  return Status::InvalidArgument("unknown property \"" + std::string(name) + '"');
}

Status ValidateConfigProperties(const CircuitBreakerConfig& config) {
  Status s = config.Validate();
  if (s.ok()) return s;
  // Validate() names the snake_case field first: "failure_rate_threshold must
  // be ...". Put the camelCase name in front, keeping the field for C++ users.
  const std::string_view message = s.message();
  for (const ConfigProperty& p : kProperties) {
    if (message.size() > p.field.size() && message.substr(0, p.field.size()) == p.field &&
        message[p.field.size()] == ' ') {
      return Status::InvalidArgument(std::string(p.name) + " (" + std::string(p.field) + ")" +
                                     std::string(message.substr(p.field.size())));
    }
  }
  return s;
}

}  // namespace fusebox
