#include "apps/gateway/route.h"

#include <gtest/gtest.h>

#include "apps/gateway/handler.h"

namespace fusebox::gateway {
namespace {

TEST(PathPattern, MatchesAndDecodesParameters) {
  Result<PathPattern> p = PathPattern::Create("/v1/{provider}/accounts/{account}/insights");
  ASSERT_TRUE(p.has_value());
  std::optional<Result<Params>> m = p->Match("/v1/instagram/accounts/a%20b/insights");
  ASSERT_TRUE(m.has_value());
  ASSERT_TRUE(m->has_value()) << m->error();
  EXPECT_EQ(**m, (Params{{"provider", "instagram"}, {"account", "a b"}}));
  std::optional<Result<Params>> utf8 = p->Match("/v1/instagram/accounts/caf%C3%A9/insights");
  ASSERT_TRUE(utf8.has_value() && utf8->has_value());
  EXPECT_EQ((**utf8)[1].second, "caf\xC3\xA9");
  EXPECT_FALSE(p->Match("/v1/instagram/accounts/178").has_value());
  EXPECT_FALSE(p->Match("/v1/instagram/users/178/insights").has_value());
}

// The error for `path`, which has the pattern's shape but a bad parameter.
std::string Refusal(const PathPattern& p, std::string_view path) {
  std::optional<Result<Params>> m = p.Match(path);
  if (!m.has_value()) return "<no match>";
  if (m->has_value()) return "<accepted>";
  EXPECT_EQ(m->error().code(), StatusCode::kInvalidArgument);
  return std::string(m->error().message());
}

TEST(PathPattern, RefusesParametersThatAreNotValidKeySegmentsNamingThem) {
  Result<PathPattern> p = PathPattern::Create("/v1/{provider}/accounts/{account}/insights");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(Refusal(*p, "/v1/instagram/accounts/%ff/insights"),
            "path parameter {account} is not valid UTF-8 at byte 0");
  EXPECT_EQ(Refusal(*p, "/v1/%C0%AF/accounts/1/insights"),  // overlong '/'
            "path parameter {provider} is not valid UTF-8 at byte 0");
  EXPECT_EQ(Refusal(*p, "/v1/ig/accounts/%ED%A0%80/insights"),  // a surrogate
            "path parameter {account} is not valid UTF-8 at byte 0");
  EXPECT_EQ(Refusal(*p, "/v1/ig/accounts/1%00/insights"),
            "path parameter {account} holds a control character at byte 1");
  EXPECT_EQ(Refusal(*p, "/v1/ig/accounts/%0a/insights"),
            "path parameter {account} holds a control character at byte 0");
  EXPECT_EQ(Refusal(*p, "/v1/ig/accounts/%7f/insights"),
            "path parameter {account} holds a control character at byte 0");
  EXPECT_EQ(Refusal(*p, "/v1/ig/accounts/%C2%85/insights"),  // NEL, a C1 control
            "path parameter {account} holds a control character at byte 0");
  // An encoded slash never makes a parameter span two segments.
  EXPECT_EQ(Refusal(*p, "/v1/ig/accounts/a%2Fb/insights"),
            "path parameter {account} holds a '/' or '\\' at byte 1");
  EXPECT_EQ(Refusal(*p, "/v1/ig/accounts/a%5cb/insights"),
            "path parameter {account} holds a '/' or '\\' at byte 1");
  // Dot segments, raw or encoded, would be resolved upstream.
  for (const char* dots : {"..", ".", "%2e%2e", "%2E", ".%2e"}) {
    EXPECT_EQ(Refusal(*p, "/v1/ig/accounts/" + std::string(dots) + "/insights"),
              "path parameter {account} is a dot segment (\".\" or \"..\")")
        << dots;
  }
  EXPECT_EQ(Refusal(*p, "/v1/ig/accounts/.../insights"), "<accepted>");
  EXPECT_EQ(Refusal(*p, "/v1/ig/accounts//insights"), "path parameter {account} is empty");
  EXPECT_EQ(Refusal(*p, "/v1/ig/accounts/%zz/insights"),
            "path parameter {account} has a malformed percent-escape");
  EXPECT_EQ(Refusal(*p, "/v1/ig/accounts/%f/insights"),
            "path parameter {account} has a malformed percent-escape");
  EXPECT_EQ(Refusal(*p, "/v1/ig/accounts/" + std::string(kMaxParameterBytes, '7') + "/insights"),
            "<accepted>");
  EXPECT_EQ(
      Refusal(*p, "/v1/ig/accounts/" + std::string(kMaxParameterBytes + 1, '7') + "/insights"),
      "path parameter {account} is longer than 256 bytes");
  // Decoded length counts: 86 escapes of 3 bytes each are 86 bytes.
  std::string escaped;
  for (int i = 0; i < 86; ++i) escaped += "%41";
  EXPECT_EQ(Refusal(*p, "/v1/ig/accounts/" + escaped + "/insights"), "<accepted>");
}

TEST(PathPattern, RejectsBadPatterns) {
  std::vector<std::string> names;
  std::string why;
  EXPECT_FALSE(PathPattern::Parse("v1/x", names, why));
  EXPECT_FALSE(PathPattern::Parse("/v1/a{b}", names, why));
  EXPECT_FALSE(PathPattern::Parse("/v1/{a}/{a}", names, why));
  EXPECT_FALSE(PathPattern::Parse("/v1/{a-b}", names, why));
  // An empty name is no parameter.
  EXPECT_FALSE(PathPattern::Parse("/v1/{}/x", names, why));
  EXPECT_NE(why.find("\"{}\""), std::string::npos) << why;
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
