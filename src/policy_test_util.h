// Shared by the policy tests (retry, timeout, bulkhead, rate limiter,
// pipeline): unwraps a Create() result. An error ends the calling test there,
// as a fatal assertion would: MustCreate throws, GoogleTest reports the test
// failed with the error's text and runs the rest of the binary (returning null
// instead, as it once did, crashed the binary at the caller's first `->`).
#ifndef FUSEBOX_SRC_POLICY_TEST_UTIL_H_
#define FUSEBOX_SRC_POLICY_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "fusebox/result.h"

namespace fusebox {

template <typename T>
std::unique_ptr<T> MustCreate(Result<std::unique_ptr<T>> created) {
  if (!created) {
    std::ostringstream text;
    text << "Create() failed: " << created.error();
    throw std::runtime_error(text.str());
  }
  return *std::move(created);
}

}  // namespace fusebox

#endif  // FUSEBOX_SRC_POLICY_TEST_UTIL_H_
