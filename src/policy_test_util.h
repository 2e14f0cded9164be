// Shared by the policy tests (retry, timeout, bulkhead, rate limiter,
// pipeline): unwraps a Create() result, failing the test if it is an error.
#ifndef FUSEBOX_SRC_POLICY_TEST_UTIL_H_
#define FUSEBOX_SRC_POLICY_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "fusebox/result.h"

namespace fusebox {

template <typename T>
std::unique_ptr<T> MustCreate(Result<std::unique_ptr<T>> created) {
  EXPECT_TRUE(created.has_value()) << created.error();
  return created ? std::move(created).value() : nullptr;
}

}  // namespace fusebox

#endif  // FUSEBOX_SRC_POLICY_TEST_UTIL_H_
