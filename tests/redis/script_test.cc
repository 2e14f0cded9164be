// fusebox::redis::Script against a real redis-server: EVALSHA first, EVAL
// once on NOSCRIPT (T10 at the level of one script).
#include "fusebox/redis/script.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "fusebox/redis/circuit_scripts.h"
#include "tests/redis/redis_server.h"

namespace fusebox::redis {
namespace {

using ::testing::HasSubstr;
using testing::RedisServer;

class ScriptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisServer::Start();
    ASSERT_TRUE(server.has_value()) << server.error();
    server_ = std::move(*server);
    auto conn = server_->Connect();
    ASSERT_TRUE(conn.has_value()) << conn.error();
    conn_ = std::move(*conn);
  }

  std::int64_t Calls(const std::string& command) {
    auto calls = server_->CommandCalls();
    EXPECT_TRUE(calls.has_value()) << calls.error();
    if (!calls) return -1;
    auto it = calls->find(command);
    return it == calls->end() ? 0 : it->second;
  }

  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<Connection> conn_;
};

TEST_F(ScriptTest, Sha1MatchesScriptLoad) {
  for (const Script* s : {&CircuitScripts::TripScript(), &CircuitScripts::AcquireScript(),
                          &CircuitScripts::CloseScript(), &CircuitScripts::ReleaseScript()}) {
    Result<Reply> r = conn_->Command({"SCRIPT", "LOAD", s->body()});
    ASSERT_TRUE(r.has_value()) << r.error();
    EXPECT_EQ(*r, Reply::String(s->sha1()));
  }
}

TEST_F(ScriptTest, FallsBackToEvalOnceOnNoscriptThenUsesEvalsha) {
  const Script script("return redis.call('INCRBY', KEYS[1], ARGV[1])");
  ASSERT_TRUE(server_->ResetStats().ok());
  // Fresh server: EVALSHA -> NOSCRIPT -> EVAL.
  Result<Reply> r = script.Run(*conn_, {"n"}, {"5"});
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(*r, Reply::Integer(5));
  EXPECT_EQ(Calls("evalsha"), 1);
  EXPECT_EQ(Calls("eval"), 1);
  // Cached now: EVALSHA only.
  r = script.Run(*conn_, {"n"}, {"2"});
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(*r, Reply::Integer(7));
  EXPECT_EQ(Calls("evalsha"), 2);
  EXPECT_EQ(Calls("eval"), 1);
  // SCRIPT FLUSH empties the cache: one more fallback, and the script ran
  // exactly once (NOSCRIPT means it did not run).
  ASSERT_TRUE(server_->ScriptFlush().ok());
  r = script.Run(*conn_, {"n"}, {"1"});
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(*r, Reply::Integer(8));
  EXPECT_EQ(Calls("evalsha"), 3);
  EXPECT_EQ(Calls("eval"), 2);
}

TEST_F(ScriptTest, RuntimeErrorOfTheScriptIsInternal) {
  const Script script("return redis.call('NO_SUCH_COMMAND')");
  Result<Reply> r = script.Run(*conn_, {}, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInternal);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("EVAL"));
  EXPECT_FALSE(conn_->broken());
}

TEST_F(ScriptTest, BrokenConnectionIsUnavailable) {
  const Script script("return 1");
  ASSERT_TRUE(server_->Kill().ok());
  Result<Reply> r = script.Run(*conn_, {}, {});
  if (r.has_value()) r = script.Run(*conn_, {}, {});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace fusebox::redis
