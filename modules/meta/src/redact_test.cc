#include "fusebox/meta/redact.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "fusebox/meta/classify.h"

namespace fusebox::meta {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kToken = "EAAGm0PX4ZCpsBAKZCZBsecretTOKEN123";
constexpr const char* kSecret = "c1ient5ecretABCDEF";
constexpr const char* kOAuthCode = "AQD8oauthCODEvalue";

// A response that carries every secret: in the body's message (Meta echoes
// request details), in a header, in error_data.
Response Leaky(int status) {
  const std::string t(kToken), s(kSecret), c(kOAuthCode);
  return Response{
      .status = status,
      .headers = {{"Authorization", "Bearer " + t},
                  {"Location", "https://x/cb?code=" + c + "&client_secret=" + s}},
      .body = R"({"error":{"message":"Error validating access token )" + t + " client_secret=" + s +
              " code=" + c + R"(","type":"OAuthException","code":190,"error_subcode":463,)" +
              R"("error_data":"{\"access_token\":\")" + t + R"(\"}","fbtrace_id":"AbC"}})"};
}

void ExpectClean(const std::string& text) {
  EXPECT_THAT(text, Not(HasSubstr(kToken)));
  EXPECT_THAT(text, Not(HasSubstr(kSecret)));
  EXPECT_THAT(text, Not(HasSubstr(kOAuthCode)));
  EXPECT_THAT(text, Not(HasSubstr("Error validating")));  // the body's text
  EXPECT_THAT(text, Not(HasSubstr("OAuthException")));
  EXPECT_THAT(text, Not(HasSubstr("AbC")));
}

TEST(MetaRedact, ResponseSummaryHasStatusCodeSubcodeOnly) {
  const std::string s = LogSummary(Leaky(400));
  EXPECT_EQ(s, "status=400 code=190 subcode=463");
  ExpectClean(s);
  EXPECT_EQ(LogSummary(Response{.status = 502, .body = "<html>secret page</html>"}), "status=502");
}

TEST(MetaRedact, ErrorSummaryAndMessage) {
  const ProviderError e = ProviderError::FromResponse(Leaky(400));
  EXPECT_EQ(e.message(), "CONN_009 status=400 code=190 subcode=463");
  ExpectClean(e.message());
  ExpectClean(LogSummary(e));
  const ProviderError rl = ProviderError::FromResponse(Leaky(429));
  EXPECT_EQ(rl.message(), "CONN_008 status=429 code=190 subcode=463 retry_after=120s");
  ProviderError open{.code = ConnCode::kConn003Transient,
                     .retry_after = std::chrono::seconds(5),
                     .circuit_open = true};
  EXPECT_EQ(LogSummary(open), "CONN_003 circuit_open status=0 retry_after=5s");
}

TEST(MetaRedact, ClassificationReasonNeverQuotesTheResponse) {
  for (int status : {400, 401, 429, 503}) {
    const Classification c = Classify(Leaky(status));
    ExpectClean(c.reason);
  }
  // A phrase rule quotes the rule's phrase, not the message.
  Response r = Leaky(400);
  r.body = std::string(R"({"error":{"code":1,"message":"rate limit for token )") + kToken + "\"}}";
  const Classification c = Classify(r);
  EXPECT_EQ(c.kind, Kind::kRateLimit);
  ExpectClean(c.reason);
}

}  // namespace
}  // namespace fusebox::meta
