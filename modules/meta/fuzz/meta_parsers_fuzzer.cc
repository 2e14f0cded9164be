// libFuzzer target: fusebox::meta's parsers on any text, as the error body,
// Retry-After, Date and X-Business-Use-Case-Usage at once, then Classify().
// Properties checked: no crash, no sanitizer report, and every recovery time
// in [1 s, 24 h].
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fusebox/meta/classify.h"
#include "fusebox/meta/recovery.h"
#include "src/json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using std::chrono::seconds;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)fusebox::meta::internal::ParseJson(text);
  (void)fusebox::meta::ParseErrorBody(text);
  (void)fusebox::meta::ParseHttpDate(text);
  const auto in_range = [](std::optional<seconds> s) {
    return !s || (*s >= seconds(1) && *s <= std::chrono::hours(24));
  };
  if (!in_range(fusebox::meta::ParseBusinessUseCaseUsage(text))) std::abort();
  const auto reference = fusebox::meta::ParseHttpDate("Tue, 04 Nov 2025 10:00:00 GMT");
  if (!in_range(fusebox::meta::ParseRetryAfter(text, reference))) std::abort();
  // The same text in every place Classify() reads.
  const std::string s(text);
  const fusebox::meta::Response r{
      .status = 400,
      .headers = {{"Date", s}, {"Retry-After", s}, {"X-Business-Use-Case-Usage", s}},
      .body = s};
  const fusebox::meta::Classification c = fusebox::meta::Classify(r);
  if (!in_range(c.retry_after)) std::abort();
  return 0;
}
