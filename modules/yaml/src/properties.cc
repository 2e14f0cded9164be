#include "src/properties.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "fusebox/backoff.h"
#include "fusebox/config_names.h"

namespace fusebox::yaml::internal {
namespace {

using SV = std::string_view;

constexpr SV kDurationText = "a duration such as 5s, 250ms or 1m (a bare integer is milliseconds)";
constexpr SV kBoolText = "true or false";

Status Expected(SV name, SV what, SV value) {
  return Status::InvalidArgument(std::string(name) + ": expected " + std::string(what) +
                                 ", got \"" + std::string(value) + "\"");
}

template <typename T>
bool ParseWhole(SV text, T& out) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, out);
  return ec == std::errc() && ptr == end && !text.empty();
}

Status SetInt(int& field, SV name, SV value, SV what) {
  int i = 0;
  if (!ParseWhole(value, i)) return Expected(name, what, value);
  field = i;
  return Status();
}

Status SetDouble(double& field, SV name, SV value, SV what) {
  double d = 0;
  if (!ParseWhole(value, d) || !std::isfinite(d)) return Expected(name, what, value);
  field = d;
  return Status();
}

Status SetDuration(Duration& field, SV name, SV value) {
  Result<Duration> d = ParseDuration(value);
  if (!d) return Expected(name, kDurationText, value);
  field = *d;
  return Status();
}

Status SetBool(bool& field, SV name, SV value) {
  if (value == "true") {
    field = true;
  } else if (value == "false") {
    field = false;
  } else {
    return Expected(name, kBoolText, value);
  }
  return Status();
}

// A Resilience4j switch that fusebox implements one way only: the property is
// accepted with that value, and printed, so that the difference shows.
Status SetFixed(bool fixed, SV name, SV value, SV why) {
  if (value == (fixed ? "true" : "false")) return Status();
  return Expected(name, std::string(fixed ? "true" : "false") + " (" + std::string(why) + ")",
                  value);
}

// callTiming, spelled as the breaker's (AUTO, PRECISE, COARSE).
Status SetTiming(CallTiming& field, SV value) {
  CircuitBreakerConfig scratch;
  Status s = SetConfigProperty(scratch, "callTiming", value);
  if (s.ok()) field = scratch.call_timing;
  return s;
}

std::string TimingText(CallTiming timing) {
  CircuitBreakerConfig scratch;
  scratch.call_timing = timing;
  return *GetConfigProperty(scratch, "callTiming");
}

std::string DoubleText(double d) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(d);
}

std::string BoolText(bool b) { return b ? "true" : "false"; }

Status Bad(SV field, const std::string& rule) {
  return Status::InvalidArgument(std::string(field) + " " + rule);
}

// The interval-function properties, shared by the breaker (OPEN duration) and
// the retry (waits). `prefix` is the field prefix for messages, `initial_field`
// the field of the first wait.
Status ValidateBackoff(const BackoffSettings& b, Duration initial, SV prefix, SV initial_field) {
  const std::string p(prefix);
  if (!(b.multiplier >= 1) || !std::isfinite(b.multiplier)) {
    return Bad(p + "multiplier", "must be >= 1, got " + DoubleText(b.multiplier));
  }
  if (!(b.randomized_factor >= 0 && b.randomized_factor <= 1)) {
    return Bad(p + "randomized_factor",
               "must be in [0, 1], got " + DoubleText(b.randomized_factor));
  }
  if (b.max_wait < Duration::zero() ||
      (b.max_wait > Duration::zero() && b.max_wait < initial && (b.exponential || b.randomized))) {
    return Bad(p + "max_wait", "must be 0 (no cap) or at least the first wait (" +
                                   FormatDuration(initial) + "), got " +
                                   FormatDuration(b.max_wait));
  }
  if ((b.exponential || b.randomized) && initial <= Duration::zero()) {
    return Bad(initial_field, "must be > 0 with exponential or randomized backoff, got " +
                                  FormatDuration(initial));
  }
  return Status();
}

// `whole_milliseconds`: Resilience4j's arithmetic (a breaker in
// compatibility: resilience4j); `seed`: the randomized wait's generator.
IntervalFunction BuildBackoff(const BackoffSettings& b, Duration initial,
                              bool whole_milliseconds = false, std::uint64_t seed = 0) {
  const Duration max = b.max_wait > Duration::zero() ? b.max_wait : Duration::max();
  if (b.randomized) {
    // Resilience4j: ofExponentialRandomBackoff, or ofRandomized (multiplier 1).
    return backoff::ExponentialJitter({.initial = initial,
                                       .multiplier = b.exponential ? b.multiplier : 1.0,
                                       .max = max,
                                       .jitter = b.randomized_factor,
                                       .seed = seed,
                                       .whole_milliseconds = whole_milliseconds});
  }
  if (b.exponential) {
    return backoff::Exponential({.initial = initial,
                                 .multiplier = b.multiplier,
                                 .max = max,
                                 .whole_milliseconds = whole_milliseconds});
  }
  return nullptr;
}

// The five interval-function rows, for S whose BackoffSettings is `Member`.
// `max_name` differs: exponentialMaxWaitDurationInOpenState for the breaker.
template <typename S, BackoffSettings S::*Member>
void AddBackoffRows(std::vector<Property<S>>& rows, SV field_prefix_exponential,
                    SV field_prefix_multiplier, SV field_prefix_max, SV max_name,
                    SV field_prefix_randomized, SV field_prefix_factor) {
  rows.push_back({"enableExponentialBackoff", field_prefix_exponential, kBoolText,
                  [](S& s, SV n, SV v) { return SetBool((s.*Member).exponential, n, v); },
                  [](const S& s, SV) { return BoolText((s.*Member).exponential); }});
  rows.push_back(
      {"exponentialBackoffMultiplier", field_prefix_multiplier, "a number >= 1",
       [](S& s, SV n, SV v) { return SetDouble((s.*Member).multiplier, n, v, "a number >= 1"); },
       [](const S& s, SV) { return DoubleText((s.*Member).multiplier); }});
  rows.push_back({max_name, field_prefix_max, "a duration >= the first wait (0: no cap)",
                  [](S& s, SV n, SV v) { return SetDuration((s.*Member).max_wait, n, v); },
                  [](const S& s, SV) { return FormatDuration((s.*Member).max_wait); }});
  rows.push_back({"enableRandomizedWait", field_prefix_randomized, kBoolText,
                  [](S& s, SV n, SV v) { return SetBool((s.*Member).randomized, n, v); },
                  [](const S& s, SV) { return BoolText((s.*Member).randomized); }});
  rows.push_back({"randomizedWaitFactor", field_prefix_factor, "a number in [0, 1]",
                  [](S& s, SV n, SV v) {
                    return SetDouble((s.*Member).randomized_factor, n, v, "a number in [0, 1]");
                  },
                  [](const S& s, SV) { return DoubleText((s.*Member).randomized_factor); }});
}

// --- resilience4j.circuitbreaker ----------------------------------------------------

Policy<CircuitBreakerSettings> MakeCircuitBreakerPolicy() {
  using S = CircuitBreakerSettings;
  Policy<S> p;
  p.section = "circuitbreaker";
  p.env_section = "CIRCUITBREAKER";
  p.aspect_order = "circuitBreakerAspectOrder";
  // Every name config_names.h knows, Resilience4j's and fusebox's own.
  for (const ConfigProperty& c : ConfigProperties()) {
    p.properties.push_back({c.name, c.field, c.expects,
                            [](S& s, SV n, SV v) { return SetConfigProperty(s.config, n, v); },
                            [](const S& s, SV n) { return *GetConfigProperty(s.config, n); }});
  }
  AddBackoffRows<S, &S::open_backoff>(p.properties, "open_backoff.exponential",
                                      "open_backoff.multiplier", "open_backoff.max_wait",
                                      "exponentialMaxWaitDurationInOpenState",
                                      "open_backoff.randomized", "open_backoff.randomized_factor");
  p.name_properties = {"recordExceptions",       "ignoreExceptions",
                       "recordFailurePredicate", "ignoreExceptionPredicate",
                       "recordResultPredicate",  "waitIntervalFunctionInOpenState"};
  p.names = [](S& s) { return &s.names; };
  p.not_applicable = {
      {"ringBufferSizeInClosedState", "removed in Resilience4j 2; use slidingWindowSize"},
      {"ringBufferSizeInHalfOpenState",
       "removed in Resilience4j 2; use permittedNumberOfCallsInHalfOpenState"},
  };
  p.finish = [](S& s) {
    if (Status st = ValidateBackoff(s.open_backoff, s.config.wait_duration_in_open_state,
                                    "open_backoff.", "wait_duration_in_open_state");
        !st.ok()) {
      return st;
    }
    s.config.wait_interval_function =
        BuildBackoff(s.open_backoff, s.config.wait_duration_in_open_state,
                     s.config.compatibility == Compatibility::kResilience4j, s.config.jitter_seed);
    return s.config.Validate();
  };
  return p;
}

// --- resilience4j.retry ---------------------------------------------------------------

Policy<RetrySettings> MakeRetryPolicy() {
  using S = RetrySettings;
  Policy<S> p;
  p.section = "retry";
  p.env_section = "RETRY";
  p.aspect_order = "retryAspectOrder";
  p.properties = {
      {"maxAttempts", "max_attempts", "an integer >= 1",
       [](S& s, SV n, SV v) { return SetInt(s.options.max_attempts, n, v, "an integer >= 1"); },
       [](const S& s, SV) { return std::to_string(s.options.max_attempts); }},
      {"waitDuration", "wait_duration", "a duration >= 0",
       [](S& s, SV n, SV v) { return SetDuration(s.options.wait_duration, n, v); },
       [](const S& s, SV) { return FormatDuration(s.options.wait_duration); }},
  };
  AddBackoffRows<S, &S::backoff>(p.properties, "backoff.exponential", "backoff.multiplier",
                                 "backoff.max_wait", "exponentialMaxWaitDuration",
                                 "backoff.randomized", "backoff.randomized_factor");
  const std::vector<Property<S>> more = {
      {"failAfterMaxAttempts", "", "true",
       [](S&, SV n, SV v) {
         return SetFixed(true, n, v, "fusebox always ends with kRetriesExhausted");
       },
       [](const S&, SV) { return std::string("true"); }},
      // fusebox's own.
      {"maxDuration", "max_duration", "a duration >= 0 (0: no budget)",
       [](S& s, SV n, SV v) { return SetDuration(s.options.max_duration, n, v); },
       [](const S& s, SV) { return FormatDuration(s.options.max_duration); }},
      {"maxRetryAfter", "max_retry_after", "a duration >= 0",
       [](S& s, SV n, SV v) { return SetDuration(s.options.max_retry_after, n, v); },
       [](const S& s, SV) { return FormatDuration(s.options.max_retry_after); }},
      {"retryOnBulkheadFull", "retry_on_bulkhead_full", kBoolText,
       [](S& s, SV n, SV v) { return SetBool(s.options.retry_on_bulkhead_full, n, v); },
       [](const S& s, SV) { return BoolText(s.options.retry_on_bulkhead_full); }},
      {"retryOnRateLimited", "retry_on_rate_limited", kBoolText,
       [](S& s, SV n, SV v) { return SetBool(s.options.retry_on_rate_limited, n, v); },
       [](const S& s, SV) { return BoolText(s.options.retry_on_rate_limited); }},
  };
  p.properties.insert(p.properties.end(), more.begin(), more.end());
  constexpr SV kRetryWhy =
      "it names a Java BiConsumer run on a result before a retry; fusebox's retry has no "
      "results to consume";
  p.name_properties = {"retryExceptions", "ignoreExceptions",   "retryExceptionPredicate",
                       "resultPredicate", "intervalBiFunction", "intervalFunction"};
  p.names = [](S& s) { return &s.names; };
  p.not_applicable = {
      {"consumeResultBeforeRetryAttempt", kRetryWhy},
  };
  p.finish = [](S& s) {
    if (Status st =
            ValidateBackoff(s.backoff, s.options.wait_duration, "backoff.", "wait_duration");
        !st.ok()) {
      return st;
    }
    s.options.interval_function = BuildBackoff(s.backoff, s.options.wait_duration);
    return s.options.Validate();
  };
  return p;
}

// --- resilience4j.bulkhead ------------------------------------------------------------

Policy<BulkheadOptions> MakeBulkheadPolicy() {
  using S = BulkheadOptions;
  Policy<S> p;
  p.section = "bulkhead";
  p.env_section = "BULKHEAD";
  p.aspect_order = "bulkheadAspectOrder";
  p.properties = {
      {"maxConcurrentCalls", "max_concurrent_calls", "an integer >= 1",
       [](S& s, SV n, SV v) { return SetInt(s.max_concurrent_calls, n, v, "an integer >= 1"); },
       [](const S& s, SV) { return std::to_string(s.max_concurrent_calls); }},
      {"maxWaitDuration", "max_wait_duration", "a duration >= 0",
       [](S& s, SV n, SV v) { return SetDuration(s.max_wait_duration, n, v); },
       [](const S& s, SV) { return FormatDuration(s.max_wait_duration); }},
      {"fairCallHandlingStrategyEnabled", "", "false",
       [](S&, SV n, SV v) {
         return SetFixed(false, n, v, "fusebox's bulkhead does not serve waiters in order");
       },
       [](const S&, SV) { return std::string("false"); }},
      // fusebox's own.
      {"maxWaitingCalls", "max_waiting_calls", "an integer >= 0",
       [](S& s, SV n, SV v) { return SetInt(s.max_waiting_calls, n, v, "an integer >= 0"); },
       [](const S& s, SV) { return std::to_string(s.max_waiting_calls); }},
  };
  constexpr SV kPoolWhy =
      "a property of the thread-pool bulkhead; move it to resilience4j.thread-pool-bulkhead";
  p.not_applicable = {
      {"maxThreadPoolSize", kPoolWhy},
      {"coreThreadPoolSize", kPoolWhy},
      {"queueCapacity", kPoolWhy},
      {"keepAliveDuration", kPoolWhy},
  };
  p.finish = [](S& s) { return s.Validate(); };
  return p;
}

// --- resilience4j.thread-pool-bulkhead ------------------------------------------------

Policy<ThreadPoolBulkheadOptions> MakeThreadPoolBulkheadPolicy() {
  using S = ThreadPoolBulkheadOptions;
  Policy<S> p;
  p.section = "thread-pool-bulkhead";
  p.env_section = "THREADPOOLBULKHEAD";
  p.aspect_order = "threadPoolBulkheadAspectOrder";
  p.properties = {
      {"maxThreadPoolSize", "max_thread_pool_size", "an integer >= coreThreadPoolSize",
       [](S& s, SV n, SV v) {
         return SetInt(s.max_thread_pool_size, n, v, "an integer >= coreThreadPoolSize");
       },
       [](const S& s, SV) { return std::to_string(s.max_thread_pool_size); }},
      {"coreThreadPoolSize", "core_thread_pool_size", "an integer >= 1",
       [](S& s, SV n, SV v) { return SetInt(s.core_thread_pool_size, n, v, "an integer >= 1"); },
       [](const S& s, SV) { return std::to_string(s.core_thread_pool_size); }},
      {"queueCapacity", "queue_capacity", "an integer >= 0",
       [](S& s, SV n, SV v) { return SetInt(s.queue_capacity, n, v, "an integer >= 0"); },
       [](const S& s, SV) { return std::to_string(s.queue_capacity); }},
      {"keepAliveDuration", "keep_alive_duration", "a duration >= 0",
       [](S& s, SV n, SV v) { return SetDuration(s.keep_alive_duration, n, v); },
       [](const S& s, SV) { return FormatDuration(s.keep_alive_duration); }},
  };
  p.finish = [](S& s) { return s.Validate(); };
  return p;
}

// --- resilience4j.ratelimiter ---------------------------------------------------------

Policy<RateLimiterOptions> MakeRateLimiterPolicy() {
  using S = RateLimiterOptions;
  Policy<S> p;
  p.section = "ratelimiter";
  p.env_section = "RATELIMITER";
  p.aspect_order = "rateLimiterAspectOrder";
  p.properties = {
      {"limitForPeriod", "limit_for_period", "an integer >= 1",
       [](S& s, SV n, SV v) { return SetInt(s.limit_for_period, n, v, "an integer >= 1"); },
       [](const S& s, SV) { return std::to_string(s.limit_for_period); }},
      {"limitRefreshPeriod", "limit_refresh_period", "a duration in (0, 1 year]",
       [](S& s, SV n, SV v) { return SetDuration(s.limit_refresh_period, n, v); },
       [](const S& s, SV) { return FormatDuration(s.limit_refresh_period); }},
      {"timeoutDuration", "timeout_duration", "a duration >= 0",
       [](S& s, SV n, SV v) { return SetDuration(s.timeout_duration, n, v); },
       [](const S& s, SV) { return FormatDuration(s.timeout_duration); }},
      // fusebox's own.
      {"callTiming", "timing", "AUTO, PRECISE or COARSE",
       [](S& s, SV, SV v) { return SetTiming(s.timing, v); },
       [](const S& s, SV) { return TimingText(s.timing); }},
  };
  p.not_applicable = {
      {"drainPermissionsOnResult",
       "it names a Java predicate; fusebox's limiter takes permits only when asked"},
  };
  p.finish = [](S& s) { return s.Validate(); };
  return p;
}

// --- resilience4j.timelimiter ---------------------------------------------------------

Policy<TimeoutOptions> MakeTimeLimiterPolicy() {
  using S = TimeoutOptions;
  Policy<S> p;
  p.section = "timelimiter";
  p.env_section = "TIMELIMITER";
  p.aspect_order = "timeLimiterAspectOrder";
  p.properties = {
      {"timeoutDuration", "timeout_duration", "a duration > 0",
       [](S& s, SV n, SV v) { return SetDuration(s.timeout_duration, n, v); },
       [](const S& s, SV) { return FormatDuration(s.timeout_duration); }},
      {"cancelRunningFuture", "cancel_running_future", kBoolText,
       [](S& s, SV n, SV v) { return SetBool(s.cancel_running_future, n, v); },
       [](const S& s, SV) { return BoolText(s.cancel_running_future); }},
      // fusebox's own.
      {"watchSlots", "watch_slots", "an integer in [1, 65536]",
       [](S& s, SV n, SV v) { return SetInt(s.watch_slots, n, v, "an integer in [1, 65536]"); },
       [](const S& s, SV) { return std::to_string(s.watch_slots); }},
      {"callTiming", "timing", "AUTO, PRECISE or COARSE",
       [](S& s, SV, SV v) { return SetTiming(s.timing, v); },
       [](const S& s, SV) { return TimingText(s.timing); }},
  };
  p.finish = [](S& s) { return s.Validate(); };
  return p;
}

constexpr std::array<KeyNote, 6> kIgnored{{
    {"contextPropagators",
     "it names Java ContextPropagator classes; a fusebox call carries what its callable "
     "captures"},
    {"registerHealthIndicator", "a Spring Boot actuator setting; fusebox has no health endpoint"},
    {"allowHealthIndicatorToFail",
     "a Spring Boot actuator setting; fusebox has no health endpoint"},
    {"eventConsumerBufferSize", "a Spring Boot event buffer; fusebox has listeners instead"},
    {"subscribeForEvents", "a Spring Boot event buffer; fusebox has listeners instead"},
    {"writableStackTraceEnabled", "fusebox reports a refusal as a Status, with no stack trace"},
}};

// Each table is built on first use and never destroyed, so that no exit-time
// destructor can run while another static still reads it.
template <typename S, Policy<S> (*kMake)()>
const Policy<S>& BuiltOnce() {
  static const Policy<S>* const kPolicy = new Policy<S>(kMake());
  return *kPolicy;
}

}  // namespace

const Policy<CircuitBreakerSettings>& CircuitBreakerPolicy() {
  return BuiltOnce<CircuitBreakerSettings, MakeCircuitBreakerPolicy>();
}
const Policy<RetrySettings>& RetryPolicy() { return BuiltOnce<RetrySettings, MakeRetryPolicy>(); }
const Policy<BulkheadOptions>& BulkheadPolicy() {
  return BuiltOnce<BulkheadOptions, MakeBulkheadPolicy>();
}
const Policy<ThreadPoolBulkheadOptions>& ThreadPoolBulkheadPolicy() {
  return BuiltOnce<ThreadPoolBulkheadOptions, MakeThreadPoolBulkheadPolicy>();
}
const Policy<RateLimiterOptions>& RateLimiterPolicy() {
  return BuiltOnce<RateLimiterOptions, MakeRateLimiterPolicy>();
}
const Policy<TimeoutOptions>& TimeLimiterPolicy() {
  return BuiltOnce<TimeoutOptions, MakeTimeLimiterPolicy>();
}

std::span<const KeyNote> IgnoredKeys() { return kIgnored; }

std::string Canonical(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c != '-' && c != '_') out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string_view Closest(std::string_view key, const std::vector<std::string_view>& candidates) {
  const std::string k = Canonical(key);
  // A typo is a few edits, more for a long name; "id" is not a typo of "xyz".
  const std::size_t limit = k.size() <= 4 ? 1 : k.size() <= 12 ? 2 : 3;
  std::string_view best;
  std::size_t best_distance = limit + 1;
  for (std::string_view c : candidates) {
    const std::size_t d = EditDistance(k, Canonical(c));
    if (d < best_distance) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

}  // namespace fusebox::yaml::internal

namespace fusebox::yaml {

Status SetCircuitBreakerProperty(CircuitBreakerSettings& settings, std::string_view name,
                                 std::string_view value) {
  const std::string canon = internal::Canonical(name);
  for (const auto& p : internal::CircuitBreakerPolicy().properties) {
    // The row's own spelling: the breaker's setters know only camelCase.
    if (internal::Canonical(p.name) == canon) return p.set(settings, p.name, value);
  }
  return Status(StatusCode::kNotFound, "no circuit breaker property \"" + std::string(name) + '"');
}

Status FinishCircuitBreakerSettings(CircuitBreakerSettings& settings) {
  const auto& policy = internal::CircuitBreakerPolicy();
  Status st = policy.finish(settings);
  if (st.ok()) return st;
  // "<field> <rule>" from finish(): put the property's name in front.
  const std::string_view message = st.message();
  for (const auto& p : policy.properties) {
    if (!p.field.empty() && message.size() > p.field.size() &&
        message.substr(0, p.field.size()) == p.field && message[p.field.size()] == ' ') {
      return Status::InvalidArgument(std::string(p.name) + " (" + std::string(p.field) + ")" +
                                     std::string(message.substr(p.field.size())));
    }
  }
  return st;
}

}  // namespace fusebox::yaml
