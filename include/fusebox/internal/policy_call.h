// How the policies (retry.h, timeout.h, bulkhead.h, rate_limiter.h,
// fallback.h, pipeline.h) run a user callable and read its outcome.
//
// Every policy accepts the same callables as CircuitBreaker::Call() and
// returns what Call() would: a callable returning Status or Result<U> keeps
// its type, one returning void gives a Status, one returning any other R gives
// a Result<R>. A policy's own rejection (kBulkheadFull, kTimeout, ...) then
// converts implicitly into that return type.
//
// A callable may take a `const std::stop_token&` (or a std::stop_token by
// value): the Timeout policy and the Pipeline pass the token that asks it to
// stop; elsewhere it gets a token that is never stopped.
//
// Internal: shipped because public headers use it, but not part of the API.
#ifndef FUSEBOX_INTERNAL_POLICY_CALL_H_
#define FUSEBOX_INTERNAL_POLICY_CALL_H_

#include <functional>
#include <stop_token>
#include <type_traits>
#include <utility>

#include "fusebox/circuit_breaker.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox::internal {

// True when `F` wants the stop token.
template <typename F>
inline constexpr bool kTakesStopToken = std::is_invocable_v<F&, const std::stop_token&>;

// What `F` returns when called the way InvokeWithToken() calls it.
template <typename F>
using RawReturn =
    typename std::conditional_t<kTakesStopToken<F>, std::invoke_result<F&, const std::stop_token&>,
                                std::invoke_result<F&>>::type;

// What a policy returns for `F`: Status, or Result<...> (see above).
template <typename F>
using PolicyReturn = typename CallReturn<RawReturn<F>>::type;

// Runs `fn`, passing `token` if it takes one, and converts what it returns to
// PolicyReturn<F>.
template <typename F>
PolicyReturn<F> InvokeWithToken(F& fn, const std::stop_token& token) {
  using R = RawReturn<F>;
  if constexpr (std::is_void_v<R>) {
    if constexpr (kTakesStopToken<F>) {
      std::invoke(fn, token);
    } else {
      std::invoke(fn);
    }
    return Status();
  } else if constexpr (kTakesStopToken<F>) {
    return std::invoke(fn, token);
  } else {
    return std::invoke(fn);
  }
}

// As InvokeWithToken() with a token that is never stopped.
template <typename F>
PolicyReturn<F> InvokePlain(F& fn) {
  return InvokeWithToken(fn, std::stop_token());
}

// StatusOf(), the Status of a Status or Result<U>, is in fusebox/result.h.

}  // namespace fusebox::internal

#endif  // FUSEBOX_INTERNAL_POLICY_CALL_H_
