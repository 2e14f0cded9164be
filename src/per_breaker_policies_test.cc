// PerBreakerPolicies: a breaker's per-key policies are its own, even when a
// new breaker takes a dropped one's address. The registry cannot be made to
// reuse an address, so the case is built with aliasing shared_ptrs: the same
// CircuitBreaker* under two control blocks, as a dropped breaker and its
// successor allocated where it lived would be.
#include "per_breaker_policies.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <utility>

#include "fusebox/circuit_breaker.h"
#include "fusebox/rate_limiter.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox::internal {
namespace {

using std::chrono::hours;

class PerBreakerPoliciesTest : public ::testing::Test {
 protected:
  PerBreakerPoliciesTest()
      : breaker_(std::shared_ptr<CircuitBreaker>(
            std::move(*CircuitBreaker::Create("a", CircuitBreakerConfig{}, clock_)))),
        policies_(std::nullopt,
                  RateLimiterOptions{.limit_for_period = 1, .limit_refresh_period = hours(1)},
                  clock_) {}

  // `breaker_` under a control block of its own: a different breaker, for
  // the map, at the same address.
  std::shared_ptr<CircuitBreaker> Successor() {
    auto owner = std::make_shared<int>(0);
    return std::shared_ptr<CircuitBreaker>(owner, breaker_.get());
  }

  testing::ManualClock clock_;
  std::shared_ptr<CircuitBreaker> breaker_;
  PerBreakerPolicies policies_;
};

TEST_F(PerBreakerPoliciesTest, ABreakerKeepsItsPoliciesAcrossCalls) {
  auto first = policies_.For(breaker_);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->first, nullptr);  // no bulkhead configured
  ASSERT_NE(first->second, nullptr);
  EXPECT_TRUE(first->second->TryAcquire().ok());
  auto again = policies_.For(breaker_);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->second, first->second);
  EXPECT_FALSE(again->second->TryAcquire().ok()) << "the one permit of the period is spent";
}

TEST_F(PerBreakerPoliciesTest, ANewBreakerAtADroppedOnesAddressGetsFreshPolicies) {
  std::shared_ptr<CircuitBreaker> dropped = Successor();
  auto spent = policies_.For(dropped);
  ASSERT_TRUE(spent.has_value());
  ASSERT_TRUE(spent->second->TryAcquire().ok());
  dropped.reset();  // the registry dropped it; its memory goes to the next breaker

  std::shared_ptr<CircuitBreaker> successor = Successor();
  ASSERT_EQ(successor.get(), breaker_.get());
  auto fresh = policies_.For(successor);
  ASSERT_TRUE(fresh.has_value());
  EXPECT_TRUE(fresh->second->TryAcquire().ok()) << "the successor inherited a spent limiter";
  EXPECT_EQ(policies_.SizeForTesting(), 1u) << "the dropped breaker's entry is replaced in place";
}

}  // namespace
}  // namespace fusebox::internal
