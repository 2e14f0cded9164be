// fusebox/grpc/interceptor.h: a gRPC C++ client interceptor that runs every
// unary call of a channel under the breaker a Registry holds for its method.
//
//   std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> f;
//   f.push_back(fusebox::grpc::MakeInterceptorFactory(registry));
//   auto channel = grpc::experimental::CreateCustomChannelWithInterceptors(
//       target, grpc::InsecureChannelCredentials(), grpc::ChannelArguments(), std::move(f));
//   auto stub = inventory::Inventory::NewStub(channel);
//   // stub->Reserve(&context, request, &reply) now runs under the breaker
//   // "inventory.Inventory/Reserve": UNAVAILABLE when its circuit is OPEN,
//   // without any network traffic, with "retry in N ms" in the message and
//   // the grpc-retry-pushback-ms trailer in context.GetServerTrailingMetadata().
//
// The same classification and breaker outcomes as Call() (fusebox/grpc/call.h,
// docs/grpc.md): transient codes are failures, RESOURCE_EXHAUSTED opens the
// breaker for its grpc-retry-pushback-ms trailer, the caller's own faults
// and authorization are ignored.
//
// How an OPEN circuit ends a call locally: the interceptor hijacks it at
// PRE_SEND_INITIAL_METADATA (gRPC's experimental interceptor API, 1.51), so
// that nothing reaches the transport, and answers the receive operations
// itself: no initial metadata, the message failed (FailHijackedRecvMessage),
// the status UNAVAILABLE with the hint, the hint as a trailer.
//
// gRPC runs no interceptor past a hijacking one: interceptors listed after
// this factory (and a global one) never see a refused call; those before it
// see it end UNAVAILABLE.
//
// Unary calls only: a streaming call (client, server or bidi) passes through
// unguarded, as if the interceptor were not there. A stream has no single
// outcome to record; run it under Call()-like code of your own.
//
// Thread-safe: a factory may serve any number of channels and calls at once;
// the registry must be thread-safe (it is) and is kept alive by the factory.
#ifndef FUSEBOX_GRPC_INTERCEPTOR_H_
#define FUSEBOX_GRPC_INTERCEPTOR_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "fusebox/grpc/call.h"
#include "fusebox/registry.h"

namespace grpc::experimental {
class ClientInterceptorFactoryInterface;
}  // namespace grpc::experimental

namespace fusebox::grpc {

struct InterceptorOptions {
  // The registry key of a call's breaker, from its method as gRPC names it
  // without the leading slash ("inventory.Inventory/Reserve"). Called once a
  // call, on the thread that starts it; must be thread-safe. Empty (the
  // default): the method name itself, one breaker per method.
  std::function<std::string(std::string_view method)> key{};
  // Rules, rate_limit_opens_breaker and the registry template
  // (config_name), as for Call().
  Options call{};
};

// A factory for grpc::experimental::CreateCustomChannelWithInterceptors(),
// or for the interceptor list of grpc::ChannelArguments. `registry` must not
// be null.
std::unique_ptr<::grpc::experimental::ClientInterceptorFactoryInterface> MakeInterceptorFactory(
    std::shared_ptr<Registry> registry, InterceptorOptions options = {});

}  // namespace fusebox::grpc

#endif  // FUSEBOX_GRPC_INTERCEPTOR_H_
