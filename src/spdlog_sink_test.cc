// The header-only spdlog adapter. Built only when spdlog is found; the only
// fusebox target that links spdlog.
#include "fusebox/spdlog_sink.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <memory>
#include <sstream>

#include "fusebox/circuit_breaker.h"
#include "fusebox/event_log.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox {
namespace {

TEST(SpdlogLineSink, WritesEventLinesUnchangedWithThePatternV) {
  std::ostringstream out;
  auto ostream_sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out);
  auto logger = std::make_shared<spdlog::logger>("fusebox-test", ostream_sink);
  logger->set_pattern("%v");
  auto log = std::move(*EventLog::Create({.sink = std::make_shared<SpdlogLineSink>(logger)}));

  testing::ManualClock clock;
  // Braces in a name must not be taken for a format string.
  auto b = std::move(*CircuitBreaker::Create("pay{}ment {0}", {}, clock));
  log->Attach(*b);
  b->ForceOpen({.reason = "drill", .actor = "ops"});
  logger->flush();
  EXPECT_EQ(out.str(),
            R"({"event":"transition","breaker":"pay{}ment {0}","from":"closed","to":"forced_open",)"
            R"("reason":"operator","failure_rate":-1,"slow_call_rate":-1,"buffered_calls":0,)"
            R"("failed_calls":0,"slow_calls":0,"not_permitted_calls":0,"t_ms":86400000000,)"
            R"("operator_reason":"drill","actor":"ops"})"
            "\n");
  EXPECT_EQ(log->lines_written(), 1u);
}

TEST(SpdlogLineSink, RespectsTheLoggersLevel) {
  std::ostringstream out;
  auto logger = std::make_shared<spdlog::logger>(
      "fusebox-level", std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
  logger->set_level(spdlog::level::warn);
  SpdlogLineSink info(logger);
  SpdlogLineSink warn(logger, spdlog::level::warn);
  EXPECT_TRUE(info.Write("dropped").ok());
  EXPECT_TRUE(warn.Write("kept").ok());
  EXPECT_THAT(out.str(), ::testing::HasSubstr("kept"));
  EXPECT_THAT(out.str(), ::testing::Not(::testing::HasSubstr("dropped")));
}

}  // namespace
}  // namespace fusebox
