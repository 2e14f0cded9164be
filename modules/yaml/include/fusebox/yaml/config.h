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
//   - sections resilience4j.{circuitbreaker, retry, bulkhead,
//     thread-pool-bulkhead, ratelimiter, timelimiter}, each with configs.<name> (templates;
//     configs.default is the base of everything that names no other) and instances.<name>, which
//     may name a template in baseConfig. Chains are fine, cycles are errors.
//     The same sections may stand at the top level, without resilience4j:;
//   - dotted keys are paths (Spring Boot); property names are camelCase,
//     kebab-case (failure-rate-threshold) or snake_case, as Spring's relaxed
//     binding allows;
//   - durations are 5s, 10S, 250ms, 1m, PT5S, PT0.5S, P1D (a bare integer is
//     milliseconds);
//   - a multi-document file ("---") is merged as Spring merges it, later
//     documents overriding earlier ones, each conditioned by
//     spring.config.activate.on-profile only when its profiles are active
//     (LoadOptions::profiles);
//   - Java names (recordExceptions, ...) are kept as written and given a
//     meaning by ResolveNames() and a NameRegistry;
//   - environment variables FUSEBOX_<SECTION>_<CONFIGS|INSTANCES>_<NAME>_<PROPERTY>
//     override the file (FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_FAILURERATETHRESHOLD=30),
//     as do Spring's RESILIENCE4J_<SECTION>_... of the same shape.
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
#include <exception>
#include <functional>
#include <map>
#include <optional>
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
#include "fusebox/thread_pool_bulkhead.h"
#include "fusebox/timeout.h"

namespace fusebox::yaml {

// The limits on every YAML text fusebox reads: this loader, and the scripts of
// `fusebox fake-upstream --script`. A larger file, a document of more values
// once its aliases are expanded (a "billion laughs" is a few lines), one whose
// text grows past kMaxYamlExpandedBytes that way (a few long strings, aliased
// many times: every key, value and path the loader holds counts), or one
// nested deeper, is refused with an error naming the limit.
// The byte limit is yaml-cpp's: it holds a few hundred bytes per token of
// the text (1.4 GB for 4 MiB of "[]"), before any of our limits can apply.
inline constexpr std::size_t kMaxYamlBytes = 1 << 20;
inline constexpr int kMaxYamlValues = 100'000;
inline constexpr std::size_t kMaxYamlExpandedBytes = 32 << 20;
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

// Names a file gives that only the service can interpret: Java class names
// in recordExceptions, ignoreExceptions and retryExceptions, and the names of
// Java functions in recordFailurePredicate, ignoreExceptionPredicate,
// recordResultPredicate, retryExceptionPredicate, resultPredicate,
// intervalBiFunction and waitIntervalFunctionInOpenState. Keyed by the
// property's camelCase name; each a list (a single name is a list of one), as
// written. They mean nothing until ResolveNames() looks them up in a
// NameRegistry.
using NameLists = std::map<std::string, std::vector<std::string>, std::less<>>;

// resilience4j.circuitbreaker: the breaker's configuration, and how its OPEN
// duration grows (config.wait_interval_function, built from open_backoff when
// exponential or randomized; in compatibility: resilience4j with Resilience4j's
// whole-millisecond arithmetic, and the randomized wait seeded by jitterSeed).
struct CircuitBreakerSettings {
  CircuitBreakerConfig config{};
  BackoffSettings open_backoff{};
  // recordExceptions, ignoreExceptions, recordFailurePredicate,
  // ignoreExceptionPredicate, recordResultPredicate,
  // waitIntervalFunctionInOpenState.
  NameLists names{};
  // Set by ResolveNames() when names classify outcomes: how a failed call's
  // Status counts, for Pipeline::Builder::WithOutcomeClassifier (the
  // exception-side twin goes into config.exception_classifier). Else unset.
  std::function<OutcomeKind(const Status&)> status_classifier = nullptr;
};

// resilience4j.retry: options.interval_function is built from backoff when
// exponential or randomized, with options.wait_duration as the first wait.
struct RetrySettings {
  RetryOptions options{};
  BackoffSettings backoff{};
  // retryExceptions, ignoreExceptions, retryExceptionPredicate,
  // resultPredicate, intervalBiFunction; ResolveNames() turns them into
  // options.retry_on and options.interval_function.
  NameLists names{};
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
  Section<CircuitBreakerSettings> circuit_breakers;          // resilience4j.circuitbreaker
  Section<RetrySettings> retries;                            // resilience4j.retry
  Section<BulkheadOptions> bulkheads;                        // resilience4j.bulkhead
  Section<ThreadPoolBulkheadOptions> thread_pool_bulkheads;  // resilience4j.thread-pool-bulkhead
  Section<RateLimiterOptions> rate_limiters;                 // resilience4j.ratelimiter
  Section<TimeoutOptions> time_limiters;                     // resilience4j.timelimiter
  // Keys that Resilience4j's Spring Boot starter knows but that change nothing
  // in fusebox (registerHealthIndicator, eventConsumerBufferSize, ...), one a
  // line in the errors' format: "app.yml:7:9: <path>: ignored: <why>".
  std::vector<std::string> warnings;
  // Keys accepted that have no meaning here by design (aspect orders,
  // metrics.enabled, resilience4j.scheduled and .thread), and which
  // profile-conditioned documents were applied or skipped; same format.
  std::vector<std::string> notes;
  // The profiles the documents were selected for (see LoadOptions::profiles).
  std::vector<std::string> profiles;
};

// Environment variables, name to value. Injected, so that tests never touch
// the process environment.
using Environment = std::map<std::string, std::string, std::less<>>;

// The process's variables whose names start with FUSEBOX_ or RESILIENCE4J_,
// and SPRING_PROFILES_ACTIVE.
Environment FuseboxEnvironment();

struct LoadOptions {
  // Overrides FUSEBOX_<SECTION>_<CONFIGS|INSTANCES>_<NAME>_<PROPERTY>, and the
  // same after RESILIENCE4J_ (Spring's own mapping,
  // RESILIENCE4J_CIRCUITBREAKER_INSTANCES_BACKENDA_FAILURERATETHRESHOLD=30);
  // other variables are ignored, unless their section is a near miss
  // (FUSEBOX_CIRCUITBRAKER_...), which is an error. SPRING_PROFILES_ACTIVE
  // names the active profiles when `profiles` is empty. Default: none.
  Environment environment{};
  // The active Spring profiles: a document of a multi-document file that
  // spring.config.activate.on-profile (or the older spring.profiles)
  // conditions is merged only when its expression matches them. Empty: those
  // of SPRING_PROFILES_ACTIVE, else of spring.profiles.active in the file,
  // else "default", as in Spring. Default: empty.
  std::vector<std::string> profiles{};
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

// One breaker's properties without the file around them: what `fusebox
// replay` does with its trace's config line, so that a trace takes every
// property an instance in a file takes, spelled as Spring allows, and gets the
// same interval function. Set each key, then finish:
//
//   fusebox::yaml::CircuitBreakerSettings s;
//   FUSEBOX_RETURN_IF_ERROR(fusebox::yaml::SetCircuitBreakerProperty(s, "enableExponentialBackoff",
//   "true")); FUSEBOX_RETURN_IF_ERROR(fusebox::yaml::FinishCircuitBreakerSettings(s));
//
// SetCircuitBreakerProperty: kNotFound when no property has the name (the
// Java names, recordExceptions and the like, are read from files only);
// kInvalidArgument "<name>: expected <what>, got \"<value>\"" for a bad value.
Status SetCircuitBreakerProperty(CircuitBreakerSettings& settings, std::string_view name,
                                 std::string_view value);
// Builds config.wait_interval_function from open_backoff and validates the
// whole, as loading a file does. kInvalidArgument "<name> (<field>) <rule>"
// for the first rule broken, e.g. "exponentialBackoffMultiplier
// (open_backoff.multiplier) must be >= 1, got 0.5".
Status FinishCircuitBreakerSettings(CircuitBreakerSettings& settings);

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

// --- Names: what recordExceptions and the predicates mean here -----------------

// What one name stands for in this service.
struct NameMeaning {
  // For people: "C++ exception std::system_error", "StatusCode Timeout",
  // "HTTP 5xx", or the description a predicate was registered with.
  std::string description;
  // Whether a thrown exception is of this name; unset: never.
  std::function<bool(const std::exception_ptr&)> matches_exception = nullptr;
  // Whether a failed call's Status is of this name; unset: never.
  std::function<bool(const Status&)> matches_status = nullptr;
  // For intervalBiFunction and waitIntervalFunctionInOpenState: the function.
  IntervalFunction interval = nullptr;
};

// The service's dictionary from the names a configuration file uses to what
// they mean in C++. Filled by the service at start-up, then read-only.
//
//   fusebox::yaml::NameRegistry names;
//   names.AddException<std::system_error>("java.io.IOException", "std::system_error")
//       .AddStatusCode("java.util.concurrent.TimeoutException", fusebox::StatusCode::kTimeout);
//   std::vector<std::string> warnings = fusebox::yaml::ResolveNames(*config, names).warnings;
//
// Thread-safe for concurrent reads once filled; not while being filled.
class NameRegistry {
 public:
  // `name` means an exception of type E (or derived from it); `cpp_name`
  // says which, for config check.
  template <typename E>
  NameRegistry& AddException(std::string_view name, std::string_view cpp_name) {
    return Add(std::string(name), {.description = "C++ exception " + std::string(cpp_name),
                                   .matches_exception = [](const std::exception_ptr& e) {
                                     try {
                                       if (e) std::rethrow_exception(e);
                                     } catch (const E&) {
                                       return true;
                                     } catch (...) {
                                     }
                                     return false;
                                   }});
  }
  // `name` means a Status with `code`.
  NameRegistry& AddStatusCode(std::string name, StatusCode code);
  // `name` means an HTTP status in [hundreds * 100, hundreds * 100 + 99]
  // ("5xx" for 5), as `http_status_of` reads it from a Status (nullopt: none).
  NameRegistry& AddHttpStatusClass(std::string name, int hundreds,
                                   std::function<std::optional<int>(const Status&)> http_status_of);
  // `name` means whatever `meaning` says. Replaces an earlier meaning.
  NameRegistry& Add(std::string name, NameMeaning meaning);
  // Java's names of the failures fusebox itself reports, to their
  // StatusCodes: java.util.concurrent.TimeoutException (kTimeout),
  // java.io.IOException, java.net.ConnectException,
  // java.net.SocketTimeoutException (kTimeout), and Resilience4j's
  // CallNotPermittedException, BulkheadFullException, RequestNotPermitted.
  NameRegistry& AddJavaDefaults();

  // The meaning of `name`, or nullptr.
  const NameMeaning* Find(std::string_view name) const;

 private:
  std::map<std::string, NameMeaning, std::less<>> meanings_;
};

// What one name of the configuration resolved to.
struct NameResolution {
  // "resilience4j.circuitbreaker.instances.payment.recordExceptions".
  std::string path;
  std::string name;
  // NameMeaning::description, or empty when nothing is registered.
  std::string meaning;
};

struct ResolvedNames {
  // Every name of every template and instance, in section and file order.
  std::vector<NameResolution> resolutions;
  // One per unregistered name, naming it and the instance:
  // "resilience4j.circuitbreaker.instances.payment.recordExceptions: \"com.acme.Oops\" is not
  // registered (NameRegistry); left out". Never an error: the file was valid.
  std::vector<std::string> warnings;
};

// Gives every name in `config` its meaning from `names`, as Resilience4j's
// predicates would:
//   - breaker: an outcome matching ignoreExceptions or ignoreExceptionPredicate
//     is ignored; else, when recordExceptions, recordFailurePredicate or
//     recordResultPredicate name anything registered, a failure matching one
//     of them is a failure and any other a success; else every failure is a
//     failure. Built into config.exception_classifier (exceptions) and
//     status_classifier (Status). waitIntervalFunctionInOpenState sets
//     config.wait_interval_function;
//   - retry: a failure matching ignoreExceptions is not retried; else, when
//     retryExceptions, retryExceptionPredicate or resultPredicate name
//     anything registered, only a failure matching one is; else the default.
//     Built into options.retry_on. intervalBiFunction sets
//     options.interval_function.
// An unregistered name is left out with a warning. The classifiers and
// functions built keep copies of the meanings: `names` need not outlive
// `config`.
ResolvedNames ResolveNames(Configuration& config, const NameRegistry& names);

}  // namespace fusebox::yaml

#endif  // FUSEBOX_YAML_CONFIG_H_
