#include "apps/gateway/admin.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "apps/gateway/route.h"
#include "fusebox/config_names.h"
#include "fusebox/meta/provider_call.h"

namespace fusebox::gateway {
namespace {

using Json = nlohmann::json;

std::optional<AdminVerb> VerbByName(std::string_view name) {
  if (name == "force-open") return AdminVerb::kForceOpen;
  if (name == "force-closed") return AdminVerb::kForceClosed;
  if (name == "disable") return AdminVerb::kDisable;
  if (name == "reset") return AdminVerb::kReset;
  return std::nullopt;
}

// The body's fields into `options`, or the 400 saying which is wrong.
std::optional<HttpResponse> ParseAdminBody(std::string_view text, AdminVerb verb,
                                           OverrideOptions& options) {
  Json body = text.empty() ? Json::object() : Json::parse(text, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return ErrorResponse(400, "BAD_REQUEST", "the body must be a JSON object");
  }
  auto field = [&](const char* name) -> std::optional<std::string> {
    auto it = body.find(name);
    if (it == body.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  options.reason = field("reason").value_or("");
  options.actor = field("actor").value_or("");
  if (verb != AdminVerb::kReset && (options.reason.empty() || options.actor.empty())) {
    return ErrorResponse(400, "BAD_REQUEST", "\"reason\" and \"actor\" are required strings");
  }
  if (auto it = body.find("expires_in"); it != body.end()) {
    if (it->is_number_unsigned()) {
      options.expires_after = std::chrono::milliseconds(it->get<std::uint64_t>());
    } else if (it->is_string()) {
      Result<Duration> d = ParseDuration(it->get<std::string>());
      if (!d) {
        return ErrorResponse(400, "BAD_REQUEST", "expires_in: " + std::string(d.error().message()));
      }
      options.expires_after = *d;
    } else {
      return ErrorResponse(400, "BAD_REQUEST", "expires_in: expected a duration such as \"10m\"");
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<HttpResponse> AdminUnauthorized(const HttpRequest& request, std::string_view token) {
  const std::optional<std::string_view> auth = request.Header("Authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth && auth->substr(0, kBearer.size()) == kBearer &&
      TokenEquals(auth->substr(kBearer.size()), token)) {
    return std::nullopt;
  }
  HttpResponse r = ErrorResponse(401, "UNAUTHORIZED", "a valid bearer token is required");
  r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

std::variant<AdminAction, HttpResponse> ParseAdminAction(const HttpRequest& request,
                                                         std::string_view path) {
  constexpr std::string_view kPrefix = "/admin/circuits/";
  const std::size_t slash = path.rfind('/');
  if (path.substr(0, kPrefix.size()) != kPrefix || slash < kPrefix.size()) {
    return ErrorResponse(404, "NOT_FOUND", "unknown admin path");
  }
  if (request.method != "POST") {
    return ErrorResponse(405, "METHOD_NOT_ALLOWED", "admin actions are POST");
  }
  std::optional<std::string> name =
      PercentDecode(path.substr(kPrefix.size(), slash - kPrefix.size()));
  const std::optional<AdminVerb> verb = VerbByName(path.substr(slash + 1));
  if (!verb) {
    return ErrorResponse(404, "NOT_FOUND",
                         "unknown action; expected force-open, force-closed, disable or reset");
  }
  if (!name || name->empty()) return ErrorResponse(400, "BAD_REQUEST", "bad circuit name");
  AdminAction action{.name = *std::move(name), .verb = *verb, .options = {}};
  if (std::optional<HttpResponse> bad = ParseAdminBody(request.body, *verb, action.options)) {
    return *std::move(bad);
  }
  return action;
}

std::variant<std::vector<std::shared_ptr<CircuitBreaker>>, HttpResponse> ResolveAdminTargets(
    Registry& registry, const std::string& name) {
  std::vector<std::shared_ptr<CircuitBreaker>> targets;
  if (std::shared_ptr<CircuitBreaker> b = registry.Find(name)) {
    targets.push_back(std::move(b));
    return targets;
  }
  if (name.substr(0, 9) != "provider:" || std::count(name.begin(), name.end(), ':') < 3) {
    return ErrorResponse(404, "NOT_FOUND", "no such breaker, and not a circuit key (provider:...)");
  }
  std::string_view key = name;
  std::string_view only;
  for (std::string_view suffix : {":transient", ":quota"}) {
    if (key.size() > suffix.size() && key.substr(key.size() - suffix.size()) == suffix) {
      only = suffix.substr(1);
      key.remove_suffix(suffix.size());
    }
  }
  if (std::count(key.begin(), key.end(), ':') < 3) {
    return ErrorResponse(404, "NOT_FOUND", "not a circuit key provider:<p>:<workload>:<subject>");
  }
  meta::ProviderCircuits c = meta::GetProviderCircuits(registry, key);
  if (only != "quota") targets.push_back(std::move(c.transient));
  if (only != "transient") targets.push_back(std::move(c.quota));
  return targets;
}

void ApplyAdminAction(const AdminAction& action,
                      const std::vector<std::shared_ptr<CircuitBreaker>>& targets) {
  for (const std::shared_ptr<CircuitBreaker>& b : targets) {
    switch (action.verb) {
      case AdminVerb::kForceOpen:
        b->ForceOpen(action.options);
        break;
      case AdminVerb::kForceClosed:
        b->ForceClosed(action.options);
        break;
      case AdminVerb::kDisable:
        b->Disable(action.options);
        break;
      case AdminVerb::kReset:
        b->Reset(action.options.reason, action.options.actor);
        break;
    }
  }
}

}  // namespace fusebox::gateway
