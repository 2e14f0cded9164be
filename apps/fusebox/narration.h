// apps/fusebox/narration.h: a simulation told in words, in English or in
// Korean, one line per call, as seed 004's page tells its timeline.
//
// The Korean is the seed's own wording for everything the seed shows (the
// default preset's forty lines come out word for word); English says the same
// things. Events the seed never shows (slow calls, errors, timers, a time-based
// window, the any-failure half-open policy) get sentences in the same voice.
//
// Thread-safe: pure functions.
#ifndef FUSEBOX_APPS_FUSEBOX_NARRATION_H_
#define FUSEBOX_APPS_FUSEBOX_NARRATION_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "apps/fusebox/sim.h"
#include "fusebox/result.h"

namespace fusebox::app {

enum class Language : std::uint8_t { kEnglish, kKorean };

// "en" or "ko".
Result<Language> ParseLanguage(std::string_view code);

// The header: which scenario, what the dependency does, the breaker's settings.
std::vector<std::string> NarrateHeader(const SimRun& run, Language lang);

// One line per call: "15. 15초: 결제 서비스가 응답하지 않습니다. ...".
std::vector<std::string> NarrateCalls(const SimRun& run, Language lang);

// The result: state sequence, counts, thread time and calls to the down
// dependency, with and without the breaker.
std::vector<std::string> NarrateSummary(const SimRun& run, Language lang);

// Header, a blank line, the calls, a blank line, the summary.
void WriteNarration(const SimRun& run, Language lang, std::ostream& out);

// "slidingWindowSize=10 minimumNumberOfCalls=10 ...": the seed's five
// settings, then every other property that differs from Resilience4j's
// default; "none" for no breaker.
std::string BreakerSettingsText(const Scenario& scenario);

}  // namespace fusebox::app

#endif  // FUSEBOX_APPS_FUSEBOX_NARRATION_H_
