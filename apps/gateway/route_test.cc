#include "apps/gateway/route.h"

#include <gtest/gtest.h>

#include "apps/gateway/handler.h"

namespace fusebox::gateway {
namespace {

TEST(PathPattern, MatchesAndDecodesParameters) {
  Result<PathPattern> p = PathPattern::Create("/v1/{provider}/accounts/{account}/insights");
  ASSERT_TRUE(p.has_value());
  std::optional<Params> m = p->Match("/v1/instagram/accounts/a%20b/insights");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(*m, (Params{{"provider", "instagram"}, {"account", "a b"}}));
  EXPECT_FALSE(p->Match("/v1/instagram/accounts/178").has_value());
  EXPECT_FALSE(p->Match("/v1/instagram/accounts//insights").has_value());
  // An encoded slash never makes a parameter span two segments.
  EXPECT_FALSE(p->Match("/v1/instagram/accounts/a%2Fb/insights").has_value());
  EXPECT_FALSE(p->Match("/v1/instagram/accounts/%zz/insights").has_value());
}

TEST(PathPattern, RejectsBadPatterns) {
  std::vector<std::string> names;
  std::string why;
  EXPECT_FALSE(PathPattern::Parse("v1/x", names, why));
  EXPECT_FALSE(PathPattern::Parse("/v1/a{b}", names, why));
  EXPECT_FALSE(PathPattern::Parse("/v1/{a}/{a}", names, why));
  EXPECT_FALSE(PathPattern::Parse("/v1/{a-b}", names, why));
}

TEST(Expand, EncodesParametersForTheUpstreamPath) {
  EXPECT_EQ(Expand("/{account}/insights", {{"account", "a b/c"}}, true), "/a%20b%2Fc/insights");
  EXPECT_EQ(Expand("{provider}", {{"provider", "ig"}}, false), "ig");
}

TEST(ParseQuery, DecodesPairs) {
  EXPECT_EQ(ParseQuery("a=1&b=x+y&c&d=%41"), (std::vector<std::pair<std::string, std::string>>{
                                                 {"a", "1"}, {"b", "x y"}, {"c", ""}, {"d", "A"}}));
}

TEST(FoldSubject, HidesTheSubjectSegment) {
  EXPECT_EQ(FoldSubject("provider:instagram:read:178:quota"), "provider:instagram:read:*:quota");
  EXPECT_EQ(FoldSubject("provider:ig:read:a:b:c:transient"), "provider:ig:read:*:transient");
  EXPECT_EQ(FoldSubject("payment"), "payment");
}

TEST(TokenEquals, ComparesWholeTokens) {
  EXPECT_TRUE(TokenEquals("abc", "abc"));
  EXPECT_FALSE(TokenEquals("abc", "abd"));
  EXPECT_FALSE(TokenEquals("ab", "abc"));
  EXPECT_FALSE(TokenEquals("abcd", "abc"));
  EXPECT_FALSE(TokenEquals("", "abc"));
}

}  // namespace
}  // namespace fusebox::gateway
