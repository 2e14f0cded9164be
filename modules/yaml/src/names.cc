// NameRegistry and ResolveNames (fusebox/yaml/config.h): what the Java names
// of a Resilience4j file mean in this service, and the classifiers they make.
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/yaml/config.h"

namespace fusebox::yaml {
namespace {

// The meanings of one property's names that are registered, with their
// resolutions and warnings recorded on the way.
std::vector<const NameMeaning*> Lookup(const NameLists& lists, std::string_view property,
                                       const std::string& path, const NameRegistry& registry,
                                       ResolvedNames& out) {
  std::vector<const NameMeaning*> found;
  auto it = lists.find(property);
  if (it == lists.end()) return found;
  const std::string where = path + "." + std::string(property);
  for (const std::string& name : it->second) {
    const NameMeaning* m = registry.Find(name);
    out.resolutions.push_back({where, name, m != nullptr ? m->description : ""});
    if (m == nullptr) {
      std::string warning = where;
      warning.append(": \"").append(name).append("\" is not registered (NameRegistry); left out");
      out.warnings.push_back(std::move(warning));
    } else {
      found.push_back(m);
    }
  }
  return found;
}

// Which of the meanings an outcome matches. Copies them: the classifiers
// built from it outlive the registry (a service may drop it once resolved).
struct Matchers {
  std::vector<NameMeaning> meanings;

  bool empty() const { return meanings.empty(); }
  void Add(const std::vector<const NameMeaning*>& more) {
    for (const NameMeaning* m : more) meanings.push_back(*m);
  }
  bool Matches(const Status& s) const {
    for (const NameMeaning& m : meanings) {
      if (m.matches_status && m.matches_status(s)) return true;
    }
    return false;
  }
  bool Matches(const std::exception_ptr& e) const {
    for (const NameMeaning& m : meanings) {
      if (m.matches_exception && m.matches_exception(e)) return true;
    }
    return false;
  }
};

// The first registered interval function among `meanings`, with a warning
// for a name registered without one.
IntervalFunction IntervalOf(const std::vector<const NameMeaning*>& meanings,
                            const std::string& where, ResolvedNames& out) {
  for (const NameMeaning* m : meanings) {
    if (m->interval) return m->interval;
    out.warnings.push_back(where + ": \"" + m->description +
                           "\" is registered without an interval function; left out");
  }
  return nullptr;
}

void ResolveBreaker(const std::string& path, CircuitBreakerSettings& s,
                    const NameRegistry& registry, ResolvedNames& out) {
  Matchers ignore, record;
  ignore.Add(Lookup(s.names, "ignoreExceptions", path, registry, out));
  ignore.Add(Lookup(s.names, "ignoreExceptionPredicate", path, registry, out));
  record.Add(Lookup(s.names, "recordExceptions", path, registry, out));
  record.Add(Lookup(s.names, "recordFailurePredicate", path, registry, out));
  record.Add(Lookup(s.names, "recordResultPredicate", path, registry, out));
  const std::vector<const NameMeaning*> interval =
      Lookup(s.names, "waitIntervalFunctionInOpenState", path, registry, out);
  if (IntervalFunction f = IntervalOf(interval, path + ".waitIntervalFunctionInOpenState", out)) {
    s.config.wait_interval_function = std::move(f);
  }
  if (ignore.empty() && record.empty()) return;
  // Resilience4j's order: ignored first; then, when anything is to be
  // recorded, only that is a failure and the rest a success.
  auto shared = std::make_shared<const std::pair<Matchers, Matchers>>(ignore, record);
  s.config.exception_classifier = [shared](const std::exception_ptr& e) {
    if (shared->first.Matches(e)) return Outcome::Ignored();
    if (shared->second.empty() || shared->second.Matches(e)) return Outcome::Failure();
    return Outcome::Success();
  };
  s.status_classifier = [shared](const Status& st) {
    if (shared->first.Matches(st)) return OutcomeKind::kIgnored;
    if (shared->second.empty() || shared->second.Matches(st)) return OutcomeKind::kFailure;
    return OutcomeKind::kSuccess;
  };
}

void ResolveRetry(const std::string& path, RetrySettings& s, const NameRegistry& registry,
                  ResolvedNames& out) {
  Matchers ignore, retry;
  ignore.Add(Lookup(s.names, "ignoreExceptions", path, registry, out));
  retry.Add(Lookup(s.names, "retryExceptions", path, registry, out));
  retry.Add(Lookup(s.names, "retryExceptionPredicate", path, registry, out));
  retry.Add(Lookup(s.names, "resultPredicate", path, registry, out));
  for (std::string_view property : {"intervalBiFunction", "intervalFunction"}) {
    const std::vector<const NameMeaning*> interval = Lookup(s.names, property, path, registry, out);
    if (IntervalFunction f = IntervalOf(interval, path + "." + std::string(property), out)) {
      s.options.interval_function = std::move(f);
    }
  }
  if (ignore.empty() && retry.empty()) return;
  // The default's rule, for when only ignoreExceptions is given.
  auto by_default = [](const Status& st) {
    return st.code() == StatusCode::kUnavailable || st.code() == StatusCode::kTimeout;
  };
  auto shared = std::make_shared<const std::pair<Matchers, Matchers>>(ignore, retry);
  s.options.retry_on = [shared, by_default](const Status& st) {
    if (shared->first.Matches(st)) return false;
    if (shared->second.empty()) return by_default(st);
    return shared->second.Matches(st);
  };
}

template <typename S, typename F>
void ResolveSection(std::string_view section, Section<S>& list, const NameRegistry& registry,
                    ResolvedNames& out, F resolve) {
  for (bool configs : {true, false}) {
    for (Named<S>& n : configs ? list.configs : list.instances) {
      const std::string path =
          "resilience4j." + std::string(section) + (configs ? ".configs." : ".instances.") + n.name;
      resolve(path, n.settings, registry, out);
    }
  }
}

}  // namespace

NameRegistry& NameRegistry::Add(std::string name, NameMeaning meaning) {
  meanings_.insert_or_assign(std::move(name), std::move(meaning));
  return *this;
}

NameRegistry& NameRegistry::AddStatusCode(std::string name, StatusCode code) {
  return Add(std::move(name),
             {.description = "StatusCode " + std::string(StatusCodeName(code)),
              .matches_status = [code](const Status& s) { return s.code() == code; }});
}

NameRegistry& NameRegistry::AddHttpStatusClass(
    std::string name, int hundreds,
    std::function<std::optional<int>(const Status&)> http_status_of) {
  return Add(std::move(name),
             {.description = "HTTP " + std::to_string(hundreds) + "xx",
              .matches_status = [hundreds, of = std::move(http_status_of)](const Status& s) {
                const std::optional<int> http = of ? of(s) : std::nullopt;
                return http.has_value() && *http / 100 == hundreds;
              }});
}

NameRegistry& NameRegistry::AddJavaDefaults() {
  AddStatusCode("java.util.concurrent.TimeoutException", StatusCode::kTimeout);
  AddStatusCode("java.net.SocketTimeoutException", StatusCode::kTimeout);
  AddStatusCode("java.io.IOException", StatusCode::kUnavailable);
  AddStatusCode("java.net.ConnectException", StatusCode::kUnavailable);
  AddStatusCode("io.github.resilience4j.circuitbreaker.CallNotPermittedException",
                StatusCode::kCircuitOpen);
  AddStatusCode("io.github.resilience4j.bulkhead.BulkheadFullException", StatusCode::kBulkheadFull);
  AddStatusCode("io.github.resilience4j.ratelimiter.RequestNotPermitted", StatusCode::kRateLimited);
  return *this;
}

const NameMeaning* NameRegistry::Find(std::string_view name) const {
  auto it = meanings_.find(name);
  return it == meanings_.end() ? nullptr : &it->second;
}

ResolvedNames ResolveNames(Configuration& config, const NameRegistry& names) {
  ResolvedNames out;
  ResolveSection("circuitbreaker", config.circuit_breakers, names, out, ResolveBreaker);
  ResolveSection("retry", config.retries, names, out, ResolveRetry);
  return out;
}

}  // namespace fusebox::yaml
