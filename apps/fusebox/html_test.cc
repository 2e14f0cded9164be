// Tests for the HTML page's content; tests/CheckHtmlInChromium.cmake loads it in
// a real browser.
#include "apps/fusebox/html.h"

#include <gtest/gtest.h>

#include <string>

#include "fusebox/testing/status_macros.h"

namespace fusebox::app {
namespace {

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Html, SelfContainedTimeline) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const Scenario scenario, FindPreset("default"));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run, Simulate(scenario));
  const std::string page = RenderHtml(run, Language::kEnglish);
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(Count(page, "<svg"), 1u);
  // Nothing to fetch: no external script, style, image or font.
  EXPECT_EQ(Count(page, "src="), 0u);
  EXPECT_EQ(Count(page, "href="), 0u);
  EXPECT_EQ(Count(page, "http"), 1u);  // the SVG namespace only
  // A mark per call, coloured by result.
  EXPECT_EQ(Count(page, "class=\"mark success\""), 24u);
  EXPECT_EQ(Count(page, "class=\"mark failure\""), 8u);
  EXPECT_EQ(Count(page, "class=\"mark rejected\""), 8u);
  // The state band: CLOSED, OPEN, HALF_OPEN, OPEN, HALF_OPEN, CLOSED.
  EXPECT_EQ(Count(page, "data-state="), 6u);
  for (const char* state : {">CLOSED<", ">OPEN<", ">HALF_OPEN<"}) {
    EXPECT_NE(page.find(state), std::string::npos) << state;
  }
  // The failure rate against its threshold; the outage.
  EXPECT_NE(page.find("class=\"rate\""), std::string::npos);
  EXPECT_NE(page.find("threshold 50%"), std::string::npos);
  EXPECT_EQ(Count(page, "class=\"outage\""), 1u);
  EXPECT_EQ(Count(page, "<li id=\"call-"), 40u);
}

TEST(Html, KoreanAndEscaping) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Scenario s, FindPreset("no-breaker"));
  s.name = "<script>alert(1)</script>";
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run, Simulate(s));
  const std::string page = RenderHtml(run, Language::kKorean);
  EXPECT_NE(page.find("<html lang=\"ko\">"), std::string::npos);
  EXPECT_NE(page.find("결제 서비스 호출 성공."), std::string::npos);
  EXPECT_EQ(page.find("<script>alert"), std::string::npos);
  EXPECT_NE(page.find("&lt;script&gt;alert"), std::string::npos);
  EXPECT_EQ(page.find("class=\"threshold\""), std::string::npos);  // no breaker, no threshold
}

}  // namespace
}  // namespace fusebox::app
