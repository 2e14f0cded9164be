// fusebox/call_timer.h: the durations of a breaker's calls as Micrometer's
// Timer keeps them for Resilience4j's `resilience4j_circuitbreaker_calls`: a
// decaying maximum per outcome kind (`..._calls_seconds_max`) and, when asked
// for, cumulative histogram buckets (`..._calls_seconds_bucket{le=...}`, the
// `percentiles-histogram` shape that Grafana's histogram_quantile reads).
//
// A MetricsCollector gives every breaker it attaches a CallTimer
// (MetricsCollectorOptions); the breaker records each call's duration into it
// where it counts the call (CircuitBreaker::CountOutcome). Recording is
// lock-free and allocation-free: a coarse clock read, a load (and, when the
// maximum grows, a compare-and-swap) per ring buffer, and with the histogram
// one binary search and one fetch_add.
//
// The decaying maximum (TimeWindowMax) is Micrometer's: a ring of
// `buffer_length` buffers; a duration raises every buffer; every
// expiry / buffer_length the buffer being read is zeroed and the next one is
// read. So the maximum reported covers between (n-1)/n of `expiry` and all of
// it (with Micrometer's Prometheus defaults, expiry 1 min and 3 buffers:
// the last 40 to 60 s), and a quiet minute brings it back to 0.
//
// Thread-safe.
#ifndef FUSEBOX_CALL_TIMER_H_
#define FUSEBOX_CALL_TIMER_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/status.h"

namespace fusebox {

struct CallTimerOptions {
  // How long a duration stays in the maximum: Micrometer's distribution
  // statistic expiry, which its Prometheus registry sets to its step.
  // Default: 1 min. Must be > 0.
  Duration max_expiry = std::chrono::minutes(1);
  // Buffers in the ring. Default: 3 (Micrometer's). Must be in [1, 64].
  int max_buffer_length = 3;
  // Histogram buckets (Micrometer's publishPercentileHistogram /
  // `percentiles-histogram`). Off by default: it costs ~1.7 KB per breaker
  // and a shared fetch_add per call.
  bool percentiles_histogram = false;
  // The bucket bounds, as Micrometer bounds a Timer's: its
  // PercentileHistogramBuckets within [minimum, maximum], and both limits.
  // Defaults: 1 ms and 30 s (Micrometer's for a Timer). 0 < min <= max.
  Duration minimum_expected_value = std::chrono::milliseconds(1);
  Duration maximum_expected_value = std::chrono::seconds(30);
};

// OK, or kInvalidArgument naming the option at fault.
Status ValidateCallTimerOptions(const CallTimerOptions& options);

// Micrometer's PercentileHistogramBuckets (nanoseconds: 1, 2, 3, then for
// each power of 4, 4^k, three steps of 4^k/3 up to the next) within [min,
// max], with min and max themselves, sorted and distinct.
std::vector<Duration> PercentileHistogramBuckets(Duration min, Duration max);

// A maximum over a rolling window (see the top of this file). Lock-free:
// rotation is taken by one thread at a time with a flag (others skip it and
// record into the ring as it is, as Micrometer's does).
class TimeWindowMax {
 public:
  // The ring starts rotating at `start`.
  TimeWindowMax(Duration expiry, int buffer_length, TimePoint start);

  TimeWindowMax(const TimeWindowMax&) = delete;
  TimeWindowMax& operator=(const TimeWindowMax&) = delete;

  // Raises the maximum to `d` (at time `now`); d <= 0 changes nothing.
  void Record(Duration d, TimePoint now) noexcept;
  // The maximum at `now`: of the durations recorded in the window.
  Duration Poll(TimePoint now) noexcept;

 private:
  void Rotate(TimePoint now) noexcept;

  const std::int64_t rotate_every_ns_;
  const int buffers_;
  std::unique_ptr<std::atomic<std::int64_t>[]> ring_;
  // When the ring last rotated (ns of TimePoint's epoch), and the buffer read.
  std::atomic<std::int64_t> last_rotation_ns_;
  std::atomic<int> current_{0};
  // Held by the thread rotating.
  std::atomic<bool> rotating_{false};
};

// What a CallTimer holds at one instant.
struct CallTimerSample {
  // The decaying maximum by OutcomeKind.
  Duration max[3] = {Duration::zero(), Duration::zero(), Duration::zero()};
  // With the histogram: the bucket bounds (shared by every breaker of one
  // collector), and by OutcomeKind the number of calls at most each bound
  // (cumulative, one entry per bound, then +Inf: the count), and the sum of
  // their durations. Null and empty without.
  std::shared_ptr<const std::vector<Duration>> bounds;
  std::array<std::vector<std::uint64_t>, 3> cumulative;
  Duration sum[3] = {Duration::zero(), Duration::zero(), Duration::zero()};
};

// The durations of one breaker's calls by outcome kind.
class CallTimer {
 public:
  // `bounds`: the histogram's bucket bounds, sorted and distinct, or null for
  // no histogram. Times are `clock`'s CoarseNow().
  CallTimer(Clock& clock, const CallTimerOptions& options,
            std::shared_ptr<const std::vector<Duration>> bounds);

  CallTimer(const CallTimer&) = delete;
  CallTimer& operator=(const CallTimer&) = delete;

  // One call's duration. Lock-free, allocation-free.
  void Record(OutcomeKind kind, Duration d) noexcept;
  CallTimerSample Sample();

 private:
  Clock& clock_;
  TimeWindowMax max_[3];
  const std::shared_ptr<const std::vector<Duration>> bounds_;
  // Per kind, one counter per bound and one for +Inf (not cumulative).
  std::unique_ptr<std::atomic<std::uint64_t>[]> counts_;
  std::atomic<std::int64_t> sum_ns_[3] = {};
};

}  // namespace fusebox

#endif  // FUSEBOX_CALL_TIMER_H_
