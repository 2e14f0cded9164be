// Prometheus text exposition of a MetricsSnapshot.
//
// Built for a registry of thousands of breakers on every scrape (target:
// 10,000 breakers in <= 20 ms, bench/metrics_benchmark.cc): one output string
// grown in place, numbers through std::to_chars, each group's escaped name
// label computed once and the text around it once per family (LineShape), so
// that a line is four appends; breakers sorted on abbreviated keys (SortKey)
// and read where they are rather than copied; no iostreams and no per-line
// allocation.
#include "fusebox/prometheus.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <tuple>

#include "json_line.h"

namespace fusebox {
namespace {

constexpr State kAllStates[] = {State::kClosed,      State::kOpen,       State::kHalfOpen,
                                State::kDisabled,    State::kForcedOpen, State::kMetricsOnly,
                                State::kForcedClosed};
constexpr const char* kKinds[] = {"successful", "failed", "ignored"};

bool ValidPrefix(std::string_view p) {
  if (p.empty()) return false;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

// A label name: [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__" (reserved).
bool ValidLabelName(std::string_view n) {
  if (n.empty() || n.substr(0, 2) == "__") return false;
  for (std::size_t i = 0; i < n.size(); ++i) {
    const char c = n[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

// Label value escaping of the text format: backslash, double quote and line
// feed; the value must also be valid UTF-8, so invalid bytes become U+FFFD.
void AppendLabelValue(std::string& out, std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    // The bytes that stay as they are (most names: all of them), in one append.
    std::size_t plain = i;
    while (plain < s.size() && static_cast<unsigned char>(s[plain]) < 0x80 && s[plain] != '\\' &&
           s[plain] != '"' && s[plain] != '\n') {
      ++plain;
    }
    out.append(s.substr(i, plain - i));
    i = plain;
    if (i == s.size()) break;
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const std::size_t n = internal::Utf8SequenceLength(s, i);
      if (n == 0) {
        out.append("\xEF\xBF\xBD");
        ++i;
      } else {
        out.append(s.substr(i, n));
        i += n;
      }
      continue;
    }
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == '"') {
      out.append("\\\"");
    } else {  // '\n'
      out.append("\\n");
    }
    ++i;
  }
}

// A sample's value and the line's end, in one append: integers and floats
// as std::to_chars writes them (shortest round-trip form).
template <typename T>
void AppendValueLine(std::string& out, T v) {
  char buf[32];  // the longest double, "-1.7976931348623157e+308", and '\n'
  char* end = std::to_chars(buf, buf + sizeof buf - 1, v).ptr;
  *end++ = '\n';
  out.append(buf, static_cast<std::size_t>(end - buf));
}

// Doubles also as the text format spells NaN and infinities.
void AppendValueLine(std::string& out, double v) {
  if (std::isnan(v)) {
    out.append("NaN\n");
  } else if (std::isinf(v)) {
    out.append(v > 0 ? "+Inf\n" : "-Inf\n");
  } else {
    AppendValueLine<double>(out, v);
  }
}

double Seconds(Duration d) { return static_cast<double>(d.count()) / 1e9; }

auto TransitionKey(const TransitionCount& t) {
  return std::make_tuple(static_cast<int>(t.from), static_cast<int>(t.to),
                         static_cast<int>(t.reason));
}

// A rate below the minimum number of calls, and the rate of no breaker.
constexpr float kNoRate = -1;

// The sums (and worst values) of the breakers reported under one name label.
struct Merged {
  std::int64_t members = 0;
  std::int64_t in_state[7] = {};
  int state_code = 0;
  std::int64_t buffered_failed = 0;
  std::int64_t buffered_successful = 0;
  std::int64_t window_slow_successful = 0;
  std::int64_t window_slow_failed = 0;
  float failure_rate = kNoRate;
  float slow_call_rate = kNoRate;
  BreakerCounters counters;
};

// The breakers reported under one name label. A group of one breaker (every
// group, without a label function) reads the breaker's sample where it is:
// copies of 10,000 samples are megabytes allocated and freed per scrape, which
// glibc may hand back to the system and fault in again on the next one.
struct Group {
  // `name="..."`, escaped; a view into Grouping::labels.
  std::string_view name_label;
  // Its only breaker; or nullptr, and `merged` holds its breakers' sums.
  const BreakerSample* only = nullptr;
  const Merged* merged = nullptr;

  std::int64_t members() const { return only ? 1 : merged->members; }
  std::int64_t in_state(State s) const {
    return only ? (only->window.state == s ? 1 : 0) : merged->in_state[static_cast<int>(s)];
  }
  int state_code() const { return only ? StateCode(only->window.state) : merged->state_code; }
  std::int64_t buffered_failed() const {
    return only ? only->window.failed_calls : merged->buffered_failed;
  }
  std::int64_t buffered_successful() const {
    return only ? only->window.successful_calls : merged->buffered_successful;
  }
  std::int64_t window_slow_successful() const {
    return only ? only->window.slow_successful_calls : merged->window_slow_successful;
  }
  std::int64_t window_slow_failed() const {
    return only ? only->window.slow_failed_calls : merged->window_slow_failed;
  }
  // As Merge computes them: the worst of kNoRate and the members'.
  float failure_rate() const {
    return only ? std::max(kNoRate, only->window.failure_rate) : merged->failure_rate;
  }
  float slow_call_rate() const {
    return only ? std::max(kNoRate, only->window.slow_call_rate) : merged->slow_call_rate;
  }
  // Zero for a breaker no collector listener watches (see Merge).
  const BreakerCounters& counters() const {
    // Never destroyed, as SystemClock(): usable during static destruction.
    static const BreakerCounters* const kNone = new BreakerCounters;
    if (only) return only->observed ? only->counters : *kNone;
    return merged->counters;
  }
};

// Same bucket bounds (one collector's timers share them).
bool SameBounds(const CallTimerSample& a, const CallTimerSample& b) {
  return a.bounds == b.bounds || (a.bounds && b.bounds && *a.bounds == *b.bounds);
}

// The maximum of the members' maxima; their histograms summed, those whose
// bounds are not the first member's left out.
void MergeTimer(BreakerCounters& c, const BreakerCounters& d) {
  if (!d.timed) return;
  CallTimerSample& t = c.timer;
  const CallTimerSample& u = d.timer;
  for (int k = 0; k < 3; ++k) t.max[k] = std::max(t.max[k], u.max[k]);
  if (!c.timed) {
    c.timed = true;
    t.bounds = u.bounds;
    for (int k = 0; k < 3; ++k) {
      t.cumulative[k] = u.cumulative[k];
      t.sum[k] = u.sum[k];
    }
    return;
  }
  if (!u.bounds || !SameBounds(t, u)) return;
  for (int k = 0; k < 3; ++k) {
    for (std::size_t i = 0; i < t.cumulative[k].size(); ++i) {
      t.cumulative[k][i] += u.cumulative[k][i];
    }
    t.sum[k] += u.sum[k];
  }
}

void Merge(Merged& g, const BreakerSample& s) {
  const CircuitBreakerMetrics& w = s.window;
  const int code = StateCode(w.state);
  g.in_state[static_cast<int>(w.state)] += 1;
  g.state_code = g.members == 0 ? code : std::max(g.state_code, code);
  ++g.members;
  g.buffered_failed += w.failed_calls;
  g.buffered_successful += w.successful_calls;
  g.window_slow_successful += w.slow_successful_calls;
  g.window_slow_failed += w.slow_failed_calls;
  g.failure_rate = std::max(g.failure_rate, w.failure_rate);
  g.slow_call_rate = std::max(g.slow_call_rate, w.slow_call_rate);
  if (!s.observed) return;
  BreakerCounters& c = g.counters;
  const BreakerCounters& d = s.counters;
  for (int i = 0; i < 3; ++i) {
    c.calls[i] += d.calls[i];
    c.call_duration[i] += d.call_duration[i];
    c.probes[i] += d.probes[i];
  }
  c.slow_successful += d.slow_successful;
  c.slow_failed += d.slow_failed;
  c.not_permitted += d.not_permitted;
  c.time_open += d.time_open;
  MergeTimer(c, d);
  if (c.transitions.empty()) {
    c.transitions = d.transitions;
    return;
  }
  for (const TransitionCount& t : d.transitions) {
    auto it = std::lower_bound(c.transitions.begin(), c.transitions.end(), t,
                               [](const TransitionCount& a, const TransitionCount& b) {
                                 return TransitionKey(a) < TransitionKey(b);
                               });
    if (it != c.transitions.end() && TransitionKey(*it) == TransitionKey(t)) {
      it->count += t.count;
    } else {
      c.transitions.insert(it, t);
    }
  }
}

// A breaker's label value as GroupBreakers sorts it. Values often share a
// long prefix ("meta:read:178414000..."), so the key holds the eight bytes
// after the prefix all values share as a big-endian integer, which compares
// as those bytes do (an abbreviated key), then the rest of the value: most
// comparisons end at the integer. The size orders two values that end within
// those eight bytes (the shorter is then a prefix of the longer). Equal keys
// are equal values.
struct SortKey {
  SortKey(std::string_view v, std::size_t shared, std::uint32_t i)
      : rest(v.substr(std::min(v.size(), shared + 8))),
        size(static_cast<std::uint32_t>(v.size())),
        index(i) {
    for (std::size_t j = shared; j < shared + 8; ++j) {
      abbreviated = abbreviated << 8 | (j < v.size() ? static_cast<unsigned char>(v[j]) : 0u);
    }
  }
  auto Tie() const { return std::tie(abbreviated, rest, size); }

  std::uint64_t abbreviated = 0;
  std::string_view rest;
  std::uint32_t size;
  // The breaker's index in the snapshot.
  std::uint32_t index;
};

// The length of the prefix that `first` shares with every value.
template <typename Value>
std::size_t SharedPrefix(std::string_view first, std::size_t n, const Value& value) {
  std::size_t shared = first.size();
  for (std::size_t i = 1; i < n; ++i) {
    const std::string_view v = value(i);
    const std::size_t limit = std::min(shared, v.size());
    if (v.compare(0, limit, first, 0, limit) == 0) {
      shared = limit;
    } else {
      shared = static_cast<std::size_t>(
          std::mismatch(v.begin(), v.begin() + limit, first.begin()).first - v.begin());
    }
  }
  return shared;
}

// Strings written back to back into one buffer: one allocation rather than
// one per string. A view is valid until the next write.
struct PackedStrings {
  std::string text;
  // Where each string ends in `text`.
  std::vector<std::size_t> ends;

  // Ends the string written to `text` since the last call.
  void EndString() { ends.push_back(text.size()); }
  std::string_view operator[](std::size_t i) const {
    const std::size_t begin = i == 0 ? 0 : ends[i - 1];
    return std::string_view(text).substr(begin, ends[i] - begin);
  }
};

// The breakers grouped by name label, sorted by it so that two scrapes of the
// same state are the same text (a registry's iteration order is its hash
// order).
struct Grouping {
  Grouping() = default;
  // The groups point into the other members and into the snapshot: filled in
  // place by GroupBreakers, never copied or moved.
  Grouping(const Grouping&) = delete;
  Grouping& operator=(const Grouping&) = delete;

  // The groups' escaped `name="..."`, which Group::name_label views.
  PackedStrings labels;
  // The groups of more than one breaker, which Group::merged points to.
  std::vector<Merged> merged;
  std::vector<Group> groups;
};

// Fills `out`, empty, with `samples` grouped; it points into `samples`.
void GroupBreakers(const std::vector<BreakerSample>& samples, const LabelFunction& label,
                   Grouping& out) {
  const std::size_t n = samples.size();
  if (n == 0) return;
  assert(n <= UINT32_MAX && "SortKey::index");
  // Each breaker's label value: its name, or what `label` maps it to.
  PackedStrings mapped;
  if (label) {
    for (const BreakerSample& s : samples) {
      mapped.text.append(label(s.name));
      mapped.EndString();
    }
  }
  const auto value = [&](std::size_t i) -> std::string_view {
    return label ? mapped[i] : std::string_view(samples[i].name);
  };

  // The breakers sorted by value, so that equal values are adjacent; a
  // group merges its members in snapshot order (stable sort).
  const std::size_t shared = SharedPrefix(value(0), n, value);
  std::vector<SortKey> keys;
  keys.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    keys.emplace_back(value(i), shared, static_cast<std::uint32_t>(i));
  }
  std::stable_sort(keys.begin(), keys.end(),
                   [](const SortKey& a, const SortKey& b) { return a.Tie() < b.Tie(); });

  // One group per run of equal values, its label escaped once. `merged` is
  // reserved first: the groups point into it.
  const auto run_end = [&](std::size_t i) {
    std::size_t end = i + 1;
    while (end < n && keys[end].Tie() == keys[i].Tie()) ++end;
    return end;
  };
  std::size_t groups = 0;
  std::size_t merged = 0;
  for (std::size_t i = 0, end = 0; i < n; i = end) {
    end = run_end(i);
    ++groups;
    if (end - i > 1) ++merged;
  }
  out.groups.reserve(groups);
  out.merged.reserve(merged);
  out.labels.ends.reserve(groups);
  for (std::size_t i = 0, end = 0; i < n; i = end) {
    end = run_end(i);
    out.labels.text.append("name=\"");
    AppendLabelValue(out.labels.text, value(keys[i].index));
    out.labels.text.push_back('"');
    out.labels.EndString();
    Group& g = out.groups.emplace_back();
    if (end - i == 1) {
      g.only = &samples[keys[i].index];
    } else {
      Merged& m = out.merged.emplace_back();
      for (std::size_t j = i; j < end; ++j) Merge(m, samples[keys[j].index]);
      g.merged = &m;
    }
  }
  for (std::size_t i = 0; i < groups; ++i) out.groups[i].name_label = out.labels[i];

  // The text is in the order of the escaped labels. They are in the order of
  // the values unless escaping reorders them, which takes a byte below '"'
  // (`name="a!"` sorts before `name="a"`), a character escaped with '\' or
  // invalid UTF-8: rare, so checked rather than sorted for. Values that
  // escape alike (invalid UTF-8 replaced by U+FFFD) stay distinct series.
  const auto by_label = [](const Group& a, const Group& b) { return a.name_label < b.name_label; };
  if (!std::is_sorted(out.groups.begin(), out.groups.end(), by_label)) {
    std::stable_sort(out.groups.begin(), out.groups.end(), by_label);
  }
}

// The constant text of a family's lines around the name label,
// `<prefix>_<name>{<labels before>` and `<labels after>} `, built once per
// render: a breaker's line is then head, name label, tail and value, four
// appends instead of a dozen small ones.
struct LineShape {
  std::string head;
  std::string tail;
};

// `key="value"`, for a value known not to need escaping.
std::string RawLabelText(std::string_view key, std::string_view value) {
  std::string text;
  text.reserve(key.size() + value.size() + 3);
  text.append(key).append("=\"").append(value).push_back('"');
  return text;
}

class Writer {
 public:
  // `constant` is the constant labels' text, `key="value",...` (escaped),
  // written first in every line; empty for none.
  Writer(std::string& out, std::string_view prefix, std::string_view constant = {})
      : out_(out), prefix_(prefix), constant_(constant) {}

  // "# HELP <prefix>_<name> <help>\n# TYPE <prefix>_<name> <type>\n".
  void Header(std::string_view name, std::string_view type, std::string_view help) {
    out_.append("# HELP ");
    Name(name);
    out_.push_back(' ');
    out_.append(help);
    out_.append("\n# TYPE ");
    Name(name);
    out_.push_back(' ');
    out_.append(type);
    out_.push_back('\n');
  }

  // The lines of family `name` with the labels `before` and `after` the name
  // label (each `key="value"`, comma-separated; empty for none). Labels are
  // written in sorted order, so which side a label goes on depends on its key.
  LineShape Shape(std::string_view name, std::string_view before = {},
                  std::string_view after = {}) const {
    LineShape shape;
    shape.head.append(prefix_).append("_").append(name).append("{");
    if (!constant_.empty()) shape.head.append(constant_).push_back(',');
    shape.head.append(before);
    if (!before.empty()) shape.head.push_back(',');
    if (!after.empty()) shape.tail.append(",").append(after);
    shape.tail.append("} ");
    return shape;
  }
  // One line of `shape` for group `g`.
  template <typename V>
  void Line(const LineShape& shape, const Group& g, V value) {
    out_.append(shape.head);
    out_.append(g.name_label);
    out_.append(shape.tail);
    AppendValueLine(out_, value);
  }

  // `<prefix>_<name>{` then labels, joined by the caller.
  void Open(std::string_view name) {
    Name(name);
    out_.push_back('{');
    out_.append(constant_);
    after_constant_ = !constant_.empty();
  }
  template <typename V>
  void Close(V value) {
    out_.append("} ");
    AppendValueLine(out_, value);
  }
  // A label `key="value"` (value escaped), with a leading comma unless first.
  void Label(std::string_view key, std::string_view value, bool first = false) {
    Separate(first);
    out_.append(key);
    out_.append("=\"");
    AppendLabelValue(out_, value);
    out_.push_back('"');
  }
  // A label whose value is known not to need escaping.
  void RawLabel(std::string_view key, std::string_view value, bool first = false) {
    Separate(first);
    out_.append(key);
    out_.append("=\"");
    out_.append(value);
    out_.push_back('"');
  }
  // The name label, after others.
  void NameLabel(const Group& g) {
    out_.push_back(',');
    out_.append(g.name_label);
  }
  // A line with no labels but the constant ones.
  template <typename V>
  void Unlabelled(std::string_view name, V value) {
    Name(name);
    if (!constant_.empty()) out_.append("{").append(constant_).append("}");
    out_.push_back(' ');
    AppendValueLine(out_, value);
  }

 private:
  // The comma before a label: always, unless it is the first one after
  // Open() and no constant label came before it.
  void Separate(bool first) {
    if (!first || after_constant_) out_.push_back(',');
    after_constant_ = false;
  }
  void Name(std::string_view name) {
    out_.append(prefix_);
    out_.push_back('_');
    out_.append(name);
  }
  std::string& out_;
  std::string_view prefix_;
  std::string_view constant_;
  bool after_constant_ = false;
};

// The shapes of a family with one line per kind (successful, failed,
// ignored), `kind="..."` before the name label.
std::array<LineShape, 3> KindShapes(const Writer& w, std::string_view name) {
  return {w.Shape(name, RawLabelText("kind", kKinds[0])),
          w.Shape(name, RawLabelText("kind", kKinds[1])),
          w.Shape(name, RawLabelText("kind", kKinds[2]))};
}

// The call timer as Micrometer's Prometheus registry writes a Timer: a
// summary (count and sum), or with buckets a histogram (buckets, count and
// sum), then the decaying maximum as a gauge family of its own.
void WriteCallTimes(Writer& w, const std::vector<Group>& groups) {
  constexpr std::string_view kHelp = "Total number of calls by kind";
  // The histogram's bounds: the first group's that has some. A group with
  // other bounds (breakers timed by another collector) writes none.
  const CallTimerSample* histogram = nullptr;
  bool timed = false;
  for (const Group& g : groups) {
    timed = timed || g.counters().timed;
    if (histogram == nullptr && g.counters().timer.bounds) histogram = &g.counters().timer;
  }
  w.Header("circuitbreaker_calls_seconds", histogram ? "histogram" : "summary", kHelp);
  if (histogram != nullptr) {
    // `le` last, as Prometheus' own clients write it: one shape per (kind,
    // bound), the bounds in seconds.
    const std::vector<Duration>& bounds = *histogram->bounds;
    std::vector<LineShape> buckets;
    buckets.reserve(3 * (bounds.size() + 1));
    for (const char* kind : kKinds) {
      for (std::size_t i = 0; i <= bounds.size(); ++i) {
        std::string le = "+Inf";
        if (i < bounds.size()) {
          le.clear();
          AppendValueLine(le, Seconds(bounds[i]));
          le.pop_back();
        }
        buckets.push_back(w.Shape("circuitbreaker_calls_seconds_bucket", RawLabelText("kind", kind),
                                  RawLabelText("le", le)));
      }
    }
    const auto count = KindShapes(w, "circuitbreaker_calls_seconds_count");
    const auto sum = KindShapes(w, "circuitbreaker_calls_seconds_sum");
    for (const Group& g : groups) {
      const BreakerCounters& c = g.counters();
      // The histogram's own count and sum, so that count == the +Inf bucket.
      const bool own = c.timer.bounds && SameBounds(c.timer, *histogram);
      for (std::size_t k = 0; k < 3; ++k) {
        if (own) {
          const std::vector<std::uint64_t>& cumulative = c.timer.cumulative[k];
          for (std::size_t i = 0; i < cumulative.size(); ++i) {
            w.Line(buckets[k * (bounds.size() + 1) + i], g, cumulative[i]);
          }
          w.Line(count[k], g, cumulative.back());
          w.Line(sum[k], g, Seconds(c.timer.sum[k]));
        } else {
          w.Line(count[k], g, c.calls[k]);
          w.Line(sum[k], g, Seconds(c.call_duration[k]));
        }
      }
    }
  } else {
    const auto count = KindShapes(w, "circuitbreaker_calls_seconds_count");
    const auto sum = KindShapes(w, "circuitbreaker_calls_seconds_sum");
    for (const Group& g : groups) {
      for (std::size_t k = 0; k < 3; ++k) {
        w.Line(count[k], g, g.counters().calls[k]);
        w.Line(sum[k], g, Seconds(g.counters().call_duration[k]));
      }
    }
  }
  if (!timed) return;
  w.Header("circuitbreaker_calls_seconds_max", "gauge", kHelp);
  const auto max = KindShapes(w, "circuitbreaker_calls_seconds_max");
  for (const Group& g : groups) {
    if (!g.counters().timed) continue;
    for (std::size_t k = 0; k < 3; ++k) w.Line(max[k], g, Seconds(g.counters().timer.max[k]));
  }
}

// Resilience4j's Micrometer families (TaggedCircuitBreakerMetrics).
void WriteResilience4jFamilies(Writer& w, const std::vector<Group>& groups) {
  w.Header("circuitbreaker_state", "gauge", "The states of the circuit breaker");
  std::array<LineShape, std::size(kAllStates)> state;
  for (std::size_t i = 0; i < state.size(); ++i) {
    state[i] =
        w.Shape("circuitbreaker_state", {}, RawLabelText("state", StateLabel(kAllStates[i])));
  }
  for (const Group& g : groups) {
    for (std::size_t i = 0; i < state.size(); ++i) {
      w.Line(state[i], g, g.in_state(kAllStates[i]));
    }
  }

  WriteCallTimes(w, groups);

  w.Header("circuitbreaker_not_permitted_calls_total", "counter",
           "Total number of not permitted calls");
  const LineShape not_permitted =
      w.Shape("circuitbreaker_not_permitted_calls_total", RawLabelText("kind", "not_permitted"));
  for (const Group& g : groups) w.Line(not_permitted, g, g.counters().not_permitted);

  const std::string failed = RawLabelText("kind", "failed");
  const std::string successful = RawLabelText("kind", "successful");

  w.Header("circuitbreaker_buffered_calls", "gauge",
           "The number of buffered calls stored in the sliding window");
  const LineShape buffered_failed = w.Shape("circuitbreaker_buffered_calls", failed);
  const LineShape buffered_successful = w.Shape("circuitbreaker_buffered_calls", successful);
  for (const Group& g : groups) {
    w.Line(buffered_failed, g, g.buffered_failed());
    w.Line(buffered_successful, g, g.buffered_successful());
  }

  w.Header("circuitbreaker_slow_calls", "gauge",
           "The number of slow calls in the sliding window, slower than the threshold");
  const LineShape slow_successful = w.Shape("circuitbreaker_slow_calls", successful);
  const LineShape slow_failed = w.Shape("circuitbreaker_slow_calls", failed);
  for (const Group& g : groups) {
    w.Line(slow_successful, g, g.window_slow_successful());
    w.Line(slow_failed, g, g.window_slow_failed());
  }

  w.Header("circuitbreaker_failure_rate", "gauge",
           "The failure rate of the circuit breaker in percent, -1 below the minimum number of "
           "calls");
  const LineShape failure_rate = w.Shape("circuitbreaker_failure_rate");
  for (const Group& g : groups) w.Line(failure_rate, g, g.failure_rate());

  w.Header("circuitbreaker_slow_call_rate", "gauge",
           "The slow call rate of the circuit breaker in percent, -1 below the minimum number of "
           "calls");
  const LineShape slow_call_rate = w.Shape("circuitbreaker_slow_call_rate");
  for (const Group& g : groups) w.Line(slow_call_rate, g, g.slow_call_rate());
}

// fusebox's own families.
void WriteFuseboxFamilies(Writer& w, const std::vector<Group>& groups, bool aggregated) {
  const std::string failed = RawLabelText("kind", "failed");
  const std::string successful = RawLabelText("kind", "successful");
  w.Header("circuitbreaker_state_code", "gauge",
           "The state as a number: closed=0, half_open=1, open=2, disabled=3, metrics_only=4, "
           "forced_open=5, forced_closed=6 (aggregated series: the highest member's)");
  const LineShape state_code = w.Shape("circuitbreaker_state_code");
  for (const Group& g : groups) w.Line(state_code, g, static_cast<std::int64_t>(g.state_code()));

  if (aggregated) {
    w.Header("circuitbreaker_instances", "gauge",
             "The number of circuit breakers reported under this name label");
    const LineShape instances = w.Shape("circuitbreaker_instances");
    for (const Group& g : groups) w.Line(instances, g, g.members());
  }

  bool any_transition = false;
  for (const Group& g : groups)
    any_transition = any_transition || !g.counters().transitions.empty();
  if (any_transition) {
    w.Header("circuitbreaker_transitions_total", "counter",
             "State transitions by from, to and reason");
    // Few lines (transitions are rare), each with its own labels: written
    // label by label.
    for (const Group& g : groups) {
      for (const TransitionCount& t : g.counters().transitions) {
        w.Open("circuitbreaker_transitions_total");
        w.RawLabel("from", StateLabel(t.from), true);
        w.NameLabel(g);
        w.RawLabel("reason", TransitionReasonName(t.reason));
        w.RawLabel("to", StateLabel(t.to));
        w.Close(t.count);
      }
    }
  }

  w.Header("circuitbreaker_open_seconds_total", "counter", "Time spent in the OPEN state");
  const LineShape open_seconds = w.Shape("circuitbreaker_open_seconds_total");
  for (const Group& g : groups) w.Line(open_seconds, g, Seconds(g.counters().time_open));

  w.Header("circuitbreaker_half_open_probes_total", "counter",
           "Outcomes of the calls admitted as half-open probes, by kind");
  const auto probes = KindShapes(w, "circuitbreaker_half_open_probes_total");
  for (const Group& g : groups) {
    for (int k = 0; k < 3; ++k) w.Line(probes[k], g, g.counters().probes[k]);
  }

  w.Header("circuitbreaker_slow_call_outcomes_total", "counter",
           "Calls slower than the slow call threshold, by kind, since observed");
  const LineShape outcomes_successful =
      w.Shape("circuitbreaker_slow_call_outcomes_total", successful);
  const LineShape outcomes_failed = w.Shape("circuitbreaker_slow_call_outcomes_total", failed);
  for (const Group& g : groups) {
    w.Line(outcomes_successful, g, g.counters().slow_successful);
    w.Line(outcomes_failed, g, g.counters().slow_failed);
  }
}

void WriteBreakers(Writer& w, const std::vector<Group>& groups, bool extensions, bool aggregated) {
  if (groups.empty()) return;
  WriteResilience4jFamilies(w, groups);
  if (extensions) WriteFuseboxFamilies(w, groups, aggregated);
}

void WriteRegistry(Writer& w, const RegistrySample& r) {
  w.Header("circuitbreaker_registry_size", "gauge", "Circuit breakers held by the registry");
  w.Unlabelled("circuitbreaker_registry_size", static_cast<std::uint64_t>(r.breakers));
  w.Header("circuitbreaker_registry_events_total", "counter",
           "Registry events: breakers created, evicted (idle, lru), removed, capacity exceeded, "
           "overflow (rate-limited)");
  constexpr RegistryEvent::Kind kRegistryEventKinds[] = {
      RegistryEvent::Kind::kCreated,          RegistryEvent::Kind::kEvictedIdle,
      RegistryEvent::Kind::kEvictedLru,       RegistryEvent::Kind::kRemoved,
      RegistryEvent::Kind::kCapacityExceeded, RegistryEvent::Kind::kOverflow};
  for (RegistryEvent::Kind k : kRegistryEventKinds) {
    w.Open("circuitbreaker_registry_events_total");
    w.RawLabel("kind", RegistryEventKindName(k), true);
    w.Close(r.events[static_cast<int>(k)]);
  }
  w.Header("circuitbreaker_registry_overflow_calls_total", "counter",
           "Gets answered by a template's overflow breaker: the registry held max_breakers_hard");
  w.Unlabelled("circuitbreaker_registry_overflow_calls_total", r.overflowed);
}

template <typename Sample, typename Value>
void WriteGauge(Writer& w, const std::vector<Sample>& samples, std::string_view name,
                std::string_view help, Value value) {
  if (samples.empty()) return;
  w.Header(name, "gauge", help);
  for (const Sample& s : samples) {
    w.Open(name);
    w.Label("name", s.name, true);
    w.Close(static_cast<std::int64_t>(value(s)));
  }
}

template <typename Sample, typename Value>
void WriteCounter(Writer& w, const std::vector<Sample>& samples, std::string_view name,
                  std::string_view help, Value value) {
  if (samples.empty()) return;
  w.Header(name, "counter", help);
  for (const Sample& s : samples) {
    w.Open(name);
    w.Label("name", s.name, true);
    w.Close(static_cast<std::uint64_t>(value(s)));
  }
}

// A counter family with one line per (kind, name): `kinds(sample)` gives
// the (kind, count) pairs, kinds in sorted order.
template <typename Sample, typename Kinds>
void WriteKindCounters(Writer& w, const std::vector<Sample>& samples, std::string_view name,
                       std::string_view help, Kinds kinds) {
  if (samples.empty()) return;
  w.Header(name, "counter", help);
  for (const Sample& s : samples) {
    for (const auto& [kind, count] : kinds(s)) {
      w.Open(name);
      w.RawLabel("kind", kind, true);
      w.Label("name", s.name);
      w.Close(count);
    }
  }
}

void WritePolicies(Writer& w, const MetricsSnapshot& s, bool extensions) {
  WriteGauge(w, s.bulkheads, "bulkhead_available_concurrent_calls",
             "The number of available permissions",
             [](const BulkheadSample& b) { return b.available_concurrent_calls; });
  WriteGauge(w, s.bulkheads, "bulkhead_max_allowed_concurrent_calls",
             "The maximum number of available permissions",
             [](const BulkheadSample& b) { return b.max_allowed_concurrent_calls; });
  if (extensions) {
    WriteGauge(w, s.bulkheads, "bulkhead_waiting_calls", "Callers waiting for a permission",
               [](const BulkheadSample& b) { return b.waiting_calls; });
    WriteCounter(w, s.bulkheads, "bulkhead_rejected_calls_total",
                 "Calls the bulkhead refused (full, too many waiting, wait ran out)",
                 [](const BulkheadSample& b) { return b.rejected_calls; });
  }
  // Resilience4j's Prometheus collector names for its thread-pool bulkhead.
  using TP = ThreadPoolBulkheadSample;
  WriteGauge(w, s.thread_pool_bulkheads, "thread_pool_bulkhead_current_thread_pool_size",
             "The number of current threads in the thread pool",
             [](const TP& b) { return b.state.thread_pool_size; });
  WriteGauge(w, s.thread_pool_bulkheads, "thread_pool_bulkhead_available_queue_capacity",
             "The number of available queue capacity",
             [](const TP& b) { return b.available_queue_capacity; });
  if (extensions) {
    WriteGauge(w, s.thread_pool_bulkheads, "thread_pool_bulkhead_queue_depth",
               "Calls waiting in the queue", [](const TP& b) { return b.state.queue_depth; });
    WriteGauge(w, s.thread_pool_bulkheads, "thread_pool_bulkhead_active_thread_count",
               "Threads running a call", [](const TP& b) { return b.state.active_thread_count; });
    WriteGauge(w, s.thread_pool_bulkheads, "thread_pool_bulkhead_core_thread_pool_size",
               "Threads kept when idle", [](const TP& b) { return b.core_thread_pool_size; });
    WriteGauge(w, s.thread_pool_bulkheads, "thread_pool_bulkhead_max_thread_pool_size",
               "The most threads at once", [](const TP& b) { return b.max_thread_pool_size; });
    WriteGauge(w, s.thread_pool_bulkheads, "thread_pool_bulkhead_queue_capacity",
               "Calls the queue holds at most", [](const TP& b) { return b.queue_capacity; });
    WriteCounter(w, s.thread_pool_bulkheads, "thread_pool_bulkhead_rejected_calls_total",
                 "Calls refused with pool and queue full",
                 [](const TP& b) { return b.state.rejected_calls; });
  }
  WriteGauge(w, s.rate_limiters, "ratelimiter_available_permissions",
             "The number of available permissions",
             [](const RateLimiterSample& r) { return r.available_permissions; });
  WriteGauge(w, s.rate_limiters, "ratelimiter_waiting_threads", "The number of waiting threads",
             [](const RateLimiterSample& r) { return r.waiting_threads; });

  if (extensions) {
    WriteGauge(w, s.rate_limiters, "ratelimiter_limit_for_period",
               "Permits per refresh period, the largest burst",
               [](const RateLimiterSample& r) { return r.limit_for_period; });
    WriteCounter(w, s.rate_limiters, "ratelimiter_rejected_calls_total",
                 "Requests the rate limiter refused (no permit in time)",
                 [](const RateLimiterSample& r) { return r.rejected_calls; });
  }
  using KindCount = std::pair<const char*, std::uint64_t>;
  WriteKindCounters(w, s.time_limiters, "timelimiter_calls_total", "The number of calls by kind",
                    [](const TimeLimiterSample& t) {
                      return std::array<KindCount, 3>{{{"failed", t.counts.failed},
                                                       {"successful", t.counts.successful},
                                                       {"timeout", t.counts.timeout}}};
                    });
  WriteKindCounters(
      w, s.retries, "retry_calls_total", "The number of retry loops by how they ended",
      [](const RetrySample& r) {
        return std::array<KindCount, 4>{{{"failed_with_retry", r.failed_with_retry},
                                         {"failed_without_retry", r.failed_without_retry},
                                         {"successful_with_retry", r.successful_with_retry},
                                         {"successful_without_retry", r.successful_without_retry}}};
      });
}

void WriteSharedStates(Writer& w, const std::vector<SharedStateSample>& states) {
  if (states.empty()) return;
  WriteGauge(w, states, "shared_state_up",
             "1 while the shared state is reachable and its pushes arrive, else 0 (fail-open)",
             [](const SharedStateSample& s) { return s.health.healthy ? 1 : 0; });
  struct Family {
    const char* name;
    const char* help;
    std::int64_t SharedStateHealth::*field;
  };
  static constexpr Family kFamilies[] = {
      {"shared_state_errors_total", "Commands to the shared state that failed",
       &SharedStateHealth::errors},
      {"shared_state_fail_open_periods_total",
       "Times the shared state was given up for a while after repeated failures",
       &SharedStateHealth::fail_open_periods},
      {"shared_state_refused_calls_total",
       "Calls answered unavailable without contacting the shared state",
       &SharedStateHealth::refused_calls},
      {"shared_state_leases_granted_total", "Probe leases this instance was granted",
       &SharedStateHealth::leases_granted},
      {"shared_state_lease_contention_total",
       "Probe leases asked for while another instance held one",
       &SharedStateHealth::lease_contention},
      {"shared_state_events_total", "Changes pushed to this instance", &SharedStateHealth::events},
      {"shared_state_dropped_total", "Trips, closes, releases or overrides that could not be sent",
       &SharedStateHealth::dropped},
      {"shared_state_expired_in_queue_total", "Trips and overrides whose time ran out while queued",
       &SharedStateHealth::expired_in_queue},
      {"shared_state_resent_total", "Ops sent again after the backend dropped their connection",
       &SharedStateHealth::resent},
      {"shared_state_closes_lost_total", "Probe closes that found their lease lost",
       &SharedStateHealth::closes_lost},
      {"shared_state_resyncs_total",
       "Times every breaker re-read the fleet (pushes may have been missed)",
       &SharedStateHealth::resyncs},
      {"shared_state_replica_acks_total",
       "Trips and overrides acknowledged by the replicas asked for (wait_replicas)",
       &SharedStateHealth::replica_acks},
      {"shared_state_replica_ack_shortfalls_total",
       "Trips and overrides the replicas asked for did not acknowledge in time",
       &SharedStateHealth::replica_ack_shortfalls},
  };
  for (const Family& f : kFamilies) {
    WriteCounter(w, states, f.name, f.help,
                 [&](const SharedStateSample& s) { return s.health.*f.field; });
  }
  w.Header("shared_state_staleness_seconds", "gauge",
           "How long ago the shared state last proved that its pushes arrive");
  for (const SharedStateSample& s : states) {
    w.Open("shared_state_staleness_seconds");
    w.Label("name", s.name, true);
    w.Close(Seconds(s.health.staleness));
  }
}

}  // namespace

LabelFunction MaskKeySegments(std::vector<int> indexes, char separator) {
  std::sort(indexes.begin(), indexes.end());
  return [indexes = std::move(indexes), separator](std::string_view name) {
    std::string out;
    out.reserve(name.size());
    int segment = 0;
    std::size_t start = 0;
    while (true) {
      const std::size_t end = name.find(separator, start);
      const std::string_view part =
          name.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
      if (std::binary_search(indexes.begin(), indexes.end(), segment)) {
        out.push_back('*');
      } else {
        out.append(part);
      }
      if (end == std::string_view::npos) break;
      out.push_back(separator);
      start = end + 1;
      ++segment;
    }
    return out;
  };
}

Status ValidatePrometheusOptions(const PrometheusOptions& options) {
  if (!ValidPrefix(options.prefix)) {
    return Status::InvalidArgument("prefix must match [a-zA-Z_:][a-zA-Z0-9_:]*, got '" +
                                   options.prefix + "'");
  }
  static constexpr std::string_view kReserved[] = {"name", "kind",   "state", "from",
                                                   "to",   "reason", "le",    "quantile"};
  for (std::size_t i = 0; i < options.constant_labels.size(); ++i) {
    const std::string& key = options.constant_labels[i].first;
    // "constant_labels[i]: '<key>' <why>".
    const auto bad = [&](std::string_view why) {
      std::string m = "constant_labels[";
      m.append(std::to_string(i)).append("]: '").append(key).append("' ").append(why);
      return Status::InvalidArgument(std::move(m));
    };
    if (!ValidLabelName(key)) {
      return bad("is not a label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with __)");
    }
    for (std::string_view r : kReserved) {
      if (key == r) return bad("is a label fusebox writes");
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (options.constant_labels[j].first == key) return bad("is given twice");
    }
  }
  return Status();
}

void AppendPrometheus(const MetricsSnapshot& snapshot, const PrometheusOptions& options,
                      std::string& out) {
  assert(ValidPrefix(options.prefix) && "invalid PrometheusOptions::prefix");
  std::string constant;
  for (const auto& [key, value] : options.constant_labels) {
    if (!constant.empty()) constant.push_back(',');
    constant.append(key).append("=\"");
    AppendLabelValue(constant, value);
    constant.push_back('"');
  }
  Writer w(out, options.prefix, constant);
  Grouping grouping;
  GroupBreakers(snapshot.breakers, options.name_label, grouping);
  const std::vector<Group>& groups = grouping.groups;
  // Reserve what the text will take, a little more rather than less: one
  // regrowth of a 30 MB string (10,000 breakers) costs as much as rendering
  // it, and pages reserved but never written cost nothing.
  std::size_t estimate =
      4096 + 256 * (snapshot.bulkheads.size() + snapshot.rate_limiters.size() +
                    snapshot.thread_pool_bulkheads.size() + 4 * snapshot.retries.size());
  for (const Group& g : groups) {
    const std::size_t lines =
        39 + g.counters().transitions.size() + 3 * g.counters().timer.cumulative[0].size();
    estimate += lines * (options.prefix.size() + constant.size() + g.name_label.size() + 96);
  }
  out.reserve(out.size() + estimate);
  WriteBreakers(w, groups, options.fusebox_extensions, options.name_label != nullptr);
  if (snapshot.registry && options.fusebox_extensions) WriteRegistry(w, *snapshot.registry);
  WritePolicies(w, snapshot, options.fusebox_extensions);
  if (options.fusebox_extensions) WriteSharedStates(w, snapshot.shared_states);
}

std::string RenderPrometheus(const MetricsSnapshot& snapshot, const PrometheusOptions& options) {
  std::string out;
  AppendPrometheus(snapshot, options, out);
  return out;
}

}  // namespace fusebox
