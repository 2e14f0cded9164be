// fusebox/prometheus.h: a MetricsSnapshot as Prometheus text exposition
// (format 0.0.4, Content-Type "text/plain; version=0.0.4; charset=utf-8").
//
// Metric names are those of Resilience4j's Micrometer binding as Prometheus
// sees them (resilience4j_circuitbreaker_state, ..._calls_seconds_count, ...),
// so that existing Grafana dashboards and alerts work unchanged; fusebox's
// additions (transitions, time OPEN, probes, registry, state code) follow the
// same scheme. PrometheusOptions::prefix puts everything under "fusebox_"
// instead. docs/observability.md lists every family with its labels.
//
// Labels are the breaker's name and a small fixed set (kind, state, from, to,
// reason); never a per-request value. A registry keyed by account id would
// still make one series per account (seed 000 warns against it), so
// PrometheusOptions::name_label maps each breaker name to its label value,
// and breakers sharing a value are reported as one aggregated series:
//
//   fusebox::PrometheusOptions options{
//       .name_label = fusebox::MaskKeySegments({2}),  // meta:read:1784...:quota ->
//       meta:read:*:quota
//   };
//   std::string body = fusebox::RenderPrometheus(metrics->Collect(*registry), options);
//
// Thread-compatible: free functions over values.
#ifndef FUSEBOX_PROMETHEUS_H_
#define FUSEBOX_PROMETHEUS_H_

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/metrics.h"
#include "fusebox/result.h"

namespace fusebox {

// Maps a breaker name to the value of its "name" label.
using LabelFunction = std::function<std::string(std::string_view name)>;

// A LabelFunction that replaces the segments at `indexes` (0-based, split at
// `separator`) with "*": MaskKeySegments({2}) maps
// "meta:read:17841400000000000:quota" to "meta:read:*:quota". Names with
// fewer segments are left alone.
LabelFunction MaskKeySegments(std::vector<int> indexes, char separator = ':');

struct PrometheusOptions {
  // Prefix of every metric name: "resilience4j" (Micrometer-compatible) or
  // "fusebox", or any valid metric name prefix. Default: "resilience4j".
  std::string prefix = "resilience4j";
  // The "name" label of a breaker. Breakers mapped to one value are
  // aggregated: counters, durations, buffered and slow calls are summed;
  // failure and slow-call rates are the worst (highest) member's;
  // state{state=S} is the number of members in S; state_code is the highest
  // member's; instances (written only when this is set) counts the members.
  // Default (unset): the name itself.
  LabelFunction name_label = nullptr;
  // Emits fusebox's own families (state_code, transitions, open time,
  // probes, slow-call counters, instances, registry) besides the Micrometer
  // ones. Default: true.
  bool fusebox_extensions = true;
  // Labels written first on every line of every family, e.g.
  // {{"application", "checkout"}} (Micrometer's common tags, which the stock
  // Resilience4j dashboard filters on). Names must be valid label names,
  // distinct, and none of those fusebox writes itself (name, kind, state,
  // from, to, reason, le, quantile); values are escaped. Default: none.
  std::vector<std::pair<std::string, std::string>> constant_labels{};
};

// OK, or kInvalidArgument naming the option at fault (a prefix that is not a
// valid metric name prefix, a bad constant label name).
Status ValidatePrometheusOptions(const PrometheusOptions& options);

// The exposition text: for each family with at least one series, a HELP and a
// TYPE line, then its samples. Label values are escaped (\\, \", \n) and
// invalid UTF-8 is replaced with U+FFFD. Options are assumed valid (see
// ValidatePrometheusOptions; an invalid prefix is a bug, asserted).
std::string RenderPrometheus(const MetricsSnapshot& snapshot,
                             const PrometheusOptions& options = {});

// As RenderPrometheus, appending to `out` (reusing its capacity).
void AppendPrometheus(const MetricsSnapshot& snapshot, const PrometheusOptions& options,
                      std::string& out);

// The Content-Type of the text above.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

}  // namespace fusebox

#endif  // FUSEBOX_PROMETHEUS_H_
