// fusebox::grpc's classifier without gRPC: every code's kind, Status and
// breaker outcome (the table of docs/grpc.md), overrides, and the
// grpc-retry-pushback-ms parser on hostile values.
#include "fusebox/grpc/classify.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "fusebox/testing/manual_clock.h"

namespace fusebox::grpc {
namespace {

using namespace std::chrono_literals;
using http::Kind;

struct Row {
  int code;
  Kind kind;
  StatusCode status;
  OutcomeKind outcome;
};

// docs/grpc.md's table, row for row.
constexpr Row kTable[] = {
    {0, Kind::kSuccess, StatusCode::kOk, OutcomeKind::kSuccess},
    {1, Kind::kInvalid, StatusCode::kInvalidArgument, OutcomeKind::kIgnored},
    {2, Kind::kTransient, StatusCode::kUnavailable, OutcomeKind::kFailure},
    {3, Kind::kInvalid, StatusCode::kInvalidArgument, OutcomeKind::kIgnored},
    {4, Kind::kTransient, StatusCode::kTimeout, OutcomeKind::kFailure},
    {5, Kind::kInvalid, StatusCode::kNotFound, OutcomeKind::kIgnored},
    {6, Kind::kInvalid, StatusCode::kInvalidArgument, OutcomeKind::kIgnored},
    {7, Kind::kAuthorization, StatusCode::kPermissionDenied, OutcomeKind::kIgnored},
    {8, Kind::kRateLimit, StatusCode::kRateLimited, OutcomeKind::kFailure},
    {9, Kind::kInvalid, StatusCode::kInvalidArgument, OutcomeKind::kIgnored},
    {10, Kind::kTransient, StatusCode::kUnavailable, OutcomeKind::kFailure},
    {11, Kind::kInvalid, StatusCode::kInvalidArgument, OutcomeKind::kIgnored},
    {12, Kind::kInvalid, StatusCode::kInvalidArgument, OutcomeKind::kIgnored},
    {13, Kind::kTransient, StatusCode::kUnavailable, OutcomeKind::kFailure},
    {14, Kind::kTransient, StatusCode::kUnavailable, OutcomeKind::kFailure},
    {15, Kind::kTransient, StatusCode::kUnavailable, OutcomeKind::kFailure},
    {16, Kind::kAuthorization, StatusCode::kUnauthenticated, OutcomeKind::kIgnored},
    {17, Kind::kInvalid, StatusCode::kInvalidArgument, OutcomeKind::kIgnored},
    {-1, Kind::kInvalid, StatusCode::kInvalidArgument, OutcomeKind::kIgnored},
};

TEST(GrpcClassify, EveryCodeFollowsTheTable) {
  const TimePoint now = testing::ManualClock::kEpoch;
  for (const Row& row : kTable) {
    const Classification c = Classify(row.code);
    EXPECT_EQ(c.kind, row.kind) << row.code;
    EXPECT_EQ(c.code, row.code);
    EXPECT_FALSE(c.rule.empty());
    const Status s = ToStatus(c, now);
    EXPECT_EQ(s.code(), row.status) << row.code;
    EXPECT_EQ(BreakerOutcome(c, 3ms).kind, row.outcome) << row.code;
    EXPECT_EQ(BreakerOutcome(c, 3ms).duration, 3ms);
    if (row.code != 0) {
      EXPECT_NE(s.message().find(std::string(GrpcCodeName(row.code))), std::string::npos)
          << s.message();
    }
  }
}

TEST(GrpcClassify, RateLimitCarriesItsWait) {
  const TimePoint now = testing::ManualClock::kEpoch;
  const Classification c = Classify(8, "1500");
  ASSERT_EQ(c.retry_after, 1500ms);
  EXPECT_EQ(ToStatus(c, now).retry_at(), now + 1500ms);
  const Outcome o = BreakerOutcome(c, 2ms);
  EXPECT_EQ(o.kind, OutcomeKind::kFailure);
  EXPECT_EQ(o.open_for, 1500ms);
  EXPECT_EQ(BreakerOutcome(c, 2ms, /*rate_limit_opens_breaker=*/false).open_for, Duration::zero());
  // Only rate limits read the trailer.
  EXPECT_FALSE(Classify(14, "1500").retry_after.has_value());
  EXPECT_FALSE(Classify(0, "1500").retry_after.has_value());
}

TEST(GrpcClassify, RateLimitWithoutUsablePushbackWaitsTheDefaultWithinMax) {
  Rules rules;
  rules.default_wait = 9s;
  EXPECT_EQ(Classify(8, std::nullopt, rules).retry_after, 9s);
  EXPECT_EQ(Classify(8, "x", rules).retry_after, 9s);
  rules.max_wait = 4s;
  EXPECT_EQ(Classify(8, std::nullopt, rules).retry_after, 4s);
  EXPECT_EQ(Classify(8, "999999", rules).retry_after, 4s);
}

TEST(GrpcClassify, OverridesComeFirst) {
  Rules rules;
  rules.codes = {{5, Kind::kSuccess}, {14, Kind::kRateLimit}, {3, Kind::kTransient}};
  EXPECT_EQ(Classify(5, std::nullopt, rules).kind, Kind::kSuccess);
  EXPECT_TRUE(ToStatus(Classify(5, std::nullopt, rules), TimePoint()).ok());
  const Classification c = Classify(14, "250", rules);
  EXPECT_EQ(c.kind, Kind::kRateLimit);
  EXPECT_EQ(c.retry_after, 250ms);
  EXPECT_EQ(c.rule, "an override in Rules::codes");
  EXPECT_EQ(BreakerOutcome(Classify(3, std::nullopt, rules), 0ms).kind, OutcomeKind::kFailure);
  EXPECT_EQ(Classify(4, std::nullopt, rules).kind, Kind::kTransient);  // untouched
}

TEST(GrpcPushback, ParsesDigitsOnly) {
  EXPECT_EQ(ParsePushback("250"), 250ms);
  EXPECT_EQ(ParsePushback("0"), 1ms);  // "retry now" is still a failure's hint
  EXPECT_EQ(ParsePushback("007"), 7ms);
  for (const char* bad : {"", "-1", "+5", " 5", "5 ", "1.5", "5ms", "1,2", "0x10", "\xff"}) {
    EXPECT_FALSE(ParsePushback(bad).has_value()) << bad;
  }
}

TEST(GrpcPushback, SaturatesWithoutOverflow) {
  EXPECT_EQ(ParsePushback("99999999999999999999999999999999"), 24h);
  EXPECT_EQ(ParsePushback("99999999999999999999999999999999", 5s), 5s);
  EXPECT_EQ(ParsePushback("99999999999999999999",
                          std::chrono::milliseconds(std::chrono::milliseconds::max())),
            std::chrono::milliseconds::max());
  // Still all digits, or nothing.
  EXPECT_FALSE(ParsePushback("99999999999999999999x").has_value());
  EXPECT_FALSE(ParsePushback(std::string(kMaxPushbackBytes + 1, '1')).has_value());
  EXPECT_EQ(ParsePushback(std::string(kMaxPushbackBytes, '1')), 24h);
}

TEST(GrpcCodeNames, AreGrpcsSpelling) {
  EXPECT_EQ(GrpcCodeName(0), "OK");
  EXPECT_EQ(GrpcCodeName(8), "RESOURCE_EXHAUSTED");
  EXPECT_EQ(GrpcCodeName(16), "UNAUTHENTICATED");
  EXPECT_EQ(GrpcCodeName(17), "UNKNOWN_CODE");
  EXPECT_EQ(GrpcCodeName(-3), "UNKNOWN_CODE");
}

}  // namespace
}  // namespace fusebox::grpc
