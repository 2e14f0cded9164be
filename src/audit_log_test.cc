#include "fusebox/audit_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "fusebox/observer.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::HasSubstr;
using testing::ManualClock;

std::chrono::system_clock::time_point FixedWall() {
  return std::chrono::system_clock::time_point(seconds(1755597600));  // 2025-08-19T10:00:00Z
}

class AuditLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    audit_ = std::move(*AuditLog::Create({.sink = sink_}));
    breaker_ = std::move(*CircuitBreaker::Create("payment", {}, clock_));
    audit_->Attach(*breaker_);
  }

  ManualClock clock_;
  std::shared_ptr<MemoryLineSink> sink_ = std::make_shared<MemoryLineSink>();
  std::unique_ptr<AuditLog> audit_;
  std::unique_ptr<CircuitBreaker> breaker_;
};

TEST_F(AuditLogTest, RecordsEveryOperatorActionWithActorReasonExpiryAndStates) {
  breaker_->ForceOpen({.reason = "incident 42", .actor = "alice", .expires_after = minutes(10)});
  breaker_->ForceClosed({.reason = "dependency is fine", .actor = "bob"});
  breaker_->Disable({.reason = "load test", .actor = "carol", .expires_after = seconds(30)});
  breaker_->MetricsOnly({.reason = "dry run", .actor = "dave"});
  breaker_->Reset("back to normal", "erin");
  const auto lines = sink_->lines();
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0],
            R"({"seq":1,"event":"audit","action":"force_open","breaker":"payment",)"
            R"("actor":"alice","reason":"incident 42","before":"closed","after":"forced_open",)"
            R"("expires_in_ms":600000,"t_ms":86400000000})");
  EXPECT_EQ(lines[1], R"({"seq":2,"event":"audit","action":"force_closed","breaker":"payment",)"
                      R"("actor":"bob","reason":"dependency is fine","before":"forced_open",)"
                      R"("after":"forced_closed","t_ms":86400000000})");
  EXPECT_THAT(lines[2], HasSubstr(R"("seq":3,"event":"audit","action":"disable",)"));
  EXPECT_THAT(lines[2], HasSubstr(R"("after":"disabled","expires_in_ms":30000,)"));
  EXPECT_THAT(lines[3], HasSubstr(R"("action":"metrics_only","breaker":"payment","actor":"dave")"));
  EXPECT_THAT(lines[4],
              HasSubstr(R"("action":"reset","breaker":"payment","actor":"erin",)"
                        R"("reason":"back to normal","before":"metrics_only","after":"closed")"));
  EXPECT_EQ(audit_->records_written(), 5u);
}

TEST_F(AuditLogTest, AnExpiredOverrideRevertsByItselfAndIsRecorded) {
  audit_ = std::move(*AuditLog::Create({.sink = sink_, .wall_clock = FixedWall}));
  audit_->Attach(*breaker_);
  breaker_->ForceOpen({.reason = "incident 42", .actor = "alice", .expires_after = minutes(10)});
  ASSERT_EQ(sink_->size(), 2u);  // the first AuditLog records it too
  EXPECT_THAT(sink_->lines()[1],
              HasSubstr(R"("expires_in_ms":600000,"expires_at":"2025-08-19T10:10:00.000Z",)"
                        R"("t_ms":86400000000,"ts":"2025-08-19T10:00:00.000Z"})"));
  sink_->Clear();

  clock_.Advance(minutes(10) - milliseconds(1));
  EXPECT_EQ(breaker_->state(), State::kForcedOpen);
  EXPECT_EQ(sink_->size(), 0u);
  clock_.Advance(milliseconds(1));  // the override's timer
  EXPECT_EQ(breaker_->state(), State::kClosed);
  const auto lines = sink_->lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_THAT(lines[1],
              HasSubstr(R"("seq":2,"event":"audit","action":"override_expired",)"
                        R"("breaker":"payment","actor":"fusebox","reason":"override expired",)"
                        R"("override_actor":"alice","override_reason":"incident 42",)"
                        R"("before":"forced_open","after":"closed","t_ms":86400600000,)"
                        R"("ts":"2025-08-19T10:00:00.000Z"})"));
}

TEST_F(AuditLogTest, AutomaticTransitionsAreNotAudited) {
  auto b = std::move(*CircuitBreaker::Create(
      "auto", {.sliding_window_size = 2, .minimum_number_of_calls = 2}, clock_));
  audit_->Attach(*b);
  b->TryAcquire()->Failure(milliseconds(1));
  b->TryAcquire()->Failure(milliseconds(1));
  ASSERT_EQ(b->state(), State::kOpen);
  EXPECT_EQ(sink_->size(), 0u);
  ASSERT_TRUE(b->TransitionToHalfOpen().ok());
  ASSERT_EQ(sink_->size(), 1u);
  EXPECT_THAT(sink_->lines()[0], HasSubstr(R"("action":"transition_to_half_open")"));
}

class TempFile {
 public:
  TempFile()
      : path_(::testing::TempDir() + "fusebox_audit_" + std::to_string(::getpid()) + ".jsonl") {
    std::remove(path_.c_str());
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }
  std::string Read() const {
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string path_;
};

TEST(AuditLogFile, AppendsAndNeverRewrites) {
  ManualClock clock;
  TempFile file;
  { std::ofstream(file.path()) << "{\"earlier\":true}\n"; }
  for (int run = 0; run < 2; ++run) {  // two "process lifetimes"
    std::shared_ptr<LineSink> sink = std::move(*FileLineSink::Create(file.path()));
    auto audit = std::move(*AuditLog::Create({.sink = sink}));
    auto b = std::move(*CircuitBreaker::Create("payment", {}, clock));
    audit->Attach(*b);
    b->ForceOpen({.reason = "run " + std::to_string(run), .actor = "ops"});
    b->Reset({}, "ops");
  }
  const std::string text = file.Read();
  std::istringstream in(text);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], "{\"earlier\":true}");
  EXPECT_THAT(
      lines[1],
      HasSubstr(R"("action":"force_open","breaker":"payment","actor":"ops","reason":"run 0")"));
  EXPECT_THAT(lines[2], HasSubstr(R"("action":"reset")"));
  EXPECT_THAT(lines[3], HasSubstr(R"("reason":"run 1")"));
  EXPECT_EQ(text.back(), '\n');
}

TEST(AuditLogFile, UnopenablePathIsAClearError) {
  auto r = FileLineSink::Create("/nonexistent-dir/audit.jsonl");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("/nonexistent-dir/audit.jsonl"));
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("No such file or directory"));
}

TEST(AuditLogOptions, SinkIsRequired) {
  auto r = AuditLog::Create({});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("sink"));
}

TEST(AuditAction, NamesOnlyOperatorTransitions) {
  TransitionEvent e;
  e.reason = TransitionReason::kFailureRate;
  e.to = State::kOpen;
  EXPECT_EQ(AuditAction(e), "");
  e.reason = TransitionReason::kOperator;
  EXPECT_EQ(AuditAction(e), "transition_to_open");
  e.to = State::kForcedClosed;
  EXPECT_EQ(AuditAction(e), "force_closed");
  e.reason = TransitionReason::kOverrideExpired;
  e.to = State::kClosed;
  EXPECT_EQ(AuditAction(e), "override_expired");
}

}  // namespace
}  // namespace fusebox
