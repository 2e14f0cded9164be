// fusebox/config_names.h: Resilience4j's configuration names for
// CircuitBreakerConfig, and the duration syntax they use.
//
// This is the one place that knows that `failureRateThreshold` is
// CircuitBreakerConfig::failure_rate_threshold, that `waitDurationInOpenState`
// takes a duration, and how "5s" or "250ms" read. The `fusebox` command (trace
// replay, scenario files) and the YAML module go through it, so that a name
// means the same thing everywhere and a bad value gets the same message.
//
// Values arrive as text, whatever carried them: a YAML scalar, a JSON number
// or string printed back, a command-line `name=value`.
//
//   fusebox::CircuitBreakerConfig config;
//   fusebox::Status s = fusebox::SetConfigProperty(config, "waitDurationInOpenState", "5s");
//   // s.message() on a bad value:
//   //   "waitDurationInOpenState: expected a duration such as 5s, 250ms or 1m
//   //    (a bare integer is milliseconds), got \"5 seconds\""
//   s = fusebox::ValidateConfigProperties(config);  // Validate(), in these names
//
// Thread-safe: every function is pure.
#ifndef FUSEBOX_CONFIG_NAMES_H_
#define FUSEBOX_CONFIG_NAMES_H_

#include <span>
#include <string>
#include <string_view>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox {

// Parses a duration as Spring Boot binds Resilience4j's, in either of Spring's
// styles:
//   - simple: a non-negative integer (an optional '+') and a unit, one of ns,
//     us, ms, s, m, h, d in any case ("5s", "10S", "250ms"); a bare integer is
//     milliseconds ("5000"), the unit of every Resilience4j duration;
//   - ISO-8601 as Java's Duration.parse reads it, case-insensitive:
//     P[nD][T[nH][nM][n[.f]S]] ("PT5S", "PT0.5S", "P1D", "PT1M30S"), the
//     fraction only on seconds, up to 9 digits.
// Surrounding spaces are allowed; negative values, fractions in the simple
// style and compound simple forms ("1m30s") are not. Fails with
// kInvalidArgument quoting the text, or on overflow (beyond ~292 years).
Result<Duration> ParseDuration(std::string_view text);

// The shortest exact spelling of `d` in ParseDuration's syntax with the
// largest unit that divides it: "5s", "250ms", "1m", "1500us", "0ms".
// ParseDuration(FormatDuration(d)) == d for every d >= 0.
std::string FormatDuration(Duration d);

// One configuration property: its Resilience4j name, the CircuitBreakerConfig
// field it sets, and what values it takes.
struct ConfigProperty {
  // camelCase, as in Resilience4j's YAML: "failureRateThreshold".
  std::string_view name;
  // The CircuitBreakerConfig field: "failure_rate_threshold".
  std::string_view field;
  // What a value looks like, for messages and --help: "a number in (0, 100]".
  std::string_view expects;
};

// Every property SetConfigProperty() knows, Resilience4j's first and in its
// documentation's order, then fusebox's own (consecutiveFailureThreshold,
// openDurationJitter, jitterSeed, halfOpenPolicy, compatibility, callTiming,
// outcomeOrder).
std::span<const ConfigProperty> ConfigProperties() noexcept;

// The property named `name` (exact, case-sensitive camelCase), or nullptr.
const ConfigProperty* FindConfigProperty(std::string_view name) noexcept;

// Sets the property `name` of `config` from its textual `value`. Numbers,
// integers and booleans ("true", "false") must be the whole text; enum values
// take Resilience4j's spelling, case-insensitive and with '-' or '_' alike
// (COUNT_BASED, count-based; OPEN; resilience4j). Does not check ranges: that
// is ValidateConfigProperties()' job, once every property is set. Fails with
// kInvalidArgument "<name>: expected <what>, got \"<value>\"", or "unknown
// property \"<name>\"" (with a suggestion when the name is only mis-cased or is
// the snake_case field name).
Status SetConfigProperty(CircuitBreakerConfig& config, std::string_view name,
                         std::string_view value);

// The value of property `name` in the syntax SetConfigProperty() reads back:
// "50", "5s", "COUNT_BASED", "true", "resilience4j". kInvalidArgument for an
// unknown name.
Result<std::string> GetConfigProperty(const CircuitBreakerConfig& config, std::string_view name);

// config.Validate(), with the message naming the property as the user wrote
// it: "failureRateThreshold (failure_rate_threshold) must be in (0, 100], got 0".
Status ValidateConfigProperties(const CircuitBreakerConfig& config);

}  // namespace fusebox

#endif  // FUSEBOX_CONFIG_NAMES_H_
