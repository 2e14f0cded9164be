// ThreadPoolBulkhead: Java's admission rule, results and exceptions through
// futures, the queue drained on destruction, and its metrics. Calls block on
// latches the test opens, so that "busy" is a fact, not a timing; no sleeps.
#include "fusebox/thread_pool_bulkhead.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fusebox/metrics.h"
#include "fusebox/prometheus.h"
#include "src/policy_test_util.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<ThreadPoolBulkhead> Make(ThreadPoolBulkheadOptions options) {
  return MustCreate(ThreadPoolBulkhead::Create(options));
}

TEST(ThreadPoolBulkheadOptions, ValidateNamesTheField) {
  EXPECT_THAT(
      std::string(ThreadPoolBulkheadOptions{.core_thread_pool_size = 0}.Validate().message()),
      HasSubstr("core_thread_pool_size"));
  EXPECT_THAT(
      std::string(ThreadPoolBulkheadOptions{.max_thread_pool_size = 1, .core_thread_pool_size = 2}
                      .Validate()
                      .message()),
      HasSubstr("max_thread_pool_size"));
  EXPECT_THAT(std::string(ThreadPoolBulkheadOptions{.queue_capacity = -1}.Validate().message()),
              HasSubstr("queue_capacity"));
  EXPECT_THAT(
      std::string(
          ThreadPoolBulkheadOptions{.keep_alive_duration = Duration(-1)}.Validate().message()),
      HasSubstr("keep_alive_duration"));
  const ThreadPoolBulkheadOptions defaults;
  EXPECT_TRUE(defaults.Validate().ok());
  EXPECT_EQ(defaults.max_thread_pool_size, ThreadPoolBulkheadOptions::DefaultMaxThreads());
  EXPECT_EQ(defaults.queue_capacity, 100);
  EXPECT_EQ(defaults.keep_alive_duration, std::chrono::milliseconds(20));
}

// Core threads first, then the queue, then extra threads up to the maximum,
// then refusal: ThreadPoolExecutor's order.
TEST(ThreadPoolBulkhead, CoreThenQueueThenMaxThenRefuses) {
  // Declared before the pool, so that it outlives the calls that wait on it.
  std::latch release(1);
  auto pool = Make({.max_thread_pool_size = 2,
                    .core_thread_pool_size = 1,
                    .queue_capacity = 1,
                    .keep_alive_duration = std::chrono::hours(1)});
  auto blocked = [&](int v) {
    return [&release, v] {
      release.wait();
      return v;
    };
  };
  Result<std::future<int>> a = pool->Submit(blocked(1));  // core thread
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(pool->state().thread_pool_size, 1);
  EXPECT_EQ(pool->state().queue_depth, 0);
  Result<std::future<int>> b = pool->Submit(blocked(2));  // queued
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(pool->state().queue_depth, 1);
  EXPECT_EQ(pool->remaining_queue_capacity(), 0);
  Result<std::future<int>> c = pool->Submit(blocked(3));  // an extra thread
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(pool->state().thread_pool_size, 2);
  EXPECT_EQ(pool->state().queue_depth, 1);

  Result<std::future<int>> d = pool->Submit(blocked(4));
  ASSERT_FALSE(d.has_value());
  EXPECT_EQ(d.error().code(), StatusCode::kBulkheadFull);
  EXPECT_EQ(d.error().reason(), "thread_pool_bulkhead_full");
  EXPECT_EQ(pool->state().rejected_calls, 1u);

  release.count_down();
  EXPECT_EQ(a->get(), 1);
  EXPECT_EQ(b->get(), 2);
  EXPECT_EQ(c->get(), 3);
  // With everything done, there is room again.
  Result<std::future<int>> e = pool->Submit([] { return 5; });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->get(), 5);
}

TEST(ThreadPoolBulkhead, RunsOffTheCallersThreadAndCarriesExceptions) {
  auto pool = Make({.max_thread_pool_size = 1, .core_thread_pool_size = 1, .queue_capacity = 2});
  Result<std::future<std::thread::id>> id = pool->Submit([] { return std::this_thread::get_id(); });
  ASSERT_TRUE(id.has_value());
  EXPECT_NE(id->get(), std::this_thread::get_id());
  Result<std::future<void>> thrown = pool->Submit([] { throw std::runtime_error("boom"); });
  ASSERT_TRUE(thrown.has_value());
  EXPECT_THROW(thrown->get(), std::runtime_error);
  // The thread survived its call's exception.
  Result<std::future<int>> after = pool->Submit([] { return 1; });
  ASSERT_TRUE(after.has_value());
  EXPECT_EQ(after->get(), 1);
}

// The destructor runs what was queued before joining, as Java's shutdown().
TEST(ThreadPoolBulkhead, DestructionRunsTheQueue) {
  std::atomic<int> ran{0};
  std::latch release(1);
  {
    auto pool = Make({.max_thread_pool_size = 1, .core_thread_pool_size = 1, .queue_capacity = 5});
    ASSERT_TRUE(pool->Enqueue([&] { release.wait(); }).ok());
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(pool->Enqueue([&] { ++ran; }).ok());
    EXPECT_FALSE(pool->Enqueue([&] { ++ran; }).ok());  // queue full
    release.count_down();
  }
  EXPECT_EQ(ran.load(), 5);
}

// An extra thread with no keep-alive ends as soon as it is idle; the pool
// shrinks back to its core and still serves.
TEST(ThreadPoolBulkhead, ExtraThreadsEndWhenIdle) {
  std::latch release(1);
  auto pool = Make({.max_thread_pool_size = 3,
                    .core_thread_pool_size = 1,
                    .queue_capacity = 0,
                    .keep_alive_duration = Duration::zero()});
  std::vector<std::future<int>> futures;
  for (int i = 0; i < 3; ++i) {
    Result<std::future<int>> f = pool->Submit([&release, i] {
      release.wait();
      return i;
    });
    ASSERT_TRUE(f.has_value()) << i;
    futures.push_back(std::move(*f));
  }
  EXPECT_EQ(pool->state().thread_pool_size, 3);
  EXPECT_FALSE(pool->Submit([] { return 9; }).has_value());
  release.count_down();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(futures[i].get(), i);
  // Two of the three end; which two is the scheduler's business. Wait for it
  // by submitting until the count is back at the core (each Submit also joins
  // the threads that ended).
  while (pool->state().thread_pool_size > 1) std::this_thread::yield();
  EXPECT_EQ(pool->state().thread_pool_size, 1);
  Result<std::future<int>> again = pool->Submit([] { return 7; });
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->get(), 7);
}

// Many submitters at once: every call is either refused at once or run
// exactly once. Run under TSan.
TEST(ThreadPoolBulkhead, ConcurrentSubmittersRunEachAcceptedCallOnce) {
  auto pool = Make({.max_thread_pool_size = 4, .core_thread_pool_size = 2, .queue_capacity = 8});
  constexpr int kThreads = 4;
  constexpr int kCalls = 500;
  std::atomic<int> ran{0};
  std::atomic<int> accepted{0};
  std::atomic<int> refused{0};
  {
    std::vector<std::jthread> submitters;
    for (int t = 0; t < kThreads; ++t) {
      submitters.emplace_back([&] {
        for (int i = 0; i < kCalls; ++i) {
          if (pool->Enqueue([&] { ran.fetch_add(1, std::memory_order_relaxed); }).ok()) {
            accepted.fetch_add(1, std::memory_order_relaxed);
          } else {
            refused.fetch_add(1, std::memory_order_relaxed);
          }
        }
      });
    }
  }
  pool.reset();  // runs what is queued, joins
  EXPECT_EQ(accepted.load() + refused.load(), kThreads * kCalls);
  EXPECT_EQ(ran.load(), accepted.load());
}

TEST(ThreadPoolBulkhead, MetricsUnderResilience4jNames) {
  std::latch release(1);
  auto pool = Make({.max_thread_pool_size = 2, .core_thread_pool_size = 1, .queue_capacity = 3});
  ASSERT_TRUE(pool->Enqueue([&] { release.wait(); }).ok());
  ASSERT_TRUE(pool->Enqueue([] {}).ok());  // queued behind it
  MetricsCollector metrics;
  metrics.AddThreadPoolBulkhead("reports", *pool);
  const std::string text = RenderPrometheus(metrics.Collect());
  EXPECT_THAT(
      text,
      HasSubstr(
          "resilience4j_thread_pool_bulkhead_current_thread_pool_size{name=\"reports\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr(
          "resilience4j_thread_pool_bulkhead_available_queue_capacity{name=\"reports\"} 2\n"));
  EXPECT_THAT(text,
              HasSubstr("resilience4j_thread_pool_bulkhead_queue_depth{name=\"reports\"} 1\n"));
  EXPECT_THAT(
      text,
      HasSubstr("resilience4j_thread_pool_bulkhead_max_thread_pool_size{name=\"reports\"} 2\n"));
  release.count_down();
  EXPECT_TRUE(metrics.RemoveThreadPoolBulkhead("reports"));
}

}  // namespace
}  // namespace fusebox
