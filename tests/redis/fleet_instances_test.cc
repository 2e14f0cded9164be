// RedisSharedState::PublishInstance() and ListInstances() against a real
// redis-server: two stores (two instances) seen by one listing, stale and
// malformed entries dropped, ids checked on the way in and on the way out,
// and the one key they use (one Redis Cluster slot).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "fusebox/redis/shared_state.h"
#include "tests/redis/redis_server.h"

namespace fusebox::redis {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::PollUntil;
using testing::RedisServer;

constexpr char kKey[] = "fusebox:v1:{instances}";

class FleetInstancesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisServer::Start();
    ASSERT_TRUE(server.has_value()) << server.error();
    server_ = std::move(*server);
    auto conn = server_->Connect();
    ASSERT_TRUE(conn.has_value()) << conn.error();
    raw_ = std::move(*conn);
  }

  std::shared_ptr<RedisSharedState> Store() {
    SharedStateOptions o;
    o.connection.port = server_->port();
    o.connection.connect_timeout = milliseconds(500);
    o.connection.command_timeout = milliseconds(500);
    auto s = RedisSharedState::Create(std::move(o));
    EXPECT_TRUE(s.has_value()) << s.error();
    return s ? *s : nullptr;
  }

  Reply Raw(std::initializer_list<std::string_view> args) {
    Result<Reply> r = raw_->Command(args);
    EXPECT_TRUE(r.has_value()) << r.error();
    return r ? *r : Reply::Nil();
  }

  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<Connection> raw_;
};

TEST_F(FleetInstancesTest, TwoInstancesAreSeenByOneListingInOneKey) {
  auto a = Store();
  auto b = Store();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(
      a->PublishInstance("gw-a:8080", R"({"calls_per_s":1.5})", seconds(6), seconds(5)).ok());
  ASSERT_TRUE(b->PublishInstance("gw-b:8080", R"({"calls_per_s":2})", seconds(6), seconds(5)).ok());
  Result<InstanceListing> got = a->ListInstances(seconds(6), 100, seconds(5));
  ASSERT_TRUE(got.has_value()) << got.error();
  ASSERT_EQ(got->instances.size(), 2u);
  EXPECT_EQ(got->instances[0].id, "gw-a:8080");
  EXPECT_EQ(got->instances[0].json, R"({"calls_per_s":1.5})");
  EXPECT_EQ(got->instances[1].id, "gw-b:8080");
  EXPECT_LT(got->instances[1].age, seconds(6));
  EXPECT_FALSE(got->truncated);
  // One hash, expiring with the fleet's last heartbeat.
  EXPECT_EQ(Raw({"HLEN", kKey}).integer, 2);
  const Reply ttl = Raw({"PTTL", kKey});
  EXPECT_GT(ttl.integer, 0);
  EXPECT_LE(ttl.integer, 6000);
  EXPECT_EQ(Raw({"DBSIZE"}).integer, 1);
}

// An entry older than max_age (by the server's clock) is not answered, and
// is deleted; so is one without the stamp or with an id too long (written
// by something else than PublishInstance).
TEST_F(FleetInstancesTest, StaleAndMalformedEntriesAreDroppedFromRedis) {
  auto a = Store();
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->PublishInstance("live", "{}", seconds(60), seconds(5)).ok());
  Raw({"HSET", kKey, "stale", R"({"at_ms":1000,"figures":{}})"});
  Raw({"HSET", kKey, "garbage", "not json"});
  const std::string long_id(RedisSharedState::kMaxInstanceIdBytes + 1, 'x');
  Raw({"HSET", kKey, long_id, R"({"at_ms":99999999999999,"figures":{}})"});
  Result<InstanceListing> got = a->ListInstances(seconds(6), 100, seconds(5));
  ASSERT_TRUE(got.has_value()) << got.error();
  ASSERT_EQ(got->instances.size(), 1u);
  EXPECT_EQ(got->instances[0].id, "live");
  EXPECT_EQ(got->dropped, 3);
  EXPECT_EQ(Raw({"HLEN", kKey}).integer, 1);
  // The live one ages out in turn (real time: the server's clock).
  EXPECT_TRUE(PollUntil([&] {
    Result<InstanceListing> l = a->ListInstances(milliseconds(50), 100, seconds(5));
    return l.has_value() && l->instances.empty();
  }));
  EXPECT_EQ(Raw({"HLEN", kKey}).integer, 0);
}

// Ids are other instances' input: bounded and without control bytes on the
// way in; markup is only text, and comes back byte for byte.
TEST_F(FleetInstancesTest, IdsAreCheckedAndComeBackVerbatim) {
  auto a = Store();
  ASSERT_NE(a, nullptr);
  const std::string hostile = R"(<img src=x onerror=alert(1)>"')";
  ASSERT_TRUE(a->PublishInstance(hostile, "{}", seconds(6), seconds(5)).ok());
  Status s = a->PublishInstance(std::string(129, 'x'), "{}", seconds(6), seconds(5));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("instance id"), std::string_view::npos) << s.message();
  EXPECT_EQ(a->PublishInstance("a\nb", "{}", seconds(6), seconds(5)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(a->PublishInstance("", "{}", seconds(6), seconds(5)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(a->PublishInstance("ok", "[1]", seconds(6), seconds(5)).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(a->PublishInstance("ok", "{}", Duration::zero(), seconds(5)).code(),
            StatusCode::kInvalidArgument);
  Result<InstanceListing> got = a->ListInstances(seconds(6), 100, seconds(5));
  ASSERT_TRUE(got.has_value()) << got.error();
  ASSERT_EQ(got->instances.size(), 1u);
  EXPECT_EQ(got->instances[0].id, hostile);
}

// At most max_instances answered (and never more than kMaxInstances), said
// by `truncated`.
TEST_F(FleetInstancesTest, ListingIsCappedAndSaysSo) {
  auto a = Store();
  ASSERT_NE(a, nullptr);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(a->PublishInstance("gw-" + std::to_string(i), "{}", seconds(6), seconds(5)).ok());
  }
  Result<InstanceListing> three = a->ListInstances(seconds(6), 3, seconds(5));
  ASSERT_TRUE(three.has_value()) << three.error();
  EXPECT_EQ(three->instances.size(), 3u);
  EXPECT_TRUE(three->truncated);
  Result<InstanceListing> all = a->ListInstances(seconds(6), 100000, seconds(5));
  ASSERT_TRUE(all.has_value()) << all.error();
  EXPECT_EQ(all->instances.size(), 5u);
  EXPECT_FALSE(all->truncated);
}

}  // namespace
}  // namespace fusebox::redis
