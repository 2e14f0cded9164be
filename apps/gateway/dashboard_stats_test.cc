// DashboardStats and DashboardStreams: rates per bucket, the rings' rollover,
// worst-first order, filters, deltas only for what changed, and the cap on
// streams. Time is a ManualClock's; the breakers' totals are written by hand.
#include "apps/gateway/dashboard_stats.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fusebox/testing/manual_clock.h"

namespace fusebox::gateway {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Json = nlohmann::json;
using std::chrono::seconds;

// A breaker's cumulative counts: successes, failures, rejections, and the
// calls' time (1 ms each).
BreakerSample Sample(std::string name, std::int64_t ok, std::int64_t failed,
                     std::int64_t rejected = 0, State state = State::kClosed) {
  BreakerSample s;
  s.name = std::move(name);
  s.state = state;
  s.totals.calls[0] = ok;
  s.totals.calls[1] = failed;
  s.totals.call_time[0] = std::chrono::milliseconds(ok);
  s.totals.call_time[1] = std::chrono::milliseconds(failed);
  s.totals.not_permitted_calls = rejected;
  return s;
}

const GroupView* Group(const Frame& f, std::string_view name) {
  for (const GroupView& g : f.groups) {
    if (g.group == name) return &g;
  }
  return nullptr;
}

// The data of an "event: groups" as JSON.
Json Data(const std::string& event) {
  const std::size_t at = event.find("data: ");
  return Json::parse(event.substr(at + 6));
}

class DashboardStatsTest : public ::testing::Test {
 protected:
  testing::ManualClock clock_;
  DashboardStats stats_{{}};
};

TEST(DashboardStats, KeyAndGroupOfABreakerName) {
  EXPECT_EQ(
      DashboardStats::KeyAndGroup("provider:instagram:read:178:quota"),
      std::make_pair(std::string("provider:instagram:read:178"), std::string("instagram:read")));
  EXPECT_EQ(DashboardStats::KeyAndGroup("provider:fb:write:a:b:transient"),
            std::make_pair(std::string("provider:fb:write:a:b"), std::string("fb:write")));
  EXPECT_EQ(DashboardStats::KeyAndGroup("payments"),
            std::make_pair(std::string("payments"), std::string("other")));
}

TEST_F(DashboardStatsTest, CountsAreTheDifferenceSinceTheLastTickInTheCurrentBucket) {
  stats_.Tick(clock_.Now(), {Sample("provider:ig:read:1:transient", 100, 50)});
  EXPECT_EQ(Group(*stats_.frame(), "ig:read")->window.calls, 150) << "a new breaker's calls";
  clock_.Advance(seconds(10));
  stats_.Tick(clock_.Now(), {Sample("provider:ig:read:1:transient", 105, 52, 3)});
  const GroupView* g = Group(*stats_.frame(), "ig:read");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->window.calls, 157);
  EXPECT_EQ(g->window.failures, 52);
  EXPECT_EQ(g->window.rejections, 3);
  EXPECT_EQ(g->window.call_time, std::chrono::milliseconds(157));
  EXPECT_EQ(g->spark_calls.size(), 30u);
  EXPECT_EQ(g->spark_calls[28], 150);
  EXPECT_EQ(g->spark_calls[29], 7) << "the next bucket: the difference since the last tick";
  EXPECT_EQ(g->spark_failures[29], 2);
  EXPECT_EQ(g->health, "degraded") << "52 of 157 failed: degraded; half or more would be failing";
}

TEST_F(DashboardStatsTest, TheTwoBreakersOfAKeyCountACallOnce) {
  stats_.Tick(clock_.Now(), {});
  clock_.Advance(seconds(1));
  stats_.Tick(clock_.Now(), {Sample("provider:ig:read:1:transient", 4, 0, 1),
                             Sample("provider:ig:read:1:quota", 3, 1, 2)});
  const GroupView* g = Group(*stats_.frame(), "ig:read");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->window.calls, 4);
  EXPECT_EQ(g->window.failures, 1);
  EXPECT_EQ(g->window.rejections, 3) << "a refusal by either breaker is a refused call";
  ASSERT_EQ(g->keys.size(), 1u);
  EXPECT_EQ(g->keys[0].breakers, "quota=closed transient=closed");
}

TEST_F(DashboardStatsTest, BucketsRollOverAndTheWindowForgetsOldCounts) {
  const std::string b = "provider:ig:read:1:transient";
  stats_.Tick(clock_.Now(), {Sample(b, 0, 0)});
  clock_.Advance(seconds(1));
  stats_.Tick(clock_.Now(), {Sample(b, 10, 0)});
  // 9 s later: the same 10 s bucket; 1 s more: the next one.
  clock_.Advance(seconds(8));
  stats_.Tick(clock_.Now(), {Sample(b, 12, 0)});
  EXPECT_EQ(Group(*stats_.frame(), "ig:read")->spark_calls.back(), 12);
  clock_.Advance(seconds(1));
  stats_.Tick(clock_.Now(), {Sample(b, 15, 0)});
  const GroupView* g = Group(*stats_.frame(), "ig:read");
  EXPECT_EQ(g->spark_calls[28], 12);
  EXPECT_EQ(g->spark_calls[29], 3);
  EXPECT_EQ(g->window.calls, 15);
  // The rate window is 6 buckets: 60 s on, the first bucket has left it but
  // is still on the sparkline; 5 minutes on, it has left both.
  clock_.Advance(seconds(50));
  stats_.Tick(clock_.Now(), {Sample(b, 15, 0)});
  g = Group(*stats_.frame(), "ig:read");
  EXPECT_EQ(g->window.calls, 3);
  EXPECT_EQ(g->keys[0].window.calls, 3);
  EXPECT_EQ(g->spark_calls[23], 12);
  clock_.Advance(seconds(300));
  stats_.Tick(clock_.Now(), {Sample(b, 15, 0)});
  g = Group(*stats_.frame(), "ig:read");
  EXPECT_EQ(g->window.calls, 0);
  EXPECT_EQ(std::count(g->spark_calls.begin(), g->spark_calls.end(), 0), 30);
}

// Frame::recent (the fleet heartbeat's figures): the ticks of the last 10 s
// exactly, each key's call once, and the OPEN breakers of this tick.
TEST_F(DashboardStatsTest, RecentCountsCoverTheLastTenSecondsOfTicks) {
  const std::string t = "provider:ig:read:1:transient";
  const std::string q = "provider:ig:read:1:quota";
  stats_.Tick(clock_.Now(), {Sample(t, 0, 0), Sample(q, 0, 0)});
  clock_.Advance(seconds(1));
  stats_.Tick(clock_.Now(), {Sample(t, 8, 2, 1), Sample(q, 8, 2)});
  EXPECT_EQ(stats_.frame()->recent.calls, 10);
  EXPECT_EQ(stats_.frame()->recent.failures, 2);
  EXPECT_EQ(stats_.frame()->recent.rejections, 1);
  EXPECT_EQ(stats_.frame()->open_circuits, 0u);
  stats_.CountStale("provider:ig:read:1");
  // 1 ns short of 10 s after those calls' tick: still counted.
  clock_.Advance(seconds(10) - std::chrono::nanoseconds(1));
  stats_.Tick(clock_.Now(),
              {Sample(t, 9, 2, 1, State::kOpen), Sample(q, 9, 2, 0, State::kForcedOpen)});
  EXPECT_EQ(stats_.frame()->recent.calls, 11);
  EXPECT_EQ(stats_.frame()->recent.stale, 1);
  EXPECT_EQ(stats_.frame()->open_circuits, 2u);
  // At 10 s they have left; the last tick's stay.
  clock_.Advance(std::chrono::nanoseconds(1));
  stats_.Tick(clock_.Now(), {Sample(t, 9, 2, 1), Sample(q, 9, 2)});
  EXPECT_EQ(stats_.frame()->recent.calls, 1);
  EXPECT_EQ(stats_.frame()->recent.failures, 0);
  EXPECT_EQ(stats_.frame()->recent.stale, 1);
  EXPECT_EQ(stats_.frame()->open_circuits, 0u);
}

TEST_F(DashboardStatsTest, StaleAnswersAndTransitionsReachTheirGroup) {
  stats_.Tick(clock_.Now(), {});
  clock_.Advance(seconds(2));
  stats_.CountStale("provider:ig:read:1");
  stats_.CountStale("provider:ig:read:1");
  TransitionEvent opened;
  opened.breaker = "provider:ig:read:1:quota";
  opened.to = State::kOpen;
  opened.reason = TransitionReason::kOpenForHint;
  opened.at = clock_.Now();
  stats_.OnTransition(opened);
  stats_.Tick(clock_.Now(), {Sample("provider:ig:read:1:quota", 0, 0, 0, State::kOpen)});
  const GroupView* g = Group(*stats_.frame(), "ig:read");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->window.stale, 2);
  EXPECT_EQ(g->state, "open");
  EXPECT_EQ(g->health, "open");
  EXPECT_EQ(g->open_keys, 1u);
  ASSERT_NE(g->timeline, nullptr);
  ASSERT_EQ(g->timeline->size(), 1u);
  EXPECT_EQ((*g->timeline)[0].to, "open");
  EXPECT_EQ((*g->timeline)[0].reason, "retry_after_hint");
  EXPECT_DOUBLE_EQ((*g->timeline)[0].at_s, 2.0);
}

// Five groups, one of each health, among quiet ones.
Frame FiveGroups(testing::ManualClock& clock, DashboardStats& stats) {
  std::vector<BreakerSample> zero = {
      Sample("provider:a:read:1:transient", 0, 0), Sample("provider:b:read:1:transient", 0, 0),
      Sample("provider:c:read:1:transient", 0, 0), Sample("provider:d:read:1:transient", 0, 0),
      Sample("provider:e:read:1:transient", 0, 0)};
  stats.Tick(clock.Now(), zero);
  clock.Advance(seconds(1));
  stats.Tick(clock.Now(), {Sample("provider:a:read:1:transient", 100, 0),
                           Sample("provider:b:read:1:transient", 2, 8),
                           Sample("provider:c:read:1:transient", 0, 0, 0, State::kHalfOpen),
                           Sample("provider:d:read:1:transient", 0, 0, 40, State::kOpen),
                           Sample("provider:e:read:1:transient", 9, 1)});
  return *stats.frame();
}

TEST_F(DashboardStatsTest, GroupsComeWorstFirst) {
  const Frame f = FiveGroups(clock_, stats_);
  std::vector<std::string> order;
  std::vector<std::string> health;
  for (const GroupView& g : f.groups) {
    order.push_back(g.group);
    health.push_back(g.health);
  }
  EXPECT_THAT(order, ElementsAre("d:read", "c:read", "b:read", "e:read", "a:read"));
  EXPECT_THAT(health, ElementsAre("open", "half_open", "failing", "degraded", "ok"));
}

TEST_F(DashboardStatsTest, TheFilterSelectsAndTopCuts) {
  const Frame f = FiveGroups(clock_, stats_);
  std::size_t matching = 0;
  auto rows = DashboardStreams::Render(f, *DashboardFilter::Parse("top=2"), &matching);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].first, "d:read");
  EXPECT_EQ(rows[1].first, "c:read");
  EXPECT_EQ(matching, 5u);
  rows = DashboardStreams::Render(f, *DashboardFilter::Parse("state=open"), &matching);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].first, "d:read");
  rows = DashboardStreams::Render(f, *DashboardFilter::Parse("provider=e"), &matching);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].first, "e:read");
  rows = DashboardStreams::Render(f, *DashboardFilter::Parse("q=provider%3Ab%3A"), &matching);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(Json::parse(rows[0].second)["keys"][0]["key"], "provider:b:read:1");
  Result<DashboardFilter> bad = DashboardFilter::Parse("top=0");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.error().message()), HasSubstr("top"));
  EXPECT_FALSE(DashboardFilter::Parse("top=201").has_value());
}

TEST_F(DashboardStatsTest, KeysExpandedSendsKeyRowsOnlyForTheOpenGroups) {
  const Frame f = FiveGroups(clock_, stats_);
  std::size_t matching = 0;
  // By default (and keys=all) every group's keys; `open` alone changes nothing.
  for (const char* query : {"", "keys=all", "open=a%3Aread"}) {
    auto rows = DashboardStreams::Render(f, *DashboardFilter::Parse(query), &matching);
    for (const auto& [group, row] : rows) {
      EXPECT_EQ(Json::parse(row)["keys"].size(), 1u) << query << " " << group;
      EXPECT_EQ(Json::parse(row)["keys_sent"], true) << query << " " << group;
    }
  }
  auto rows = DashboardStreams::Render(
      f, *DashboardFilter::Parse("keys=expanded&open=c%3Aread,a%3Aread,a%3Aread"), &matching);
  ASSERT_EQ(rows.size(), 5u);
  for (const auto& [group, row] : rows) {
    const Json j = Json::parse(row);
    const bool open = group == "a:read" || group == "c:read";
    EXPECT_EQ(j["keys"].size(), open ? 1u : 0u) << group;
    EXPECT_EQ(j["keys_sent"], open) << group;
    EXPECT_EQ(j["keys_matched"], 1) << "still counted: " << group;
  }
  // The same open groups in any order share a channel; `open` without
  // keys=expanded is the default's channel.
  EXPECT_EQ(DashboardFilter::Parse("keys=expanded&open=a:read,c:read")->Canonical(),
            DashboardFilter::Parse("open=c:read,a:read&keys=expanded")->Canonical());
  EXPECT_EQ(DashboardFilter::Parse("open=a:read")->Canonical(),
            DashboardFilter::Parse("")->Canonical());
  EXPECT_NE(DashboardFilter::Parse("keys=expanded")->Canonical(),
            DashboardFilter::Parse("")->Canonical());
  Result<DashboardFilter> bad = DashboardFilter::Parse("keys=some");
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.error().message()), HasSubstr("keys"));
  std::string many = "keys=expanded&open=";
  for (std::size_t i = 0; i <= DashboardFilter::kMaxOpen; ++i)
    many += "g" + std::to_string(i) + ",";
  bad = DashboardFilter::Parse(many);
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(std::string(bad.error().message()), HasSubstr("open"));
}

TEST_F(DashboardStatsTest, StreamsGetOnlyTheGroupsThatChanged) {
  const std::string a = "provider:a:read:1:transient";
  const std::string b = "provider:b:read:1:transient";
  stats_.Tick(clock_.Now(), {Sample(a, 0, 0), Sample(b, 0, 0)});
  DashboardStreams streams(4);
  Result<DashboardStreams::Subscription> sub = streams.Subscribe("", *stats_.frame());
  ASSERT_TRUE(sub.has_value());
  Json first = Data(sub->first_event);
  EXPECT_TRUE(first["full"]);
  EXPECT_EQ(first["rows"].size(), 2u);

  // Nothing moved: nothing to send.
  clock_.Advance(seconds(1));
  stats_.Tick(clock_.Now(), {Sample(a, 0, 0), Sample(b, 0, 0)});
  EXPECT_THAT(streams.Publish(*stats_.frame()), IsEmpty());

  // b failed: b's row alone, b first.
  clock_.Advance(seconds(1));
  stats_.Tick(clock_.Now(), {Sample(a, 0, 0), Sample(b, 0, 5)});
  auto events = streams.Publish(*stats_.frame());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].first, sub->channel);
  Json delta = Data(*events[0].second);
  EXPECT_FALSE(delta["full"]);
  ASSERT_EQ(delta["rows"].size(), 1u);
  EXPECT_EQ(delta["rows"][0]["group"], "b:read");
  EXPECT_EQ(delta["rows"][0]["window"]["failures"], 5);
  EXPECT_EQ(delta["order"], Json::array({"b:read", "a:read"}));
  EXPECT_THAT(delta["removed"], IsEmpty());

  // a's breaker is gone (dropped by the registry) and its ring is empty.
  clock_.Advance(seconds(1));
  stats_.Tick(clock_.Now(), {Sample(b, 0, 5)});
  events = streams.Publish(*stats_.frame());
  ASSERT_EQ(events.size(), 1u);
  delta = Data(*events[0].second);
  EXPECT_EQ(delta["removed"], Json::array({"a:read"}));
  EXPECT_THAT(delta["rows"], IsEmpty());
}

TEST_F(DashboardStatsTest, StreamsWithTheSameFilterShareOneChannel) {
  stats_.Tick(clock_.Now(), {Sample("provider:a:read:1:transient", 0, 0)});
  DashboardStreams streams(4);
  auto one = streams.Subscribe("top=5&state=", *stats_.frame());
  auto two = streams.Subscribe("state=&top=5", *stats_.frame());
  auto other = streams.Subscribe("top=6", *stats_.frame());
  ASSERT_TRUE(one && two && other);
  EXPECT_EQ(one->channel, two->channel);
  EXPECT_NE(one->channel, other->channel);
}

TEST_F(DashboardStatsTest, StreamsAreCapped) {
  DashboardStreams streams(2);
  auto one = streams.Subscribe("", *stats_.frame());
  auto two = streams.Subscribe("top=3", *stats_.frame());
  ASSERT_TRUE(one && two);
  Result<DashboardStreams::Subscription> three = streams.Subscribe("", *stats_.frame());
  ASSERT_FALSE(three.has_value());
  EXPECT_EQ(three.error().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(three.error().message()), HasSubstr("at most 2"));
  streams.Unsubscribe(one->id);
  EXPECT_EQ(streams.size(), 1u);
  EXPECT_TRUE(streams.Subscribe("", *stats_.frame()).has_value());
  Result<DashboardStreams::Subscription> bad = streams.Subscribe("top=x", *stats_.frame());
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kInvalidArgument) << "a bad query is named first";
}

// ---- Upstream call times (group_latencies.h) ----

using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST(LatencyBuckets, EachDurationLiesInItsBucketAndBucketsAreAtMostAQuarterWide) {
  EXPECT_EQ(LatencyBucketOf(Duration::zero()), 0u);
  EXPECT_EQ(LatencyBucketOf(Duration(-5)), 0u) << "a negative time counts as zero";
  EXPECT_EQ(LatencyBucketUpper(0), Duration(8192));
  for (std::size_t i = 1; i + 1 < kLatencyBuckets; ++i) {
    const Duration lower = LatencyBucketUpper(i - 1);
    const Duration upper = LatencyBucketUpper(i);
    // Both sides of each boundary: [lower, upper) is bucket i.
    EXPECT_EQ(LatencyBucketOf(lower - Duration(1)), i - 1) << i;
    EXPECT_EQ(LatencyBucketOf(lower), i) << i;
    EXPECT_EQ(LatencyBucketOf(upper - Duration(1)), i) << i;
    EXPECT_LE(static_cast<double>(upper.count()), 1.25 * static_cast<double>(lower.count())) << i;
  }
  EXPECT_LT(LatencyBucketOf(seconds(60)), kLatencyBuckets - 1) << "60 s is still measured";
  EXPECT_EQ(LatencyBucketOf(seconds(69)), kLatencyBuckets - 1);
  EXPECT_EQ(LatencyBucketOf(std::chrono::hours(100)), kLatencyBuckets - 1);
  EXPECT_EQ(LatencyBucketUpper(kLatencyBuckets - 1), LatencyBucketUpper(kLatencyBuckets - 2));
  EXPECT_LT(LatencyBucketUpper(1), microseconds(11)) << "about 10 us at the bottom";
}

TEST(LatencyBuckets, APercentileIsTheBucketOfTheCeilRankthCall) {
  LatencyCounts counts{};
  EXPECT_EQ(LatencyPercentile(counts, 99), std::nullopt);
  const std::size_t fast = LatencyBucketOf(milliseconds(1));
  const std::size_t slow = LatencyBucketOf(milliseconds(100));
  // 100 calls: the 99th smallest decides p99, the 50th p50.
  counts[fast] = 99;
  counts[slow] = 1;
  EXPECT_EQ(LatencyPercentile(counts, 99), LatencyBucketUpper(fast)) << "1 slow call in 100";
  counts[fast] = 98;
  counts[slow] = 2;
  EXPECT_EQ(LatencyPercentile(counts, 99), LatencyBucketUpper(slow)) << "2 slow calls in 100";
  EXPECT_EQ(LatencyPercentile(counts, 50), LatencyBucketUpper(fast));
  // One call: every percentile is it.
  LatencyCounts one{};
  one[slow] = 1;
  EXPECT_EQ(LatencyPercentile(one, 1), LatencyBucketUpper(slow));
  EXPECT_EQ(LatencyPercentile(one, 99), LatencyBucketUpper(slow));
}

TEST(GroupLatencies, GroupOfKeyMatchesTheDashboardsGroups) {
  EXPECT_EQ(GroupLatencies::GroupOfKey("provider:instagram:read:178"), "instagram:read");
  EXPECT_EQ(GroupLatencies::GroupOfKey("provider:fb:write:a:b"), "fb:write");
  EXPECT_EQ(GroupLatencies::GroupOfKey("provider:fb:write"), "other");
  EXPECT_EQ(GroupLatencies::GroupOfKey("payments"), "other");
}

TEST(GroupLatencies, TheTableIsBoundedAndLaterGroupsShareOther) {
  GroupLatencies table;
  LatencyHistogram* first = table.Find("p0:read");
  for (std::size_t i = 1; i < GroupLatencies::kMaxGroups; ++i) {
    ASSERT_NE(table.Find("p" + std::to_string(i) + ":read"), first);
  }
  LatencyHistogram* a = table.Find("late-a:read");
  EXPECT_EQ(table.Find("late-b:read"), a) << "beyond the cap: one shared histogram";
  EXPECT_EQ(table.Find("other"), a);
  EXPECT_EQ(table.Find("p0:read"), first) << "groups made before the cap keep theirs";
  std::size_t groups = 0;
  table.ForEach([&](const std::string&, const LatencyCounts&) { ++groups; });
  EXPECT_EQ(groups, GroupLatencies::kMaxGroups + 1);
}

// `n` calls of `d` in `group`, as the handler records them.
void Record(DashboardStats& stats, std::string_view group, Duration d, int n) {
  LatencyHistogram* h = stats.latencies().Find(group);
  for (int i = 0; i < n; ++i) LatencyHistogram::Record(h, d);
}

TEST_F(DashboardStatsTest, P99AndP50OfAKnownDistributionAreTheirBucketsUpperBounds) {
  const std::string b = "provider:ig:read:1:transient";
  stats_.Tick(clock_.Now(), {Sample(b, 0, 0)});
  // 1, 2, ..., 1000 ms: p99 is the 990th (990 ms), p50 the 500th.
  LatencyHistogram* h = stats_.latencies().Find("ig:read");
  for (int i = 1; i <= 1000; ++i) LatencyHistogram::Record(h, milliseconds(i));
  clock_.Advance(seconds(1));
  stats_.Tick(clock_.Now(), {Sample(b, 1000, 0)});
  const GroupView* g = Group(*stats_.frame(), "ig:read");
  ASSERT_NE(g, nullptr);
  ASSERT_TRUE(g->p99.has_value());
  EXPECT_EQ(*g->p99, LatencyBucketUpper(LatencyBucketOf(milliseconds(990))));
  EXPECT_GE(*g->p99, milliseconds(990));
  EXPECT_LE(*g->p99, milliseconds(990) * 5 / 4) << "within one bucket (25 %)";
  EXPECT_EQ(*g->p50, LatencyBucketUpper(LatencyBucketOf(milliseconds(500))));
  EXPECT_LT(*g->p50, milliseconds(700));
  EXPECT_EQ(g->spark_p99.back(), g->p99) << "one bucket so far: its p99 is the window's";

  // 2 slow calls in 100 make the p99, 1 does not (the rank is ceil(0.99 n)).
  DashboardStats two({});
  two.Tick(clock_.Now(), {Sample(b, 0, 0)});
  Record(two, "ig:read", milliseconds(1), 98);
  Record(two, "ig:read", milliseconds(100), 2);
  clock_.Advance(seconds(1));
  two.Tick(clock_.Now(), {Sample(b, 100, 0)});
  EXPECT_EQ(Group(*two.frame(), "ig:read")->p99,
            LatencyBucketUpper(LatencyBucketOf(milliseconds(100))));
  EXPECT_EQ(Group(*two.frame(), "ig:read")->p50,
            LatencyBucketUpper(LatencyBucketOf(milliseconds(1))));
  DashboardStats one({});
  one.Tick(clock_.Now(), {Sample(b, 0, 0)});
  Record(one, "ig:read", milliseconds(1), 99);
  Record(one, "ig:read", milliseconds(100), 1);
  clock_.Advance(seconds(1));
  one.Tick(clock_.Now(), {Sample(b, 100, 0)});
  EXPECT_EQ(Group(*one.frame(), "ig:read")->p99,
            LatencyBucketUpper(LatencyBucketOf(milliseconds(1))));
}

TEST_F(DashboardStatsTest, P99BucketsRollOverWithTheOtherCounts) {
  const std::string b = "provider:ig:read:1:transient";
  stats_.Tick(clock_.Now(), {Sample(b, 0, 0)});
  const Duration slow = LatencyBucketUpper(LatencyBucketOf(milliseconds(100)));
  const Duration fast = LatencyBucketUpper(LatencyBucketOf(milliseconds(2)));
  // Bucket 0, over two ticks: 5 slow calls, then 95 fast ones.
  Record(stats_, "ig:read", milliseconds(100), 5);
  clock_.Advance(seconds(1));
  stats_.Tick(clock_.Now(), {Sample(b, 5, 0)});
  Record(stats_, "ig:read", milliseconds(2), 95);
  clock_.Advance(seconds(8));
  stats_.Tick(clock_.Now(), {Sample(b, 100, 0)});
  EXPECT_EQ(Group(*stats_.frame(), "ig:read")->spark_p99.back(), slow)
      << "the bucket's p99 is of all its ticks";
  // Bucket 1: 100 fast calls.
  Record(stats_, "ig:read", milliseconds(2), 100);
  clock_.Advance(seconds(1));
  stats_.Tick(clock_.Now(), {Sample(b, 200, 0)});
  const GroupView* g = Group(*stats_.frame(), "ig:read");
  ASSERT_EQ(g->spark_p99.size(), 30u);
  EXPECT_EQ(g->spark_p99[28], slow);
  EXPECT_EQ(g->spark_p99[29], fast);
  EXPECT_EQ(g->spark_p99[27], std::nullopt) << "before the first tick";
  EXPECT_EQ(g->p99, slow) << "5 slow calls in 200: the window's p99 is slow";
  // 50 s on, bucket 0 has left the 6-bucket window but not the sparkline.
  clock_.Advance(seconds(50));
  stats_.Tick(clock_.Now(), {Sample(b, 200, 0)});
  g = Group(*stats_.frame(), "ig:read");
  EXPECT_EQ(g->p99, fast);
  EXPECT_EQ(g->spark_p99[23], slow);
  EXPECT_EQ(g->spark_p99[29], std::nullopt) << "a bucket without calls has no p99";
  // 5 minutes on, without calls: nothing left.
  clock_.Advance(seconds(300));
  stats_.Tick(clock_.Now(), {Sample(b, 200, 0)});
  g = Group(*stats_.frame(), "ig:read");
  EXPECT_EQ(g->p99, std::nullopt);
  EXPECT_EQ(g->p50, std::nullopt);
  for (const auto& p : g->spark_p99) EXPECT_EQ(p, std::nullopt);
}

TEST_F(DashboardStatsTest, AGroupWithoutTimedCallsShowsNoLatency) {
  const std::string timed = "provider:ig:read:1:transient";
  const std::string quiet = "provider:ig:write:1:transient";
  stats_.Tick(clock_.Now(), {Sample(timed, 0, 0), Sample(quiet, 0, 0)});
  Record(stats_, "ig:read", milliseconds(3), 10);
  clock_.Advance(seconds(1));
  stats_.Tick(clock_.Now(), {Sample(timed, 10, 0), Sample(quiet, 0, 0, 4)});
  const Frame& f = *stats_.frame();
  const GroupView* q = Group(f, "ig:write");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->p99, std::nullopt);
  EXPECT_EQ(q->p50, std::nullopt);
  for (const auto& p : q->spark_p99) EXPECT_EQ(p, std::nullopt);
  const Json quiet_row = Json::parse(DashboardStreams::RowJson(*q, {}, f.now_s));
  EXPECT_TRUE(quiet_row["latency"]["p99_ms"].is_null());
  EXPECT_TRUE(quiet_row["spark"]["p99_ms"].back().is_null());
  const Json timed_row = Json::parse(DashboardStreams::RowJson(*Group(f, "ig:read"), {}, f.now_s));
  const double p99_ms = timed_row["latency"]["p99_ms"].get<double>();
  EXPECT_GE(p99_ms, 3.0);
  EXPECT_LE(p99_ms, 3.75);
  EXPECT_EQ(timed_row["spark"]["p99_ms"].size(), 30u);
  EXPECT_EQ(timed_row["spark"]["p99_ms"].back().get<double>(), p99_ms);
  EXPECT_TRUE(timed_row["spark"]["p99_ms"][0].is_null());
}

TEST_F(DashboardStatsTest, TimesOfAGroupWithoutBreakersAreDropped) {
  stats_.Tick(clock_.Now(), {});
  Record(stats_, "gone:read", milliseconds(3), 10);
  clock_.Advance(seconds(1));
  stats_.Tick(clock_.Now(), {});
  // It comes back: only the calls since count.
  Record(stats_, "gone:read", milliseconds(50), 1);
  clock_.Advance(seconds(1));
  stats_.Tick(clock_.Now(), {Sample("provider:gone:read:1:transient", 1, 0)});
  EXPECT_EQ(Group(*stats_.frame(), "gone:read")->p50,
            LatencyBucketUpper(LatencyBucketOf(milliseconds(50))));
}

}  // namespace
}  // namespace fusebox::gateway
