// fusebox/meta/response.h: a view of one Meta Graph API HTTP response, and
// the fields of its error body that fusebox::meta reads.
//
// A Response is what the HTTP adapter got back: the status, the headers (names
// compared case-insensitively, in the order received) and the body text. It
// owns copies; build it once per response and hand it to Classify()
// (classify.h), RecoveryTime() (recovery.h) or ProviderError::FromResponse()
// (provider_call.h).
//
//   fusebox::meta::Response r{.status = 400,
//                             .headers = {{"Retry-After", "30"}},
//                             .body = R"({"error":{"code":4,"message":"..."}})"};
//   fusebox::meta::ErrorBody e = fusebox::meta::ParseErrorBody(r.body);  // e.code == 4
//
// The error body is read by a strict, bounded JSON reader (no JSON library):
// bodies over 1 MiB, nested deeper than 64, or not valid JSON give an empty
// ErrorBody, never an error.
//
// Thread-compatible: const methods may run concurrently, others need external
// synchronization. The free functions are pure and thread-safe.
#ifndef FUSEBOX_META_RESPONSE_H_
#define FUSEBOX_META_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fusebox::meta {

struct Response {
  // The HTTP status code, e.g. 400.
  int status = 0;
  // Name/value pairs as received. Names match case-insensitively; values are
  // kept verbatim (Header() does not trim them).
  std::vector<std::pair<std::string, std::string>> headers{};
  // The body text, usually JSON; may be empty, HTML or anything else.
  std::string body{};

  // The value of the first header named `name` (ASCII case-insensitive), or
  // nullopt. The view points into this Response.
  std::optional<std::string_view> Header(std::string_view name) const;
};

// The members of Meta's `{"error": {...}}` envelope that the rules read. A
// member that is absent or of the wrong JSON type (a code given as a string,
// a fractional code) is nullopt; a duplicated member takes its last value,
// as JavaScript's JSON.parse does.
struct ErrorBody {
  // `error.code`: an integer, primary key of classification.
  std::optional<std::int64_t> code{};
  // `error.error_subcode`: an integer refining `code`.
  std::optional<std::int64_t> subcode{};
  // `error.message`: human readable, English. Never logged (redact.h).
  std::optional<std::string> message{};
  // `error.type`, e.g. "OAuthException". Never decides a class on its own.
  std::optional<std::string> type{};
};

// Reads `body` as Meta's error envelope. Anything else (not JSON, not an
// object, no `error` object, over 1 MiB, nested deeper than 64) gives an
// ErrorBody with every field nullopt.
ErrorBody ParseErrorBody(std::string_view body);

// ASCII case-insensitive equality, for header names.
bool EqualsIgnoreCase(std::string_view a, std::string_view b) noexcept;

}  // namespace fusebox::meta

#endif  // FUSEBOX_META_RESPONSE_H_
