#include "apps/fusebox/classify.h"

#include <nlohmann/json.hpp>
#include <string>

#include "fusebox/meta/classify.h"

namespace fusebox::app {
namespace {

Status LineError(long line, const std::string& what) {
  return Status::InvalidArgument("line " + std::to_string(line) + ": " + what);
}

}  // namespace

Status ClassifyMetaResponses(std::istream& in, std::ostream& out) {
  std::string text;
  long line = 0;
  while (std::getline(in, text)) {
    ++line;
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (text.find_first_not_of(" \t") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return LineError(line, "not valid JSON");
    if (!j.is_object()) return LineError(line, "expected a JSON object");
    meta::Response r;
    const auto status = j.find("status");
    if (status == j.end()) return LineError(line, "missing \"status\"");
    if (!status->is_number_integer() || status->get<long long>() < 100 ||
        status->get<long long>() > 599) {
      return LineError(
          line, "\"status\" must be an integer HTTP status in [100, 599], got " + status->dump());
    }
    r.status = status->get<int>();
    if (const auto headers = j.find("headers"); headers != j.end() && !headers->is_null()) {
      if (!headers->is_object()) return LineError(line, "\"headers\" must be an object");
      for (const auto& [name, value] : headers->items()) {
        if (!value.is_string()) {
          return LineError(line, "header \"" + name + "\" must be a string, got " + value.dump());
        }
        r.headers.emplace_back(name, value.get<std::string>());
      }
    }
    if (const auto body = j.find("body"); body != j.end() && !body->is_null()) {
      if (!body->is_string()) return LineError(line, "\"body\" must be a string");
      r.body = body->get<std::string>();
    }
    const meta::Classification c = meta::Classify(r);
    out << "{\"class\": " << nlohmann::json(std::string(meta::KindName(c.kind))).dump()
        << ", \"retryAfterSeconds\": "
        << (c.retry_after ? std::to_string(c.retry_after->count()) : std::string("null"))
        << ", \"reason\": " << nlohmann::json(c.reason).dump() << "}\n";
  }
  return Status();
}

}  // namespace fusebox::app
