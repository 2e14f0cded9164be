// apps/fusebox/classify.h: `fusebox classify --provider meta`.
//
// Reads one Meta response per line as JSON ({"status": 400, "headers": {...},
// "body": "..."}; other fields ignored; blank lines skipped) and writes one line
// per response:
//   {"class": "rate-limit", "retryAfterSeconds": 120, "reason": "..."}
// with fusebox::meta::Classify() under the default rules (docs/meta.md).
#ifndef FUSEBOX_APPS_FUSEBOX_CLASSIFY_H_
#define FUSEBOX_APPS_FUSEBOX_CLASSIFY_H_

#include <istream>
#include <ostream>

#include "fusebox/status.h"

namespace fusebox::app {

// Classifies every line of `in` into `out`. Stops at the first bad line with
// kInvalidArgument "line N: <what is wrong>"; the lines before it are written.
Status ClassifyMetaResponses(std::istream& in, std::ostream& out);

}  // namespace fusebox::app

#endif  // FUSEBOX_APPS_FUSEBOX_CLASSIFY_H_
