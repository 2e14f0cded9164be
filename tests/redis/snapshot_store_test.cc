// RedisSnapshotStore against a real redis-server, alone and under
// StaleIfErrorReader: two instances share a snapshot, ages come from Redis'
// TTLs, and a dead Redis costs neither an error nor a wait to a good call.
#include "fusebox/redis/snapshot_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

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

  std::unique_ptr<RedisServer> server_;
};

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
  // The age grows with Redis' clock.
  ASSERT_TRUE(PollUntil([&] {
    auto s = store->Get("stats:acct-1");
    return s && *s && (*s)->age >= milliseconds(50);
  }));
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
  o.max_age = Duration::zero();
  auto bad = RedisSnapshotStore::Create(o);
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(std::string(bad.error().message()), ::testing::HasSubstr("max_age"));
}

}  // namespace
}  // namespace fusebox::redis
