#include "fusebox/redis/reply.h"

#include <gtest/gtest.h>

#include <string>

namespace fusebox::redis {
namespace {

TEST(Reply, IsErrorCodeMatchesTheFirstWordOnly) {
  const Reply e = Reply::Error("NOSCRIPT No matching script. Please use EVAL.");
  EXPECT_TRUE(e.IsErrorCode("NOSCRIPT"));
  EXPECT_FALSE(e.IsErrorCode("NOSCRIPTX"));
  EXPECT_FALSE(e.IsErrorCode("NOSCR"));
  EXPECT_TRUE(Reply::Error("BUSY").IsErrorCode("BUSY"));
  EXPECT_FALSE(Reply::String("NOSCRIPT x").IsErrorCode("NOSCRIPT"));
}

TEST(Reply, ToStringShowsShapeAndCutsLongStrings) {
  EXPECT_EQ(Reply::Nil().ToString(), "nil");
  EXPECT_EQ(Reply::Integer(-2).ToString(), "-2");
  EXPECT_EQ(Reply::StatusReply("OK").ToString(), "+OK");
  EXPECT_EQ(Reply::Error("ERR x").ToString(), "-ERR x");
  EXPECT_EQ(Reply::Array({Reply::String("opened"), Reply::Integer(1)}).ToString(),
            "[\"opened\", 1]");
  const std::string shown = Reply::String(std::string(100, 'a')).ToString();
  EXPECT_EQ(shown.size(), 64u + 2 + 3);
}

TEST(Reply, StringsAreBinarySafeValues) {
  const std::string bytes("a\0b", 3);
  EXPECT_EQ(Reply::String(bytes).str.size(), 3u);
  EXPECT_EQ(Reply::String(bytes), Reply::String(bytes));
  EXPECT_NE(Reply::String(bytes), Reply::StatusReply(bytes));
}

}  // namespace
}  // namespace fusebox::redis
