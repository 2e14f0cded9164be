// apps/gateway/admin.h: the admin API's actions (docs/gateway.md), without
// the network. Handler::HandleAdmin answers
//   POST /admin/circuits/<name>/<action>
// in four steps, each a function here that either goes on or returns the
// answer that ends the request:
//
//   if (auto refused = AdminUnauthorized(request, token)) return *refused;
//   ... ParseAdminAction(request, path)        -> AdminAction or a 4xx
//   ... ResolveAdminTargets(registry, a.name)  -> the breakers or a 404
//   ApplyAdminAction(a, breakers);
//
// Thread-safe (the functions hold no state).
#ifndef FUSEBOX_APPS_GATEWAY_ADMIN_H_
#define FUSEBOX_APPS_GATEWAY_ADMIN_H_

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "apps/gateway/handler.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/registry.h"

namespace fusebox::gateway {

enum class AdminVerb { kForceOpen, kForceClosed, kDisable, kReset };

// POST /admin/circuits/<name>/<verb> and its body, checked.
struct AdminAction {
  std::string name;  // percent-decoded, not empty
  AdminVerb verb = AdminVerb::kReset;
  // reason and actor (required but for reset) and expires_in of the body.
  OverrideOptions options;
};

// Step 1: nullopt when `request` carries "Authorization: Bearer <token>"
// (compared in constant time), else the 401 with WWW-Authenticate.
std::optional<HttpResponse> AdminUnauthorized(const HttpRequest& request, std::string_view token);

// Step 2: the action that `path` (below /admin/circuits/) and the body name,
// or the answer saying what is wrong, checked in this order: the path (404),
// the method (405), the action (404), the name (400), the body (400: a JSON
// object whose "reason" and "actor" are strings, "expires_in" a number of
// milliseconds or a duration such as "10m").
std::variant<AdminAction, HttpResponse> ParseAdminAction(const HttpRequest& request,
                                                         std::string_view path);

// Step 3: the breakers `name` means: the breaker of that name, else both
// breakers of a circuit key "provider:<p>:<workload>:<subject>" (or the one
// a ":transient" or ":quota" suffix names), made when missing so that an
// account can be forced before its first call; else a 404.
std::variant<std::vector<std::shared_ptr<CircuitBreaker>>, HttpResponse> ResolveAdminTargets(
    Registry& registry, const std::string& name);

// Step 4: the action on each of `targets` (each audited by the registry's
// observers).
void ApplyAdminAction(const AdminAction& action,
                      const std::vector<std::shared_ptr<CircuitBreaker>>& targets);

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_ADMIN_H_
