// Golden tests of the narration: the default preset in Korean is seed 004's
// page word for word; English says the same.
#include "apps/fusebox/narration.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "apps/fusebox/test_util.h"
#include "fusebox/testing/status_macros.h"

namespace fusebox::app {
namespace {

// The run of preset `name` (FUSEBOX_ASSERT_OK_AND_ASSIGN fails the test if
// there is none or it does not run).
Result<SimRun> SimulatedPreset(std::string_view name) {
  Result<Scenario> preset = FindPreset(name);
  if (!preset) return preset.error();
  return Simulate(*preset);
}

TEST(Narration, DefaultPresetInKoreanIsTheSeedsTimeline) {
  // testdata/seed004_default.ko.txt: the forty lines of the seed's
  // "처음 설정으로 실행하면", copied verbatim.
  const std::vector<std::string> seed =
      testing::Lines(testing::ReadFile(testing::TestData("seed004_default.ko.txt")));
  ASSERT_EQ(seed.size(), 40u);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run, SimulatedPreset("default"));
  const std::vector<std::string> lines = NarrateCalls(run, Language::kKorean);
  ASSERT_EQ(lines.size(), 40u);
  for (std::size_t i = 0; i < seed.size(); ++i) EXPECT_EQ(lines[i], seed[i]) << "call " << i + 1;
}

TEST(Narration, DefaultPresetGolden) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run, SimulatedPreset("default"));
  for (const auto& [lang, file] : {std::pair{Language::kKorean, "default.ko.txt"},
                                   std::pair{Language::kEnglish, "default.en.txt"}}) {
    std::ostringstream out;
    WriteNarration(run, lang, out);
    EXPECT_EQ(out.str(), testing::ReadFile(testing::TestData(file))) << file;
  }
}

TEST(Narration, EnglishKeyLines) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run, SimulatedPreset("default"));
  const std::vector<std::string> en = NarrateCalls(run, Language::kEnglish);
  ASSERT_EQ(en.size(), 40u);
  EXPECT_EQ(en[0], "1. 1 s: Payment service call succeeded.");
  EXPECT_EQ(en[9],
            "10. 10 s: Payment service call succeeded. Failure rate over the last 10 calls: 0%.");
  EXPECT_EQ(en[14],
            "15. 15 s: The payment service does not answer. The call waits 3 s and fails with a "
            "timeout. A request thread was tied up all that time. Over the last 10 calls the "
            "failure rate is 50%, at or above the 50% threshold. The circuit opens (OPEN). For "
            "the next 5 s calls to the payment service are blocked.");
  EXPECT_EQ(en[15],
            "16. 16 s: The circuit is open (OPEN). The payment service is not called; the "
            "fallback answers at once. No waiting.");
  EXPECT_EQ(en[28],
            "29. 29 s: Payment service call succeeded. The failure rate of the 3 trial calls is "
            "0%, below the threshold. Recovered: back to normal (CLOSED).");
}

TEST(Narration, SummaryInBothLanguages) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run, SimulatedPreset("default"));
  const std::vector<std::string> ko = NarrateSummary(run, Language::kKorean);
  EXPECT_EQ(ko[1],
            "• 상태가 CLOSED → OPEN → HALF_OPEN → OPEN → HALF_OPEN → CLOSED 순으로 바뀌었습니다.");
  EXPECT_EQ(ko[2], "• 성공 24번, 실패 8번, 차단 8번.");
  EXPECT_EQ(ko[3],
            "• 요청 스레드가 기다린 시간은 모두 24초입니다. 서킷 브레이커가 없었다면 "
            "45초였습니다(21초 절약).");
  const std::vector<std::string> en = NarrateSummary(run, Language::kEnglish);
  EXPECT_EQ(en[4],
            "- Calls sent to the payment service while it was down: 8; without a circuit "
            "breaker, 15.");
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun no_breaker, SimulatedPreset("no-breaker"));
  const std::vector<std::string> none = NarrateSummary(no_breaker, Language::kKorean);
  EXPECT_EQ(none[1], "• 서킷 브레이커가 없어 모든 호출이 결제 서비스로 갔습니다.");
  EXPECT_EQ(none[3], "• 요청 스레드가 기다린 시간은 모두 45초입니다.");
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun short_outage, SimulatedPreset("short-outage"));
  const std::vector<std::string> calm = NarrateSummary(short_outage, Language::kKorean);
  EXPECT_EQ(calm[1], "• 상태가 CLOSED에서 바뀌지 않았습니다.");
}

TEST(Narration, SlowCallsAndTimeBasedWindow) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Scenario s, FindPreset("default"));
  s.outages.clear();
  s.slowdowns = {Slowdown{TimeWindow{std::chrono::seconds(11), std::chrono::seconds(15)},
                          std::chrono::seconds(2)}};
  s.breaker.slow_call_duration_threshold = std::chrono::seconds(1);
  s.breaker.slow_call_rate_threshold = 50;
  s.breaker.sliding_window_type = SlidingWindowType::kTimeBased;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run_en, Simulate(s));
  const std::vector<std::string> en = NarrateCalls(run_en, Language::kEnglish);
  EXPECT_EQ(en[10],
            "11. 11 s: Payment service call succeeded in 2 s. It counts as a slow call (over 1 s). "
            "Failure rate over the last 10 s: 0%, slow-call rate 10%.");
  bool tripped = false;
  for (const std::string& line : en) {
    tripped = tripped || line.find("the slow-call rate is 50%, at or above the 50% threshold") !=
                             std::string::npos;
  }
  EXPECT_TRUE(tripped);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run_ko, Simulate(s));
  const std::vector<std::string> ko = NarrateCalls(run_ko, Language::kKorean);
  EXPECT_EQ(ko[10],
            "11. 11초: 결제 서비스 호출 성공(2초 걸림). 1초를 넘긴 느린 호출로 셉니다. 최근 10초의 "
            "실패율 "
            "0%, 느린 호출 비율 10%.");
}

TEST(Narration, ErrorsAndAnyFailurePolicy) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Scenario s, FindPreset("default"));
  s.outages.clear();
  s.latency = std::chrono::milliseconds(200);
  s.error_bursts = {
      ErrorBurst{TimeWindow{std::chrono::seconds(11), std::chrono::seconds(10)}, 1.0}};
  s.breaker.half_open_policy = HalfOpenPolicy::kAnyFailureReopens;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const SimRun run_en, Simulate(s));
  const std::vector<std::string> en = NarrateCalls(run_en, Language::kEnglish);
  EXPECT_EQ(en[10].rfind("11. 11 s: The payment service answers with an error after 0.2 s: the "
                         "call fails.",
                         0),
            0u)
      << en[10];
  bool reopened = false;
  for (const std::string& line : en) {
    reopened = reopened || line.find("A trial call failed. Not recovered yet") != std::string::npos;
  }
  EXPECT_TRUE(reopened);
}

TEST(Narration, ParseLanguage) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Language ko, ParseLanguage("ko"));
  EXPECT_EQ(ko, Language::kKorean);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Language en, ParseLanguage("en"));
  EXPECT_EQ(en, Language::kEnglish);
  EXPECT_EQ(ParseLanguage("fr").error().code(), StatusCode::kInvalidArgument);
}

TEST(Narration, BreakerSettings) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const Scenario default_preset, FindPreset("default"));
  EXPECT_EQ(BreakerSettingsText(default_preset),
            "slidingWindowSize=10 minimumNumberOfCalls=10 failureRateThreshold=50 "
            "waitDurationInOpenState=5s permittedNumberOfCallsInHalfOpenState=3");
  FUSEBOX_ASSERT_OK_AND_ASSIGN(const Scenario no_breaker, FindPreset("no-breaker"));
  EXPECT_EQ(BreakerSettingsText(no_breaker), "none");
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Scenario s, FindPreset("default"));
  s.breaker.compatibility = Compatibility::kResilience4j;
  EXPECT_NE(BreakerSettingsText(s).find("compatibility=resilience4j"), std::string::npos);
}

}  // namespace
}  // namespace fusebox::app
