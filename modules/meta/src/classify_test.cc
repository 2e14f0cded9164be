#include "fusebox/meta/classify.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>

namespace fusebox::meta {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

Response Error(int status, std::string error_json, decltype(Response::headers) headers = {}) {
  return Response{
      .status = status, .headers = std::move(headers), .body = R"({"error":)" + error_json + "}"};
}

TEST(MetaClassify, OrderCode200ApiAccessBlockedIsRateLimitNotAuthorization) {
  const Classification c =
      Classify(Error(400, R"({"message":"(#200) API access blocked.","code":200})"));
  EXPECT_EQ(c.kind, Kind::kRateLimit);
  EXPECT_EQ(c.retry_after, seconds(120));
  EXPECT_THAT(c.reason, HasSubstr("\"api access blocked\""));
}

TEST(MetaClassify, Order503WithRetryAfterIsTransientWithoutRetryAfter) {
  const Classification c = Classify(Response{.status = 503, .headers = {{"Retry-After", "30"}}});
  EXPECT_EQ(c.kind, Kind::kTransient);
  EXPECT_EQ(c.retry_after, std::nullopt);
  EXPECT_EQ(c.reason, "transient: HTTP status 503");
}

TEST(MetaClassify, Http429WinsOverEverything) {
  const Classification c = Classify(Error(429, R"({"code":190,"error_subcode":463})"));
  EXPECT_EQ(c.kind, Kind::kRateLimit);
  EXPECT_THAT(c.reason, HasSubstr("HTTP status 429"));
}

TEST(MetaClassify, RateLimitCodeBeats5xx) {
  EXPECT_EQ(Classify(Error(500, R"({"code":4})")).kind, Kind::kRateLimit);
}

TEST(MetaClassify, EveryDefaultRateLimitCode) {
  for (int code : {4, 17, 32, 613, 80000, 80001, 80002, 80003, 80004, 80005, 80006, 80007, 80008,
                   80009, 80014}) {
    EXPECT_EQ(Classify(Error(400, R"({"code":)" + std::to_string(code) + "}")).kind,
              Kind::kRateLimit)
        << code;
  }
  for (int code : {80010, 80011, 80012, 80013, 341, 9, 368}) {
    EXPECT_EQ(Classify(Error(400, R"({"code":)" + std::to_string(code) + "}")).kind, Kind::kInvalid)
        << code;
  }
}

TEST(MetaClassify, PhrasesCaseInsensitiveButTemporarilyAloneNever) {
  for (const char* m : {"Too Many Calls", "RATE LIMIT hit", "too many requests",
                        "User request limit", "api access blocked"}) {
    EXPECT_EQ(Classify(Error(400, std::string(R"({"code":1,"message":")") + m + "\"}")).kind,
              Kind::kRateLimit)
        << m;
  }
  EXPECT_EQ(Classify(Error(400, R"({"code":368,"message":"temporarily blocked"})")).kind,
            Kind::kInvalid);
}

TEST(MetaClassify, TransientStatuses) {
  for (int s : {408, 500, 502, 504, 599}) EXPECT_EQ(Classify({.status = s}).kind, Kind::kTransient);
  for (int s : {400, 404, 407, 409, 600}) EXPECT_EQ(Classify({.status = s}).kind, Kind::kInvalid);
}

TEST(MetaClassify, AuthorizationRules) {
  EXPECT_EQ(Classify({.status = 401}).kind, Kind::kAuthorization);
  EXPECT_EQ(Classify({.status = 403}).kind, Kind::kAuthorization);
  for (int code : {10, 102, 190, 200, 250, 299}) {
    EXPECT_EQ(Classify(Error(400, R"({"code":)" + std::to_string(code) + "}")).kind,
              Kind::kAuthorization)
        << code;
  }
  for (int sub : {458, 459, 460, 463, 464, 467, 492}) {
    const Classification c =
        Classify(Error(400, R"({"code":100,"error_subcode":)" + std::to_string(sub) + "}"));
    EXPECT_EQ(c.kind, Kind::kAuthorization) << sub;
    EXPECT_THAT(c.reason, HasSubstr("error.error_subcode " + std::to_string(sub)));
  }
  EXPECT_EQ(Classify(Error(400, R"({"code":300})")).kind, Kind::kInvalid);
}

TEST(MetaClassify, OAuthExceptionTypeAloneIsNotAuthorization) {
  const Classification c =
      Classify(Error(400, R"({"type":"OAuthException","code":100,"error_subcode":33})"));
  EXPECT_EQ(c.kind, Kind::kInvalid);
  EXPECT_EQ(c.reason,
            "invalid: no rule matched (HTTP status 400, error.code 100, "
            "error.error_subcode 33)");
  EXPECT_EQ(c.error.type, "OAuthException");
}

TEST(MetaClassify, CodesMustBeJsonIntegers) {
  EXPECT_EQ(Classify(Error(400, R"({"code":"4"})")).kind, Kind::kInvalid);
  EXPECT_EQ(Classify(Error(400, R"({"code":4.0})")).kind, Kind::kInvalid);
  EXPECT_EQ(Classify({.status = 400, .body = "Bad Request"}).kind, Kind::kInvalid);
  EXPECT_EQ(Classify({.status = 400, .body = R"({"error":"4"})"}).kind, Kind::kInvalid);
}

TEST(MetaClassify, RulesetGapsCanBeOptedInto) {
  Rules rules;
  rules.rate_limit_codes.push_back(341);
  rules.rate_limit_code_subcodes.push_back({9, 2207042});
  rules.transient_codes = {-1, -2, 1, 2};
  EXPECT_EQ(Classify(Error(400, R"({"code":341})"), rules).kind, Kind::kRateLimit);
  EXPECT_EQ(Classify(Error(400, R"({"code":9,"error_subcode":2207042})"), rules).kind,
            Kind::kRateLimit);
  EXPECT_EQ(Classify(Error(400, R"({"code":9,"error_subcode":1})"), rules).kind, Kind::kInvalid);
  const Classification c = Classify(Error(400, R"({"code":-1,"error_subcode":2207001})"), rules);
  EXPECT_EQ(c.kind, Kind::kTransient);
  EXPECT_THAT(c.reason, HasSubstr("error.code -1 is a transient code"));
  // And they are outside the defaults.
  EXPECT_EQ(Classify(Error(400, R"({"code":341})")).kind, Kind::kInvalid);
  EXPECT_EQ(Classify(Error(400, R"({"code":-1})")).kind, Kind::kInvalid);
}

TEST(MetaClassify, ReasonNamesTheRecoverySource) {
  const Classification c = Classify(
      Error(400, R"({"code":80002})",
            {{"X-Business-Use-Case-Usage", R"({"1":[{"estimated_time_to_regain_access":45}]})"}}));
  EXPECT_EQ(c.retry_after, seconds(2700));
  EXPECT_EQ(c.reason,
            "rate-limit: error.code 80002 is a rate-limit code; wait 2700 s from "
            "X-Business-Use-Case-Usage");
}

TEST(MetaClassify, KindNames) {
  EXPECT_EQ(KindName(Kind::kRateLimit), "rate-limit");
  EXPECT_EQ(KindName(Kind::kTransient), "transient");
  EXPECT_EQ(KindName(Kind::kAuthorization), "authorization");
  EXPECT_EQ(KindName(Kind::kInvalid), "invalid");
}

// docs/meta.md: the sets are exact. The neighbours of every default code and
// subcode are invalid, so a widened range or an off-by-one fails here.
TEST(MetaClassify, TheNeighboursOfEveryDefaultCodeAreInvalid) {
  for (int code :
       {3, 5, 16, 18, 31, 33, 612, 614, 79999, 80015, 9, 11, 101, 103, 189, 191, 199, 300}) {
    EXPECT_EQ(Classify(Error(400, R"({"code":)" + std::to_string(code) + "}")).kind, Kind::kInvalid)
        << code;
  }
  for (int sub : {457, 461, 462, 465, 466, 468, 491, 493}) {
    EXPECT_EQ(
        Classify(Error(400, R"({"code":100,"error_subcode":)" + std::to_string(sub) + "}")).kind,
        Kind::kInvalid)
        << sub;
  }
}

// docs/meta.md: first match wins, in the order rate-limit, transient,
// authorization, invalid.
TEST(MetaClassify, TransientComesBeforeAuthorizationAndRateLimitBeforeBoth) {
  EXPECT_EQ(Classify(Error(503, R"({"code":190,"error_subcode":463})")).kind, Kind::kTransient);
  EXPECT_EQ(Classify(Error(408, R"({"code":10})")).kind, Kind::kTransient);
  EXPECT_EQ(Classify(Error(401, R"({"code":17})")).kind, Kind::kRateLimit);
  EXPECT_EQ(Classify(Error(403, R"({"code":1,"message":"Too many calls"})")).kind,
            Kind::kRateLimit);
  EXPECT_EQ(Classify(Error(502, R"({"code":1,"message":"request limit reached"})")).kind,
            Kind::kRateLimit);
  // A rate limit reports its recovery time; nothing else does.
  EXPECT_EQ(Classify(Error(401, R"({"code":190})", {{"Retry-After", "30"}})).retry_after,
            std::nullopt);
  EXPECT_EQ(Classify(Error(400, R"({"code":100})", {{"Retry-After", "30"}})).retry_after,
            std::nullopt);
}

// docs/meta.md: error bodies are read up to 1 MiB; a larger body has no codes.
TEST(MetaClassify, ABodyOver1MiBHasNoCodes) {
  const std::string head = R"({"error":{"code":4,"message":")";
  const std::string tail = R"("}})";
  std::string body = head + std::string((std::size_t{1} << 20) - head.size() - tail.size(), 'x');
  body += tail;
  ASSERT_EQ(body.size(), std::size_t{1} << 20);
  EXPECT_EQ(Classify({.status = 400, .body = body}).kind, Kind::kRateLimit);
  body.insert(head.size(), "x");
  EXPECT_EQ(Classify({.status = 400, .body = body}).kind, Kind::kInvalid);
}

}  // namespace
}  // namespace fusebox::meta
