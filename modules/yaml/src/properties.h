// modules/yaml/src/properties.h (private): Resilience4j's property names for
// each policy, in one table per policy, as src/config_names.cc is for the
// breaker (whose table this reuses).
//
// A table row says what a name sets, what values it takes, and how to print
// the value back in the syntax it reads. Names Resilience4j has but fusebox
// cannot honour are listed too, with the reason, so that the loader can say
// "not applicable: ..." rather than "unknown".
//
// Thread-safe: the tables are immutable after first use.
#ifndef FUSEBOX_MODULES_YAML_SRC_PROPERTIES_H_
#define FUSEBOX_MODULES_YAML_SRC_PROPERTIES_H_

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/status.h"
#include "fusebox/yaml/config.h"

namespace fusebox::yaml::internal {

template <typename S>
struct Property {
  // camelCase, as Resilience4j's documentation writes it.
  std::string_view name;
  // The field as S's validation names it at the start of its message
  // ("failure_rate_threshold must be ..."), to map a rule back to the name.
  std::string_view field;
  // What a value looks like: "an integer >= 1".
  std::string_view expects;
  // Sets the property from text. Fails with "<name>: expected <what>, got
  // \"<text>\"". Ranges are the job of Policy::finish.
  Status (*set)(S& settings, std::string_view name, std::string_view value);
  // The value in the syntax `set` reads.
  std::string (*get)(const S& settings, std::string_view name);
};

// A name Resilience4j knows and fusebox does not take, and why.
struct KeyNote {
  std::string_view name;
  std::string_view why;
};

template <typename S>
struct Policy {
  // The YAML section: "circuitbreaker".
  std::string_view section;
  // Its token in environment variable names: "CIRCUITBREAKER".
  std::string_view env_section;
  // Spring Boot's aspect-order key of the section, ignored with a warning.
  std::string_view aspect_order;
  std::vector<Property<S>> properties;
  // Errors, with the reason.
  std::vector<KeyNote> not_applicable;
  // Properties that hold names for ResolveNames() (recordExceptions, ...):
  // a list, or one name, or names separated by commas.
  std::vector<std::string_view> name_properties;
  // Where S keeps them; nullptr when `name_properties` is empty.
  NameLists* (*names)(S& settings) = nullptr;
  // Builds what the properties describe (interval functions) and validates
  // the whole. Fails with "<field> <rule>, got <value>".
  Status (*finish)(S& settings);
};

const Policy<CircuitBreakerSettings>& CircuitBreakerPolicy();
const Policy<RetrySettings>& RetryPolicy();
const Policy<BulkheadOptions>& BulkheadPolicy();
const Policy<ThreadPoolBulkheadOptions>& ThreadPoolBulkheadPolicy();
const Policy<RateLimiterOptions>& RateLimiterPolicy();
const Policy<TimeoutOptions>& TimeLimiterPolicy();

// Names of Resilience4j's Spring Boot starter that change nothing in fusebox
// (health indicators, event buffers), in every section; loaded with a warning.
std::span<const KeyNote> IgnoredKeys();

// Spring's relaxed form of a name: lower case, '-' and '_' dropped, so that
// failureRateThreshold, failure-rate-threshold, failure_rate_threshold and
// FAILURERATETHRESHOLD meet.
std::string Canonical(std::string_view name);

// Levenshtein distance.
std::size_t EditDistance(std::string_view a, std::string_view b);

// The candidate nearest to `key` (compared in Canonical form) when it is near
// enough to be a typo of it, else empty.
std::string_view Closest(std::string_view key, const std::vector<std::string_view>& candidates);

}  // namespace fusebox::yaml::internal

#endif  // FUSEBOX_MODULES_YAML_SRC_PROPERTIES_H_
