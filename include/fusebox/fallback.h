// fusebox/fallback.h: a degraded answer for named failures, reads by default.
//
// A Fallback<T> turns some failures of a call returning Result<T> (or Status,
// for T = void) into an answer computed from the failure: an empty
// recommendation list when the recommendation service is down, a cached
// exchange rate marked stale. It applies only to the StatusCodes it names;
// every other failure, and every success, passes through unchanged.
//
// Seed 003 draws the line: "빈 추천 목록" is a fine fallback, "결제 승인" is not.
// A fallback that answers a write makes the caller believe something happened
// that did not. So each use states what the call is, CallKind::kRead or
// CallKind::kWrite, and a fallback answers a write only if it was created with
// writes = WriteFallback::kAllowed: two explicit choices, one where the
// fallback is defined and one where it is used. (A write fallback that makes
// sense, e.g. "queued for later" backed by a durable queue, must say so in
// its answer.)
//
//   auto empty = *fusebox::Fallback<std::vector<Item>>::Create({
//       .on_codes = {fusebox::StatusCode::kCircuitOpen, fusebox::StatusCode::kBulkheadFull,
//                    fusebox::StatusCode::kTimeout, fusebox::StatusCode::kUnavailable},
//       .fn = [](const fusebox::Status&) { return std::vector<Item>{}; },
//   });
//   fusebox::Result<std::vector<Item>> items =
//       empty->Recover(fusebox::CallKind::kRead, pipeline->Execute(load_recommendations));
//
// Thread-safe, if `fn` is.
#ifndef FUSEBOX_FALLBACK_H_
#define FUSEBOX_FALLBACK_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/call_kind.h"
#include "fusebox/internal/policy_call.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox {

// Whether a fallback may answer a write.
enum class WriteFallback : std::uint8_t {
  // A write's failure is always returned as it is.
  kNever,
  // The fallback also answers writes; its answer must be true for a write.
  kAllowed,
};

namespace internal {
// A set of StatusCodes as a bit mask; validates the list (non-empty, no kOk).
Status FallbackCodeMask(const std::vector<StatusCode>& codes, bool has_fn, std::uint32_t* mask);
}  // namespace internal

// T is the value type: Result<T> is what the protected call returns; T = void
// stands for calls returning Status.
template <typename T>
struct FallbackOptions {
  using Return = typename internal::CallReturn<T>::type;

  // The failures the fallback answers (non-empty, never kOk). No default.
  // kRetriesExhausted also matches by its cause(), the last attempt's code:
  // with kTimeout here, a retry loop that ran out after timeouts is answered
  // as a timeout would be. Name kRetriesExhausted to answer every such loop.
  std::vector<StatusCode> on_codes = {};
  // The answer, from the failure. It may fail itself. Required.
  std::function<Return(const Status&)> fn = nullptr;
  // Default: kNever.
  WriteFallback writes = WriteFallback::kNever;
};

template <typename T>
class Fallback {
 public:
  // Result<T>, or Status for T = void.
  using Return = typename internal::CallReturn<T>::type;

  // Fails with kInvalidArgument naming the field at fault: "on_codes must not
  // be empty", "on_codes must not contain OK", "fn must be set".
  static Result<std::unique_ptr<Fallback>> Create(FallbackOptions<T> options) {
    std::uint32_t mask = 0;
    Status s = internal::FallbackCodeMask(options.on_codes, options.fn != nullptr, &mask);
    if (!s.ok()) return s;
    return std::unique_ptr<Fallback>(new Fallback(std::move(options), mask));
  }

  // Whether the fallback answers a call of kind `kind` that ended with
  // `status`.
  bool AppliesTo(CallKind kind, const Status& status) const noexcept {
    if (status.ok()) return false;
    const bool named = (mask_ & Bit(status.code())) != 0 ||
                       (status.code() == StatusCode::kRetriesExhausted &&
                        status.cause() != StatusCode::kOk && (mask_ & Bit(status.cause())) != 0);
    if (!named) return false;
    return kind == CallKind::kRead || options_.writes == WriteFallback::kAllowed;
  }

  // `result` itself, or the fallback's answer when AppliesTo(kind, its
  // status).
  Return Recover(CallKind kind, Return result) const {
    const Status& s = internal::StatusOf(result);
    if (!AppliesTo(kind, s)) return result;
    used_.fetch_add(1, std::memory_order_relaxed);
    return options_.fn(s);
  }

  // Runs `fn` and Recover()s its result. `fn` must return Return (or a value
  // convertible to it).
  template <typename F>
  Return Execute(CallKind kind, F&& fn) const {
    return Recover(kind, internal::InvokePlain(fn));
  }

  // How many answers the fallback gave.
  std::int64_t used() const noexcept { return used_.load(std::memory_order_relaxed); }
  const FallbackOptions<T>& options() const noexcept { return options_; }

 private:
  Fallback(FallbackOptions<T> options, std::uint32_t mask)
      : options_(std::move(options)), mask_(mask) {}

  static std::uint32_t Bit(StatusCode code) noexcept {
    return std::uint32_t{1} << static_cast<unsigned>(code);
  }

  const FallbackOptions<T> options_;
  const std::uint32_t mask_;
  mutable std::atomic<std::int64_t> used_{0};
};

}  // namespace fusebox

#endif  // FUSEBOX_FALLBACK_H_
