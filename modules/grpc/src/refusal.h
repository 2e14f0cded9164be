// Private to fusebox::grpc: the local refusal of a call whose breaker (or
// registry) said no, shared by Call() and the interceptor so that both say
// it alike.
#ifndef FUSEBOX_MODULES_GRPC_SRC_REFUSAL_H_
#define FUSEBOX_MODULES_GRPC_SRC_REFUSAL_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "fusebox/clock.h"
#include "fusebox/status.h"

namespace fusebox::grpc::internal {

struct Refusal {
  // The gRPC code: 14 UNAVAILABLE for an open circuit, else the status's
  // (GrpcCodeFor()).
  int code = 0;
  // "fusebox: circuit '<name>' is open (<reason>); retry in N ms
  // (grpc-retry-pushback-ms: N)", or "fusebox: <status>".
  std::string message;
  // An open circuit with a known retry_at: the time until then, rounded up
  // to whole milliseconds, at least 1.
  std::optional<std::chrono::milliseconds> pushback;
};

// `status` is the breaker's (kCircuitOpen) or the registry's; `breaker`
// names it; `now` is on the breaker's clock.
Refusal MakeRefusal(const Status& status, std::string_view breaker, TimePoint now);

}  // namespace fusebox::grpc::internal

#endif  // FUSEBOX_MODULES_GRPC_SRC_REFUSAL_H_
