// fusebox/event_log.h: breaker events as JSON lines, with sampled rejections.
//
// An EventLog is a BreakerObserver that writes one JSON object per line to a
// LineSink (observer.h; fusebox/spdlog_sink.h adapts spdlog):
//   - every transition, with from, to, reason, the window's counts and rates,
//     and when the new state ends (retry_at) if it has an end;
//   - rejections, sampled: per breaker, the first rejections_per_interval of
//     each sampling_interval are written; the rest are only counted, and one
//     "rejections_suppressed" line with the count closes the interval (when it
//     ends, on a timer of the breaker's Clock, or before the breaker's next
//     transition). An outage that rejects 10,000 calls a second writes a few
//     lines, not 10,000 (seed 003: "개별 거절 로그는 샘플링한다");
//   - registry evictions and capacity warnings.
// Outcomes are never written: a log line must not carry a call's payload, and
// an OutcomeEvent has none to carry anyway. Breaker names (registry keys) are
// written; they are identifiers, not secrets.
//
// Times. A breaker's Clock is steady and means nothing outside the process,
// so every line carries "t_ms", the event's steady time in milliseconds (for
// ordering and differences), and "retry_in_ms" when the state has an end.
// Lines leave in the order of their t_ms: a line stamped earlier than the
// last one on the same clock (a rejection is timed by the coarse clock,
// behind the transition before it) carries the last one's time.
// When EventLogOptions::wall_clock is set, lines also carry "ts" and
// "retry_at" as RFC 3339 UTC times (steady times mapped through the wall
// clock at the moment the line is written). docs/observability.md has the
// schema of each line.
//
//   auto sink = std::make_shared<fusebox::MemoryLineSink>();
//   std::shared_ptr<fusebox::EventLog> log = *fusebox::EventLog::Create({
//       .sink = sink,
//       .wall_clock = [] { return std::chrono::system_clock::now(); },
//   });
//   log->Attach(*breaker);
//
// Cost: a rejection beyond the sample is three relaxed atomic operations, no
// lock and no allocation; a written line allocates.
//
// Thread-safe.
#ifndef FUSEBOX_EVENT_LOG_H_
#define FUSEBOX_EVENT_LOG_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/observer.h"
#include "fusebox/registry.h"
#include "fusebox/result.h"

namespace fusebox {

// A wall-clock source, for logs only (never for decisions).
using WallClock = std::function<std::chrono::system_clock::time_point()>;

struct EventLogOptions {
  // Where lines go (required).
  std::shared_ptr<LineSink> sink = nullptr;
  // When set, lines carry RFC 3339 UTC "ts" and "retry_at". Default: unset.
  WallClock wall_clock = nullptr;
  // Rejections written per breaker per interval before the rest are only
  // counted (>= 0). Default: 10.
  int rejections_per_interval = 10;
  // The sampling interval (> 0), on the breaker's Clock. Default: 10 s.
  Duration sampling_interval = std::chrono::seconds(10);
  // Also write a line for each breaker a registry creates. Default: false
  // (a registry of account keys would log one line per account).
  bool log_registry_created = false;

  // OK, or kInvalidArgument naming the first field at fault.
  Status Validate() const;
};

// Writes the JSON lines described at the top of this file for every breaker
// attached to it. Listeners it adds keep what they need alive, so the log may
// be destroyed before the breakers.
//
// Thread-safe.
class EventLog final : public BreakerObserver {
 public:
  // Fails with kInvalidArgument naming the bad option.
  static Result<std::unique_ptr<EventLog>> Create(EventLogOptions options);

  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;
  ~EventLog() override;

  // Writes `breaker`'s transitions and sampled rejections from now on. A
  // second Attach() of the same breaker adds a second listener: don't.
  void Attach(CircuitBreaker& breaker) override;
  void OnRegistryEvent(const RegistryEvent& event) override;

  // Lines written, and lines the sink refused.
  std::uint64_t lines_written() const noexcept;
  std::uint64_t write_errors() const noexcept;

 private:
  struct Core;
  class Listener;
  explicit EventLog(std::shared_ptr<Core> core);
  const std::shared_ptr<Core> core_;
};

}  // namespace fusebox

#endif  // FUSEBOX_EVENT_LOG_H_
