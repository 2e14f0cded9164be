// apps/gateway/dashboard_stats.h: what the dashboard shows, aggregated once
// per tick by circuit group, and the streams that carry it.
//
// DashboardStats turns the breakers' cumulative counts (CircuitBreaker::
// totals(), read by the gateway once a second) into per-interval counts kept
// in small rings, per group ("<provider>:<workload>", the middle of the
// circuit key "provider:<p>:<w>:<subject>") and per key, so the page can draw
// rates and sparklines. Nothing is added to a call's path: the counts are
// the breakers' own, diffed at the tick; only a stale answer (which the
// breakers do not see) is counted by the handler, through CountStale(); and
// each upstream call's duration is recorded by the handler into its group's
// histogram (latencies(), group_latencies.h: one fetch_add), from which the
// tick computes each group's p50 and p99.
//
// DashboardStreams renders one Frame per tick for every distinct filter that
// some open stream asked for (top N worst groups, search, provider,
// workload, state), and sends each stream only the groups that changed
// since its last event. The work per tick is one pass over the breakers plus
// one render per distinct filter, whatever the number of browsers, and the
// number of streams is capped (kMaxStreams; beyond it /dashboard/events
// answers 503).
//
//   DashboardStats stats({});
//   stats.Tick(clock.Now(), samples);              // once a second
//   DashboardStreams streams(4);
//   auto sub = streams.Subscribe("top=20&state=open", *stats.frame());
//   for (auto& [channel, event] : streams.Publish(*stats.frame())) ...
//
// DashboardStats: Tick() is thread-compatible (one ticking thread);
// frame(), latencies(), CountStale() and OnTransition() are thread-safe.
// DashboardStreams: thread-safe.
#ifndef FUSEBOX_APPS_GATEWAY_DASHBOARD_STATS_H_
#define FUSEBOX_APPS_GATEWAY_DASHBOARD_STATS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "apps/gateway/group_latencies.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/internal/key_hash.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/registry.h"
#include "fusebox/result.h"

namespace fusebox::gateway {

// Maps keyed by breaker names and keys, which requests choose: hashed with
// internal::KeyHash (keyed by a secret), so that no client can pile them into
// one bucket.
template <typename V>
using KeyMap = std::unordered_map<std::string, V, internal::KeyHash>;

// Open /dashboard/events streams at most (docs/gateway.md): one more is
// answered 503 TOO_MANY_STREAMS.
inline constexpr std::size_t kMaxDashboardStreams = 16;

// One breaker as read at a tick.
struct BreakerSample {
  std::string name;
  State state = State::kClosed;
  // Of the breaker's window, in percent; negative: not enough calls yet.
  float failure_rate = -1;
  CircuitBreakerTotals totals;
};

// The counts of one interval (or the sum of several).
struct IntervalCounts {
  std::int64_t calls = 0;
  std::int64_t failures = 0;
  std::int64_t rejections = 0;
  std::int64_t stale = 0;
  // Sum of the calls' durations.
  Duration call_time = Duration::zero();
  void Add(const IntervalCounts& o);
  bool empty() const { return calls == 0 && rejections == 0 && stale == 0; }
};

// A transition in a group's timeline.
struct TimelineEntry {
  // Seconds since the stats began (the clock's time, so that ManualClock
  // tests are exact); the page shows "n s ago" from Frame::now_s.
  double at_s = 0;
  std::string name;
  std::string from;
  std::string to;
  std::string reason;
  // The operator's reason for an override.
  std::string detail;
};

struct KeyView {
  std::string key;
  // The worst state of the key's breakers, and each breaker's own
  // ("transient=closed quota=open").
  std::string state;
  std::string breakers;
  // The highest failure rate of its breakers' windows (percent), or -1.
  double failure_rate = -1;
  int severity = 0;
  IntervalCounts window;
};

struct GroupView {
  std::string group;  // "<provider>:<workload>", or "other"
  std::string provider;
  std::string workload;
  // The worst state of its keys; health is that state and the failure rate
  // together: "open", "half_open", "failing" (>= 50 % of the window's calls
  // failed), "degraded" (failures, rejections or stale answers), "ok".
  std::string state;
  std::string health;
  int severity = 0;
  // The counts of the rate window (Options::window), for rates.
  IntervalCounts window;
  // Per bucket, oldest first (Options::buckets of them): sparklines.
  std::vector<std::int64_t> spark_calls;
  std::vector<std::int64_t> spark_failures;
  std::vector<std::int64_t> spark_rejections;
  std::vector<std::int64_t> spark_stale;
  // Upstream call times (GroupLatencies): the window's p50 and p99, and the
  // p99 of each bucket, oldest first; nullopt: no call timed. Each is the
  // upper bound of its histogram bucket (up to 25 % above the true value).
  std::optional<Duration> p50;
  std::optional<Duration> p99;
  std::vector<std::optional<Duration>> spark_p99;
  std::size_t open_keys = 0;
  // Worst first.
  std::vector<KeyView> keys;
  // Oldest first, at most DashboardStats::kTimelineKept; null: none.
  // Shared with the stats (copied on write, when a transition comes).
  std::shared_ptr<const std::vector<TimelineEntry>> timeline;
};

// One tick's aggregation, shared by every stream.
struct Frame {
  double now_s = 0;
  double window_s = 0;
  double bucket_s = 0;
  std::size_t circuits = 0;
  // This instance as a whole, for its fleet heartbeat: the calls of the
  // ticks in the last kRecent (each call once per key, as in the groups),
  // and the breakers OPEN or FORCED_OPEN now.
  IntervalCounts recent;
  std::size_t open_circuits = 0;
  // Worst first (severity, then failures, then calls, then name).
  std::vector<GroupView> groups;
};

// What one stream asked for (the query of /dashboard/events).
struct DashboardFilter {
  // Substring of the key (or group); empty: any.
  std::string q;
  // Exact; empty: any.
  std::string provider;
  std::string workload;
  // A state a key must be in (closed, open, half_open, forced_open, ...).
  std::string state;
  // Groups sent at most (1 .. kMaxTop; default kDefaultTop).
  std::size_t top = kDefaultTop;
  // "keys=expanded": key rows only for the groups in `open` (the page's
  // expanded drill-downs), to cut the bytes; by default every group's.
  bool keys_expanded = false;
  // "open=<group>,<group>": sorted, without duplicates, at most kMaxOpen.
  std::vector<std::string> open;

  static constexpr std::size_t kDefaultTop = 25;
  static constexpr std::size_t kMaxTop = 200;
  // Keys per group sent at most (worst first).
  static constexpr std::size_t kKeysPerGroup = 20;
  // Groups named in `open` at most.
  static constexpr std::size_t kMaxOpen = kMaxTop;

  // Whether `group`'s key rows are sent.
  bool SendsKeysOf(std::string_view group) const;

  // From "q=...&provider=...&workload=...&state=...&top=N&keys=expanded&
  // open=a:read,b:write"; unknown names are ignored, a bad top, keys or
  // open is kInvalidArgument naming it.
  static Result<DashboardFilter> Parse(std::string_view query);
  // A canonical form: filters that mean the same share a channel.
  std::string Canonical() const;
};

// Every breaker of `registry`, read once (CircuitBreaker::Observe: one lock
// and one pass over its counters each).
std::vector<BreakerSample> SampleBreakers(const Registry& registry);

class DashboardStats {
 public:
  struct Options {
    // The width of one bucket. Default: 10 s.
    Duration bucket = std::chrono::seconds(10);
    // Buckets kept per group (the sparklines' length). Default: 30 (5 min).
    std::size_t buckets = 30;
    // Buckets summed for the rates (the last ones, the current included).
    // Default: 6 (one minute).
    std::size_t window = 6;
  };
  explicit DashboardStats(Options options);

  // Folds one reading of every breaker into the rings and builds the frame.
  // Breakers absent from `samples` are dropped (their past counts stay in
  // their group's ring).
  void Tick(TimePoint now, const std::vector<BreakerSample>& samples) FUSEBOX_EXCLUDES(pending_mu_);

  // The last frame built (empty before the first tick).
  std::shared_ptr<const Frame> frame() const FUSEBOX_EXCLUDES(frame_mu_);

  // A stale answer for circuit key `key` (any thread).
  void CountStale(std::string_view key) FUSEBOX_EXCLUDES(pending_mu_);
  // A transition, into its group's timeline (any thread).
  void OnTransition(const TransitionEvent& event) FUSEBOX_EXCLUDES(pending_mu_);
  // Where the handler records its upstream calls' durations (any thread);
  // each Tick() folds what was recorded since the last into the groups.
  GroupLatencies& latencies() { return latencies_; }

  // Frame::recent spans the ticks of this last stretch of time.
  static constexpr Duration kRecent = std::chrono::seconds(10);

  // Transitions kept per group, and groups with a timeline at most.
  static constexpr std::size_t kTimelineKept = 20;
  static constexpr std::size_t kTimelineGroups = 1000;

  // "provider:<p>:<w>:<subject>[:transient|:quota]" -> the key and its group
  // "<p>:<w>"; another name is its own key, in group "other".
  static std::pair<std::string, std::string> KeyAndGroup(std::string_view breaker);

 private:
  template <typename T>
  struct Ring {
    std::vector<T> buckets;
    std::int64_t head = -1;  // the bucket number of the newest bucket
    void Advance(std::int64_t bucket);
    T Sum(std::size_t last) const;
  };
  // One interval's call times, per histogram bucket.
  struct LatencyInterval {
    LatencyCounts n{};
    void Add(const LatencyInterval& o);
  };
  struct Quantiles {
    std::optional<Duration> p99;
  };
  struct GroupEntry {
    Ring<IntervalCounts> ring;
    std::vector<std::string> keys;
    // Empty until the group's first timed call: the last Options::window
    // buckets' histograms (for the window's quantiles), and each bucket's
    // p99 (the sparkline).
    Ring<LatencyInterval> latency;
    Ring<Quantiles> p99s;
  };
  struct KeyEntry {
    Ring<IntervalCounts> ring;
    // Its entry in groups_ (a std::map: the address is stable).
    GroupEntry* group = nullptr;
    // This tick's breakers of the key: name suffix -> state.
    std::vector<std::pair<std::string, State>> states;
    double failure_rate = -1;
    // This tick's counts, folded into the rings once all breakers are read.
    IntervalCounts pending;
    bool seen = false;
  };
  struct BreakerEntry {
    CircuitBreakerTotals last;
    // Parsed once, when the breaker is first seen. The key entry lives as
    // long as the breaker is read (a key goes only when all its breakers
    // went); unordered_map nodes keep their address on rehash.
    KeyEntry* key = nullptr;
    std::string suffix;
    bool seen = false;
  };

  std::int64_t BucketOf(TimePoint now) const;
  // What latencies_ recorded since the last tick, into the groups' rings.
  void FoldLatencies(std::int64_t bucket);
  GroupView ViewOf(const std::string& name, const GroupEntry& g) const;

  const Options options_;
  // Tick()'s own, on the ticking thread.
  std::optional<TimePoint> origin_;
  KeyMap<BreakerEntry> breakers_;
  KeyMap<KeyEntry> keys_;
  std::map<std::string, GroupEntry> groups_;
  // Each tick's counts of the last kRecent, oldest first (Frame::recent).
  std::deque<std::pair<TimePoint, IntervalCounts>> recent_;
  // Each histogram's cumulative counts at the last tick.
  KeyMap<LatencyCounts> latency_last_;
  GroupLatencies latencies_;
  // Written by Tick(), read by streams starting on other threads.
  mutable internal::Mutex frame_mu_;
  std::shared_ptr<const Frame> frame_ FUSEBOX_GUARDED_BY(frame_mu_) = std::make_shared<Frame>();

  mutable internal::Mutex pending_mu_;
  KeyMap<std::int64_t> stale_ FUSEBOX_GUARDED_BY(pending_mu_);
  using Timeline = std::shared_ptr<const std::vector<TimelineEntry>>;
  KeyMap<Timeline> timelines_ FUSEBOX_GUARDED_BY(pending_mu_);
  // Set by the first Tick (OnTransition before it counts from 0).
  std::optional<TimePoint> timeline_origin_ FUSEBOX_GUARDED_BY(pending_mu_);
};

// The dashboard's open streams, grouped into channels by filter.
class DashboardStreams {
 public:
  // At most `max_streams` subscriptions at once.
  explicit DashboardStreams(std::size_t max_streams) : max_streams_(max_streams) {}

  struct Subscription {
    std::uint64_t id = 0;
    std::string channel;
    // The "event: groups" of the channel's current rows (all of them).
    std::string first_event;
  };
  // A new stream for `query` (DashboardFilter::Parse). kUnavailable when
  // max_streams are open, kInvalidArgument for a bad query.
  Result<Subscription> Subscribe(std::string_view query, const Frame& frame) FUSEBOX_EXCLUDES(mu_);
  void Unsubscribe(std::uint64_t id) FUSEBOX_EXCLUDES(mu_);
  std::size_t size() const FUSEBOX_EXCLUDES(mu_);

  // Renders `frame` for every channel and returns, per channel that changed,
  // the event to send its streams: only the changed rows, the removed group
  // names and the order.
  std::vector<std::pair<std::string, std::shared_ptr<const std::string>>> Publish(
      const Frame& frame) FUSEBOX_EXCLUDES(mu_);

  // One group's row as the page reads it (JSON), keys filtered and capped.
  static std::string RowJson(const GroupView& g, const DashboardFilter& f, double now_s);
  // The rows `f` selects from `frame`, worst first: (group, row JSON);
  // `matching` gets how many groups matched before the top-N cut.
  static std::vector<std::pair<std::string, std::string>> Render(const Frame& frame,
                                                                 const DashboardFilter& f,
                                                                 std::size_t* matching);

 private:
  struct Channel {
    DashboardFilter filter;
    std::vector<std::pair<std::string, std::string>> rows;
    std::size_t matching = 0;
    std::size_t streams = 0;
  };
  static std::string Event(const Channel& c, const Frame& frame,
                           const std::vector<const std::string*>& changed,
                           const std::vector<std::string>& removed, bool full);

  const std::size_t max_streams_;
  mutable internal::Mutex mu_;
  std::map<std::string, Channel> channels_ FUSEBOX_GUARDED_BY(mu_);
  std::map<std::uint64_t, std::string> streams_ FUSEBOX_GUARDED_BY(mu_);
  std::uint64_t next_id_ FUSEBOX_GUARDED_BY(mu_) = 0;
};

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_DASHBOARD_STATS_H_
