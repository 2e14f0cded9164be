// fusebox/http/retry_after.h: how long an HTTP server asked us to wait.
//
// Retry-After (RFC 9110 section 10.2.3) is either delta-seconds ("120") or an
// HTTP-date ("Sun, 06 Nov 1994 08:49:37 GMT"); a date means "until then", and
// is measured against a reference: the response's own Date header (the
// server's clock, immune to local clock error) or the caller's "now".
//
//   std::optional<std::chrono::seconds> wait =
//       fusebox::http::ParseRetryAfter(value, fusebox::http::ParseHttpDate(date));
//
// Hostile input is an absent header, never an error and never undefined
// behaviour: any number of digits saturates at max_wait (no overflow), signs,
// fractions, lists, comments, control bytes and impossible dates ("Feb 30",
// "25:00:00") give nullopt. Inputs longer than kMaxRetryAfterBytes are
// rejected before they are read.
//
// Thread-safe: every function is pure. Allocates nothing.
#ifndef FUSEBOX_HTTP_RETRY_AFTER_H_
#define FUSEBOX_HTTP_RETRY_AFTER_H_

#include <chrono>
#include <cstddef>
#include <optional>
#include <string_view>

namespace fusebox::http {

// Longer Retry-After or Date values are malformed (the longest valid
// HTTP-date is 29 bytes; a 256-byte delta-seconds already saturates).
inline constexpr std::size_t kMaxRetryAfterBytes = 256;

// Retry-After alone: spaces and tabs trimmed; 1*DIGIT is seconds; otherwise an
// HTTP-date (IMF-fixdate, RFC 850, asctime) minus `reference`. nullopt when
// malformed ("-600", "90.5", "30, 60", "soon"), when <= 0 ("0" and a date in
// the past mean "no wait"), for a date with no reference, or when longer than
// kMaxRetryAfterBytes. Saturates at `max_wait` (which must be positive).
std::optional<std::chrono::seconds> ParseRetryAfter(
    std::string_view value, std::optional<std::chrono::sys_seconds> reference,
    std::chrono::seconds max_wait = std::chrono::hours(24));

// An HTTP-date in any of RFC 9110's three forms, exactly (no surrounding
// text; two-digit RFC 850 years are 19xx from 70, else 20xx). nullopt when it
// is anything else or not a real date.
std::optional<std::chrono::sys_seconds> ParseHttpDate(std::string_view text);

// `s` without leading and trailing spaces and tabs (HTTP's OWS).
std::string_view TrimOws(std::string_view s) noexcept;

}  // namespace fusebox::http

#endif  // FUSEBOX_HTTP_RETRY_AFTER_H_
