// apps/gateway/dashboard.h: the live dashboard's page and its feed of
// breaker transitions.
//
// DashboardFeed is a BreakerObserver (attached to every breaker through
// ObserveRegistry) that keeps the most recent transitions and tells the
// server of each new one, so that /dashboard/events can push it at once.
// The page (DashboardHtml()) is self-contained: no external script, style or
// font; it reads /dashboard/events with EventSource. docs/gateway.md lists the
// element ids and classes that tests rely on.
//
// Thread-safe.
#ifndef FUSEBOX_APPS_GATEWAY_DASHBOARD_H_
#define FUSEBOX_APPS_GATEWAY_DASHBOARD_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "fusebox/clock.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/observer.h"

namespace fusebox::gateway {

class DashboardFeed final : public BreakerObserver {
 public:
  // `clock` times retry_in_ms; `on_transition` receives each transition as a
  // JSON object, and `on_event` (if set) the event itself (the groups'
  // timelines, DashboardStats::OnTransition), on the thread that caused it
  // (keep them short).
  DashboardFeed(Clock& clock, std::function<void(const std::string& json)> on_transition,
                std::function<void(const TransitionEvent&)> on_event = nullptr);
  ~DashboardFeed() override;

  void Attach(CircuitBreaker& breaker) override;

  // The kept transitions as a JSON array, oldest first.
  std::string RecentJson() const;

  // Transitions kept.
  static constexpr std::size_t kKept = 50;

 private:
  struct Core {
    Clock* clock;
    std::function<void(const std::string&)> on_transition;
    std::function<void(const TransitionEvent&)> on_event;
    mutable internal::Mutex mu;
    std::deque<std::string> recent FUSEBOX_GUARDED_BY(mu);
    std::uint64_t seq FUSEBOX_GUARDED_BY(mu) = 0;
    void Add(const TransitionEvent& event) FUSEBOX_EXCLUDES(mu);
  };
  class Listener;
  // Listeners hold the core weakly: a breaker may outlive the feed.
  std::shared_ptr<Core> core_;
};

// The dashboard page.
std::string_view DashboardHtml();

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_DASHBOARD_H_
