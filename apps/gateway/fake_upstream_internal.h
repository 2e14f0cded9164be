// Private helpers shared by fake_upstream.cc and fake_upstream_script.cc.
#ifndef FUSEBOX_APPS_GATEWAY_FAKE_UPSTREAM_INTERNAL_H_
#define FUSEBOX_APPS_GATEWAY_FAKE_UPSTREAM_INTERNAL_H_

#include <string_view>

#include "apps/gateway/fake_upstream.h"
#include "fusebox/status.h"

namespace fusebox::gateway {

// RFC 9110 token characters only (a method or a header name).
bool IsHttpToken(std::string_view text);

// kInvalidArgument naming what is wrong with `route`.
Status ValidateFakeRoute(const FakeRoute& route);

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_FAKE_UPSTREAM_INTERNAL_H_
