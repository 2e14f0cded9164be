#include "apps/gateway/dashboard_stats.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>
#include <tuple>

#include "apps/gateway/route.h"
#include "fusebox/metrics.h"

namespace fusebox::gateway {
namespace {

using Json = nlohmann::json;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// How bad a state is, for the worst state of a key or group.
int StateRank(State s) {
  switch (s) {
    case State::kOpen:
    case State::kForcedOpen:
      return 3;
    case State::kHalfOpen:
      return 2;
    case State::kClosed:
      return 1;
    default:
      return 0;  // disabled, metrics-only, forced closed: not protecting
  }
}

// Health from the worst state and the window's counts (GroupView::health).
std::pair<std::string, int> Health(std::string_view state, const IntervalCounts& w) {
  if (state == "open" || state == "forced_open") return {"open", 4};
  if (state == "half_open") return {"half_open", 3};
  if (w.calls > 0 && w.failures * 2 >= w.calls) return {"failing", 2};
  if (w.failures > 0 || w.rejections > 0 || w.stale > 0) return {"degraded", 1};
  return {"ok", 0};
}

// Worst first: severity, failures, rejections, calls, then name.
template <typename T>
bool Worse(const T& a, const T& b, const std::string& an, const std::string& bn) {
  if (a.severity != b.severity) return a.severity > b.severity;
  if (a.window.failures != b.window.failures) return a.window.failures > b.window.failures;
  if (a.window.rejections != b.window.rejections) return a.window.rejections > b.window.rejections;
  if (a.window.calls != b.window.calls) return a.window.calls > b.window.calls;
  return an < bn;
}

IntervalCounts Delta(const CircuitBreakerTotals& now, const CircuitBreakerTotals& before) {
  IntervalCounts d;
  for (int i = 0; i < 3; ++i) {
    d.calls += now.calls[i] - before.calls[i];
    d.call_time += now.call_time[i] - before.call_time[i];
  }
  d.failures = now.calls[1] - before.calls[1];
  d.rejections = now.not_permitted_calls - before.not_permitted_calls;
  return d;
}

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

void IntervalCounts::Add(const IntervalCounts& o) {
  calls += o.calls;
  failures += o.failures;
  rejections += o.rejections;
  stale += o.stale;
  call_time += o.call_time;
}

// ---- DashboardFilter ----

Result<DashboardFilter> DashboardFilter::Parse(std::string_view query) {
  DashboardFilter f;
  for (auto& [name, value] : ParseQuery(query)) {
    if (name == "q") f.q = value;
    if (name == "provider") f.provider = value;
    if (name == "workload") f.workload = value;
    if (name == "state") f.state = value;
    if (name == "top") {
      std::size_t n = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
      if (ec != std::errc() || end != value.data() + value.size() || n == 0 || n > kMaxTop) {
        return Status::InvalidArgument("top: expected a number from 1 to " +
                                       std::to_string(kMaxTop));
      }
      f.top = n;
    }
    if (name == "keys") {
      if (value != "all" && value != "expanded") {
        return Status::InvalidArgument("keys: expected all or expanded");
      }
      f.keys_expanded = value == "expanded";
    }
    if (name == "open") {
      for (std::size_t at = 0; at <= value.size();) {
        const std::size_t comma = std::min(value.find(',', at), value.size());
        if (comma > at) f.open.push_back(value.substr(at, comma - at));
        at = comma + 1;
      }
    }
  }
  std::sort(f.open.begin(), f.open.end());
  f.open.erase(std::unique(f.open.begin(), f.open.end()), f.open.end());
  if (f.open.size() > kMaxOpen) {
    return Status::InvalidArgument("open: at most " + std::to_string(kMaxOpen) + " groups");
  }
  return f;
}

bool DashboardFilter::SendsKeysOf(std::string_view group) const {
  return !keys_expanded || std::binary_search(open.begin(), open.end(), group);
}

std::string DashboardFilter::Canonical() const {
  // `open` counts only when it selects the keys sent.
  return Dump(Json::array({q, provider, workload, state, top, keys_expanded,
                           keys_expanded ? open : std::vector<std::string>{}}));
}

// ---- DashboardStats ----

std::vector<BreakerSample> SampleBreakers(const Registry& registry) {
  std::vector<BreakerSample> out;
  registry.ForEach([&out](const std::string& name, CircuitBreaker& b) {
    CircuitBreakerMetrics m;
    BreakerSample s;
    s.name = name;
    b.Observe(m, s.totals);
    s.state = m.state;
    s.failure_rate = m.failure_rate;
    out.push_back(std::move(s));
  });
  return out;
}

DashboardStats::DashboardStats(Options options) : options_(options) {}

std::pair<std::string, std::string> DashboardStats::KeyAndGroup(std::string_view breaker) {
  std::string_view key = breaker;
  for (std::string_view suffix : {":transient", ":quota"}) {
    if (key.size() > suffix.size() && key.substr(key.size() - suffix.size()) == suffix) {
      key.remove_suffix(suffix.size());
      break;
    }
  }
  // The handler times calls by the same grouping (GroupOfKey).
  const std::string_view group = GroupLatencies::GroupOfKey(key);
  if (group == GroupLatencies::kOtherGroup) return {std::string(breaker), "other"};
  return {std::string(key), std::string(group)};
}

void DashboardStats::LatencyInterval::Add(const LatencyInterval& o) {
  for (std::size_t i = 0; i < n.size(); ++i) n[i] += o.n[i];
}

template <typename T>
void DashboardStats::Ring<T>::Advance(std::int64_t bucket) {
  if (bucket <= head) return;
  const auto n = static_cast<std::int64_t>(buckets.size());
  // Clears the buckets skipped since the last tick (all of them after a
  // long pause).
  for (std::int64_t b = std::max(head + 1, bucket - n + 1); b <= bucket; ++b) {
    buckets[static_cast<std::size_t>(b % n)] = {};
  }
  head = bucket;
}

template <typename T>
T DashboardStats::Ring<T>::Sum(std::size_t last) const {
  T sum;
  const auto n = static_cast<std::int64_t>(buckets.size());
  for (std::int64_t b = head; b > head - static_cast<std::int64_t>(last) && b >= 0; --b) {
    sum.Add(buckets[static_cast<std::size_t>(b % n)]);
  }
  return sum;
}

std::int64_t DashboardStats::BucketOf(TimePoint now) const {
  return (now - *origin_) / options_.bucket;
}

void DashboardStats::Tick(TimePoint now, const std::vector<BreakerSample>& samples) {
  if (!origin_) {
    origin_ = now;
    internal::MutexLock lock(&pending_mu_);
    timeline_origin_ = now;
  }
  const std::int64_t bucket = BucketOf(now);
  KeyMap<std::int64_t> stale;
  KeyMap<Timeline> timelines;
  {
    internal::MutexLock lock(&pending_mu_);
    stale.swap(stale_);
    timelines = timelines_;  // pointers: the vectors are never changed
  }
  for (auto& [name, k] : keys_) {
    k.seen = false;
    k.states.clear();
    k.failure_rate = -1;
  }
  for (auto& [name, b] : breakers_) b.seen = false;

  // One key's breakers see the same call: its count is the larger of
  // theirs, not the sum; a rejection by either is one refused call.
  for (const BreakerSample& s : samples) {
    BreakerEntry& be = breakers_[s.name];
    if (be.key == nullptr) {
      auto [key, group] = KeyAndGroup(s.name);
      KeyEntry& k = keys_[key];
      if (k.group == nullptr) {
        k.ring.buckets.resize(options_.window);
        k.group = &groups_[group];
        k.group->keys.push_back(key);
      }
      be.key = &k;
      be.suffix = s.name.size() > key.size() ? s.name.substr(key.size() + 1) : "breaker";
    }
    // A breaker made since the last tick has all its calls in this interval
    // (the gateway ticks from its start: the first tick's totals are new too).
    const IntervalCounts d = Delta(s.totals, be.last);
    be.last = s.totals;
    be.seen = true;
    KeyEntry& k = *be.key;
    k.seen = true;
    k.states.emplace_back(be.suffix, s.state);
    k.failure_rate = std::max<double>(k.failure_rate, s.failure_rate);
    IntervalCounts& acc = k.pending;
    if (d.calls >= acc.calls) acc.call_time = d.call_time;
    acc.calls = std::max(acc.calls, d.calls);
    acc.failures = std::max(acc.failures, d.failures);
    acc.rejections += d.rejections;
  }
  for (auto& [key, n] : stale) {
    auto it = keys_.find(key);
    if (it != keys_.end()) it->second.pending.stale += n;
  }

  for (auto& [name, g] : groups_) {
    if (g.ring.buckets.empty()) g.ring.buckets.resize(options_.buckets);
    g.ring.Advance(bucket);
  }
  FoldLatencies(bucket);
  const auto slot = static_cast<std::size_t>(bucket);
  IntervalCounts tick;
  for (auto& [key, k] : keys_) {
    k.ring.Advance(bucket);
    if (k.pending.empty() && k.pending.failures == 0) continue;
    tick.Add(k.pending);
    k.ring.buckets[slot % k.ring.buckets.size()].Add(k.pending);
    k.group->ring.buckets[slot % k.group->ring.buckets.size()].Add(k.pending);
    k.pending = {};
  }

  // Breakers the registry dropped: forgotten, as are their keys; a group
  // goes once its ring is empty.
  std::erase_if(breakers_, [](const auto& e) { return !e.second.seen; });
  std::erase_if(keys_, [](const auto& e) { return !e.second.seen; });
  auto frame = std::make_shared<Frame>();
  frame->now_s = Seconds(now - *origin_);
  frame->window_s = Seconds(options_.bucket * static_cast<std::int64_t>(options_.window));
  frame->bucket_s = Seconds(options_.bucket);
  frame->circuits = samples.size();
  recent_.emplace_back(now, tick);
  while (now - recent_.front().first >= kRecent) recent_.pop_front();
  for (const auto& [at, counts] : recent_) frame->recent.Add(counts);
  frame->open_circuits = static_cast<std::size_t>(
      std::count_if(samples.begin(), samples.end(),
                    [](const BreakerSample& s) { return StateRank(s.state) == 3; }));
  for (auto it = groups_.begin(); it != groups_.end();) {
    GroupEntry& g = it->second;
    std::erase_if(g.keys, [this](const std::string& k) { return keys_.count(k) == 0; });
    if (g.keys.empty() && g.ring.Sum(g.ring.buckets.size()).empty()) {
      it = groups_.erase(it);
      continue;
    }
    frame->groups.push_back(ViewOf(it->first, g));
    if (auto t = timelines.find(it->first); t != timelines.end()) {
      frame->groups.back().timeline = t->second;
    }
    ++it;
  }
  std::sort(frame->groups.begin(), frame->groups.end(),
            [](const GroupView& a, const GroupView& b) { return Worse(a, b, a.group, b.group); });
  internal::MutexLock lock(&frame_mu_);
  frame_ = std::move(frame);
}

void DashboardStats::FoldLatencies(std::int64_t bucket) {
  const auto slot = static_cast<std::size_t>(bucket);
  latencies_.ForEach([&](const std::string& name, const LatencyCounts& now) {
    LatencyCounts& last = latency_last_[name];
    LatencyInterval d;
    std::int64_t calls = 0;
    for (std::size_t i = 0; i < now.size(); ++i) {
      d.n[i] = now[i] - last[i];
      calls += d.n[i];
    }
    last = now;
    // Times of a group no breaker shows (gone since) are dropped.
    auto it = groups_.find(name);
    if (calls == 0 || it == groups_.end()) return;
    GroupEntry& g = it->second;
    if (g.latency.buckets.empty()) {
      g.latency.buckets.resize(options_.window);
      g.p99s.buckets.resize(options_.buckets);
    }
    g.latency.Advance(bucket);
    g.latency.buckets[slot % g.latency.buckets.size()].Add(d);
  });
  for (auto& [name, g] : groups_) {
    if (g.latency.buckets.empty()) continue;
    g.latency.Advance(bucket);
    g.p99s.Advance(bucket);
    // The current bucket's p99, from all its ticks so far.
    g.p99s.buckets[slot % g.p99s.buckets.size()].p99 =
        LatencyPercentile(g.latency.buckets[slot % g.latency.buckets.size()].n, 99);
  }
}

std::shared_ptr<const Frame> DashboardStats::frame() const {
  internal::MutexLock lock(&frame_mu_);
  return frame_;
}

GroupView DashboardStats::ViewOf(const std::string& name, const GroupEntry& g) const {
  GroupView v;
  v.group = name;
  const std::size_t colon = name.find(':');
  v.provider = colon == std::string::npos ? name : name.substr(0, colon);
  v.workload = colon == std::string::npos ? "" : name.substr(colon + 1);
  v.window = g.ring.Sum(options_.window);
  const auto n = static_cast<std::int64_t>(g.ring.buckets.size());
  for (std::int64_t b = g.ring.head - n + 1; b <= g.ring.head; ++b) {
    const IntervalCounts c =
        b < 0 ? IntervalCounts{} : g.ring.buckets[static_cast<std::size_t>(b % n)];
    v.spark_calls.push_back(c.calls);
    v.spark_failures.push_back(c.failures);
    v.spark_rejections.push_back(c.rejections);
    v.spark_stale.push_back(c.stale);
    v.spark_p99.push_back(b < 0 || g.p99s.buckets.empty()
                              ? std::nullopt
                              : g.p99s.buckets[static_cast<std::size_t>(b % n)].p99);
  }
  if (!g.latency.buckets.empty()) {
    const LatencyInterval w = g.latency.Sum(options_.window);
    v.p50 = LatencyPercentile(w.n, 50);
    v.p99 = LatencyPercentile(w.n, 99);
  }
  int worst = -1;
  for (const std::string& key : g.keys) {
    const KeyEntry& k = keys_.at(key);
    KeyView kv;
    kv.key = key;
    kv.failure_rate = k.failure_rate;
    kv.window = k.ring.Sum(options_.window);
    State ks = State::kDisabled;
    std::vector<std::pair<std::string, State>> states = k.states;
    std::sort(states.begin(), states.end());  // "quota=... transient=...", whatever the order read
    for (const auto& [suffix, s] : states) {
      if (!kv.breakers.empty()) kv.breakers += ' ';
      kv.breakers += suffix + "=" + std::string(StateLabel(s));
      if (StateRank(s) >= StateRank(ks)) ks = s;
    }
    kv.state = std::string(StateLabel(ks));
    kv.severity = Health(kv.state, kv.window).second;
    if (StateRank(ks) == 3) ++v.open_keys;
    if (StateRank(ks) > worst) {
      worst = StateRank(ks);
      v.state = kv.state;
    }
    v.keys.push_back(std::move(kv));
  }
  if (v.state.empty()) v.state = "closed";
  std::sort(v.keys.begin(), v.keys.end(),
            [](const KeyView& a, const KeyView& b) { return Worse(a, b, a.key, b.key); });
  std::tie(v.health, v.severity) = Health(v.state, v.window);
  return v;
}

void DashboardStats::CountStale(std::string_view key) {
  internal::MutexLock lock(&pending_mu_);
  ++stale_[std::string(key)];
}

void DashboardStats::OnTransition(const TransitionEvent& event) {
  auto [key, group] = KeyAndGroup(event.breaker);
  TimelineEntry e{.at_s = 0,
                  .name = std::string(event.breaker),
                  .from = std::string(StateLabel(event.from)),
                  .to = std::string(StateLabel(event.to)),
                  .reason = std::string(TransitionReasonName(event.reason)),
                  .detail = std::string(event.detail)};
  internal::MutexLock lock(&pending_mu_);
  if (timeline_origin_) e.at_s = Seconds(event.at - *timeline_origin_);
  auto it = timelines_.find(group);
  if (it == timelines_.end()) {
    // Bounded: a flood of new groups keeps the first ones' timelines.
    if (timelines_.size() >= kTimelineGroups) return;
    it = timelines_.emplace(group, nullptr).first;
  }
  // Copied on write (transitions are rare; frames share the vectors).
  std::vector<TimelineEntry> next;
  if (it->second) next = *it->second;
  next.push_back(std::move(e));
  if (next.size() > kTimelineKept) next.erase(next.begin());
  it->second = std::make_shared<const std::vector<TimelineEntry>>(std::move(next));
}

// ---- DashboardStreams ----

namespace {

bool Contains(std::string_view text, std::string_view part) {
  return part.empty() || text.find(part) != std::string_view::npos;
}

bool KeyMatches(const KeyView& k, const DashboardFilter& f) {
  return Contains(k.key, f.q) && (f.state.empty() || k.state == f.state);
}

bool GroupMatches(const GroupView& g, const DashboardFilter& f) {
  if (!f.provider.empty() && g.provider != f.provider) return false;
  if (!f.workload.empty() && g.workload != f.workload) return false;
  if (f.q.empty() && f.state.empty()) return true;
  if (f.state.empty() && Contains(g.group, f.q)) return true;
  return std::any_of(g.keys.begin(), g.keys.end(),
                     [&](const KeyView& k) { return KeyMatches(k, f); });
}

Json Millis(const std::optional<Duration>& d) {
  if (!d) return nullptr;
  return std::chrono::duration<double, std::milli>(*d).count();
}

Json CountsJson(const IntervalCounts& c) {
  return {{"calls", c.calls},
          {"failures", c.failures},
          {"rejections", c.rejections},
          {"stale", c.stale},
          {"mean_ms", c.calls > 0 ? std::chrono::duration<double, std::milli>(c.call_time).count() /
                                        static_cast<double>(c.calls)
                                  : 0.0}};
}

Json P99Json(const std::vector<std::optional<Duration>>& spark) {
  Json out = Json::array();
  for (const std::optional<Duration>& d : spark) out.push_back(Millis(d));
  return out;
}

}  // namespace

std::string DashboardStreams::RowJson(const GroupView& g, const DashboardFilter& f,
                                      double /*now_s*/) {
  Json keys = Json::array();
  // A group found by its own name shows all its keys (in the state asked).
  const bool group_hit = f.state.empty() && Contains(g.group, f.q);
  std::size_t matched = 0;
  const bool send_keys = f.SendsKeysOf(g.group);
  for (const KeyView& k : g.keys) {
    if (!group_hit && !KeyMatches(k, f)) continue;
    if (++matched > DashboardFilter::kKeysPerGroup || !send_keys) continue;
    keys.push_back({{"key", k.key},
                    {"state", k.state},
                    {"breakers", k.breakers},
                    {"failure_rate", k.failure_rate},
                    {"window", CountsJson(k.window)}});
  }
  Json timeline = Json::array();
  for (std::size_t i = 0; g.timeline && i < g.timeline->size(); ++i) {
    const TimelineEntry& t = (*g.timeline)[i];
    timeline.push_back({{"at_s", t.at_s},
                        {"name", t.name},
                        {"from", t.from},
                        {"to", t.to},
                        {"reason", t.reason},
                        {"detail", t.detail}});
  }
  return Dump({{"group", g.group},
               {"provider", g.provider},
               {"workload", g.workload},
               {"state", g.state},
               {"health", g.health},
               {"window", CountsJson(g.window)},
               {"latency", {{"p50_ms", Millis(g.p50)}, {"p99_ms", Millis(g.p99)}}},
               {"spark",
                {{"calls", g.spark_calls},
                 {"failures", g.spark_failures},
                 {"rejections", g.spark_rejections},
                 {"stale", g.spark_stale},
                 {"p99_ms", P99Json(g.spark_p99)}}},
               {"key_count", g.keys.size()},
               {"keys_matched", matched},
               {"keys_sent", send_keys},
               {"open_keys", g.open_keys},
               {"keys", std::move(keys)},
               {"timeline", std::move(timeline)}});
}

std::vector<std::pair<std::string, std::string>> DashboardStreams::Render(const Frame& frame,
                                                                          const DashboardFilter& f,
                                                                          std::size_t* matching) {
  std::vector<std::pair<std::string, std::string>> rows;
  std::size_t n = 0;
  for (const GroupView& g : frame.groups) {
    if (!GroupMatches(g, f)) continue;
    // Rendered only within the top N; the rest are just counted.
    if (++n <= f.top) rows.emplace_back(g.group, RowJson(g, f, frame.now_s));
  }
  if (matching != nullptr) *matching = n;
  return rows;
}

std::string DashboardStreams::Event(const Channel& c, const Frame& frame,
                                    const std::vector<const std::string*>& changed,
                                    const std::vector<std::string>& removed, bool full) {
  std::string out = "event: groups\ndata: {\"full\":";
  out += full ? "true" : "false";
  Json order = Json::array();
  for (const auto& [group, row] : c.rows) order.push_back(group);
  out += ",\"now_s\":" + Dump(frame.now_s) + ",\"window_s\":" + Dump(frame.window_s) +
         ",\"bucket_s\":" + Dump(frame.bucket_s) + ",\"circuits\":" + Dump(frame.circuits) +
         ",\"total_groups\":" + Dump(frame.groups.size()) + ",\"matching\":" + Dump(c.matching) +
         ",\"top\":" + Dump(c.filter.top) + ",\"order\":" + Dump(order) +
         ",\"removed\":" + Dump(removed) + ",\"rows\":[";
  for (std::size_t i = 0; i < changed.size(); ++i) {
    if (i > 0) out += ',';
    out += *changed[i];
  }
  out += "]}\n\n";
  return out;
}

Result<DashboardStreams::Subscription> DashboardStreams::Subscribe(std::string_view query,
                                                                   const Frame& frame) {
  Result<DashboardFilter> f = DashboardFilter::Parse(query);
  if (!f) return f.error();
  const std::string name = f->Canonical();
  internal::MutexLock lock(&mu_);
  if (streams_.size() >= max_streams_) {
    return Status::Unavailable("too many dashboard streams (at most " +
                               std::to_string(max_streams_) + "): close one and retry");
  }
  auto [it, added] = channels_.try_emplace(name);
  Channel& c = it->second;
  if (added) {
    c.filter = *f;
    c.rows = Render(frame, c.filter, &c.matching);
  }
  ++c.streams;
  const std::uint64_t id = ++next_id_;
  streams_.emplace(id, name);
  std::vector<const std::string*> all;
  for (const auto& [group, row] : c.rows) all.push_back(&row);
  return Subscription{.id = id, .channel = name, .first_event = Event(c, frame, all, {}, true)};
}

void DashboardStreams::Unsubscribe(std::uint64_t id) {
  internal::MutexLock lock(&mu_);
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  auto c = channels_.find(it->second);
  if (c != channels_.end() && --c->second.streams == 0) channels_.erase(c);
  streams_.erase(it);
}

std::size_t DashboardStreams::size() const {
  internal::MutexLock lock(&mu_);
  return streams_.size();
}

std::vector<std::pair<std::string, std::shared_ptr<const std::string>>> DashboardStreams::Publish(
    const Frame& frame) {
  std::vector<std::pair<std::string, std::shared_ptr<const std::string>>> out;
  internal::MutexLock lock(&mu_);
  for (auto& [name, c] : channels_) {
    std::size_t matching = 0;
    std::vector<std::pair<std::string, std::string>> rows = Render(frame, c.filter, &matching);
    std::map<std::string_view, const std::string*> before;
    for (const auto& [group, row] : c.rows) before.emplace(group, &row);
    std::vector<const std::string*> changed;
    bool reordered = rows.size() != c.rows.size() || matching != c.matching;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      auto b = before.find(rows[i].first);
      if (b == before.end() || *b->second != rows[i].second) changed.push_back(&rows[i].second);
      if (b != before.end()) before.erase(b);
      reordered = reordered || i >= c.rows.size() || c.rows[i].first != rows[i].first;
    }
    std::vector<std::string> removed;
    removed.reserve(before.size());
    for (const auto& [group, row] : before) removed.emplace_back(group);
    if (changed.empty() && removed.empty() && !reordered) continue;
    // Event() reads the new rows' order from the channel: swap them in first,
    // keeping `changed` valid (it points into `rows`, now the channel's).
    c.rows.swap(rows);
    c.matching = matching;
    out.emplace_back(name, std::make_shared<const std::string>(
                               Event(c, frame, changed, removed, /*full=*/false)));
  }
  return out;
}

}  // namespace fusebox::gateway
