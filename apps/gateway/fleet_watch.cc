#include "apps/gateway/fleet_watch.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <utility>

#include "fusebox/meta/provider_call.h"
#include "fusebox/metrics.h"
#include "fusebox/prometheus.h"

namespace fusebox::gateway {
namespace {

using Json = nlohmann::json;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// RFC 3339 UTC with milliseconds, from the wall clock (a log's time stamp,
// never a decision).
std::string Timestamp() {
  const auto now = WallClockNow();
  const std::time_t secs = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) %
                  std::chrono::seconds(1);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[40];
  const std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  char out[48];
  std::snprintf(out, sizeof out, "%.*s.%03dZ", static_cast<int>(n), buf,
                static_cast<int>(ms.count()));
  return out;
}

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

std::optional<std::string_view> TemplateOfCircuit(std::string_view circuit) {
  if (circuit.substr(0, 9) != "provider:") return std::nullopt;
  // provider:<p>:<workload>:<subject>:<kind>: at least four colons.
  if (std::count(circuit.begin(), circuit.end(), ':') < 4) return std::nullopt;
  if (EndsWith(circuit, ":quota")) return meta::kQuotaConfigName;
  if (EndsWith(circuit, ":transient")) return meta::kTransientConfigName;
  return std::nullopt;
}

Status JsonLineLog::Write(std::string_view line) {
  const TimePoint now = clock_.Now();
  std::string out;
  {
    internal::MutexLock lock(&mu_);
    if (refilled_ != TimePoint{}) {
      const double secs = std::chrono::duration<double>(now - refilled_).count();
      tokens_ = std::min<double>(kLogBurst, tokens_ + std::max(0.0, secs) * kLogPerSecond);
    }
    refilled_ = now;
    if (tokens_ < 1) {
      ++suppressed_;
      suppressed_total_.fetch_add(1, std::memory_order_relaxed);
      return Status();
    }
    tokens_ -= 1;
    if (suppressed_ > 0) {
      out = Dump(Json{{"ts", Timestamp()},
                      {"event", "log_lines_suppressed"},
                      {"lines", std::exchange(suppressed_, 0)}});
      out += '\n';
    }
    out.append(line);
    out += '\n';
    // One write of whole lines, under the lock: lines never interleave.
    out_.write(out.data(), static_cast<std::streamsize>(out.size()));
    out_.flush();
  }
  return Status();
}

void JsonLineLog::WriteVerbatim(std::string_view text) {
  internal::MutexLock lock(&mu_);
  out_.write(text.data(), static_cast<std::streamsize>(text.size()));
  out_.flush();
}

FleetWatch::FleetWatch(std::ostream& log) : line_log_(std::make_shared<JsonLineLog>(log)) {}

void FleetWatch::LogStoreEvent(std::string_view event, std::string_view detail, bool recovered) {
  Json line{{"ts", Timestamp()}, {"event", event}, {"detail", detail}};
  if (recovered) line["recovered"] = true;
  (void)line_log_->Write(Dump(line));
}

void FleetWatch::AdoptInto(Registry* registry) {
  internal::MutexLock lock(&mu_);
  registry_ = registry;
}

void FleetWatch::OnFleetOverride(std::string_view circuit, const SharedOverride& setting) {
  // A lift concerns only breakers that exist: they hear it themselves.
  if (setting.kind == SharedOverride::Kind::kLifted) return;
  const std::optional<std::string_view> config = TemplateOfCircuit(circuit);
  if (!config) return;
  internal::MutexLock lock(&mu_);
  if (registry_ == nullptr || registry_->Find(circuit) != nullptr) return;
  // Created (observers attached first, then the store's subscription): the
  // store delivers this very override to it right after this returns.
  Result<std::shared_ptr<CircuitBreaker>> b = registry_->Get(circuit, *config);
  if (!b) return;
  if ((*b)->name() == circuit) {
    adopted_.fetch_add(1, std::memory_order_relaxed);
  } else {
    overflowed_.fetch_add(1, std::memory_order_relaxed);  // Past max_breakers_hard.
  }
}

std::string FleetWatch::Metrics(const SharedStateHealth& health) const {
  MetricsSnapshot snapshot;
  snapshot.shared_states.push_back(SharedStateSample{"redis", health});
  PrometheusOptions options;
  options.prefix = "fusebox";
  std::string out = RenderPrometheus(snapshot, options);
  out +=
      "# HELP fusebox_gateway_fleet_overrides_adopted_total Overrides pushed by the fleet for a "
      "circuit this instance had no breaker for: created (applied, listed, audited here), or "
      "overflow (the registry was at max_breakers_hard: not applied).\n"
      "# TYPE fusebox_gateway_fleet_overrides_adopted_total counter\n"
      "fusebox_gateway_fleet_overrides_adopted_total{result=\"created\"} " +
      std::to_string(adopted_.load()) +
      "\nfusebox_gateway_fleet_overrides_adopted_total{result=\"overflow\"} " +
      std::to_string(overflowed_.load()) +
      "\n# HELP fusebox_gateway_log_lines_suppressed_total JSON log lines dropped by the log's "
      "rate limit.\n# TYPE fusebox_gateway_log_lines_suppressed_total counter\n"
      "fusebox_gateway_log_lines_suppressed_total " +
      std::to_string(line_log_->suppressed()) + "\n";
  return out;
}

}  // namespace fusebox::gateway
