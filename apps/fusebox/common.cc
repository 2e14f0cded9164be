#include "apps/fusebox/common.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

namespace fusebox::app {

std::string TransitionLabel(const Transition& t) {
  return std::string(StateName(t.from)) + ">" + std::string(StateName(t.to));
}

void TransitionLog::OnTransition(const TransitionEvent& e) {
  Transition t;
  t.from = e.from;
  t.to = e.to;
  t.reason = e.reason;
  t.counts = e.counts;
  t.at = e.at - start_;
  if (e.retry_at) t.lasts = *e.retry_at - e.at;
  pending_.push_back(std::move(t));
}

std::vector<Transition> TransitionLog::Take() { return std::exchange(pending_, {}); }

std::string SecondsText(Duration d) {
  const bool negative = d < Duration::zero();
  // Round to the millisecond, then print the decimals that are not zero.
  long long ms =
      std::llabs(static_cast<long long>(std::llround(static_cast<double>(d.count()) / 1e6)));
  std::string text = std::to_string(ms / 1000);
  if (const long long frac = ms % 1000; frac != 0) {
    char buf[8];
    std::snprintf(buf, sizeof buf, ".%03lld", frac);
    std::string decimals(buf);
    while (decimals.back() == '0') decimals.pop_back();
    text += decimals;
  }
  return negative ? "-" + text : text;
}

std::string PercentText(float rate) {
  const double tenths = std::round(static_cast<double>(rate) * 10.0);
  char buf[32];
  if (std::fmod(tenths, 10.0) == 0) {
    std::snprintf(buf, sizeof buf, "%.0f", tenths / 10.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f", tenths / 10.0);
  }
  return buf;
}

Json JsonFloat(float f) {
  // Whole numbers as integers, as Resilience4j's -1 and 50 read best.
  if (std::isfinite(f) && std::fabs(f) < 1e9f && f == std::trunc(f)) {
    return static_cast<long long>(f);
  }
  // to_chars gives the shortest float spelling; the double read back from it
  // is printed by nlohmann with the same digits.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  if (ec != std::errc()) return static_cast<double>(f);
  return std::strtod(std::string(buf, end).c_str(), nullptr);
}

Json JsonMillis(Duration d) {
  if (d.count() % 1000000 == 0) return static_cast<long long>(d.count() / 1000000);
  return static_cast<double>(d.count()) / 1e6;
}

}  // namespace fusebox::app
