// A fixed scene for the exposition golden test and the promtool check: a few
// breakers on a ManualClock driven through every kind of metric, with a name
// that needs escaping, a bulkhead, a rate limiter and a retry.
#ifndef FUSEBOX_SRC_METRICS_TEST_FIXTURE_H_
#define FUSEBOX_SRC_METRICS_TEST_FIXTURE_H_

#include <string>

namespace fusebox::testing {

// The exposition text of the scene, with default PrometheusOptions.
std::string RenderMetricsFixture();

}  // namespace fusebox::testing

#endif  // FUSEBOX_SRC_METRICS_TEST_FIXTURE_H_
