#include "fusebox/prometheus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fusebox/metrics.h"
#include "fusebox/observer.h"
#include "fusebox/registry.h"
#include "fusebox/testing/manual_clock.h"
#include "metrics_test_fixture.h"

namespace fusebox {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using testing::ManualClock;
using ::testing::Not;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every line of the text that starts with `prefix`.
std::vector<std::string> LinesStartingWith(const std::string& text, std::string_view prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

// promtool 2.42 does not notice a series written twice; this does.
void ExpectNoDuplicateSeries(const std::string& text) {
  std::set<std::string> seen;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::string series = line.substr(0, line.rfind(' '));
    EXPECT_TRUE(seen.insert(series).second) << "duplicate series: " << series;
  }
}

TEST(Prometheus, MatchesTheGoldenExposition) {
  // Regenerate after an intended change with:
  //   build/<preset>/fusebox_metrics_golden > src/testdata/metrics_golden.prom
  // and review the diff; ctest metrics.promtool.golden parses it with promtool.
  const std::string golden = ReadFile(FUSEBOX_CORE_TESTDATA "/metrics_golden.prom");
  ASSERT_FALSE(golden.empty());
  EXPECT_EQ(testing::RenderMetricsFixture(), golden);
  ExpectNoDuplicateSeries(golden);
}

TEST(Prometheus, UsesMicrometerNamesForResilience4jDashboards) {
  const std::string text = testing::RenderMetricsFixture();
  EXPECT_THAT(text, HasSubstr("# TYPE resilience4j_circuitbreaker_state gauge\n"));
  EXPECT_THAT(
      text, HasSubstr("resilience4j_circuitbreaker_state{name=\"payment\",state=\"closed\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("resilience4j_circuitbreaker_state{name=\"payment\",state=\"open\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE resilience4j_circuitbreaker_calls_seconds summary\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_calls_seconds_count{kind=\"successful\","
                              "name=\"payment\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_calls_seconds_sum{kind=\"failed\",name="
                              "\"payment\"} 2.305\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_not_permitted_calls_total"
                              "{kind=\"not_permitted\",name=\"payment\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_failure_rate{name=\"payment\"} -1\n"));
  EXPECT_THAT(text,
              HasSubstr("resilience4j_circuitbreaker_transitions_total{from=\"closed\","
                        "name=\"payment\",reason=\"failure_rate_exceeded\",to=\"open\"} 1\n"));
  EXPECT_THAT(
      text, HasSubstr("resilience4j_circuitbreaker_open_seconds_total{name=\"payment\"} 10.001\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_state_code{name=\"inventory\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_retry_calls_total{kind=\"successful_without_retry\","
                              "name=\"payment\"} 2\n"));
  EXPECT_THAT(text,
              HasSubstr("resilience4j_bulkhead_available_concurrent_calls{name=\"payment\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_ratelimiter_available_permissions{name=\"meta\"} 7\n"));
}

TEST(Prometheus, EscapesLabelValues) {
  ManualClock clock;
  MetricsCollector metrics;
  auto b = std::move(*CircuitBreaker::Create("a\"b\\c\nd-\xC3\xBC-\xFF", {}, clock));
  MetricsSnapshot snap;
  metrics.AddBreaker(snap, *b);
  const std::string text = RenderPrometheus(snap);
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_failure_rate"
                              "{name=\"a\\\"b\\\\c\\nd-\xC3\xBC-\xEF\xBF\xBD\"} -1\n"));
}

TEST(Prometheus, AggregatesHighCardinalityKeysThroughTheLabelFunction) {
  ManualClock clock;
  auto metrics = std::make_shared<MetricsCollector>();
  RegistryOptions options{.clock = &clock};
  options.default_config =
      CircuitBreakerConfig{.sliding_window_size = 2, .minimum_number_of_calls = 2};
  ObserveRegistry(options, {metrics});
  auto registry = std::move(*Registry::Create(std::move(options)));
  for (int account = 0; account < 100; ++account) {
    auto b = *registry->Get("meta:read:178414" + std::to_string(account) + ":quota");
    b->TryAcquire()->Success(milliseconds(10));
    b->TryAcquire()->Failure(milliseconds(30));  // 50 %: every one of them opens
    if (account < 3) (void)b->TryAcquire();
  }
  (void)registry->Get("meta:publish:42:quota");

  PrometheusOptions po{.name_label = MaskKeySegments({2})};
  const std::string text = RenderPrometheus(metrics->Collect(*registry), po);
  EXPECT_THAT(text, Not(HasSubstr("178414")));
  EXPECT_THAT(text,
              HasSubstr("resilience4j_circuitbreaker_instances{name=\"meta:read:*:quota\"} 100\n"));
  EXPECT_THAT(
      text, HasSubstr("resilience4j_circuitbreaker_instances{name=\"meta:publish:*:quota\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_state{name=\"meta:read:*:quota\","
                              "state=\"open\"} 100\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_calls_seconds_count{kind=\"failed\","
                              "name=\"meta:read:*:quota\"} 100\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_calls_seconds_sum{kind=\"failed\","
                              "name=\"meta:read:*:quota\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_not_permitted_calls_total"
                              "{kind=\"not_permitted\",name=\"meta:read:*:quota\"} 3\n"));
  EXPECT_THAT(
      text, HasSubstr("resilience4j_circuitbreaker_failure_rate{name=\"meta:read:*:quota\"} 50\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_transitions_total{from=\"closed\","
                              "name=\"meta:read:*:quota\",reason=\"failure_rate_exceeded\","
                              "to=\"open\"} 100\n"));
  ExpectNoDuplicateSeries(text);
  // Two groups: 7 state series each.
  EXPECT_EQ(LinesStartingWith(text, "resilience4j_circuitbreaker_state{").size(), 14u);
}

TEST(Prometheus, MaskKeySegmentsReplacesOnlyTheNamedSegments) {
  const LabelFunction f = MaskKeySegments({2});
  EXPECT_EQ(f("meta:read:17841400000000000:quota"), "meta:read:*:quota");
  EXPECT_EQ(f("meta:read"), "meta:read");
  EXPECT_EQ(f("a:b:c"), "a:b:*");
  EXPECT_EQ(f(""), "");
  EXPECT_EQ(MaskKeySegments({0, 3}, '/')("x/y/z/w/v"), "*/y/z/*/v");
}

// Every Get answered by an overflow breaker is counted; the event (a
// warning in logs) is rate-limited.
TEST(Prometheus, OverflowGetsAreCounted) {
  ManualClock clock;
  auto metrics = std::make_shared<MetricsCollector>();
  RegistryOptions options{.clock = &clock, .max_breakers = 1, .max_breakers_hard = 1};
  options.on_create = [](CircuitBreaker& b) { b.ForceOpen(); };
  ObserveRegistry(options, {metrics});
  auto registry = std::move(*Registry::Create(std::move(options)));
  (void)registry->Get("held");
  (void)registry->Get("over-1");
  (void)registry->Get("over-2");
  const std::string text = RenderPrometheus(metrics->Collect(*registry));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_registry_overflow_calls_total 2\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_registry_events_total"
                              "{kind=\"overflow\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("name=\"overflow:default\""));
}

TEST(Prometheus, EvictedBreakersSeriesDisappear) {
  ManualClock clock;
  auto metrics = std::make_shared<MetricsCollector>();
  RegistryOptions options{.clock = &clock,
                          .idle_timeout = std::chrono::minutes(1),
                          .sweep_interval = std::chrono::minutes(1)};
  ObserveRegistry(options, {metrics});
  auto registry = std::move(*Registry::Create(std::move(options)));
  (*registry->Get("gone"))->TryAcquire()->Success(milliseconds(1));
  (*registry->Get("stays"))->TryAcquire()->Success(milliseconds(1));
  EXPECT_THAT(RenderPrometheus(metrics->Collect(*registry)), HasSubstr("name=\"gone\""));

  auto stays = *registry->Get("stays");  // held: not evictable
  clock.Advance(std::chrono::minutes(2));
  ASSERT_EQ(registry->Sweep(), 1u);
  const std::string text = RenderPrometheus(metrics->Collect(*registry));
  EXPECT_THAT(text, Not(HasSubstr("name=\"gone\"")));
  EXPECT_THAT(text, HasSubstr("name=\"stays\""));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_registry_events_total"
                              "{kind=\"evicted_idle\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_registry_size 1\n"));

  ASSERT_TRUE(registry->Remove("stays"));
  stays.reset();
  EXPECT_THAT(RenderPrometheus(metrics->Collect(*registry)), Not(HasSubstr("name=\"stays\"")));
}

TEST(Prometheus, FuseboxPrefixRenamesEveryFamily) {
  ManualClock clock;
  MetricsCollector metrics;
  auto b = std::move(*CircuitBreaker::Create("x", {}, clock));
  metrics.Attach(*b);
  MetricsSnapshot snap;
  metrics.AddBreaker(snap, *b);
  const std::string text = RenderPrometheus(snap, {.prefix = "fusebox"});
  std::istringstream in(text);
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    if (line.rfind("# ", 0) == 0) {
      EXPECT_THAT(line, ::testing::ContainsRegex("^# (HELP|TYPE) fusebox_")) << line;
    } else {
      EXPECT_EQ(line.rfind("fusebox_", 0), 0u) << line;
    }
  }
  EXPECT_GT(lines, 40);
  EXPECT_THAT(text, HasSubstr("fusebox_circuitbreaker_state{name=\"x\",state=\"closed\"} 1\n"));
}

TEST(Prometheus, WithoutExtensionsOnlyMicrometerFamilies) {
  ManualClock clock;
  MetricsCollector metrics;
  auto b = std::move(*CircuitBreaker::Create("x", {}, clock));
  MetricsSnapshot snap;
  metrics.AddBreaker(snap, *b);
  const std::string text = RenderPrometheus(snap, {.fusebox_extensions = false});
  const auto types = LinesStartingWith(text, "# TYPE ");
  EXPECT_THAT(types, ::testing::ElementsAre(
                         "# TYPE resilience4j_circuitbreaker_state gauge",
                         "# TYPE resilience4j_circuitbreaker_calls_seconds summary",
                         "# TYPE resilience4j_circuitbreaker_not_permitted_calls_total counter",
                         "# TYPE resilience4j_circuitbreaker_buffered_calls gauge",
                         "# TYPE resilience4j_circuitbreaker_slow_calls gauge",
                         "# TYPE resilience4j_circuitbreaker_failure_rate gauge",
                         "# TYPE resilience4j_circuitbreaker_slow_call_rate gauge"));
}

TEST(Prometheus, EmptySnapshotIsEmptyText) { EXPECT_EQ(RenderPrometheus(MetricsSnapshot{}), ""); }

TEST(Prometheus, RejectsAnInvalidPrefix) {
  const Status s = ValidatePrometheusOptions({.prefix = "9lives"});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("prefix"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("9lives"));
  EXPECT_TRUE(ValidatePrometheusOptions({.prefix = "fusebox"}).ok());
  EXPECT_EQ(ValidatePrometheusOptions({.prefix = ""}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidatePrometheusOptions({.prefix = "a-b"}).code(), StatusCode::kInvalidArgument);
}

// Constant labels (Micrometer's common tags) come first on every line of every
// family, the unlabelled ones included, escaped; bad names are refused by name.
TEST(PrometheusConstantLabels, OnEveryLineOfEveryFamily) {
  ManualClock clock;
  auto metrics = std::make_shared<MetricsCollector>();
  RegistryOptions options{.clock = &clock};
  ObserveRegistry(options, {metrics});
  auto registry = std::move(*Registry::Create(std::move(options)));
  (*registry->Get("payment"))->TryAcquire()->Success(milliseconds(5));
  PrometheusOptions prom;
  prom.constant_labels = {{"application", "check\"out"}, {"env", "prod"}};
  ASSERT_TRUE(ValidatePrometheusOptions(prom).ok());
  const std::string text = RenderPrometheus(metrics->Collect(*registry), prom);
  std::istringstream lines(text);
  std::string line;
  int samples = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] == '#') continue;
    ++samples;
    EXPECT_THAT(line, HasSubstr("{application=\"check\\\"out\",env=\"prod\"")) << line;
  }
  EXPECT_GT(samples, 20);
  EXPECT_THAT(text, HasSubstr("resilience4j_circuitbreaker_state{application=\"check\\\"out\",env="
                              "\"prod\",name=\"payment\",state=\"closed\"} 1"));
  for (const auto& bad : std::vector<std::pair<std::string, std::string>>{
           {"name", "x"}, {"le", "x"}, {"1abc", "x"}, {"__x", "x"}, {"", "x"}, {"a-b", "x"}}) {
    PrometheusOptions p;
    p.constant_labels = {bad};
    const Status s = ValidatePrometheusOptions(p);
    EXPECT_FALSE(s.ok()) << bad.first;
    EXPECT_THAT(std::string(s.message()), HasSubstr("constant_labels[0]")) << bad.first;
  }
  PrometheusOptions twice;
  twice.constant_labels = {{"app", "a"}, {"app", "b"}};
  EXPECT_THAT(std::string(ValidatePrometheusOptions(twice).message()), HasSubstr("twice"));
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

// The families of one breaker's call timer, `from` the calls_seconds HELP
// line up to the next family's.
std::string CallTimerFamilies(const std::string& text) {
  const std::size_t begin = text.find("# HELP resilience4j_circuitbreaker_calls_seconds ");
  const std::size_t end = text.find("# HELP resilience4j_circuitbreaker_not_permitted");
  return begin == std::string::npos || end == std::string::npos ? ""
                                                                : text.substr(begin, end - begin);
}

// A breaker timed with buckets between 1 ms and 2 ms: a histogram family
// (buckets cumulative, `le` last, count == +Inf, the timer's own sum), then
// the decaying max as a gauge family; constant labels first.
TEST(PrometheusCallTimer, WritesHistogramAndMaxFamiliesExactly) {
  ManualClock clock;
  auto metrics = std::make_shared<MetricsCollector>(
      MetricsCollectorOptions{.time_calls = true,
                              .timer = {.percentiles_histogram = true,
                                        .minimum_expected_value = milliseconds(1),
                                        .maximum_expected_value = milliseconds(2)}});
  RegistryOptions options{.clock = &clock};
  ObserveRegistry(options, {metrics});
  auto registry = std::move(*Registry::Create(std::move(options)));
  auto a = *registry->Get("a");
  a->TryAcquire()->Success(std::chrono::microseconds(1500));
  a->TryAcquire()->Success(milliseconds(1));
  a->TryAcquire()->Failure(milliseconds(5));
  PrometheusOptions prom;
  prom.constant_labels = {{"application", "shop"}};
  const std::string text = RenderPrometheus(metrics->Collect(*registry), prom);
  const std::string expected =
      R"(# HELP resilience4j_circuitbreaker_calls_seconds Total number of calls by kind
# TYPE resilience4j_circuitbreaker_calls_seconds histogram
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="successful",name="a",le="0.001"} 1
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="successful",name="a",le="0.001048576"} 1
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="successful",name="a",le="0.001398101"} 1
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="successful",name="a",le="0.001747626"} 2
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="successful",name="a",le="0.002"} 2
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="successful",name="a",le="+Inf"} 2
resilience4j_circuitbreaker_calls_seconds_count{application="shop",kind="successful",name="a"} 2
resilience4j_circuitbreaker_calls_seconds_sum{application="shop",kind="successful",name="a"} 0.0025
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="failed",name="a",le="0.001"} 0
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="failed",name="a",le="0.001048576"} 0
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="failed",name="a",le="0.001398101"} 0
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="failed",name="a",le="0.001747626"} 0
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="failed",name="a",le="0.002"} 0
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="failed",name="a",le="+Inf"} 1
resilience4j_circuitbreaker_calls_seconds_count{application="shop",kind="failed",name="a"} 1
resilience4j_circuitbreaker_calls_seconds_sum{application="shop",kind="failed",name="a"} 0.005
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="ignored",name="a",le="0.001"} 0
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="ignored",name="a",le="0.001048576"} 0
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="ignored",name="a",le="0.001398101"} 0
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="ignored",name="a",le="0.001747626"} 0
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="ignored",name="a",le="0.002"} 0
resilience4j_circuitbreaker_calls_seconds_bucket{application="shop",kind="ignored",name="a",le="+Inf"} 0
resilience4j_circuitbreaker_calls_seconds_count{application="shop",kind="ignored",name="a"} 0
resilience4j_circuitbreaker_calls_seconds_sum{application="shop",kind="ignored",name="a"} 0
# HELP resilience4j_circuitbreaker_calls_seconds_max Total number of calls by kind
# TYPE resilience4j_circuitbreaker_calls_seconds_max gauge
resilience4j_circuitbreaker_calls_seconds_max{application="shop",kind="successful",name="a"} 0.0015
resilience4j_circuitbreaker_calls_seconds_max{application="shop",kind="failed",name="a"} 0.005
resilience4j_circuitbreaker_calls_seconds_max{application="shop",kind="ignored",name="a"} 0
)";
  EXPECT_EQ(CallTimerFamilies(text), expected);
  ExpectNoDuplicateSeries(text);
  // A minute later the max has decayed on the registry's clock; the
  // histogram, a set of counters, has not.
  clock.Advance(seconds(60));
  const std::string later = RenderPrometheus(metrics->Collect(*registry), prom);
  EXPECT_THAT(later, HasSubstr("resilience4j_circuitbreaker_calls_seconds_max{application=\"shop\","
                               "kind=\"successful\",name=\"a\"} 0\n"));
  EXPECT_THAT(later, HasSubstr("resilience4j_circuitbreaker_calls_seconds_bucket{application="
                               "\"shop\",kind=\"successful\",name=\"a\",le=\"+Inf\"} 2\n"));
}

// Without the histogram: a summary and the max; with time_calls off: the
// summary only.
TEST(PrometheusCallTimer, DefaultIsSummaryAndMaxAndTimeCallsOffLeavesOutTheMax) {
  ManualClock clock;
  for (const bool timed : {true, false}) {
    auto metrics = std::make_shared<MetricsCollector>(MetricsCollectorOptions{.time_calls = timed});
    RegistryOptions options{.clock = &clock};
    ObserveRegistry(options, {metrics});
    auto registry = std::move(*Registry::Create(std::move(options)));
    (*registry->Get("a"))->TryAcquire()->Success(milliseconds(3));
    const std::string families = CallTimerFamilies(RenderPrometheus(metrics->Collect(*registry)));
    std::string expected =
        R"(# HELP resilience4j_circuitbreaker_calls_seconds Total number of calls by kind
# TYPE resilience4j_circuitbreaker_calls_seconds summary
resilience4j_circuitbreaker_calls_seconds_count{kind="successful",name="a"} 1
resilience4j_circuitbreaker_calls_seconds_sum{kind="successful",name="a"} 0.003
resilience4j_circuitbreaker_calls_seconds_count{kind="failed",name="a"} 0
resilience4j_circuitbreaker_calls_seconds_sum{kind="failed",name="a"} 0
resilience4j_circuitbreaker_calls_seconds_count{kind="ignored",name="a"} 0
resilience4j_circuitbreaker_calls_seconds_sum{kind="ignored",name="a"} 0
)";
    if (timed) {
      expected +=
          R"(# HELP resilience4j_circuitbreaker_calls_seconds_max Total number of calls by kind
# TYPE resilience4j_circuitbreaker_calls_seconds_max gauge
resilience4j_circuitbreaker_calls_seconds_max{kind="successful",name="a"} 0.003
resilience4j_circuitbreaker_calls_seconds_max{kind="failed",name="a"} 0
resilience4j_circuitbreaker_calls_seconds_max{kind="ignored",name="a"} 0
)";
    }
    EXPECT_EQ(families, expected) << "time_calls=" << timed;
  }
}

// Aggregated under one name label: buckets, counts and sums added, the
// highest member's max.
TEST(PrometheusCallTimer, AggregationSumsBucketsAndTakesTheHighestMax) {
  ManualClock clock;
  auto metrics = std::make_shared<MetricsCollector>(
      MetricsCollectorOptions{.time_calls = true,
                              .timer = {.percentiles_histogram = true,
                                        .minimum_expected_value = milliseconds(1),
                                        .maximum_expected_value = milliseconds(1)}});
  RegistryOptions options{.clock = &clock};
  ObserveRegistry(options, {metrics});
  auto registry = std::move(*Registry::Create(std::move(options)));
  (*registry->Get("k:1"))->TryAcquire()->Success(milliseconds(1));
  (*registry->Get("k:2"))->TryAcquire()->Success(milliseconds(7));
  (*registry->Get("k:2"))->TryAcquire()->Success(milliseconds(2));
  const std::string text =
      RenderPrometheus(metrics->Collect(*registry), {.name_label = MaskKeySegments({1})});
  for (const char* line : {
           "resilience4j_circuitbreaker_calls_seconds_bucket{kind=\"successful\",name=\"k:*\","
           "le=\"0.001\"} 1\n",
           "resilience4j_circuitbreaker_calls_seconds_bucket{kind=\"successful\",name=\"k:*\","
           "le=\"+Inf\"} 3\n",
           "resilience4j_circuitbreaker_calls_seconds_count{kind=\"successful\",name=\"k:*\"} 3\n",
           "resilience4j_circuitbreaker_calls_seconds_sum{kind=\"successful\",name=\"k:*\"} 0.01\n",
           "resilience4j_circuitbreaker_calls_seconds_max{kind=\"successful\",name=\"k:*\"} "
           "0.007\n",
       }) {
    EXPECT_THAT(text, HasSubstr(line));
  }
  ExpectNoDuplicateSeries(text);
}

}  // namespace
}  // namespace fusebox
