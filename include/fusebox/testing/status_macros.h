// fusebox/testing/status_macros.h: GoogleTest assertions on Status and
// Result<T>, for tests of code built on fusebox (needs GoogleTest; fusebox
// itself does not link it).
//
//   FUSEBOX_EXPECT_OK(registry->SetConfig("payment", config));
//   FUSEBOX_ASSERT_OK_AND_ASSIGN(auto breaker, CircuitBreaker::Create("p", config, clock));
//   breaker->TryAcquire();
//
// Each evaluates its expression once; a failure prints the expression and
// its status ("CircuitBreaker::Create(...) is InvalidArgument: ...").
// FUSEBOX_ASSERT_OK_AND_ASSIGN declares or assigns `lhs` (no top-level comma:
// use a type alias) and, as every ASSERT_*, returns from a void function on
// failure.
#ifndef FUSEBOX_TESTING_STATUS_MACROS_H_
#define FUSEBOX_TESTING_STATUS_MACROS_H_

#include <gtest/gtest.h>

#include <utility>

#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox::testing::internal {

// For EXPECT_PRED_FORMAT1: success when `result` (a Status or a Result<T>)
// is OK.
template <typename T>
::testing::AssertionResult IsOk(const char* text, const T& result) {
  const Status& s = ::fusebox::internal::StatusOf(result);
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << text << " is " << s;
}

}  // namespace fusebox::testing::internal

#define FUSEBOX_EXPECT_OK(expr) EXPECT_PRED_FORMAT1(::fusebox::testing::internal::IsOk, expr)
#define FUSEBOX_ASSERT_OK(expr) ASSERT_PRED_FORMAT1(::fusebox::testing::internal::IsOk, expr)

#define FUSEBOX_ASSERT_OK_AND_ASSIGN(lhs, rexpr)                                               \
  FUSEBOX_ASSERT_OK_AND_ASSIGN_IMPL_(FUSEBOX_RESULT_CONCAT_(fusebox_assert_result_, __LINE__), \
                                     lhs, rexpr)
#define FUSEBOX_ASSERT_OK_AND_ASSIGN_IMPL_(result, lhs, rexpr)           \
  auto result = (rexpr);                                                 \
  ASSERT_TRUE(result.has_value()) << #rexpr << " is " << result.error(); \
  lhs = *std::move(result)

#endif  // FUSEBOX_TESTING_STATUS_MACROS_H_
