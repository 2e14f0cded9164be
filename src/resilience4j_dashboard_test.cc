// The stock Resilience4j Grafana dashboard finds data in fusebox's /metrics
// text: every query of src/testdata/resilience4j_grafana_dashboard.txt (its
// queries, copied from the dashboard) names a family that fusebox writes with
// samples carrying the `application` label the dashboard filters on, and
// every panel has a query that finds data.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "fusebox/bulkhead.h"
#include "fusebox/metrics.h"
#include "fusebox/observer.h"
#include "fusebox/prometheus.h"
#include "fusebox/rate_limiter.h"
#include "fusebox/registry.h"
#include "fusebox/testing/manual_clock.h"
#include "fusebox/timeout.h"

namespace fusebox {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::ManualClock;

struct Query {
  std::string panel;
  std::string metric;
};

std::string Trim(const std::string& s) {
  const auto b = s.find_first_not_of(' ');
  const auto e = s.find_last_not_of(' ');
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<Query> DashboardQueries() {
  std::ifstream in(FUSEBOX_CORE_TESTDATA "/resilience4j_grafana_dashboard.txt");
  std::vector<Query> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const auto a = line.find(" | ");
    const auto b = line.find(" | ", a + 3);
    if (a == std::string::npos || b == std::string::npos) {
      ADD_FAILURE() << "bad line: " << line;
      continue;
    }
    out.push_back({Trim(line.substr(0, a)), Trim(line.substr(a + 3, b - a - 3))});
  }
  return out;
}

// A service with every component the dashboard (and Resilience4j) knows:
// a circuit breaker, a retry, a bulkhead, a rate limiter and a time limiter,
// timed with histogram buckets on, under the constant label `application`.
std::string RenderService() {
  ManualClock clock;
  auto metrics = std::make_shared<MetricsCollector>(
      MetricsCollectorOptions{.time_calls = true, .timer = {.percentiles_histogram = true}});
  RegistryOptions options{.clock = &clock};
  ObserveRegistry(options, {metrics});
  auto registry = std::move(*Registry::Create(std::move(options)));
  auto breaker = *registry->Get("backendA");
  breaker->TryAcquire()->Success(milliseconds(12));
  breaker->TryAcquire()->Success(milliseconds(250));
  breaker->TryAcquire()->Failure(milliseconds(900));
  metrics->RetryCountersFor("backendA").Record(/*succeeded=*/true, /*attempts=*/2);
  auto bulkhead = std::move(*Bulkhead::Create({.max_concurrent_calls = 5}, clock));
  auto held = bulkhead->TryAcquire();
  metrics->AddBulkhead("backendA", *bulkhead);
  auto limiter = std::move(*RateLimiter::Create({.limit_for_period = 10}, clock));
  (void)limiter->TryAcquire(3);
  metrics->AddRateLimiter("backendA", *limiter);
  auto timeout = std::move(*Timeout::Create({.timeout_duration = seconds(1)}, clock));
  (void)timeout->Execute([] { return Status(); });
  metrics->AddTimeLimiter("backendA", *timeout);
  PrometheusOptions prom;
  prom.constant_labels = {{"application", "checkout"}};
  return RenderPrometheus(metrics->Collect(*registry), prom);
}

// Sample lines by metric name (the text before '{').
std::map<std::string, std::vector<std::string>> SamplesByMetric(const std::string& text) {
  std::map<std::string, std::vector<std::string>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    out[line.substr(0, line.find_first_of("{ "))].push_back(line);
  }
  return out;
}

// Families of Resilience4j 0.x's own Prometheus collector, which the
// dashboard still queries next to their Micrometer successors
// (calls_seconds_count, buffered_calls) in the same panels; Micrometer's
// binding, and fusebox, write only the successors.
const std::set<std::string> kPreMicrometerNames = {
    "resilience4j_circuitbreaker_calls_total",
    "resilience4j_circuitbreaker_max_buffered_calls",
};

TEST(Resilience4jDashboard, EveryPanelFindsData) {
  const std::vector<Query> queries = DashboardQueries();
  ASSERT_GE(queries.size(), 20u);
  const std::string text = RenderService();
  const auto samples = SamplesByMetric(text);
  std::map<std::string, bool> panel_has_data;
  std::set<std::string> missing;
  for (const Query& q : queries) {
    bool found = false;
    if (q.metric == "application") {
      // label_values(application): any series carrying it.
      found = text.find("{application=\"checkout\"") != std::string::npos;
    } else if (auto it = samples.find(q.metric); it != samples.end()) {
      found = true;
      for (const std::string& line : it->second) {
        EXPECT_EQ(line.rfind(q.metric + "{application=\"checkout\",", 0), 0u) << line;
      }
    }
    if (!found) missing.insert(q.metric);
    panel_has_data[q.panel] = panel_has_data[q.panel] || found;
  }
  for (const auto& [panel, has] : panel_has_data) EXPECT_TRUE(has) << "no data: " << panel;
  EXPECT_EQ(missing, kPreMicrometerNames);
  EXPECT_GE(panel_has_data.size(), 11u);
}

// histogram_quantile needs buckets by `le` ending in +Inf, equal to the count.
TEST(Resilience4jDashboard, HistogramQuantileHasBucketsToReadForEveryKind) {
  const auto samples = SamplesByMetric(RenderService());
  const auto& buckets = samples.at("resilience4j_circuitbreaker_calls_seconds_bucket");
  const auto& counts = samples.at("resilience4j_circuitbreaker_calls_seconds_count");
  for (const std::string kind : {"successful", "failed", "ignored"}) {
    const std::string labels = "{application=\"checkout\",kind=\"" + kind + "\",name=\"backendA\"";
    std::string inf;
    for (const std::string& b : buckets) {
      if (b.find(labels + ",le=\"+Inf\"}") != std::string::npos) inf = b.substr(b.rfind(' '));
    }
    std::string count;
    for (const std::string& c : counts) {
      if (c.find(labels + "}") != std::string::npos) count = c.substr(c.rfind(' '));
    }
    EXPECT_FALSE(inf.empty()) << kind;
    EXPECT_EQ(inf, count) << kind;
  }
}

// The components the dashboard has no panel for still write their
// Resilience4j families with data.
TEST(Resilience4jDashboard, RateAndTimeLimitersAndMaxAreWritten) {
  const auto samples = SamplesByMetric(RenderService());
  for (const char* name :
       {"resilience4j_ratelimiter_available_permissions",
        "resilience4j_ratelimiter_waiting_threads", "resilience4j_timelimiter_calls_total",
        "resilience4j_circuitbreaker_calls_seconds_max",
        "resilience4j_bulkhead_max_allowed_concurrent_calls"}) {
    EXPECT_TRUE(samples.count(name)) << name;
  }
}

}  // namespace
}  // namespace fusebox
