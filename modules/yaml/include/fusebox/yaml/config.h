// fusebox/yaml/config.h: breaker, retry, bulkhead, rate limiter and timeout
// configurations from a YAML file written for Resilience4j.
//
// A file written for Resilience4j's Spring Boot starter loads unchanged: the
// same layout, names and defaults, so that seed 004's application.yml
//
//   resilience4j.circuitbreaker.instances.payment:
//     slidingWindowSize: 10
//     minimumNumberOfCalls: 10
//     failureRateThreshold: 50
//     waitDurationInOpenState: 5s
//     permittedNumberOfCallsInHalfOpenState: 3
//
// gives the breaker of its simulator. docs/configuration.md describes the
// format in full; in short:
//   - sections resilience4j.{circuitbreaker, retry, bulkhead, ratelimiter,
//     timelimiter}, each with configs.<name> (templates; configs.default is
//     the base of everything that names no other) and instances.<name>, which
//     may name a template in baseConfig. Chains are fine, cycles are errors.
//     The same sections may stand at the top level, without resilience4j:;
//   - dotted keys are paths (Spring Boot); property names are camelCase or
//     kebab-case (failure-rate-threshold), as Spring's relaxed binding allows;
//   - durations are 5s, 250ms, 1m (a bare integer is milliseconds);
//   - environment variables FUSEBOX_<SECTION>_<CONFIGS|INSTANCES>_<NAME>_<PROPERTY>
//     override the file (FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_FAILURERATETHRESHOLD=30).
//
// Loading is all or nothing: either every section, template and instance
// resolves and validates, and the result holds them all, or the result is an
// error listing every fault found, one a line, each naming the file, line,
// column, key path and the rule broken:
//
//   app.yml:12:5: resilience4j.circuitbreaker.instances.payment.failureRateThreshold: must be in
//   (0, 100], got 0
//
//   fusebox::Result<fusebox::yaml::Configuration> config =
//       fusebox::yaml::LoadConfigFile("application.yml",
//                                     {.environment = fusebox::yaml::FuseboxEnvironment()});
//   if (!config) { std::cerr << config.error().message() << '\n'; return 1; }
//   FUSEBOX_RETURN_IF_ERROR(fusebox::yaml::ApplyToRegistry(*config, *registry));
//   const fusebox::RetryOptions* retry = config->retries.instance("payment");
//
// Thread-safe: the functions are pure but for FuseboxEnvironment(), which
// reads the process environment; a Configuration is a plain value.
#ifndef FUSEBOX_YAML_CONFIG_H_
#define FUSEBOX_YAML_CONFIG_H_

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/bulkhead.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/rate_limiter.h"
#include "fusebox/registry.h"
#include "fusebox/result.h"
#include "fusebox/retry.h"
#include "fusebox/status.h"
#include "fusebox/timeout.h"

namespace fusebox::yaml {

// The limits on every YAML text fusebox reads: this loader, and the scripts of
// `fusebox fake-upstream --script`. A larger file, a document of more values
// once its aliases are expanded (a "billion laughs" is a few lines), or one
// nested deeper, is refused with an error naming the limit.
inline constexpr std::size_t kMaxYamlBytes = 4 << 20;
inline constexpr int kMaxYamlValues = 100'000;
inline constexpr int kMaxYamlDepth = 64;

// Resilience4j's interval-function properties, which a breaker uses for its
// OPEN duration and a retry between attempts. The function they describe is
// built into CircuitBreakerConfig::wait_interval_function or
// RetryOptions::interval_function; these fields say what it is.
struct BackoffSettings {
  // enableExponentialBackoff: multiply the wait by `multiplier` each time.
  // Default: false.
  bool exponential = false;
  // exponentialBackoffMultiplier (>= 1). Default: 1.5 (Resilience4j).
  double multiplier = 1.5;
  // exponentialMaxWaitDuration (retry) or exponentialMaxWaitDurationInOpenState
  // (breaker): the longest wait; zero means no cap, else >= the initial wait.
  // Default: 0.
  Duration max_wait = Duration::zero();
  // enableRandomizedWait: spread each wait uniformly over [w * (1 - f),
  // w * (1 + f)]. Drawn from a generator with a fixed seed, so runs are
  // reproducible (fusebox/backoff.h). Default: false.
  bool randomized = false;
  // randomizedWaitFactor f, in [0, 1]. Default: 0.5 (Resilience4j).
  double randomized_factor = 0.5;
};

// resilience4j.circuitbreaker: the breaker's configuration, and how its OPEN
// duration grows (config.wait_interval_function, built from open_backoff when
// exponential or randomized).
struct CircuitBreakerSettings {
  CircuitBreakerConfig config{};
  BackoffSettings open_backoff{};
};

// resilience4j.retry: options.interval_function is built from backoff when
// exponential or randomized, with options.wait_duration as the first wait.
struct RetrySettings {
  RetryOptions options{};
  BackoffSettings backoff{};
};

// A template (configs.<name>) or an instance (instances.<name>), resolved:
// every property set, from the defaults, its baseConfig chain, its own keys
// and the environment, in that order.
template <typename S>
struct Named {
  std::string name;
  S settings{};
};

// One section (resilience4j.retry, ...): its templates and instances, in file
// order.
template <typename S>
struct Section {
  std::vector<Named<S>> configs;
  std::vector<Named<S>> instances;

  // The instance or template called `name`, or nullptr.
  const S* instance(std::string_view name) const { return FindIn(instances, name); }
  const S* config(std::string_view name) const { return FindIn(configs, name); }
  bool empty() const noexcept { return configs.empty() && instances.empty(); }

 private:
  static const S* FindIn(const std::vector<Named<S>>& list, std::string_view name) {
    for (const Named<S>& n : list) {
      if (n.name == name) return &n.settings;
    }
    return nullptr;
  }
};

// Everything a file declares, resolved and validated.
struct Configuration {
  Section<CircuitBreakerSettings> circuit_breakers;  // resilience4j.circuitbreaker
  Section<RetrySettings> retries;                    // resilience4j.retry
  Section<BulkheadOptions> bulkheads;                // resilience4j.bulkhead
  Section<RateLimiterOptions> rate_limiters;         // resilience4j.ratelimiter
  Section<TimeoutOptions> time_limiters;             // resilience4j.timelimiter
  // Keys that Resilience4j's Spring Boot starter knows but that change nothing
  // in fusebox (registerHealthIndicator, eventConsumerBufferSize, ...), one a
  // line in the errors' format: "app.yml:7:9: <path>: ignored: <why>".
  std::vector<std::string> warnings;
};

// Environment variables, name to value. Injected, so that tests never touch
// the process environment.
using Environment = std::map<std::string, std::string, std::less<>>;

// The process's variables whose names start with FUSEBOX_.
Environment FuseboxEnvironment();

struct LoadOptions {
  // Overrides FUSEBOX_<SECTION>_<CONFIGS|INSTANCES>_<NAME>_<PROPERTY>; other
  // variables are ignored, unless their section is a near miss
  // (FUSEBOX_CIRCUITBRAKER_...), which is an error. Default: none.
  Environment environment{};
};

// Loads the YAML `text`; `source` names it in messages ("app.yml"). Fails
// with kInvalidArgument whose message is every error found, one a line,
// sorted by position (environment errors last).
Result<Configuration> LoadConfig(std::string_view text, std::string_view source,
                                 const LoadOptions& options = {});

// LoadConfig() on the file at `path`, named `path` in messages. A file that
// cannot be read is kInvalidArgument too.
Result<Configuration> LoadConfigFile(const std::string& path, const LoadOptions& options = {});

// The resolved configuration as YAML with Resilience4j's names and every
// property of every template and instance (defaults and inherited values
// filled in, baseConfig gone). LoadConfig() of this text gives `config` back.
std::string FormatConfig(const Configuration& config);

// Adds every circuit breaker template, then every instance, to `registry` as
// a configuration template of the same name (Registry::AddConfig), so that
// `registry.Get(key, "payment")` makes breakers as instances.payment says;
// configs.default replaces the registry's default. An instance named like a
// template wins: it is the more specific (and, with baseConfig, usually
// built on it). The other sections have no registry: their options are read
// from the Configuration and passed to Retry::Create() and the like.
// The configurations were validated when loaded; should the registry still
// refuse one, nothing is added and its error is returned.
Status ApplyToRegistry(const Configuration& config, Registry& registry);

}  // namespace fusebox::yaml

#endif  // FUSEBOX_YAML_CONFIG_H_
