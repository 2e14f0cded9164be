// fusebox/meta/redact.h: what may be logged about a Meta response or error.
//
// Logs and error messages carry the HTTP status, Meta's numeric error.code and
// error.error_subcode, and (for errors) the CONN_* code and retry-after: never
// the access token, client secret, OAuth code, error message, headers or
// body. The summary is built from numbers only, so nothing the provider or the
// request put in text can leak through it.
//
//   log.warn("meta call failed: {}", fusebox::meta::LogSummary(response));
//   // "status=400 code=190 subcode=463"
//   log.warn("{}", fusebox::meta::LogSummary(error));
//   // "CONN_008 status=429 code=4 retry_after=120s"
//
// Thread-safe: every function is pure.
#ifndef FUSEBOX_META_REDACT_H_
#define FUSEBOX_META_REDACT_H_

#include <string>

#include "fusebox/meta/provider_call.h"
#include "fusebox/meta/response.h"

namespace fusebox::meta {

// "status=<n>[ code=<n>][ subcode=<n>]".
std::string LogSummary(const Response& response);

// "<CONN_xxx>[ circuit_open] status=<n>[ code=<n>][ subcode=<n>][ retry_after=<n>s]".
std::string LogSummary(const ProviderError& error);

}  // namespace fusebox::meta

#endif  // FUSEBOX_META_REDACT_H_
