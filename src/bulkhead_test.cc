// Unit tests of Bulkhead. Waits end on the ManualClock (Advance) or by a
// release from another thread; threads synchronize on waiting_calls() with
// yields, never with sleeps.
#include "fusebox/bulkhead.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fusebox/testing/manual_clock.h"
#include "src/policy_test_util.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;
using ::testing::HasSubstr;

class BulkheadTest : public ::testing::Test {
 protected:
  std::unique_ptr<Bulkhead> Make(BulkheadOptions options) {
    return MustCreate(Bulkhead::Create(options, clock_));
  }

  // Blocks until `n` callers wait in `bulkhead`.
  static void AwaitWaiters(const Bulkhead& bulkhead, int n) {
    while (bulkhead.waiting_calls() != n) std::this_thread::yield();
  }

  ManualClock clock_;
};

TEST_F(BulkheadTest, CreateNamesTheBadField) {
  auto b = Bulkhead::Create({.max_concurrent_calls = 0}, clock_);
  EXPECT_EQ(b.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.error().message()), HasSubstr("max_concurrent_calls"));
  b = Bulkhead::Create({.max_wait_duration = -1ns}, clock_);
  EXPECT_THAT(std::string(b.error().message()), HasSubstr("max_wait_duration"));
  b = Bulkhead::Create({.max_waiting_calls = -1}, clock_);
  EXPECT_THAT(std::string(b.error().message()), HasSubstr("max_waiting_calls"));
}

TEST_F(BulkheadTest, FullBulkheadRejectsAtOnce) {
  auto bulkhead = Make({.max_concurrent_calls = 2});
  Result<BulkheadPermit> a = bulkhead->TryAcquire();
  Result<BulkheadPermit> b = bulkhead->Acquire();
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(bulkhead->available_permits(), 0);
  Result<BulkheadPermit> c = bulkhead->Acquire();
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), StatusCode::kBulkheadFull);
  EXPECT_EQ(c.error().reason(), "bulkhead_full");
  EXPECT_EQ(bulkhead->rejected_calls(), 1u);
  a->Release();
  EXPECT_FALSE(a->held());
  EXPECT_TRUE(bulkhead->TryAcquire().has_value());  // Taken and freed at once.
  EXPECT_EQ(bulkhead->available_permits(), 1);
}

TEST_F(BulkheadTest, PermitsAreRaiiAndMoveOnly) {
  auto bulkhead = Make({.max_concurrent_calls = 1});
  {
    BulkheadPermit p = *bulkhead->TryAcquire();
    BulkheadPermit q = std::move(p);
    EXPECT_FALSE(p.held());  // NOLINT(bugprone-use-after-move): checking the moved-from state.
    EXPECT_TRUE(q.held());
    EXPECT_EQ(bulkhead->available_permits(), 0);
    q.Release();
    q.Release();  // Second release is a no-op.
    EXPECT_EQ(bulkhead->available_permits(), 1);
    p = *bulkhead->TryAcquire();
  }
  EXPECT_EQ(bulkhead->available_permits(), 1);
}

TEST_F(BulkheadTest, ExecuteHoldsTheSlotAndFreesItOnThrow) {
  auto bulkhead = Make({.max_concurrent_calls = 1});
  Result<int> r = bulkhead->Execute([&] {
    EXPECT_EQ(bulkhead->available_permits(), 0);
    EXPECT_EQ(bulkhead->Execute([] { return 1; }).error().code(), StatusCode::kBulkheadFull);
    return 2;
  });
  EXPECT_EQ(*r, 2);
  EXPECT_THROW((void)bulkhead->Execute([]() -> Status { throw std::runtime_error("boom"); }),
               std::runtime_error);
  EXPECT_EQ(bulkhead->available_permits(), 1);
}

TEST_F(BulkheadTest, BoundedWaitEndsOnTheClock) {
  auto bulkhead = Make({.max_concurrent_calls = 1, .max_wait_duration = 100ms});
  BulkheadPermit held = *bulkhead->TryAcquire();
  std::optional<Status> waited;
  std::thread waiter([&] {
    Result<BulkheadPermit> p = bulkhead->Acquire();
    waited = p ? Status() : p.error();
  });
  AwaitWaiters(*bulkhead, 1);
  clock_.Advance(100ms - 1ns);
  EXPECT_EQ(bulkhead->waiting_calls(), 1);  // Still waiting 1 ns before the end.
  clock_.Advance(1ns);
  waiter.join();
  ASSERT_TRUE(waited.has_value());
  EXPECT_EQ(waited->code(), StatusCode::kBulkheadFull);
  EXPECT_EQ(waited->reason(), "wait_timeout");
  EXPECT_EQ(bulkhead->waiting_calls(), 0);
  EXPECT_EQ(bulkhead->rejected_calls(), 1u) << "one refusal, after the wait, not two";
}

TEST_F(BulkheadTest, WaiterGetsAReleasedSlot) {
  auto bulkhead = Make({.max_concurrent_calls = 1, .max_wait_duration = 1s});
  Result<BulkheadPermit> held = bulkhead->TryAcquire();
  bool got = false;
  std::thread waiter([&] {
    Result<BulkheadPermit> p = bulkhead->Acquire();
    got = p.has_value();
  });
  AwaitWaiters(*bulkhead, 1);
  held->Release();
  waiter.join();
  EXPECT_TRUE(got);
  EXPECT_EQ(bulkhead->available_permits(), 1);
  EXPECT_EQ(clock_.Now(), ManualClock::kEpoch);  // No time had to pass.
}

TEST_F(BulkheadTest, WaitingCallersAreBounded) {
  auto bulkhead =
      Make({.max_concurrent_calls = 1, .max_wait_duration = 1s, .max_waiting_calls = 1});
  Result<BulkheadPermit> held = bulkhead->TryAcquire();
  std::thread waiter([&] { (void)bulkhead->Acquire(); });
  AwaitWaiters(*bulkhead, 1);
  // One caller waits already: the next is refused at once, without waiting.
  Result<BulkheadPermit> refused = bulkhead->Acquire();
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kBulkheadFull);
  EXPECT_EQ(refused.error().reason(), "too_many_waiting");
  held->Release();
  waiter.join();
}

// docs/policies.md: max_waiting_calls defaults to 25. 25 callers wait; the
// 26th is refused at once; the clock ends the 25 waits.
TEST_F(BulkheadTest, TwentyFiveCallersMayWaitByDefault) {
  BulkheadOptions o;
  o.max_concurrent_calls = 1;
  o.max_wait_duration = 1s;
  auto bulkhead = Make(o);
  Result<BulkheadPermit> held = bulkhead->TryAcquire();
  ASSERT_TRUE(held.has_value());
  std::vector<std::thread> waiters;
  waiters.reserve(25);
  for (int i = 0; i < 25; ++i) waiters.emplace_back([&] { (void)bulkhead->Acquire(); });
  AwaitWaiters(*bulkhead, 25);
  Result<BulkheadPermit> refused = bulkhead->Acquire();
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().reason(), "too_many_waiting");
  clock_.Advance(1s);
  for (std::thread& t : waiters) t.join();
  EXPECT_EQ(bulkhead->waiting_calls(), 0);
}

// Several threads hammer one bulkhead with TryAcquire: the number of holders
// never exceeds the limit, and every slot comes back.
TEST_F(BulkheadTest, ConcurrentHoldersNeverExceedTheLimit) {
  constexpr int kLimit = 3;
  auto bulkhead = Make({.max_concurrent_calls = kLimit});
  std::atomic<int> holders{0};
  std::atomic<int> most{0};
  std::atomic<int> admitted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        Result<BulkheadPermit> p = bulkhead->TryAcquire();
        if (!p) {
          EXPECT_EQ(p.error().code(), StatusCode::kBulkheadFull);
          continue;
        }
        admitted.fetch_add(1, std::memory_order_relaxed);
        const int now = holders.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        holders.fetch_sub(1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_LE(most.load(), kLimit);
  EXPECT_GT(admitted.load(), 0);
  EXPECT_EQ(bulkhead->available_permits(), kLimit);
}

// Threads that wait: with the clock standing still, only releases end waits,
// so a lost wake-up would hang this test; every acquisition must succeed.
TEST_F(BulkheadTest, WaitersAreWokenByReleases) {
  constexpr int kThreads = 4;
  constexpr int kCalls = 2000;
  auto bulkhead =
      Make({.max_concurrent_calls = 2, .max_wait_duration = 1h, .max_waiting_calls = kThreads});
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        if (bulkhead->Execute([] {}).ok()) ok.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(ok.load(), kThreads * kCalls);
  EXPECT_EQ(bulkhead->available_permits(), 2);
  EXPECT_EQ(bulkhead->waiting_calls(), 0);
}

}  // namespace
}  // namespace fusebox
