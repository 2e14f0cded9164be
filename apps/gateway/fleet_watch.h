// apps/gateway/fleet_watch.h: what the gateway does with the fleet's shared
// state besides sharing its breakers' OPENs (docs/gateway.md, "The fleet"):
//
//   - Adopts the fleet's overrides. An operator's force-open set on any
//     instance is pushed to every instance; one that has no breaker for that
//     circuit yet creates it on hearing the push (through the Registry, whose
//     bounds hold: beyond max_breakers_hard nothing is created), so that the
//     override is applied, listed in /admin/circuits and written to the audit
//     log here at once, not when this instance first serves that circuit.
//   - Logs, as JSON lines on the gateway's log (stderr), every circuit
//     transition (fusebox::EventLog's lines), Redis lost and recovered, an
//     authentication failure and a resync. Rate-limited: at most a burst of
//     kLogBurst lines, then kLogPerSecond a second; what is dropped is
//     counted in a "log_lines_suppressed" line once lines flow again.
//   - /metrics families of the store's health, fusebox_shared_state_*
//     (RenderPrometheus' families under the "fusebox" prefix), and of the
//     overrides adopted.
//
// Thread-safe.
#ifndef FUSEBOX_APPS_GATEWAY_FLEET_WATCH_H_
#define FUSEBOX_APPS_GATEWAY_FLEET_WATCH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include "fusebox/clock.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/observer.h"
#include "fusebox/registry.h"
#include "fusebox/shared_state.h"

namespace fusebox::gateway {

// The template of a gateway circuit, by its name's suffix:
// "provider:<p>:<workload>:<subject>:quota" -> meta's quota template,
// ":transient" -> the transient one; nullopt for any other name.
std::optional<std::string_view> TemplateOfCircuit(std::string_view circuit);

// JSON lines to the gateway's log, rate-limited (see the top of this file).
class JsonLineLog final : public LineSink {
 public:
  static constexpr int kLogBurst = 100;
  static constexpr int kLogPerSecond = 20;

  // `out` must outlive the log. Rates are timed on `clock` (real time by
  // default: a log's rate is a matter of real time).
  explicit JsonLineLog(std::ostream& out, Clock& clock = SystemClock())
      : out_(out), clock_(clock) {}
  Status Write(std::string_view line) override FUSEBOX_EXCLUDES(mu_);
  // `text` as it is, not rate-limited: the gateway's few plain lines (start,
  // stop, warnings). Every write to `out` goes through this log's lock, so
  // the store's thread and the gateway's never write at once.
  void WriteVerbatim(std::string_view text) FUSEBOX_EXCLUDES(mu_);
  // Lines dropped by the rate limit so far.
  std::uint64_t suppressed() const { return suppressed_total_.load(); }

 private:
  std::ostream& out_;
  Clock& clock_;
  internal::Mutex mu_;
  double tokens_ FUSEBOX_GUARDED_BY(mu_) = kLogBurst;
  TimePoint refilled_ FUSEBOX_GUARDED_BY(mu_) = {};
  std::uint64_t suppressed_ FUSEBOX_GUARDED_BY(mu_) = 0;
  std::atomic<std::uint64_t> suppressed_total_{0};
};

class FleetWatch final : public SharedOverrideWatcher {
 public:
  explicit FleetWatch(std::ostream& log);

  // The log every line of this file goes to (transitions included: pass it
  // to an EventLog).
  std::shared_ptr<JsonLineLog> line_log() const { return line_log_; }

  // One store event as a JSON line: {"ts":..,"event":<event>,"detail":..}
  // (and "recovered": true on a recovery). `detail` never carries a secret
  // (the store's messages mask the password).
  void LogStoreEvent(std::string_view event, std::string_view detail, bool recovered);

  // From now on, overrides pushed for circuits without a breaker here create
  // it in `registry`; nullptr stops that, waiting for a creation in
  // progress (call it before the registry goes).
  void AdoptInto(Registry* registry) FUSEBOX_EXCLUDES(mu_);
  void OnFleetOverride(std::string_view circuit, const SharedOverride& setting) override
      FUSEBOX_EXCLUDES(mu_);

  // /metrics text: the store's health as fusebox_shared_state_* and the
  // overrides adopted.
  std::string Metrics(const SharedStateHealth& health) const;

 private:
  std::shared_ptr<JsonLineLog> line_log_;
  internal::Mutex mu_;
  Registry* registry_ FUSEBOX_GUARDED_BY(mu_) = nullptr;
  // Overrides that made a breaker here, and those the registry's hard bound
  // answered with an overflow breaker (not applied).
  std::atomic<std::uint64_t> adopted_{0};
  std::atomic<std::uint64_t> overflowed_{0};
};

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_FLEET_WATCH_H_
