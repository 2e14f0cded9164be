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

  // The value. Calling these without a value is a bug (asserted).
  T& value() & noexcept { return assert(has_value()), value_; }
  const T& value() const& noexcept { return assert(has_value()), value_; }
  T&& value() && noexcept { return assert(has_value()), std::move(value_); }
  T& operator*() & noexcept { return value(); }
  const T& operator*() const& noexcept { return value(); }
  T&& operator*() && noexcept { return std::move(*this).value(); }
  T* operator->() noexcept { return &value(); }
  const T* operator->() const noexcept { return &value(); }

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

}  // namespace fusebox

#endif  // FUSEBOX_RESULT_H_
