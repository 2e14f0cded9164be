// fusebox/audit_log.h: an append-only record of every operator action.
//
// Forcing a breaker open or closed, disabling it, or putting it in
// metrics-only mode changes what every caller gets; seed 003 asks that such
// overrides carry an expiry, an actor and an audit record ("운영자 강제 상태에
// 만료와 감사 기록이 있는가?"). An AuditLog is a BreakerObserver that writes one
// JSON line per operator action to its LineSink (a FileLineSink opened in
// append mode in production, a MemoryLineSink in tests):
//
//   {"seq":1,"event":"audit","action":"force_open","breaker":"payment",
//    "actor":"alice","reason":"incident 42","before":"closed","after":"forced_open",
//    "expires_in_ms":600000,"t_ms":...,"ts":"2025-08-19T10:00:00.000Z",
//    "expires_at":"2025-08-19T10:10:00.000Z"}
//
// Actions: force_open, force_closed, disable, metrics_only, reset, and the
// programmatic transition_to_open / transition_to_half_open; when an override
// expires and the breaker returns to CLOSED by itself, an "override_expired"
// record names the override that ended (its actor and reason). Nothing is
// sampled or dropped; a sink failure is counted (write_errors()).
//
//   std::shared_ptr<fusebox::AuditLog> audit = *fusebox::AuditLog::Create({
//       .sink = *fusebox::FileLineSink::Create("/var/log/fusebox/audit.jsonl"),
//   });
//   audit->Attach(*breaker);
//   breaker->ForceOpen({.reason = "incident 42", .actor = "alice",
//                       .expires_after = std::chrono::minutes(10)});
//
// Thread-safe.
#ifndef FUSEBOX_AUDIT_LOG_H_
#define FUSEBOX_AUDIT_LOG_H_

#include <cstdint>
#include <memory>
#include <string_view>

#include "fusebox/circuit_breaker.h"
#include "fusebox/event_log.h"
#include "fusebox/observer.h"
#include "fusebox/result.h"

namespace fusebox {

struct AuditLogOptions {
  // Where records go (required).
  std::shared_ptr<LineSink> sink = nullptr;
  // When set, records carry RFC 3339 UTC "ts" and "expires_at". Default: unset.
  WallClock wall_clock = nullptr;

  // OK, or kInvalidArgument naming the first field at fault.
  Status Validate() const;
};

// The action an operator transition stands for: "force_open", "force_closed",
// "disable", "metrics_only", "reset", "transition_to_open",
// "transition_to_half_open", or "override_expired"; empty for a transition
// that no operator caused.
std::string_view AuditAction(const TransitionEvent& event) noexcept;

// Records the operator actions of every breaker attached to it (see the top
// of this file). May be destroyed before the breakers.
//
// Thread-safe.
class AuditLog final : public BreakerObserver {
 public:
  // Fails with kInvalidArgument naming the bad option.
  static Result<std::unique_ptr<AuditLog>> Create(AuditLogOptions options);

  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;
  ~AuditLog() override;

  // Records `breaker`'s operator actions from now on.
  void Attach(CircuitBreaker& breaker) override;

  // Records written, and records the sink refused.
  std::uint64_t records_written() const noexcept;
  std::uint64_t write_errors() const noexcept;

 private:
  struct Core;
  class Listener;
  explicit AuditLog(std::shared_ptr<Core> core);
  const std::shared_ptr<Core> core_;
};

}  // namespace fusebox

#endif  // FUSEBOX_AUDIT_LOG_H_
