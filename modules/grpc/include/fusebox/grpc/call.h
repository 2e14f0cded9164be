// fusebox/grpc/call.h: one gRPC unary call run under a circuit breaker, its
// grpc::Status classified by fusebox/grpc/classify.h.
//
//   grpc::ClientContext context;
//   context.set_deadline(...);
//   fusebox::grpc::CallInfo info;
//   grpc::Status s = fusebox::grpc::Call(*breaker, context,
//       [&](grpc::ClientContext& c) { return stub->Charge(&c, request, &reply); }, &info);
//   // s is the server's status, or UNAVAILABLE "fusebox: circuit ... is open;
//   // retry in 1500 ms" when the breaker refused: the server was not asked,
//   // info.rejected is true and info.retry_pushback is 1500 ms.
//
// What the breaker records (docs/grpc.md has the table): UNAVAILABLE,
// DEADLINE_EXCEEDED and the other transient codes are failures;
// RESOURCE_EXHAUSTED opens the breaker at once for its grpc-retry-pushback-ms
// trailer (Options::rate_limit_opens_breaker; Rules::default_wait without
// one); UNAUTHENTICATED, PERMISSION_DENIED, INVALID_ARGUMENT, NOT_FOUND and
// the other caller's faults are ignored (counted as neither).
//
// Why a wrapper and not a grpc::experimental::ClientInterceptor: in gRPC 1.51
// an interceptor can end a call without sending it only by hijacking it
// (Hijack() at PRE_SEND_INITIAL_METADATA, then forging every receive
// operation: initial metadata, the message, the status), an experimental API
// that is easy to get wrong, and the interceptor factory sees a method name
// but not the caller's key or the CallInfo. The wrapper works with any stub,
// generated or generic, and costs one function-pointer call.
//
// Compile cost: this header declares gRPC's ClientContext and Status without
// including gRPC; the caller, who holds a stub, includes gRPC anyway.
//
// The unary call runs on the calling thread, once, with `context` (a
// ClientContext serves one call). An exception thrown by it propagates
// unchanged and records nothing (the permit is given back). Thread-safe as
// the breaker and the registry are; `context` and `info` are the caller's.
#ifndef FUSEBOX_GRPC_CALL_H_
#define FUSEBOX_GRPC_CALL_H_

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/grpc/classify.h"
#include "fusebox/registry.h"
#include "fusebox/status.h"

namespace grpc {
class ClientContext;
class Status;
}  // namespace grpc

namespace fusebox::grpc {

// A non-owning reference to the caller's unary call: anything callable as
// ::grpc::Status(::grpc::ClientContext&). The callable must outlive the call
// to Call() (a lambda written in the argument list does).
class UnaryCall {
 public:
  // enable_if rather than requires: clang-tidy 14 reads only the former as
  // keeping the copy and move constructors visible.
  template <typename F,
            typename = std::enable_if_t<!std::is_same_v<std::remove_cvref_t<F>, UnaryCall>>>
  UnaryCall(F&& fn) noexcept  // a reference, as function_ref: implicit on purpose
      : object_(const_cast<void*>(static_cast<const void*>(std::addressof(fn)))),
        invoke_(&Invoke<std::remove_reference_t<F>>) {}

  ::grpc::Status operator()(::grpc::ClientContext& context) const;

 private:
  // The defaulted S keeps the return type dependent: gRPC's Status is
  // complete where a call is made, not here.
  template <typename F, typename S = ::grpc::Status>
  static S Invoke(void* object, ::grpc::ClientContext& context) {
    return (*static_cast<F*>(object))(context);
  }

  void* object_;
  ::grpc::Status (*invoke_)(void*, ::grpc::ClientContext&);
};

struct Options {
  // The classifier's rules (fusebox/grpc/classify.h).
  Rules rules{};
  // RESOURCE_EXHAUSTED opens the breaker at once for its wait
  // (Outcome::OpenFor). When false it is a plain failure. Default: true.
  bool rate_limit_opens_breaker = true;
  // Call(Registry&, ...) only: the template of a breaker the registry
  // creates for a new key. Default: "default".
  std::string_view config_name = "default";
};

// What happened, for the caller who wants more than the grpc::Status.
struct CallInfo {
  // OK; the classified failure (ToStatus(), with retry_at for a rate limit);
  // or, when refused locally, the breaker's (or the registry's) status:
  // kCircuitOpen with its reason and retry_at.
  Status status{};
  // How the server's answer was classified (unset when refused locally).
  std::optional<Classification> classification{};
  // True when the call was refused locally and the server never asked.
  bool rejected = false;
  // Refused by an OPEN circuit with a known retry_at: the time until then,
  // rounded up to whole milliseconds (at least 1), the value the returned
  // status's message carries as grpc-retry-pushback-ms.
  std::optional<std::chrono::milliseconds> retry_pushback{};
  // How long the call took on the breaker's clock.
  Duration elapsed = Duration::zero();
};

// Runs `call` once under a permit of `breaker` and records its outcome:
// returns the server's status (and `context` holds its metadata), or, when the
// breaker refuses, UNAVAILABLE with a message naming the breaker, the reason
// and "retry in N ms (grpc-retry-pushback-ms: N)" when retry_at is known,
// without running `call`. `info`, when given, is overwritten.
::grpc::Status Call(CircuitBreaker& breaker, ::grpc::ClientContext& context, UnaryCall call,
                    CallInfo* info = nullptr, const Options& options = {});

// The same under the breaker the registry holds for `key` (a per-method or
// per-tenant name such as "payments/Charge"), created from
// options.config_name when new. A registry refusal (an empty key, an unknown
// template) fails locally as its status maps to gRPC (GrpcCodeFor()).
::grpc::Status Call(Registry& registry, std::string_view key, ::grpc::ClientContext& context,
                    UnaryCall call, CallInfo* info = nullptr, const Options& options = {});

}  // namespace fusebox::grpc

#endif  // FUSEBOX_GRPC_CALL_H_
