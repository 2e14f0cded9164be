#include "fusebox/http/classify.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include "fusebox/http/retry_after.h"

namespace fusebox::http {
namespace {

using std::chrono::seconds;

Kind KindOf(int status) { return Classify({.status = status}).kind; }

TEST(HttpClassify, StatusRangesFollowTheGenericRules) {
  for (int s : {200, 201, 204, 299, 301, 304, 399}) EXPECT_EQ(KindOf(s), Kind::kSuccess) << s;
  for (int s : {408, 500, 502, 503, 504, 599}) EXPECT_EQ(KindOf(s), Kind::kTransient) << s;
  EXPECT_EQ(KindOf(429), Kind::kRateLimit);
  EXPECT_EQ(KindOf(401), Kind::kAuthorization);
  EXPECT_EQ(KindOf(403), Kind::kAuthorization);
  for (int s : {400, 404, 405, 409, 410, 422, 499}) EXPECT_EQ(KindOf(s), Kind::kInvalid) << s;
  for (int s : {0, -1, 100, 199, 600, 1000, 2147483647}) EXPECT_EQ(KindOf(s), Kind::kInvalid) << s;
}

TEST(HttpClassify, RateLimitsCarryTheirRecoveryTime) {
  Classification c = Classify({.status = 429, .retry_after = "30"});
  EXPECT_EQ(c.kind, Kind::kRateLimit);
  EXPECT_EQ(c.retry_after, seconds(30));
  EXPECT_EQ(Classify({.status = 429}).retry_after, seconds(60)) << "default_wait";
  EXPECT_EQ(Classify({.status = 429, .retry_after = "soon"}).retry_after, seconds(60));
  Rules rules;
  rules.default_wait = seconds(7);
  EXPECT_EQ(Classify({.status = 429}, rules).retry_after, seconds(7));
  rules.max_wait = seconds(5);
  EXPECT_EQ(Classify({.status = 429, .retry_after = "100"}, rules).retry_after, seconds(5));
  EXPECT_EQ(Classify({.status = 429}, rules).retry_after, seconds(5)) << "default saturates too";
  EXPECT_EQ(Classify({.status = 500, .retry_after = "30"}).retry_after, std::nullopt)
      << "only rate limits report a wait";
}

TEST(HttpClassify, UnavailableWithUsableRetryAfterIsARateLimit) {
  EXPECT_EQ(Classify({.status = 503, .retry_after = "12"}).kind, Kind::kRateLimit);
  EXPECT_EQ(Classify({.status = 503, .retry_after = "12"}).retry_after, seconds(12));
  EXPECT_EQ(Classify({.status = 503, .retry_after = "garbage"}).kind, Kind::kTransient);
  EXPECT_EQ(Classify({.status = 503, .retry_after = "0"}).kind, Kind::kTransient);
  EXPECT_EQ(Classify({.status = 502, .retry_after = "12"}).kind, Kind::kTransient);
  Rules rules;
  rules.unavailable_with_retry_after_is_rate_limit = false;
  EXPECT_EQ(Classify({.status = 503, .retry_after = "12"}, rules).kind, Kind::kTransient);
}

TEST(HttpClassify, HttpDateRetryAfterUsesDateElseNow) {
  const Response r{.status = 503,
                   .retry_after = "Tue, 04 Nov 2025 10:00:40 GMT",
                   .date = "Tue, 04 Nov 2025 10:00:00 GMT"};
  EXPECT_EQ(Classify(r).retry_after, seconds(40));
  Rules rules;
  rules.now = ParseHttpDate("Tue, 04 Nov 2025 10:00:30 GMT");
  EXPECT_EQ(Classify(r, rules).retry_after, seconds(40)) << "the server's Date wins";
  const Response no_date{.status = 503, .retry_after = "Tue, 04 Nov 2025 10:00:40 GMT"};
  EXPECT_EQ(Classify(no_date).kind, Kind::kTransient) << "no reference: unusable";
  EXPECT_EQ(Classify(no_date, rules).retry_after, seconds(10));
  const Response bad_date{
      .status = 503, .retry_after = "Tue, 04 Nov 2025 10:00:40 GMT", .date = "yesterday"};
  EXPECT_EQ(Classify(bad_date, rules).retry_after, seconds(10)) << "bad Date: falls back to now";
}

TEST(HttpClassify, EveryStatusRuleIsOverridable) {
  Rules rules;
  rules.statuses = {{404, Kind::kSuccess},
                    {409, Kind::kTransient},
                    {200, Kind::kInvalid},
                    {500, Kind::kRateLimit}};
  EXPECT_EQ(Classify({.status = 404}, rules).kind, Kind::kSuccess);
  EXPECT_EQ(Classify({.status = 409}, rules).kind, Kind::kTransient);
  EXPECT_EQ(Classify({.status = 200}, rules).kind, Kind::kInvalid);
  const Classification c = Classify({.status = 500, .retry_after = "3"}, rules);
  EXPECT_EQ(c.kind, Kind::kRateLimit);
  EXPECT_EQ(c.retry_after, seconds(3));
  EXPECT_EQ(c.rule, "an override in Rules::statuses");
  EXPECT_EQ(Classify({.status = 410}, rules).kind, Kind::kInvalid) << "others unchanged";
}

TEST(HttpClassify, TransportFailuresAreTransientByDefaultAndOverridable) {
  for (Transport t :
       {Transport::kConnect, Transport::kReset, Transport::kDeadline, Transport::kOther}) {
    EXPECT_EQ(ClassifyTransport(t).kind, Kind::kTransient) << TransportName(t);
  }
  EXPECT_EQ(ClassifyTransport(Transport::kCancelled).kind, Kind::kInvalid);
  Rules rules;
  rules.on_connect = Kind::kRateLimit;
  rules.on_reset = Kind::kInvalid;
  rules.on_deadline = Kind::kAuthorization;
  rules.on_cancelled = Kind::kTransient;
  rules.on_other = Kind::kSuccess;
  EXPECT_EQ(ClassifyTransport(Transport::kConnect, rules).kind, Kind::kRateLimit);
  EXPECT_EQ(ClassifyTransport(Transport::kConnect, rules).retry_after, seconds(60));
  EXPECT_EQ(ClassifyTransport(Transport::kReset, rules).kind, Kind::kInvalid);
  EXPECT_EQ(ClassifyTransport(Transport::kDeadline, rules).kind, Kind::kAuthorization);
  EXPECT_EQ(ClassifyTransport(Transport::kCancelled, rules).kind, Kind::kTransient);
  EXPECT_EQ(ClassifyTransport(Transport::kOther, rules).kind, Kind::kSuccess);
}

TEST(HttpToStatus, TheDocumentedTable) {
  const TimePoint now = TimePoint() + std::chrono::hours(1);
  EXPECT_TRUE(ToStatus(Classify({.status = 204}), now).ok());
  const Status limited = ToStatus(Classify({.status = 429, .retry_after = "30"}), now);
  EXPECT_EQ(limited.code(), StatusCode::kRateLimited);
  ASSERT_TRUE(limited.retry_at().has_value());
  EXPECT_EQ(*limited.retry_at(), now + seconds(30));
  EXPECT_EQ(limited.message(), "HTTP 429: 429 is a rate limit");
  EXPECT_EQ(ToStatus(Classify({.status = 502}), now).code(), StatusCode::kUnavailable);
  EXPECT_EQ(ToStatus(ClassifyTransport(Transport::kDeadline), now).code(), StatusCode::kTimeout);
  EXPECT_EQ(ToStatus(ClassifyTransport(Transport::kConnect), now).code(), StatusCode::kUnavailable);
  EXPECT_EQ(ToStatus(ClassifyTransport(Transport::kConnect), now).message(),
            "HTTP exchange failed (connect): Rules::on_connect");
  EXPECT_EQ(ToStatus(Classify({.status = 401}), now).code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(ToStatus(Classify({.status = 403}), now).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(ToStatus(Classify({.status = 404}), now).code(), StatusCode::kNotFound);
  EXPECT_EQ(ToStatus(Classify({.status = 422}), now).code(), StatusCode::kInvalidArgument);
}

TEST(HttpBreakerOutcomeKind, CallersFaultsAreIgnoredDependencyFaultsFail) {
  const TimePoint now{};
  EXPECT_EQ(BreakerOutcomeKind(Status()), OutcomeKind::kSuccess);
  for (int s : {400, 401, 403, 404}) {
    EXPECT_EQ(BreakerOutcomeKind(ToStatus(Classify({.status = s}), now)), OutcomeKind::kIgnored)
        << s;
  }
  for (int s : {408, 429, 500, 503}) {
    EXPECT_EQ(BreakerOutcomeKind(ToStatus(Classify({.status = s}), now)), OutcomeKind::kFailure)
        << s;
  }
  EXPECT_EQ(BreakerOutcomeKind(ToStatus(ClassifyTransport(Transport::kDeadline), now)),
            OutcomeKind::kFailure);
}

}  // namespace
}  // namespace fusebox::http
