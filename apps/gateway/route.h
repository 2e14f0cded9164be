// apps/gateway/route.h: path patterns with parameters ("/v1/{provider}/x"),
// templates that use them, and percent-decoding.
//
// A pattern is split at '/'; a segment is either literal text or exactly one
// "{name}" (a name of letters, digits and '_'), which matches one non-empty
// path segment. Matching compares the raw (still percent-encoded) request
// path segment by segment, then decodes each parameter, so "%2F" in a
// parameter never splits a segment.
//
//   std::vector<std::string> names;
//   std::string why;
//   PathPattern::Parse("/v1/{provider}/accounts/{account}", names, why);
//   PathPattern p = *PathPattern::Create("/v1/{provider}/accounts/{account}");
//   std::optional<Params> m = p.Match("/v1/instagram/accounts/178");  // {provider, instagram}...
//   Expand("/{account}/insights", *m);  // "/178/insights"
//
// Thread-compatible.
#ifndef FUSEBOX_APPS_GATEWAY_ROUTE_H_
#define FUSEBOX_APPS_GATEWAY_ROUTE_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/result.h"

namespace fusebox::gateway {

// Parameter name -> decoded value, in pattern order.
using Params = std::vector<std::pair<std::string, std::string>>;

class PathPattern {
 public:
  // Checks `pattern`; fills `names` with its parameters. False with `why`.
  static bool Parse(std::string_view pattern, std::vector<std::string>& names, std::string& why);
  static Result<PathPattern> Create(std::string_view pattern);

  // The parameters when `path` (no query) matches, else nullopt. A parameter
  // that decodes to something empty or holding a '/' or control character
  // does not match.
  std::optional<Params> Match(std::string_view path) const;

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
