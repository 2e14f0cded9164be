// libFuzzer target: fusebox::http's parsers on any text, as Retry-After and
// Date at once, then Classify() for the statuses that read them. Properties
// checked: no crash, no sanitizer report, every wait in [1 s, max_wait], and
// a delta-seconds value is never read as a date.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "fusebox/http/classify.h"
#include "fusebox/http/retry_after.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using std::chrono::seconds;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto in_range = [](std::optional<seconds> s, seconds max) {
    return !s || (*s >= seconds(1) && *s <= max);
  };
  (void)fusebox::http::ParseHttpDate(text);
  const auto reference = fusebox::http::ParseHttpDate("Tue, 04 Nov 2025 10:00:00 GMT");
  if (!in_range(fusebox::http::ParseRetryAfter(text, reference), std::chrono::hours(24))) {
    std::abort();
  }
  if (!in_range(fusebox::http::ParseRetryAfter(text, reference, seconds(7)), seconds(7))) {
    std::abort();
  }
  fusebox::http::Rules rules;
  rules.now = reference;
  for (const int status : {429, 503, 500, 200}) {
    const fusebox::http::Classification c =
        fusebox::http::Classify({.status = status, .retry_after = text, .date = text}, rules);
    if (!in_range(c.retry_after, rules.max_wait)) std::abort();
    if ((c.kind == fusebox::http::Kind::kRateLimit) != c.retry_after.has_value()) std::abort();
  }
  return 0;
}
