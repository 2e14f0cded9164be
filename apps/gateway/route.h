// apps/gateway/route.h: path patterns with parameters ("/v1/{provider}/x"),
// templates that use them, and percent-decoding.
//
// A pattern is split at '/'; a segment is either literal text or exactly one
// "{name}" (a name of letters, digits and '_'), which matches one path
// segment. Matching compares the raw (still percent-encoded) request path
// segment by segment, then decodes each parameter, so "%2F" in a parameter
// never splits a segment. A decoded parameter becomes part of a circuit key
// (a breaker's name, a Redis key, a metrics label, log and JSON text) and of
// the upstream path, so it must be a valid one (CheckParameter) or the
// request is refused with the parameter named.
//
//   std::vector<std::string> names;
//   std::string why;
//   PathPattern::Parse("/v1/{provider}/accounts/{account}", names, why);
//   PathPattern p = *PathPattern::Create("/v1/{provider}/accounts/{account}");
//   std::optional<Result<Params>> m = p.Match("/v1/instagram/accounts/178");
//   // *m holds {provider, instagram}, {account, 178}
//   Expand("/{account}/insights", **m, true);  // "/178/insights"
//   p.Match("/v1/instagram/accounts/%ff");  // kInvalidArgument: "path parameter {account}: ..."
//
// Thread-compatible.
#ifndef FUSEBOX_APPS_GATEWAY_ROUTE_H_
#define FUSEBOX_APPS_GATEWAY_ROUTE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/result.h"

namespace fusebox::gateway {

// Parameter name -> decoded value, in pattern order.
using Params = std::vector<std::pair<std::string, std::string>>;

// The longest decoded path parameter accepted, in bytes.
inline constexpr std::size_t kMaxParameterBytes = 256;

// Why `value`, a decoded path parameter, may not be used, or "" when it may.
// A parameter is 1 to kMaxParameterBytes bytes of well-formed UTF-8 without
// control characters (U+0000-U+001F, U+007F-U+009F), '/' or a backslash, and is
// neither "." nor ".." (a dot segment upstream). The reason never quotes
// the value's bytes.
std::string CheckParameter(std::string_view value);

class PathPattern {
 public:
  // Checks `pattern`; fills `names` with its parameters. False with `why`.
  static bool Parse(std::string_view pattern, std::vector<std::string>& names, std::string& why);
  static Result<PathPattern> Create(std::string_view pattern);

  // nullopt when `path` (no query) does not have the pattern's shape (as
  // many segments, the same literal ones). Else its parameters, decoded, or
  // kInvalidArgument "path parameter {name}: <why>" for the first one that
  // is malformed (a bad percent-escape) or not valid (CheckParameter).
  std::optional<Result<Params>> Match(std::string_view path) const;

 private:
  struct Segment {
    bool param = false;
    std::string text;  // literal text, or the parameter's name
  };
  std::vector<Segment> segments_;
};

// The "{name}"s of `tmpl`, in order. False with `why` on an unclosed brace or
// a bad name.
bool TemplateParameters(std::string_view tmpl, std::vector<std::string>& names, std::string& why);

// `tmpl` with each "{name}" replaced by its value in `params`; when
// `encode` is true values are percent-encoded for a URL path segment.
std::string Expand(std::string_view tmpl, const Params& params, bool encode);

// Percent-decodes `text`; nullopt on a malformed escape.
std::optional<std::string> PercentDecode(std::string_view text);

// Percent-encodes everything but RFC 3986 unreserved characters.
std::string PercentEncode(std::string_view text);

// Splits a query string into (decoded name, decoded value) pairs; '+' is a
// space. Malformed escapes are kept verbatim.
std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view query);

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_ROUTE_H_
