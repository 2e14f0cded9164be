#include "fusebox/http/retry_after.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

namespace fusebox::http {
namespace {

using std::chrono::hours;
using std::chrono::seconds;
using std::chrono::sys_seconds;

const std::optional<sys_seconds> kRef = ParseHttpDate("Tue, 04 Nov 2025 10:00:00 GMT");

TEST(ParseRetryAfter, DeltaSecondsTrimmedOfSpacesAndTabs) {
  EXPECT_EQ(ParseRetryAfter("120", std::nullopt), seconds(120));
  EXPECT_EQ(ParseRetryAfter(" \t7\t ", std::nullopt), seconds(7));
  EXPECT_EQ(ParseRetryAfter("0007", std::nullopt), seconds(7));
}

TEST(ParseRetryAfter, ZeroAndEmptyMeanNoWait) {
  EXPECT_EQ(ParseRetryAfter("0", std::nullopt), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("", std::nullopt), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("  ", std::nullopt), std::nullopt);
}

TEST(ParseRetryAfter, HugeNumbersSaturateWithoutOverflow) {
  EXPECT_EQ(ParseRetryAfter("86400", std::nullopt), hours(24));
  EXPECT_EQ(ParseRetryAfter("86399", std::nullopt), seconds(86399));
  EXPECT_EQ(ParseRetryAfter(std::string(200, '9'), std::nullopt), hours(24));
  // 2^63 and beyond: would wrap a naive int64 accumulator to a negative wait.
  EXPECT_EQ(ParseRetryAfter("9223372036854775808", std::nullopt), hours(24));
  EXPECT_EQ(ParseRetryAfter("60", std::nullopt, seconds(30)), seconds(30));
}

TEST(ParseRetryAfter, GarbageIsAbsent) {
  for (const char* bad : {"-600", "+5", "90.5", "30, 60", "soon", "1e3", "0x10", "12 s", "١٢",
                          "30\r\n", "Tue, 04 Nov 2025 10:00:00 UTC"}) {
    EXPECT_EQ(ParseRetryAfter(bad, kRef), std::nullopt) << bad;
  }
  EXPECT_EQ(ParseRetryAfter(std::string("3\0"
                                        "0",
                                        3),
                            kRef),
            std::nullopt);
}

TEST(ParseRetryAfter, OverlongInputIsRejectedUnread) {
  EXPECT_EQ(ParseRetryAfter(std::string(kMaxRetryAfterBytes, '9'), std::nullopt), hours(24));
  EXPECT_EQ(ParseRetryAfter(std::string(kMaxRetryAfterBytes + 1, '9'), std::nullopt), std::nullopt);
}

TEST(ParseRetryAfter, NonPositiveMaxWaitIsAbsent) {
  EXPECT_EQ(ParseRetryAfter("5", std::nullopt, seconds(0)), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("5", std::nullopt, seconds(-3)), std::nullopt);
}

TEST(ParseRetryAfter, HttpDateIsMeasuredAgainstTheReference) {
  EXPECT_EQ(ParseRetryAfter("Tue, 04 Nov 2025 10:01:30 GMT", kRef), seconds(90));
  EXPECT_EQ(ParseRetryAfter("Tuesday, 04-Nov-25 10:00:05 GMT", kRef), seconds(5));
  EXPECT_EQ(ParseRetryAfter("Tue Nov  4 10:00:09 2025", kRef), seconds(9));
  EXPECT_EQ(ParseRetryAfter("Tue, 04 Nov 2025 10:01:30 GMT", std::nullopt), std::nullopt)
      << "a date without a reference is unusable";
  EXPECT_EQ(ParseRetryAfter("Tue, 04 Nov 2025 09:59:59 GMT", kRef), std::nullopt) << "past";
  EXPECT_EQ(ParseRetryAfter("Tue, 04 Nov 2025 10:00:00 GMT", kRef), std::nullopt) << "now";
  EXPECT_EQ(ParseRetryAfter("Fri, 31 Dec 9999 23:59:59 GMT", kRef), hours(24)) << "saturates";
}

TEST(ParseHttpDate, ThreeFormsExactlyAndRealDatesOnly) {
  const sys_seconds want = std::chrono::sys_days(std::chrono::year(1994) / 11 / 6) + hours(8) +
                           std::chrono::minutes(49) + seconds(37);
  EXPECT_EQ(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT"), want);
  EXPECT_EQ(ParseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT"), want);
  EXPECT_EQ(ParseHttpDate("Sun Nov  6 08:49:37 1994"), want);
  EXPECT_EQ(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT "), std::nullopt) << "trailing";
  EXPECT_EQ(ParseHttpDate("Sun, 30 Feb 1994 08:49:37 GMT"), std::nullopt) << "Feb 30";
  EXPECT_EQ(ParseHttpDate("Sun, 06 Nov 1994 25:49:37 GMT"), std::nullopt) << "25 h";
  EXPECT_EQ(ParseHttpDate("Sun, 06 Nov 1994 08:60:37 GMT"), std::nullopt) << "60 min";
  EXPECT_EQ(ParseHttpDate("Sun, 06 Xyz 1994 08:49:37 GMT"), std::nullopt) << "month";
  EXPECT_EQ(ParseHttpDate(std::string(kMaxRetryAfterBytes + 1, 'S')), std::nullopt);
}

}  // namespace
}  // namespace fusebox::http
