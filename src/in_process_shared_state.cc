// The in-process shared state: the Redis scripts' rules (see
// modules/redis/src/scripts.cc and docs/distributed.md) on a map and a Clock.
#include "fusebox/testing/in_process_shared_state.h"

#include <algorithm>
#include <string>

namespace fusebox::testing {

InProcessSharedState::InProcessSharedState(Clock& clock, Duration min_grace)
    : clock_(clock), min_grace_(min_grace) {}

SharedState::SubscriptionId InProcessSharedState::Subscribe(
    std::string_view circuit, std::shared_ptr<SharedStateListener> listener) {
  internal::MutexLock lock(&mu_);
  const SubscriptionId id = next_id_++;
  subscribers_.emplace(id, std::make_pair(std::string(circuit), std::move(listener)));
  return id;
}

void InProcessSharedState::Unsubscribe(SubscriptionId id) {
  std::shared_ptr<SharedStateListener> dropped;  // Destroyed outside the lock.
  internal::MutexLock lock(&mu_);
  auto it = subscribers_.find(id);
  if (it == subscribers_.end()) return;
  dropped = std::move(it->second.second);
  subscribers_.erase(it);
}

InProcessSharedState::Listeners InProcessSharedState::ListenersLocked(
    std::string_view circuit) const {
  Listeners out;
  if (!pushes_) return out;
  for (const auto& [id, sub] : subscribers_) {
    if (sub.first == circuit) out.push_back(sub.second);
  }
  return out;
}

void InProcessSharedState::ExpireLocked(std::map<std::string, Circuit, std::less<>>::iterator it,
                                        TimePoint now) {
  const Circuit& c = it->second;
  if (c.open_until <= now && c.recovery_until <= now && c.lease_until <= now &&
      (!c.override_ || c.override_until <= now)) {
    circuits_.erase(it);
  }
}

bool InProcessSharedState::RefusedLocked() {
  if (available_) return false;
  ++counters_.unavailable;
  return true;
}

InProcessSharedState::Circuit& InProcessSharedState::CircuitLocked(std::string_view circuit) {
  auto it = circuits_.find(circuit);
  if (it == circuits_.end()) it = circuits_.emplace(std::string(circuit), Circuit{}).first;
  return it->second;
}

Result<SharedCircuitView> InProcessSharedState::Read(std::string_view circuit) {
  internal::MutexLock lock(&mu_);
  if (!available_) {
    ++counters_.unavailable;
    return Status::Unavailable("in-process shared state: unavailable");
  }
  ++counters_.reads;
  const TimePoint now = clock_.Now();
  auto it = circuits_.find(circuit);
  if (it == circuits_.end()) return SharedCircuitView{};
  SharedCircuitView view;
  const Circuit& c = it->second;
  if (c.override_ && c.override_until > now) {
    view.override_in_force = *c.override_;
    if (c.override_until != TimePoint::max()) {
      view.override_in_force->expires_after = c.override_until - now;
    }
  }
  if (c.open_until > now) {
    view.kind = SharedCircuitView::Kind::kOpen;
    view.open_remaining = c.open_until - now;
  } else if (c.recovery_until > now) {
    view.kind = SharedCircuitView::Kind::kRecovering;
  } else if (!view.override_in_force) {
    ExpireLocked(it, now);
  }
  return view;
}

void InProcessSharedState::Trip(std::string_view circuit, Duration open_for,
                                std::string_view reason) {
  Listeners notify;
  Duration remaining;
  {
    internal::MutexLock lock(&mu_);
    if (RefusedLocked()) return;
    const TimePoint now = clock_.Now();
    Circuit& c = CircuitLocked(circuit);
    remaining = c.open_until > now ? c.open_until - now : Duration::zero();
    c.reason = std::string(reason);
    if (remaining < open_for) {
      remaining = open_for;
      c.open_until = now + open_for;
      // Fencing: a probe in flight belongs to the OPEN that just ended.
      c.lease_token.clear();
      c.lease_until = TimePoint{};
      ++counters_.trips;
      notify = ListenersLocked(circuit);
    } else {
      ++counters_.trips_kept;
    }
    c.recovery_until =
        std::max(c.recovery_until, now + remaining + std::max(remaining, min_grace_));
  }
  for (const auto& l : notify) l->OnSharedOpen(remaining);
}

ProbeLease InProcessSharedState::AcquireProbe(std::string_view circuit, Duration lease_for) {
  internal::MutexLock lock(&mu_);
  if (!available_) {
    ++counters_.unavailable;
    return ProbeLease{};
  }
  const TimePoint now = clock_.Now();
  auto it = circuits_.find(circuit);
  if (it == circuits_.end()) return ProbeLease{ProbeLease::Verdict::kClosed};
  Circuit& c = it->second;
  if (c.open_until > now) return ProbeLease{ProbeLease::Verdict::kOpen, c.open_until - now};
  if (c.recovery_until <= now) {
    ExpireLocked(it, now);
    return ProbeLease{ProbeLease::Verdict::kClosed};
  }
  if (!c.lease_token.empty() && c.lease_until > now) {
    ++counters_.probes_busy;
    return ProbeLease{ProbeLease::Verdict::kBusy, c.lease_until - now};
  }
  ++counters_.probes_granted;
  c.lease_token = "in-process-" + std::to_string(next_token_++);
  c.lease_until = now + lease_for;
  return ProbeLease{ProbeLease::Verdict::kProbe, lease_for, c.lease_token};
}

void InProcessSharedState::Close(std::string_view circuit, std::string_view token) {
  Listeners notify;
  {
    internal::MutexLock lock(&mu_);
    if (RefusedLocked()) return;
    const TimePoint now = clock_.Now();
    auto it = circuits_.find(circuit);
    if (it == circuits_.end() || it->second.lease_token != token || it->second.lease_until <= now) {
      ++counters_.closes_lost;  // Expired, or fenced by a trip.
      return;
    }
    if (it->second.open_until > now) {  // Reopened meanwhile; cannot happen
      it->second.lease_token.clear();   // with fencing, kept as the script.
      ++counters_.closes_lost;
      return;
    }
    circuits_.erase(it);
    ++counters_.closes;
    notify = ListenersLocked(circuit);
  }
  for (const auto& l : notify) l->OnSharedClosed();
}

void InProcessSharedState::Release(std::string_view circuit, std::string_view token) {
  internal::MutexLock lock(&mu_);
  if (RefusedLocked()) return;
  auto it = circuits_.find(circuit);
  if (it == circuits_.end() || it->second.lease_token != token) return;
  it->second.lease_token.clear();
  it->second.lease_until = TimePoint{};
  ++counters_.releases;
}

void InProcessSharedState::PublishOverride(std::string_view circuit,
                                           const SharedOverride& setting) {
  Listeners notify;
  {
    internal::MutexLock lock(&mu_);
    if (RefusedLocked()) return;
    const TimePoint now = clock_.Now();
    Circuit& c = CircuitLocked(circuit);
    if (setting.kind == SharedOverride::Kind::kLifted) {
      c.override_.reset();
    } else {
      c.override_ = setting;
      c.override_until =
          setting.expires_after > Duration::zero() ? now + setting.expires_after : TimePoint::max();
    }
    ++counters_.overrides;
    notify = ListenersLocked(circuit);
  }
  for (const auto& l : notify) l->OnSharedOverride(setting);
}

void InProcessSharedState::SetAvailable(bool available) {
  internal::MutexLock lock(&mu_);
  available_ = available;
}

void InProcessSharedState::SetPushes(bool pushes) {
  internal::MutexLock lock(&mu_);
  pushes_ = pushes;
}

void InProcessSharedState::Resync() {
  Listeners all;
  {
    internal::MutexLock lock(&mu_);
    for (const auto& [id, sub] : subscribers_) all.push_back(sub.second);
  }
  for (const auto& l : all) l->OnSharedResync();
}

SharedStateHealth InProcessSharedState::health() const {
  internal::MutexLock lock(&mu_);
  SharedStateHealth h;
  h.healthy = available_ && pushes_;
  h.refused_calls = counters_.unavailable;
  h.leases_granted = counters_.probes_granted;
  h.lease_contention = counters_.probes_busy;
  return h;
}

InProcessSharedState::Counters InProcessSharedState::counters() const {
  internal::MutexLock lock(&mu_);
  return counters_;
}

std::string InProcessSharedState::trip_reason(std::string_view circuit) const {
  internal::MutexLock lock(&mu_);
  auto it = circuits_.find(circuit);
  return it == circuits_.end() ? std::string() : it->second.reason;
}

}  // namespace fusebox::testing
