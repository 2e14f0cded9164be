#include "src/json.h"

#include <gtest/gtest.h>

#include <string>

namespace fusebox::meta::internal {
namespace {

TEST(MetaJson, ReadsNestedDocument) {
  auto v = ParseJson(R"( {"a":[1,-2.5e1,"x\u00e9\ud83d\ude00",true,false,null],"b":{}} )");
  ASSERT_TRUE(v.has_value());
  ASSERT_TRUE(v->is_object());
  const JsonValue* a = v->Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->array.size(), 6u);
  EXPECT_TRUE(a->array[0].is_integer);
  EXPECT_EQ(a->array[0].integer, 1);
  EXPECT_FALSE(a->array[1].is_integer);
  EXPECT_DOUBLE_EQ(a->array[1].number, -25);
  EXPECT_EQ(a->array[2].string, "x\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_TRUE(a->array[3].boolean);
}

TEST(MetaJson, DuplicateKeysKeptAndFindTakesTheLast) {
  auto v = ParseJson(R"({"k":1,"k":2})");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->members.size(), 2u);
  EXPECT_EQ(v->Find("k")->integer, 2);
}

TEST(MetaJson, RejectsWhatRfc8259Rejects) {
  for (const char* bad : {"",
                          " ",
                          "{",
                          "[1,]",
                          R"({"a":1,})",
                          "01",
                          "1.",
                          ".5",
                          "-",
                          "1e",
                          "+1",
                          "'a'",
                          R"("a\x")",
                          "\"a\nb\"",
                          R"("\ud800")",
                          R"("\udc00")",
                          R"("\ud800\u0041")",
                          "tru",
                          "nul",
                          "{} {}",
                          R"({"a" 1})",
                          R"({a:1})",
                          "[1 2]",
                          "/*c*/1",
                          "NaN",
                          "Infinity"}) {
    EXPECT_FALSE(ParseJson(bad).has_value()) << bad;
  }
}

TEST(MetaJson, BoundsDepthAndSize) {
  std::string deep(65, '[');
  deep += std::string(65, ']');
  EXPECT_FALSE(ParseJson(deep).has_value());
  std::string ok(64, '[');
  ok += std::string(64, ']');
  EXPECT_TRUE(ParseJson(ok).has_value());
  EXPECT_FALSE(ParseJson("[1,2,3]", JsonLimits{.max_bytes = 6}).has_value());
}

TEST(MetaJson, HugeIntegersAreNumbersButNotIntegers) {
  auto v = ParseJson("99999999999999999999999");
  ASSERT_TRUE(v.has_value());
  EXPECT_FALSE(v->is_integer);
  EXPECT_GT(v->number, 1e22);
  auto w = ParseJson("1e400");
  ASSERT_TRUE(w.has_value());
  EXPECT_TRUE(w->is_number());
}

}  // namespace
}  // namespace fusebox::meta::internal
