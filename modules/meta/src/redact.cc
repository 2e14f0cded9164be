#include "fusebox/meta/redact.h"

namespace fusebox::meta {
namespace {

// Numbers only, by construction: nothing textual from the response is read.
void AppendCodes(std::string& out, int status, std::optional<std::int64_t> code,
                 std::optional<std::int64_t> subcode) {
  out += "status=" + std::to_string(status);
  if (code) out += " code=" + std::to_string(*code);
  if (subcode) out += " subcode=" + std::to_string(*subcode);
}

}  // namespace

std::string LogSummary(const Response& response) {
  const ErrorBody e = ParseErrorBody(response.body);
  std::string out;
  AppendCodes(out, response.status, e.code, e.subcode);
  return out;
}

std::string LogSummary(const ProviderError& error) {
  std::string out(ConnCodeName(error.code));
  out += error.circuit_open ? " circuit_open " : " ";
  AppendCodes(out, error.http_status, error.meta_code, error.meta_subcode);
  if (error.retry_after) out += " retry_after=" + std::to_string(error.retry_after->count()) + "s";
  return out;
}

}  // namespace fusebox::meta
