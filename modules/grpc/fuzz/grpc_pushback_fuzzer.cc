// libFuzzer target: fusebox::grpc's grpc-retry-pushback-ms parser on any
// text, then Classify() for RESOURCE_EXHAUSTED and others with it as the
// trailer. Properties checked: no crash, no sanitizer report, every wait in
// [1 ms, max_wait], a value is accepted only when it is all digits, and only
// rate limits carry a wait.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "fusebox/grpc/classify.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using std::chrono::milliseconds;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto in_range = [](std::optional<milliseconds> ms, milliseconds max) {
    return !ms || (*ms >= milliseconds(1) && *ms <= max);
  };
  const std::optional<milliseconds> parsed = fusebox::grpc::ParsePushback(text);
  if (!in_range(parsed, std::chrono::hours(24))) std::abort();
  const bool all_digits =
      !text.empty() && text.size() <= fusebox::grpc::kMaxPushbackBytes &&
      std::all_of(text.begin(), text.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  if (parsed.has_value() != all_digits) std::abort();
  if (!in_range(fusebox::grpc::ParsePushback(text, milliseconds(7)), milliseconds(7))) {
    std::abort();
  }
  fusebox::grpc::Rules rules;
  for (const int code : {8, 14, 0, 5}) {
    const fusebox::grpc::Classification c = fusebox::grpc::Classify(code, text, rules);
    if (!in_range(c.retry_after, rules.max_wait)) std::abort();
    if ((c.kind == fusebox::http::Kind::kRateLimit) != c.retry_after.has_value()) std::abort();
  }
  return 0;
}
