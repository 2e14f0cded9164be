// AuditLog: one JSON line per operator action, numbered, never sampled.
#include "fusebox/audit_log.h"

#include <atomic>
#include <string>
#include <utility>

#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/metrics.h"
#include "json_line.h"

namespace fusebox {

Status AuditLogOptions::Validate() const {
  if (sink == nullptr) return Status::InvalidArgument("sink must be set");
  return Status();
}

std::string_view AuditAction(const TransitionEvent& event) noexcept {
  if (event.reason == TransitionReason::kOverrideExpired) return "override_expired";
  if (event.reason != TransitionReason::kOperator) return "";
  switch (event.to) {
    case State::kForcedOpen:
      return "force_open";
    case State::kForcedClosed:
      return "force_closed";
    case State::kDisabled:
      return "disable";
    case State::kMetricsOnly:
      return "metrics_only";
    case State::kClosed:
      return "reset";
    case State::kOpen:
      return "transition_to_open";
    case State::kHalfOpen:
      return "transition_to_half_open";
  }
  return "";
}

namespace {
bool IsOverride(State s) {
  return s == State::kForcedOpen || s == State::kForcedClosed || s == State::kDisabled ||
         s == State::kMetricsOnly;
}
}  // namespace

struct AuditLog::Core {
  explicit Core(AuditLogOptions o) : options(std::move(o)) {}

  const AuditLogOptions options;
  // Sequence numbers are given and lines written under one lock, so that the
  // file's order is the sequence's order. Operator actions are rare.
  internal::Mutex mu;
  std::uint64_t next_seq FUSEBOX_GUARDED_BY(mu) = 1;
  std::atomic<std::uint64_t> written{0};
  std::atomic<std::uint64_t> errors{0};
};

class AuditLog::Listener final : public CircuitBreakerListener {
 public:
  Listener(std::shared_ptr<Core> core, CircuitBreaker& breaker)
      : core_(std::move(core)), clock_(breaker.clock()), name_(breaker.name()) {}

  // Transitions are delivered one at a time per breaker, so the override
  // remembered here needs no lock.
  unsigned interests() const override { return kTransitionEvents; }

  void OnTransition(const TransitionEvent& e) override {
    const std::string_view action = AuditAction(e);
    if (action.empty()) {
      if (!IsOverride(e.to)) last_override_.reset();
      return;
    }
    const bool expired = e.reason == TransitionReason::kOverrideExpired;
    const WallClock& wall = core_->options.wall_clock;

    internal::MutexLock lock(&core_->mu);
    internal::JsonObject o;
    o.Uint("seq", core_->next_seq)
        .Str("event", "audit")
        .Str("action", action)
        .Str("breaker", name_);
    if (expired) {
      // Nobody acted: the override's time ran out. Name the override that
      // ended, so the record reads without searching for the one that set it.
      o.Str("actor", "fusebox").Str("reason", "override expired");
      if (last_override_) {
        o.Str("override_actor", last_override_->actor)
            .Str("override_reason", last_override_->reason);
      }
    } else {
      o.Str("actor", e.actor).Str("reason", e.detail);
    }
    o.Str("before", StateLabel(e.from)).Str("after", StateLabel(e.to));
    if (IsOverride(e.to) && e.retry_at) {
      o.Int("expires_in_ms", internal::Ms(*e.retry_at - e.at));
      if (wall) o.Time("expires_at", internal::ToWall(wall, clock_, *e.retry_at));
    }
    o.Int("t_ms", internal::SteadyMs(e.at));
    if (wall) o.Time("ts", internal::ToWall(wall, clock_, e.at));
    // A number is used even when the write fails: a gap in the sequence is
    // how a reader of the file sees that a record is missing.
    ++core_->next_seq;
    if (core_->options.sink->Write(std::move(o).Done()).ok()) {
      core_->written.fetch_add(1, std::memory_order_relaxed);
    } else {
      core_->errors.fetch_add(1, std::memory_order_relaxed);
    }

    if (IsOverride(e.to)) {
      last_override_ = Override{std::string(e.actor), std::string(e.detail)};
    } else {
      last_override_.reset();
    }
  }

 private:
  struct Override {
    std::string actor;
    std::string reason;
  };

  const std::shared_ptr<Core> core_;
  Clock& clock_;
  const std::string name_;
  std::optional<Override> last_override_;
};

Result<std::unique_ptr<AuditLog>> AuditLog::Create(AuditLogOptions options) {
  Status s = options.Validate();
  if (!s.ok()) return s;
  return std::unique_ptr<AuditLog>(new AuditLog(std::make_shared<Core>(std::move(options))));
}

AuditLog::AuditLog(std::shared_ptr<Core> core) : core_(std::move(core)) {}

AuditLog::~AuditLog() = default;

void AuditLog::Attach(CircuitBreaker& breaker) {
  breaker.AddListener(std::make_shared<Listener>(core_, breaker));
}

std::uint64_t AuditLog::records_written() const noexcept {
  return core_->written.load(std::memory_order_relaxed);
}

std::uint64_t AuditLog::write_errors() const noexcept {
  return core_->errors.load(std::memory_order_relaxed);
}

}  // namespace fusebox
