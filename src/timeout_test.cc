// Unit tests of Timeout on a ManualClock. A callable "takes time" by advancing
// the clock itself; Advance() runs the watchdog timer on the calling thread,
// so a stop requested at the deadline is visible to the callable as soon as
// its Advance() returns.
#include "fusebox/timeout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "fusebox/testing/manual_clock.h"
#include "src/policy_test_util.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;
using ::testing::HasSubstr;

class TimeoutTest : public ::testing::Test {
 protected:
  std::unique_ptr<Timeout> Make(TimeoutOptions options) {
    return MustCreate(Timeout::Create(options, clock_));
  }

  // Advances the clock in `step`s until `total` has passed or the token is
  // stopped, as a dependency that honours cancellation would.
  void Work(const std::stop_token& stop, Duration total, Duration step) {
    for (Duration done = 0ns; done < total && !stop.stop_requested(); done += step) {
      clock_.Advance(step);
    }
  }

  ManualClock clock_;
};

TEST_F(TimeoutTest, CreateNamesTheBadField) {
  auto t = Timeout::Create({.timeout_duration = 0ns}, clock_);
  EXPECT_EQ(t.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.error().message()), HasSubstr("timeout_duration"));
  t = Timeout::Create({.watch_slots = 0}, clock_);
  EXPECT_THAT(std::string(t.error().message()), HasSubstr("watch_slots"));
}

TEST_F(TimeoutTest, FastCallKeepsItsResult) {
  auto timeout = Make({.timeout_duration = 1s});
  Result<int> r = timeout->Execute([](const std::stop_token& stop) {
    EXPECT_TRUE(stop.stop_possible());
    EXPECT_FALSE(stop.stop_requested());
    return 7;
  });
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, 7);
}

// cancelRunningFuture: false. The deadline is measured, not enforced: the
// call runs past it with its token never stopped, and is still reported as
// timed out. With the default, the same call sees its stop at the deadline.
TEST_F(TimeoutTest, WithoutCancelRunningFutureTheTokenIsNeverStopped) {
  for (bool cancel : {true, false}) {
    SCOPED_TRACE(cancel ? "cancel_running_future" : "no cancel");
    auto timeout = Make({.timeout_duration = 100ms, .cancel_running_future = cancel});
    const TimePoint start = clock_.Now();
    Duration ran = 0ns;
    Result<int> r = timeout->Execute([&](const std::stop_token& stop) {
      Work(stop, 300ms, 10ms);
      ran = clock_.Now() - start;
      return 7;
    });
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), StatusCode::kTimeout);
    EXPECT_EQ(timeout->options().cancel_running_future, cancel);
    // Stopped at the deadline, or ran its whole 300 ms.
    EXPECT_EQ(ran, cancel ? Duration(100ms) : Duration(300ms));
  }
}

TEST_F(TimeoutTest, WithoutCancelRunningFutureAFastCallKeepsItsResult) {
  auto timeout = Make({.timeout_duration = 100ms, .cancel_running_future = false});
  Result<int> r = timeout->Execute([&](const std::stop_token& stop) {
    EXPECT_FALSE(stop.stop_possible());
    clock_.Advance(99ms);
    return 7;
  });
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, 7);
}

// Without a stop, the elapsed time alone decides, with the same boundary: a
// call that ends exactly at timeout_duration has timed out.
TEST_F(TimeoutTest, WithoutCancelRunningFutureACallEndingAtTheDeadlineTimesOut) {
  auto timeout = Make({.timeout_duration = 100ms, .cancel_running_future = false});
  Result<int> r = timeout->Execute([&](const std::stop_token&) {
    clock_.Advance(100ms);
    return 7;
  });
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kTimeout);
}

TEST_F(TimeoutTest, OneNanosecondBeforeTheDeadlineIsInTime) {
  auto timeout = Make({.timeout_duration = 1s});
  bool stopped = true;
  Result<int> r = timeout->Execute([&](const std::stop_token& stop) {
    clock_.Advance(1s - 1ns);
    stopped = stop.stop_requested();
    return 7;
  });
  EXPECT_FALSE(stopped);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, 7);
}

TEST_F(TimeoutTest, AtTheDeadlineTheTokenStopsAndTheCallTimesOut) {
  auto timeout = Make({.timeout_duration = 1s});
  bool stopped = false;
  Result<int> r = timeout->Execute([&](const std::stop_token& stop) {
    clock_.Advance(1s);
    stopped = stop.stop_requested();
    return 7;
  });
  EXPECT_TRUE(stopped);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kTimeout);
  EXPECT_EQ(r.error().reason(), "deadline_exceeded");
}

TEST_F(TimeoutTest, CooperativeCallableReturnsAtTheDeadline) {
  auto timeout = Make({.timeout_duration = 1s});
  const TimePoint start = clock_.Now();
  Status s = timeout->Execute([&](const std::stop_token& stop) { Work(stop, 5s, 100ms); });
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  EXPECT_EQ(clock_.Now() - start, 1s);
}

TEST_F(TimeoutTest, StopCallbacksRunAtTheDeadline) {
  auto timeout = Make({.timeout_duration = 300ms});
  std::vector<Duration> cancelled_at;
  const TimePoint start = clock_.Now();
  Status s = timeout->Execute([&](const std::stop_token& stop) {
    std::stop_callback cancel(stop, [&] { cancelled_at.push_back(clock_.Now() - start); });
    clock_.Advance(1s);  // A blocking read that the callback would abort.
  });
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  // Advance() moved the clock to 1 s before running the due timer.
  ASSERT_EQ(cancelled_at.size(), 1u);
  EXPECT_EQ(cancelled_at[0], 1s);
}

TEST_F(TimeoutTest, IgnoredTokenRunsToItsEndThenTimesOut) {
  auto timeout = Make({.timeout_duration = 1s});
  const TimePoint start = clock_.Now();
  Result<int> r = timeout->Execute([&] {  // Takes no token at all.
    clock_.Advance(5s);
    return 7;
  });
  // The caller waited the full 5 s (no thread was abandoned), and the late
  // result is reported as a timeout.
  EXPECT_EQ(clock_.Now() - start, 5s);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kTimeout);
}

TEST_F(TimeoutTest, SlotIsReusedWithAFreshTokenAfterAStop) {
  auto timeout = Make({.timeout_duration = 1s, .watch_slots = 1});
  EXPECT_EQ(timeout->Execute([&] { clock_.Advance(2s); }).code(), StatusCode::kTimeout);
  bool stopped = true;
  EXPECT_TRUE(
      timeout->Execute([&](const std::stop_token& stop) { stopped = stop.stop_requested(); }).ok());
  EXPECT_FALSE(stopped);
}

TEST_F(TimeoutTest, CallsBeyondTheSlotsStillTimeOut) {
  auto timeout = Make({.timeout_duration = 1s, .watch_slots = 1});
  bool inner_stopped = false;
  bool outer_stopped = false;
  Status outer = timeout->Execute([&](const std::stop_token& outer_stop) {
    // The one slot is ours: the nested call gets its own source and timer.
    Status inner = timeout->Execute([&](const std::stop_token& inner_stop) {
      clock_.Advance(1s);
      inner_stopped = inner_stop.stop_requested();
    });
    EXPECT_EQ(inner.code(), StatusCode::kTimeout);
    outer_stopped = outer_stop.stop_requested();
  });
  EXPECT_EQ(outer.code(), StatusCode::kTimeout);
  EXPECT_TRUE(inner_stopped);
  EXPECT_TRUE(outer_stopped);
  // The nested call's own timer ran and is gone; only the watchdog remains.
  EXPECT_EQ(clock_.PendingTimers(), 1u);
}

TEST_F(TimeoutTest, OneWatchdogTimerServesManyCalls) {
  auto timeout = Make({.timeout_duration = 1s});
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(timeout->Execute([&] { clock_.Advance(1ms); }).ok());
  }
  // The first call armed one timer for its deadline; nothing else was needed.
  EXPECT_EQ(clock_.PendingTimers(), 1u);
  // It fires; calls were made since it was armed, so it re-arms itself for
  // one more period (steady traffic never has to schedule it)...
  clock_.Advance(1s);
  EXPECT_EQ(clock_.PendingTimers(), 1u);
  // ...and after a period without calls it stops.
  clock_.Advance(1s);
  EXPECT_EQ(clock_.PendingTimers(), 0u);
}

TEST_F(TimeoutTest, WatchdogReArmsForALaterCall) {
  auto timeout = Make({.timeout_duration = 1s});
  // Call A arms for +1 s and finishes; call B starts at +600 ms and runs
  // past A's deadline: the watchdog must re-arm for B's, at +1.6 s.
  EXPECT_TRUE(timeout->Execute([&] { clock_.Advance(600ms); }).ok());
  std::vector<bool> stopped_after;
  Status b = timeout->Execute([&](const std::stop_token& stop) {
    clock_.Advance(1s - 1ns);  // +1.6 s - 1 ns: A's timer fired, B not stopped.
    stopped_after.push_back(stop.stop_requested());
    clock_.Advance(1ns);
    stopped_after.push_back(stop.stop_requested());
  });
  EXPECT_EQ(b.code(), StatusCode::kTimeout);
  EXPECT_EQ(stopped_after, (std::vector<bool>{false, true}));
}

TEST_F(TimeoutTest, ExceptionPropagatesAndFreesTheSlot) {
  auto timeout = Make({.timeout_duration = 1s, .watch_slots = 1});
  EXPECT_THROW((void)timeout->Execute([]() -> Status { throw std::runtime_error("boom"); }),
               std::runtime_error);
  // The slot is free: the next call does not need a timer of its own.
  EXPECT_TRUE(timeout->Execute([] {}).ok());
  EXPECT_EQ(clock_.PendingTimers(), 1u);
}

// Several threads share one Timeout while the clock moves under them. Thread
// 0 alone moves it (ManualClock::Advance from two threads at once could go
// back), by a whole timeout in each tenth call, which must time out; the
// other calls may or may not, depending on what ran meanwhile. Bounded, no
// sleeps; under TSan it checks the slot hand-offs between the callers and the
// watchdog, which runs inside thread 0's Advance().
TEST_F(TimeoutTest, ManyThreadsShareOneTimeout) {
  auto timeout = Make({.timeout_duration = 1s, .watch_slots = 4});
  constexpr int kThreads = 4;
  constexpr int kCalls = 500;
  std::atomic<int> wrong{0};
  std::atomic<int> timed_out{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const bool slow = t == 0 && i % 10 == 0;
        Status s = timeout->Execute([&](const std::stop_token&) {
          if (slow) clock_.Advance(1s);
        });
        if (s.code() == StatusCode::kTimeout) timed_out.fetch_add(1);
        if (slow && s.code() != StatusCode::kTimeout) wrong.fetch_add(1);
        if (!s.ok() && s.code() != StatusCode::kTimeout) wrong.fetch_add(1);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GE(timed_out.load(), kCalls / 10);
}

}  // namespace
}  // namespace fusebox
