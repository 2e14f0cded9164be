#include "apps/fusebox/step_clock.h"

#include <algorithm>
#include <memory>
#include <utility>

namespace fusebox::app {

TimerId StepClock::ScheduleAt(TimePoint deadline, std::function<void()> fn) {
  // The id is only known after ScheduleAt returns, and ManualClock may run a
  // timer that is already due inside a later Set(), never inside ScheduleAt:
  // so the wrapper can look its own id up through a shared slot.
  auto id_slot = std::make_shared<TimerId>(0);
  const TimerId id = manual_.ScheduleAt(deadline, [this, id_slot, fn = std::move(fn)] {
    deadlines_.erase(*id_slot);
    fn();
  });
  *id_slot = id;
  deadlines_[id] = deadline;
  return id;
}

bool StepClock::Cancel(TimerId id) {
  deadlines_.erase(id);
  return manual_.Cancel(id);
}

void StepClock::AdvanceTo(TimePoint t) {
  for (;;) {
    // The earliest pending deadline; timers can schedule new ones, so look
    // again after each step.
    auto first = std::min_element(deadlines_.begin(), deadlines_.end(),
                                  [](const auto& a, const auto& b) { return a.second < b.second; });
    if (first == deadlines_.end() || first->second > t) break;
    const TimerId id = first->first;
    const TimePoint deadline = std::max(first->second, manual_.Now());
    manual_.Set(deadline);
    // A timer that ran erased itself; one that did not run (never, since its
    // deadline has passed) must not loop forever.
    auto again = deadlines_.find(id);
    if (again != deadlines_.end() && again->second <= manual_.Now()) deadlines_.erase(again);
  }
  if (t > manual_.Now()) manual_.Set(t);
}

}  // namespace fusebox::app
