#include "fusebox/event_log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fusebox/observer.h"
#include "fusebox/registry.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::ManualClock;
using ::testing::StartsWith;

// 2025-08-19T10:00:00Z, fixed: wall-clock fields are exact.
std::chrono::system_clock::time_point FixedWall() {
  return std::chrono::system_clock::time_point(seconds(1755597600));
}

class EventLogTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeLog({}); }

  void MakeLog(EventLogOptions options) {
    options.sink = sink_;
    if (options.sampling_interval == EventLogOptions{}.sampling_interval) {
      options.sampling_interval = seconds(5);
    }
    log_ = std::move(*EventLog::Create(std::move(options)));
  }

  std::unique_ptr<CircuitBreaker> Breaker(std::string name = "payment") {
    auto b = std::move(*CircuitBreaker::Create(std::move(name),
                                               {.permitted_number_of_calls_in_half_open_state = 1,
                                                .sliding_window_size = 4,
                                                .minimum_number_of_calls = 4,
                                                .wait_duration_in_open_state = seconds(10)},
                                               clock_));
    log_->Attach(*b);
    return b;
  }

  static void Trip(CircuitBreaker& b) {
    b.TryAcquire()->Success(milliseconds(10));
    b.TryAcquire()->Success(milliseconds(10));
    b.TryAcquire()->Failure(milliseconds(10));
    b.TryAcquire()->Failure(milliseconds(10));
    ASSERT_EQ(b.state(), State::kOpen);
  }

  static int Rejections(CircuitBreaker& b, int n) {
    int rejected = 0;
    for (int i = 0; i < n; ++i) rejected += b.TryAcquire().has_value() ? 0 : 1;
    return rejected;
  }

  // The lines whose "event" is `event`.
  std::vector<std::string> Events(std::string_view event) const {
    std::vector<std::string> out;
    const std::string needle = "{\"event\":\"" + std::string(event) + "\"";
    for (const std::string& line : sink_->lines()) {
      if (line.rfind(needle, 0) == 0) out.push_back(line);
    }
    return out;
  }

  ManualClock clock_;
  std::shared_ptr<MemoryLineSink> sink_ = std::make_shared<MemoryLineSink>();
  std::unique_ptr<EventLog> log_;
};

TEST_F(EventLogTest, TransitionLineCarriesFromToReasonCountsAndRetryAt) {
  MakeLog({.wall_clock = FixedWall});
  auto b = Breaker();
  Trip(*b);
  ASSERT_EQ(sink_->size(), 1u);
  EXPECT_EQ(sink_->lines()[0],
            R"({"event":"transition","breaker":"payment","from":"closed","to":"open",)"
            R"("reason":"failure_rate_exceeded","failure_rate":50,"slow_call_rate":0,)"
            R"("buffered_calls":4,"failed_calls":2,"slow_calls":0,"not_permitted_calls":0,)"
            R"("t_ms":86400000000,"ts":"2025-08-19T10:00:00.000Z","retry_in_ms":10000,)"
            R"("retry_at":"2025-08-19T10:00:10.000Z"})");
}

TEST_F(EventLogTest, WithoutWallClockOnlySteadyOffsets) {
  auto b = Breaker();
  Trip(*b);
  ASSERT_EQ(Rejections(*b, 1), 1);
  const auto rejections = Events("rejection");
  ASSERT_EQ(rejections.size(), 1u);
  EXPECT_EQ(rejections[0],
            R"({"event":"rejection","breaker":"payment","state":"open","reason":"open",)"
            R"("t_ms":86400000000,"retry_in_ms":10000})");
}

TEST_F(EventLogTest, EveryTransitionIsLogged) {
  auto b = Breaker();
  Trip(*b);
  clock_.Advance(seconds(10) + milliseconds(1));
  b->TryAcquire()->Success(milliseconds(1));
  ASSERT_EQ(b->state(), State::kClosed);
  const auto t = Events("transition");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_THAT(t[1], HasSubstr(R"("from":"open","to":"half_open","reason":"wait_elapsed")"));
  EXPECT_THAT(t[2], HasSubstr(R"("from":"half_open","to":"closed","reason":"probes_succeeded")"));
  // CLOSED has no end: no retry fields.
  EXPECT_THAT(t[2], ::testing::Not(HasSubstr("retry_in_ms")));
}

// A ManualClock whose CoarseNow() lags Now() by 5 ms, as the system clock's
// may: the breaker stamps a transition with Now(), a rejection with CoarseNow().
class LaggingClock final : public Clock {
 public:
  TimePoint Now() const override { return inner.Now(); }
  TimePoint CoarseNow() const override { return inner.Now() - milliseconds(5); }
  void SleepUntil(TimePoint deadline) override { inner.SleepUntil(deadline); }
  TimerId ScheduleAt(TimePoint deadline, std::function<void()> fn) override {
    return inner.ScheduleAt(deadline, std::move(fn));
  }
  bool Cancel(TimerId id) override { return inner.Cancel(id); }
  ManualClock inner;
};

// The t_ms of every line.
std::vector<long long> Times(const MemoryLineSink& sink) {
  std::vector<long long> out;
  for (const std::string& line : sink.lines()) {
    const std::size_t at = line.find("\"t_ms\":");
    if (at != std::string::npos) out.push_back(std::stoll(line.substr(at + 7)));
  }
  return out;
}

TEST_F(EventLogTest, LinesAreInTheOrderOfTheirTimes) {
  LaggingClock lagging;
  auto b = std::move(*CircuitBreaker::Create("payment",
                                             {.sliding_window_size = 2,
                                              .minimum_number_of_calls = 2,
                                              .wait_duration_in_open_state = seconds(10)},
                                             lagging));
  log_->Attach(*b);
  b->TryAcquire()->Failure(milliseconds(1));
  b->TryAcquire()->Failure(milliseconds(1));
  ASSERT_EQ(b->state(), State::kOpen);
  ASSERT_EQ(Rejections(*b, 2), 2);  // Stamped 5 ms before the transition, by the coarse clock.
  lagging.inner.Advance(milliseconds(3));
  ASSERT_EQ(Rejections(*b, 1), 1);
  ASSERT_EQ(Events("transition").size(), 1u);
  ASSERT_EQ(Events("rejection").size(), 3u);
  const std::vector<long long> t = Times(*sink_);
  ASSERT_EQ(t.size(), 4u);
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end())) << ::testing::PrintToString(t);
  // Raised to the transition's time, never past it: the 5 ms lag is clamped, not invented.
  EXPECT_EQ(t[1], t[0]);
  EXPECT_EQ(t[3], t[0]);
  // The rejections' retry_in_ms is measured from the stamped time.
  EXPECT_THAT(Events("rejection")[0], HasSubstr(R"("retry_in_ms":10000)"));
}

// Seed 003: an outage must not flood the log. 10,000 rejections in one
// interval give exactly N lines and one summary with the rest.
TEST_F(EventLogTest, A10000RejectionBurstWritesTheSampleAndOneSummary) {
  auto b = Breaker();
  Trip(*b);
  sink_->Clear();
  ASSERT_EQ(Rejections(*b, 10000), 10000);
  EXPECT_EQ(Events("rejection").size(), 10u);
  EXPECT_EQ(sink_->size(), 10u);

  // The summary is written when the interval ends, by a timer on the clock.
  clock_.Advance(seconds(5));
  ASSERT_EQ(sink_->size(), 11u);
  EXPECT_EQ(sink_->lines()[10],
            R"({"event":"rejections_suppressed","breaker":"payment","logged":10,)"
            R"("suppressed":9990,"interval_ms":5000,"t_ms":86400005000})");

  // The next interval samples afresh.
  ASSERT_EQ(Rejections(*b, 10000), 10000);
  clock_.Advance(seconds(4));
  EXPECT_EQ(Events("rejection").size(), 20u);
  EXPECT_EQ(sink_->size(), 21u);
  clock_.Advance(seconds(1));
  ASSERT_EQ(Events("rejections_suppressed").size(), 2u);
  EXPECT_THAT(Events("rejections_suppressed")[1], HasSubstr(R"("suppressed":9990,)"));
  EXPECT_EQ(log_->lines_written(), 1u + 22u);
  EXPECT_EQ(log_->write_errors(), 0u);
}

TEST_F(EventLogTest, ConcurrentBurstIsCountedExactly) {
  auto b = Breaker();
  Trip(*b);
  sink_->Clear();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] { EXPECT_EQ(Rejections(*b, 2500), 2500); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(Events("rejection").size(), 10u);
  clock_.Advance(seconds(5));
  const auto summary = Events("rejections_suppressed");
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_THAT(summary[0], HasSubstr(R"("suppressed":9990,)"));
}

// Lines written by many threads while the clock moves leave in t_ms order:
// each is stamped under the lock that writes it (TSan runs this too).
TEST_F(EventLogTest, LinesFromManyThreadsStayInTimeOrder) {
  std::vector<std::unique_ptr<CircuitBreaker>> breakers;
  for (int t = 0; t < 4; ++t) breakers.push_back(Breaker("dep-" + std::to_string(t)));
  std::atomic<bool> done{false};
  // At most 200 ms in all: no sampling interval ends, no breaker leaves OPEN.
  std::thread ticker([&] {
    for (int i = 0; i < 200 && !done.load(); ++i) {
      clock_.Advance(milliseconds(1));
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Trip(*breakers[t]);
      EXPECT_EQ(Rejections(*breakers[t], 200), 200);
    });
  }
  for (auto& t : threads) t.join();
  done.store(true);
  ticker.join();
  EXPECT_EQ(Events("transition").size(), 4u);
  const std::vector<long long> t = Times(*sink_);
  EXPECT_GE(t.size(), 8u);
  EXPECT_TRUE(std::is_sorted(t.begin(), t.end())) << ::testing::PrintToString(t);
}

TEST_F(EventLogTest, SummaryComesBeforeTheNextTransition) {
  MakeLog({.rejections_per_interval = 2, .sampling_interval = seconds(60)});
  auto b = Breaker();
  Trip(*b);
  ASSERT_EQ(Rejections(*b, 100), 100);
  clock_.Advance(seconds(10) + milliseconds(1));
  b->TryAcquire()->Failure(milliseconds(1));  // HALF_OPEN, then back to OPEN
  const auto lines = sink_->lines();
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_THAT(lines[0], StartsWith(R"({"event":"transition")"));
  EXPECT_THAT(lines[1], StartsWith(R"({"event":"rejection")"));
  EXPECT_THAT(lines[2], StartsWith(R"({"event":"rejection")"));
  EXPECT_THAT(
      lines[3],
      StartsWith(
          R"({"event":"rejections_suppressed","breaker":"payment","logged":2,"suppressed":98,)"));
  EXPECT_THAT(lines[4], HasSubstr(R"("to":"half_open")"));
  EXPECT_THAT(lines[5], HasSubstr(R"("from":"half_open","to":"open")"));
  // Nothing left for the timer.
  clock_.Advance(seconds(60));
  EXPECT_EQ(sink_->size(), 6u);
}

TEST_F(EventLogTest, ZeroSampleWritesOnlySummaries) {
  MakeLog({.rejections_per_interval = 0});
  auto b = Breaker();
  Trip(*b);
  ASSERT_EQ(Rejections(*b, 7), 7);
  clock_.Advance(seconds(5));
  EXPECT_TRUE(Events("rejection").empty());
  ASSERT_EQ(Events("rejections_suppressed").size(), 1u);
  EXPECT_THAT(Events("rejections_suppressed")[0], HasSubstr(R"("logged":0,"suppressed":7,)"));
}

TEST_F(EventLogTest, DestroyedBreakerFlushesWhatItSuppressed) {
  auto b = Breaker();
  Trip(*b);
  ASSERT_EQ(Rejections(*b, 50), 50);
  b.reset();
  ASSERT_EQ(Events("rejections_suppressed").size(), 1u);
  EXPECT_THAT(Events("rejections_suppressed")[0], HasSubstr(R"("suppressed":40,)"));
  clock_.Advance(seconds(60));  // the cancelled timer does nothing
  EXPECT_EQ(Events("rejections_suppressed").size(), 1u);
}

TEST_F(EventLogTest, EscapesBreakerNamesAndOperatorText) {
  auto b = Breaker("pay\"ment\\\n\x01-\xC3\xBC-\xFF");
  b->ForceOpen({.reason = "tab\there \"quoted\"", .actor = "\xEA\xB9\x80"});  // actor: 김
  ASSERT_EQ(sink_->size(), 1u);
  const std::string line = sink_->lines()[0];
  EXPECT_THAT(line, HasSubstr(R"("breaker":"pay\"ment\\\n\u0001-)"
                              "\xC3\xBC"
                              "-\xEF\xBF\xBD\""));
  EXPECT_THAT(line, HasSubstr(R"("operator_reason":"tab\there \"quoted\"","actor":")"
                              "\xEA\xB9\x80"
                              "\"}"));
}

TEST_F(EventLogTest, LogsRegistryEvictions) {
  auto log = std::shared_ptr<EventLog>(std::move(*EventLog::Create({.sink = sink_})));
  RegistryOptions options{.clock = &clock_,
                          .idle_timeout = std::chrono::minutes(1),
                          .sweep_interval = std::chrono::minutes(1)};
  ObserveRegistry(options, {log});
  auto registry = std::move(*Registry::Create(std::move(options)));
  (void)registry->Get("meta:read:1:quota");
  EXPECT_EQ(sink_->size(), 0u);  // creations are not logged by default
  clock_.Advance(std::chrono::minutes(2));
  ASSERT_EQ(registry->Sweep(), 1u);
  EXPECT_THAT(sink_->lines(), ElementsAre(R"({"event":"registry","kind":"evicted_idle",)"
                                          R"("breaker":"meta:read:1:quota","size":0})"));
}

TEST_F(EventLogTest, CountsSinkFailures) {
  class BrokenSink final : public LineSink {
   public:
    Status Write(std::string_view) override { return Status::Unavailable("disk full"); }
  };
  auto log = std::move(*EventLog::Create({.sink = std::make_shared<BrokenSink>()}));
  auto b = std::move(*CircuitBreaker::Create("x", {}, clock_));
  log->Attach(*b);
  b->ForceOpen();
  EXPECT_EQ(log->write_errors(), 1u);
  EXPECT_EQ(log->lines_written(), 0u);
}

TEST(EventLogOptions, ValidateNamesTheField) {
  auto sink = std::make_shared<MemoryLineSink>();
  EXPECT_EQ(EventLog::Create({}).error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(EventLog::Create({}).error().message()), HasSubstr("sink"));
  auto r = EventLog::Create({.sink = sink, .rejections_per_interval = -1});
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("rejections_per_interval"));
  r = EventLog::Create({.sink = sink, .sampling_interval = Duration::zero()});
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("sampling_interval"));
}

}  // namespace
}  // namespace fusebox
