#include "fusebox/meta/recovery.h"

#include <gtest/gtest.h>

#include <chrono>

namespace fusebox::meta {
namespace {

using std::chrono::seconds;
using std::chrono::sys_seconds;

constexpr std::string_view kDate = "Tue, 04 Nov 2025 10:00:00 GMT";

sys_seconds Reference() { return *ParseHttpDate(kDate); }

TEST(MetaRecovery, ParsesTheThreeHttpDateForms) {
  const auto imf = ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT");
  ASSERT_TRUE(imf.has_value());
  EXPECT_EQ(imf->time_since_epoch().count(), 784111777);
  EXPECT_EQ(ParseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT"), imf);
  EXPECT_EQ(ParseHttpDate("Sun Nov  6 08:49:37 1994"), imf);
  EXPECT_EQ(ParseHttpDate("Sun Nov 16 08:49:37 1994"), *imf + std::chrono::days(10));
  EXPECT_EQ(ParseHttpDate("Monday, 01-Jan-24 00:00:00 GMT"),
            sys_seconds(std::chrono::sys_days(std::chrono::year(2024) / 1 / 1)));
}

// RFC 5322 (which the IMF-fixdate borrows) allows a leap second: 60 reads as
// the next minute's first second; 61 is malformed.
TEST(MetaRecovery, ALeapSecondIsTheNextMinutesFirst) {
  const auto leap = ParseHttpDate("Sat, 31 Dec 2016 23:59:60 GMT");
  ASSERT_TRUE(leap.has_value());
  EXPECT_EQ(leap, ParseHttpDate("Sun, 01 Jan 2017 00:00:00 GMT"));
  EXPECT_FALSE(ParseHttpDate("Sat, 31 Dec 2016 23:59:61 GMT").has_value());
}

TEST(MetaRecovery, RejectsMalformedDates) {
  for (const char* bad : {"", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 UTC",
                          "Sun, 31 Feb 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT",
                          "Sun 06 Nov 1994 08:49:37 GMT", "Xyz, 06 Nov 1994 08:49:37 GMT",
                          "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT x",
                          "Sun Nov 6 08:49:37 1994"}) {
    EXPECT_FALSE(ParseHttpDate(bad).has_value()) << bad;
  }
}

TEST(MetaRecovery, RetryAfterDeltaSeconds) {
  EXPECT_EQ(ParseRetryAfter("30", std::nullopt), seconds(30));
  EXPECT_EQ(ParseRetryAfter("  75 \t", std::nullopt), seconds(75));
  EXPECT_EQ(ParseRetryAfter("0", std::nullopt), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("99999999999999999999999", std::nullopt), seconds(86400));
  EXPECT_EQ(ParseRetryAfter("86401", std::nullopt), seconds(86400));
  EXPECT_EQ(ParseRetryAfter("86399", std::nullopt), seconds(86399));
  for (const char* bad : {"-600", "90.5", "30, 60", "soon", "", "  ", "+5", "1e3"}) {
    EXPECT_EQ(ParseRetryAfter(bad, Reference()), std::nullopt) << bad;
  }
}

TEST(MetaRecovery, RetryAfterHttpDateAgainstReference) {
  EXPECT_EQ(ParseRetryAfter("Tue, 04 Nov 2025 10:02:30 GMT", Reference()), seconds(150));
  EXPECT_EQ(ParseRetryAfter("Tue, 04 Nov 2025 09:58:00 GMT", Reference()), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("Tue, 04 Nov 2025 10:00:00 GMT", Reference()), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("Tue, 04 Nov 2025 10:02:30 GMT", std::nullopt), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("Fri, 04 Nov 2030 10:00:00 GMT", Reference()), seconds(86400));
}

TEST(MetaRecovery, BusinessUseCaseUsage) {
  EXPECT_EQ(ParseBusinessUseCaseUsage(R"({"1":[{"estimated_time_to_regain_access":45}]})"),
            seconds(2700));
  // Duplicate ids (Meta's own sample), several entries: the maximum.
  EXPECT_EQ(ParseBusinessUseCaseUsage(R"({"1":[{"estimated_time_to_regain_access":3}],
      "1":[{"estimated_time_to_regain_access":7},{"estimated_time_to_regain_access":2}]})"),
            seconds(420));
  // Fractions round up.
  EXPECT_EQ(ParseBusinessUseCaseUsage(R"({"1":[{"estimated_time_to_regain_access":0.01}]})"),
            seconds(1));
  EXPECT_EQ(ParseBusinessUseCaseUsage(R"({"1":[{"estimated_time_to_regain_access":1e300}]})"),
            seconds(86400));
  // Skipped: non-arrays, non-objects, non-numbers, <= 0.
  EXPECT_EQ(ParseBusinessUseCaseUsage(R"({"1":{"estimated_time_to_regain_access":5},
      "2":[7,{"estimated_time_to_regain_access":"5"},{"estimated_time_to_regain_access":-3},
      {"estimated_time_to_regain_access":0}]})"),
            std::nullopt);
  EXPECT_EQ(ParseBusinessUseCaseUsage(R"([{"estimated_time_to_regain_access":30}])"), std::nullopt);
  EXPECT_EQ(ParseBusinessUseCaseUsage("{not json"), std::nullopt);
}

TEST(MetaRecovery, LongerOfTheTwoThenDefault) {
  Response r{.status = 429,
             .headers = {{"date", std::string(kDate)},
                         {"retry-after", "60"},
                         {"x-business-use-case-usage",
                          R"({"1":[{"estimated_time_to_regain_access":10}]})"}}};
  Recovery rec = RecoveryTime(r);
  EXPECT_EQ(rec.wait, seconds(600));
  EXPECT_EQ(rec.source, RecoverySource::kBusinessUseCaseUsage);
  r.headers[1].second = "700";
  rec = RecoveryTime(r);
  EXPECT_EQ(rec.wait, seconds(700));
  EXPECT_EQ(rec.source, RecoverySource::kRetryAfter);
  rec = RecoveryTime(Response{.status = 429});
  EXPECT_EQ(rec.wait, seconds(120));
  EXPECT_EQ(rec.source, RecoverySource::kDefault);
  EXPECT_EQ(RecoveryTime(Response{.status = 429}, {.default_wait = seconds(5)}).wait, seconds(5));
}

TEST(MetaRecovery, HttpDateFallsBackToInjectedNowWithoutDate) {
  const Response r{.status = 429, .headers = {{"Retry-After", "Tue, 04 Nov 2025 10:01:00 GMT"}}};
  EXPECT_EQ(RecoveryTime(r).wait, seconds(120));  // no reference: ignored
  EXPECT_EQ(RecoveryTime(r, {.now = Reference()}).wait, seconds(60));
  // A bad Date header also falls back to `now`.
  const Response bad{
      .status = 429,
      .headers = {{"Date", "yesterday"}, {"Retry-After", "Tue, 04 Nov 2025 10:01:00 GMT"}}};
  EXPECT_EQ(RecoveryTime(bad, {.now = Reference()}).wait, seconds(60));
  // The response's Date wins over `now`.
  const Response dated{
      .status = 429,
      .headers = {{"Date", std::string(kDate)}, {"Retry-After", "Tue, 04 Nov 2025 10:01:00 GMT"}}};
  EXPECT_EQ(RecoveryTime(dated, {.now = Reference() - seconds(1000)}).wait, seconds(60));
}

// docs/meta.md: a member that is not an array and an entry that is not an
// object are skipped, and the rest of the header still counts.
TEST(MetaRecovery, BusinessUseCaseUsageSkipsBadPartsAndKeepsTheRest) {
  EXPECT_EQ(ParseBusinessUseCaseUsage(R"({"1":{"estimated_time_to_regain_access":50},
      "2":[7,"x",{"estimated_time_to_regain_access":"90"},{"estimated_time_to_regain_access":2}]})"),
            seconds(120));
  EXPECT_EQ(ParseBusinessUseCaseUsage(R"({"1":[{"call_count":100}],"2":5})"), std::nullopt);
}

// docs/meta.md: max_wait is configurable; both headers saturate to it.
TEST(MetaRecovery, MaxWaitCapsBothHeaders) {
  const Response r{.status = 429,
                   .headers = {{"Retry-After", "900"},
                               {"X-Business-Use-Case-Usage",
                                R"({"1":[{"estimated_time_to_regain_access":30}]})"}}};
  EXPECT_EQ(RecoveryTime(r).wait, seconds(1800));
  EXPECT_EQ(RecoveryTime(r, {.max_wait = seconds(600)}).wait, seconds(600));
  const Response only_retry{.status = 429, .headers = {{"Retry-After", "900"}}};
  EXPECT_EQ(RecoveryTime(only_retry, {.max_wait = seconds(600)}).wait, seconds(600));
  EXPECT_EQ(RecoveryTime(only_retry, {.max_wait = seconds(600)}).source,
            RecoverySource::kRetryAfter);
  // A malformed header is never an error: the default stands.
  const Response bad{.status = 429,
                     .headers = {{"Retry-After", "soon"}, {"X-Business-Use-Case-Usage", "{"}}};
  const Recovery rec = RecoveryTime(bad);
  EXPECT_EQ(rec.wait, seconds(120));
  EXPECT_EQ(rec.source, RecoverySource::kDefault);
}

}  // namespace
}  // namespace fusebox::meta
