#include "json_line.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>

namespace fusebox::internal {
namespace {

std::string Json(std::string_view s) {
  std::string out;
  AppendJsonString(out, s);
  return out;
}

TEST(JsonLine, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(Json("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(Json("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(Json(std::string("\x00\x01\x1f\x7f", 4)), R"("\u0000\u0001\u001f\u007f")");
  EXPECT_EQ(Json("/ and ' stay"), R"("/ and ' stay")");
}

TEST(JsonLine, KeepsValidUtf8AsItIs) {
  const std::string text =
      "Gr\xC3\xBC\xC3\x9F"
      "e \xEC\x84\x9C\xED\x82\xB7 \xF0\x9F\x98\x80";  // Grüße 서킷 😀
  EXPECT_EQ(Json(text), "\"" + text + "\"");
}

TEST(JsonLine, ReplacesEachInvalidUtf8ByteWithReplacementCharacter) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(Json("a\xFF"), "\"a" + fffd + "\"");
  // Overlong "/" (C0 AF): two bad bytes.
  EXPECT_EQ(Json("\xC0\xAF"), "\"" + fffd + fffd + "\"");
  // A UTF-16 surrogate encoded in UTF-8 (ED A0 80) is not UTF-8.
  EXPECT_EQ(Json("\xED\xA0\x80"), "\"" + fffd + fffd + fffd + "\"");
  // Truncated euro sign (E2 82 ..) at the end.
  EXPECT_EQ(Json("\xE2\x82"), "\"" + fffd + fffd + "\"");
  // Beyond U+10FFFF (F4 90 80 80).
  EXPECT_EQ(Json("\xF4\x90\x80\x80"), "\"" + fffd + fffd + fffd + fffd + "\"");
  // The largest code point (F4 8F BF BF) is fine.
  EXPECT_EQ(Json("\xF4\x8F\xBF\xBF"), "\"\xF4\x8F\xBF\xBF\"");
}

TEST(JsonLine, NumbersAreShortestAndNonFiniteIsNull) {
  std::string out;
  AppendJsonNumber(out, 65.5);
  out.push_back(' ');
  AppendJsonNumber(out, -1);
  out.push_back(' ');
  AppendJsonNumber(out, std::numeric_limits<double>::quiet_NaN());
  out.push_back(' ');
  AppendJsonNumber(out, std::numeric_limits<double>::infinity());
  EXPECT_EQ(out, "65.5 -1 null null");
}

TEST(JsonLine, Rfc3339IsUtcWithMilliseconds) {
  using namespace std::chrono;
  std::string out;
  // 2025-08-19T10:00:30Z is 1755597630 s after the Unix epoch.
  AppendRfc3339(out, system_clock::time_point(seconds(1755597630) + milliseconds(7)));
  EXPECT_EQ(out, "2025-08-19T10:00:30.007Z");
  out.clear();
  AppendRfc3339(out, system_clock::time_point(seconds(951782400)));  // leap day 2000
  EXPECT_EQ(out, "2000-02-29T00:00:00.000Z");
}

TEST(JsonLine, ObjectJoinsFieldsInOrder) {
  JsonObject o;
  o.Str("event", "x").Int("n", -3).Uint("u", 7).Num("r", 0.25);
  EXPECT_EQ(std::move(o).Done(), R"({"event":"x","n":-3,"u":7,"r":0.25})");
}

}  // namespace
}  // namespace fusebox::internal
