// RedisSnapshotStore against a real redis-server, alone and under
// StaleIfErrorReader: two instances share a snapshot, ages come from Redis'
// TTLs, and a dead Redis costs neither an error nor a wait to a good call.
#include "fusebox/redis/snapshot_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "fusebox/stale_cache.h"
#include "tests/redis/redis_server.h"

namespace fusebox::redis {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::PollUntil;
using testing::RedisServer;

class RedisSnapshotStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisServer::Start();
    ASSERT_TRUE(server.has_value()) << server.error();
    server_ = std::move(*server);
  }

  std::unique_ptr<RedisSnapshotStore> Store(Duration max_age = seconds(60)) {
    SnapshotStoreOptions o;
    o.connection = server_->connection_options(milliseconds(200));
    o.connection.connect_timeout = milliseconds(200);
    o.max_age = max_age;
    auto s = RedisSnapshotStore::Create(o);
    EXPECT_TRUE(s.has_value()) << s.error();
    return s ? std::move(*s) : nullptr;
  }

  // A store with one connection and a 2 s command timeout, holding "k".
  std::unique_ptr<RedisSnapshotStore> OneConnectionWithK(int max_waiters, Duration max_wait) {
    SnapshotStoreOptions o;
    o.connection = server_->connection_options(seconds(2));
    o.connections = 1;
    o.max_waiters = max_waiters;
    o.max_wait = max_wait;
    auto store = RedisSnapshotStore::Create(o);
    if (!store || !(*store)->Put("k", "v").ok()) return nullptr;
    return std::move(*store);
  }

  void TearDown() override {
    if (server_) (void)server_->Resume();  // Whatever a test did: never leave it stopped.
  }

  std::unique_ptr<RedisServer> server_;
};

// A pool smaller than its callers queues them: busy is not down, and every
// read of a stored key finds it (it used to fail at once, "every connection
// busy", which a caller took for a miss).
TEST_F(RedisSnapshotStoreTest, ABusyPoolQueuesItsCallersInsteadOfRefusingThem) {
  auto store = OneConnectionWithK(/*max_waiters=*/16, /*max_wait=*/seconds(2));
  ASSERT_NE(store, nullptr);
  std::atomic<int> found{0}, failed{0};
  std::latch start(16);
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      start.arrive_and_wait();
      for (int i = 0; i < 50; ++i) {
        auto g = store->Get("k");
        (g && *g ? found : failed).fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(found.load(), 16 * 50);
  const RedisSnapshotStore::Stats stats = store->stats();
  EXPECT_GT(stats.pool_waits, 0);
  EXPECT_EQ(stats.pool_queue_full, 0);
  EXPECT_EQ(stats.pool_in_use, 0);
}

// SIGSTOP: Redis holds the connection and answers nothing. The caller's
// budget bounds the I/O (the command timeout is 2 s), a waiter gives up at its
// own budget, and a caller finding the queue full is refused at once.
TEST_F(RedisSnapshotStoreTest, ACallersBudgetBoundsItsIoAndItsWaitForAConnection) {
  auto store = OneConnectionWithK(/*max_waiters=*/1, /*max_wait=*/seconds(5));
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(server_->Suspend().ok());
  using Clock = std::chrono::steady_clock;
  Clock::duration a_took{}, b_took{};
  Result<std::optional<Snapshot>> a = std::optional<Snapshot>(), b = std::optional<Snapshot>();
  std::thread ta([&] {
    const auto t0 = Clock::now();
    a = store->GetWithin("k", milliseconds(600));
    a_took = Clock::now() - t0;
  });
  ASSERT_TRUE(PollUntil([&] { return store->stats().pool_in_use == 1; }));
  std::thread tb([&] {
    const auto t0 = Clock::now();
    b = store->GetWithin("k", milliseconds(100));
    b_took = Clock::now() - t0;
  });
  ASSERT_TRUE(PollUntil([&] { return store->stats().pool_waiting == 1; }));
  auto c = store->Get("k");  // The queue (1) is full.
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), StatusCode::kUnavailable);
  tb.join();
  ta.join();
  ASSERT_FALSE(a.has_value());
  EXPECT_EQ(a.error().code(), StatusCode::kTimeout) << a.error();
  EXPECT_LT(a_took, milliseconds(1500));  // Not the 2 s command timeout.
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().code(), StatusCode::kTimeout) << b.error();
  EXPECT_LT(b_took, milliseconds(1500));
  const RedisSnapshotStore::Stats stats = store->stats();
  EXPECT_EQ(stats.pool_queue_full, 1);
  EXPECT_EQ(stats.pool_wait_timeouts, 1);
  EXPECT_EQ(stats.timeouts, 1);
  // No budget left: no I/O, no wait.
  auto none = store->GetWithin("k", Duration::zero());
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kTimeout);
  ASSERT_TRUE(server_->Resume().ok());
}

TEST_F(RedisSnapshotStoreTest, StoresBytesExactlyAndMeasuresAgeByRedisTtl) {
  auto store = Store();
  const std::string value("{\"followers\":10}\0tail\xff", 22);
  ASSERT_TRUE(store->Put("stats:acct-1", value).ok());
  auto snap = store->Get("stats:acct-1");
  ASSERT_TRUE(snap.has_value()) << snap.error();
  ASSERT_TRUE(snap->has_value());
  EXPECT_EQ((*snap)->value, value);
  EXPECT_GE((*snap)->age, Duration::zero());
  EXPECT_LT((*snap)->age, milliseconds(100));
  // The age grows with Redis' clock: what has run off the TTL, not what is
  // left of it (a minute, max_age, minus the age).
  Duration age{};
  ASSERT_TRUE(PollUntil([&] {
    auto s = store->Get("stats:acct-1");
    if (!s || !*s) return false;
    age = (*s)->age;
    return age >= milliseconds(50);
  }));
  EXPECT_LT(age, seconds(30));
  auto missing = store->Get("stats:acct-2");
  ASSERT_TRUE(missing.has_value());
  EXPECT_FALSE(missing->has_value());
  ASSERT_TRUE(store->Erase("stats:acct-1").ok());
  EXPECT_FALSE(store->Get("stats:acct-1")->has_value());
  EXPECT_TRUE(store->Erase("never-there").ok());
}

TEST_F(RedisSnapshotStoreTest, ASnapshotOlderThanMaxAgeIsGone) {
  auto store = Store(milliseconds(200));
  ASSERT_TRUE(store->Put("k", "v").ok());
  ASSERT_TRUE(PollUntil([&] {
    auto s = store->Get("k");
    return s && !s->has_value();
  }));
}

TEST_F(RedisSnapshotStoreTest, AnotherInstanceServesTheSnapshotStaleWhenItsCallFails) {
  auto store_a = Store(), store_b = Store();
  auto reader_a =
      *StaleIfErrorReader::Create({.store = store_a.get(), .fresh_for = Duration::zero()});
  auto reader_b =
      *StaleIfErrorReader::Create({.store = store_b.get(), .fresh_for = Duration::zero()});
  auto ok = reader_a->Read("posts:acct-1", [] { return Result<std::string>("[1,2,3]"); });
  ASSERT_TRUE(ok.has_value());
  EXPECT_FALSE(ok->stale);
  // Older than fresh_for (zero) once Redis' clock has moved a millisecond.
  ASSERT_TRUE(PollUntil([&] {
    auto s = store_b->Get("posts:acct-1");
    return s && *s && (*s)->age > Duration::zero();
  }));
  auto r = reader_b->Read("posts:acct-1", [] {
    return Result<std::string>(Status::Rejected(StatusCode::kCircuitOpen, "open", std::nullopt));
  });
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_TRUE(r->stale);
  EXPECT_EQ(r->value, "[1,2,3]");
  EXPECT_GT(r->age, Duration::zero());
  EXPECT_EQ(r->hidden_error.code(), StatusCode::kCircuitOpen);
}

TEST_F(RedisSnapshotStoreTest, ADeadRedisNeitherFailsAGoodCallNorMakesItWait) {
  auto store = Store();
  auto reader = *StaleIfErrorReader::Create({.store = store.get(), .fresh_for = Duration::zero()});
  ASSERT_TRUE(server_->Stop().ok());
  auto worst = std::chrono::steady_clock::duration::zero();
  for (int i = 0; i < 100; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = reader->Read("k", [] { return Result<std::string>("fresh"); });
    worst = std::max(worst, std::chrono::steady_clock::now() - t0);
    ASSERT_TRUE(r.has_value()) << r.error();
    EXPECT_EQ(r->value, "fresh");
  }
  EXPECT_LT(worst, milliseconds(400));
  auto g = store->Get("k");
  ASSERT_FALSE(g.has_value());
  EXPECT_EQ(g.error().code(), StatusCode::kUnavailable);
  // And a failing call with no reachable snapshot gets its own error back.
  auto r =
      reader->Read("k", [] { return Result<std::string>(Status::Unavailable("upstream 503")); });
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(std::string(r.error().message()), ::testing::HasSubstr("upstream 503"));
}

TEST_F(RedisSnapshotStoreTest, RefusesOversizedValuesAndBadOptions) {
  SnapshotStoreOptions o;
  o.connection = server_->connection_options();
  o.max_value_bytes = 8;
  auto store = RedisSnapshotStore::Create(o);
  ASSERT_TRUE(store.has_value());
  Status s = (*store)->Put("k", "123456789");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("max_value_bytes"));
  // Exactly max_value_bytes is within the limit, stored and read back.
  ASSERT_TRUE((*store)->Put("k", "12345678").ok());
  Result<std::optional<Snapshot>> back = (*store)->Get("k");
  ASSERT_TRUE(back.has_value()) << back.error();
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((*back)->value, "12345678");
  o.max_age = Duration::zero();
  auto bad = RedisSnapshotStore::Create(o);
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(std::string(bad.error().message()), ::testing::HasSubstr("max_age"));
}

}  // namespace
}  // namespace fusebox::redis
