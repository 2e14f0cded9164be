// fusebox/result.h: Result<T>, a value or the Status that explains its absence.
//
// The members are named as in C++23 std::expected (has_value, value, error,
// operator*, operator->, value_or), so that moving to std::expected<T, Status>
// is mechanical once the project can require C++23.
//
//   fusebox::Result<std::unique_ptr<CircuitBreaker>> cb =
//       CircuitBreaker::Create("payment", config, clock);
//   if (!cb) return cb.error();
//   (*cb)->TryAcquire();
//
// value() on an error is a bug, but never undefined behaviour: in every build
// it writes "fusebox: Result::value() on an error: <status>" to stderr and
// aborts, as absl::StatusOr does without exceptions. operator* and operator->
// do not check (an assert in debug builds), as in std::expected: use them
// after testing has_value(). fusebox's own code never relies on the abort.
//
// Two macros keep error propagation short, in a function returning Status or
// Result<U>:
//
//   FUSEBOX_RETURN_IF_ERROR(registry->SetConfig("payment", config));  // Status
//   FUSEBOX_ASSIGN_OR_RETURN(auto breaker, registry->Get("payment"));  // Result<T>
//
// RETURN_IF_ERROR takes a Status or a Result<T>; ASSIGN_OR_RETURN declares or
// assigns its first argument (which may not contain a top-level comma: use a
// type alias) from the value, or returns the error. Both evaluate their
// expression once.
//
// Thread-compatible: const methods may run concurrently, others need external
// synchronization.
#ifndef FUSEBOX_RESULT_H_
#define FUSEBOX_RESULT_H_

#include <cassert>
#include <new>
#include <type_traits>
#include <utility>

#include "fusebox/status.h"

namespace fusebox {

namespace internal {
// Writes "fusebox: Result::value() on an error: <status>" to stderr and
// aborts: Result<T>::value() without a value.
[[noreturn]] void DieOfValueOnError(const Status& status) noexcept;
}  // namespace internal

template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_void_v<T>, "use Status for an operation without a value");
  static_assert(!std::is_reference_v<T>, "Result<T&> is not supported");
  static_assert(!std::is_same_v<std::remove_cv_t<T>, Status>, "Result<Status> makes no sense");

 public:
  using value_type = T;

  // A value. Implicit, so that `return value;` works in a function returning
  // Result<T>.
  template <typename U = T, typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                                        !std::is_same_v<std::decay_t<U>, Result> &&
                                                        !std::is_same_v<std::decay_t<U>, Status>>>
  Result(U&& value) noexcept(std::is_nothrow_constructible_v<T, U&&>) {  // NOLINT
    ::new (static_cast<void*>(&value_)) T(std::forward<U>(value));
  }

  // An error. `status` must not be OK: that is a bug in the caller.
  Result(Status status) noexcept : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "Result constructed from an OK Status without a value");
    if (status_.ok()) status_ = Status(StatusCode::kInternal, "OK status given as an error");
  }

  Result(const Result& other) requires std::is_copy_constructible_v<T> : status_(other.status_) {
    if (other.has_value()) ::new (static_cast<void*>(&value_)) T(other.value_);
  }
  Result(Result&& other) noexcept(std::is_nothrow_move_constructible_v<T>)
      : status_(std::move(other.status_)) {
    if (status_.ok()) ::new (static_cast<void*>(&value_)) T(std::move(other.value_));
  }
  Result& operator=(const Result& other) requires std::is_copy_constructible_v<T> {
    if (this != &other) {
      Reset();
      status_ = other.status_;
      if (other.has_value()) ::new (static_cast<void*>(&value_)) T(other.value_);
    }
    return *this;
  }
  Result& operator=(Result&& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &other) {
      Reset();
      status_ = std::move(other.status_);
      if (status_.ok()) ::new (static_cast<void*>(&value_)) T(std::move(other.value_));
    }
    return *this;
  }
  ~Result() {
    if (status_.ok()) value_.~T();
  }

  bool has_value() const noexcept { return status_.ok(); }
  explicit operator bool() const noexcept { return has_value(); }

  // The value. Without one, a bug: the status goes to stderr and the process
  // aborts, in release builds too.
  T& value() & noexcept { return CheckValue(), value_; }
  const T& value() const& noexcept { return CheckValue(), value_; }
  T&& value() && noexcept { return CheckValue(), std::move(value_); }
  // The value, unchecked (asserted in debug builds): test has_value() first.
  T& operator*() & noexcept { return assert(has_value()), value_; }
  const T& operator*() const& noexcept { return assert(has_value()), value_; }
  T&& operator*() && noexcept { return assert(has_value()), std::move(value_); }
  T* operator->() noexcept { return assert(has_value()), &value_; }
  const T* operator->() const noexcept { return assert(has_value()), &value_; }

  // The error; OK when there is a value.
  const Status& error() const& noexcept { return status_; }
  Status&& error() && noexcept { return std::move(status_); }
  // Same as error(), under the name absl::StatusOr uses.
  const Status& status() const& noexcept { return status_; }

  template <typename U>
  T value_or(U&& fallback) const& {
    return has_value() ? value_ : static_cast<T>(std::forward<U>(fallback));
  }
  template <typename U>
  T value_or(U&& fallback) && {
    return has_value() ? std::move(value_) : static_cast<T>(std::forward<U>(fallback));
  }

 private:
  void CheckValue() const noexcept {
    if (!has_value()) [[unlikely]]
      internal::DieOfValueOnError(status_);
  }
  void Reset() noexcept {
    if (status_.ok()) {
      value_.~T();
      status_ = Status::Rejected(StatusCode::kInternal, "moved");
    }
  }

  Status status_;  // OK iff value_ holds a value.
  union {
    T value_;
  };
};

namespace internal {
// The Status of a Status (itself) or of a Result<T> (OK when it holds a
// value): FUSEBOX_RETURN_IF_ERROR and the policies read any result by it.
inline const Status& StatusOf(const Status& status) noexcept { return status; }
template <typename T>
const Status& StatusOf(const Result<T>& result) noexcept {
  return result.status();
}
}  // namespace internal

}  // namespace fusebox

// Returns the error of `expr` (a Status or a Result<T>) from the enclosing
// function, which returns Status or Result<U>, if it is not OK.
#define FUSEBOX_RETURN_IF_ERROR(expr)                                                              \
  do {                                                                                             \
    /* Holds a temporary for as long as its status is read. */                                     \
    auto&& fusebox_result_ = (expr);                                                               \
    if (const ::fusebox::Status& fusebox_status_ = ::fusebox::internal::StatusOf(fusebox_result_); \
        !fusebox_status_.ok()) {                                                                   \
      return ::fusebox::Status(fusebox_status_);                                                   \
    }                                                                                              \
  } while (false)

// `lhs = std::move(value)` of the Result<T> `rexpr`, or returns its error
// from the enclosing function, which returns Status or Result<U>. `lhs` may
// declare a variable (`auto x`, `std::unique_ptr<Foo> x`) or name one.
#define FUSEBOX_ASSIGN_OR_RETURN(lhs, rexpr) \
  FUSEBOX_ASSIGN_OR_RETURN_IMPL_(FUSEBOX_RESULT_CONCAT_(fusebox_result_, __LINE__), lhs, rexpr)

// `lhs` may be a declaration, which parentheses would break.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define FUSEBOX_RESULT_CONCAT_INNER_(a, b) a##b
#define FUSEBOX_RESULT_CONCAT_(a, b) FUSEBOX_RESULT_CONCAT_INNER_(a, b)
#define FUSEBOX_ASSIGN_OR_RETURN_IMPL_(result, lhs, rexpr) \
  auto result = (rexpr);                                   \
  if (!result.has_value()) [[unlikely]]                    \
    return std::move(result).error();                      \
  lhs = *std::move(result)
// NOLINTEND(bugprone-macro-parentheses)

#endif  // FUSEBOX_RESULT_H_
