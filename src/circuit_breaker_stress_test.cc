// Concurrency stress tests for CircuitBreaker on a ManualClock.
//
// Several threads acquire permits and report outcomes at random (success,
// slow success, failure, ignore, or dropping the permit without an outcome),
// one thread advances the clock in small steps and, in the chaos variant,
// another forces operator transitions. Every thread draws from its own seeded
// std::mt19937. Nothing sleeps: the clock and operator threads pace themselves
// on the workers' progress (see Pacer).
//
// The tests must stay clean under TSan and ASan+UBSan and finish in a few
// seconds under TSan, so the iteration counts are small and fixed.
//
// Checked invariants:
//   - every metrics() snapshot adds up: buffered = successful + failed,
//     buffered <= the window (or probe window) size, slow = slow successful +
//     slow failed <= buffered, rates are -1 or within [0, 100];
//   - not_permitted_calls never decreases between two snapshots of the same
//     state taken where no transition can have happened in between;
//   - transitions reach listeners one at a time and in order (each event's
//     `from` is the previous event's `to`);
//   - kDefault, no operator: the half-open slots in use never exceed
//     permitted_number_of_calls_in_half_open_state, and a "half_open_full"
//     rejection means all of them really are in use (no slot leaked);
//   - no permit is lost: once every thread has joined, the breaker still
//     reaches CLOSED through successful probes;
//   - OutcomeOrder::kRelaxed: every outcome is applied exactly once (the
//     window and the totals add up to what the threads reported), the window
//     holds what a replay of the applied order gives, and the breaker trips
//     exactly where every order of the reports reaches the threshold;
//   - no crash, no deadlock, no data race.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;

constexpr int kWorkers = 4;
constexpr int kPermitted = 3;
constexpr int kWindow = 5;
constexpr Duration kWait = 200ms;
constexpr Duration kStep = 10ms;
constexpr Duration kSlow = 50ms;
constexpr Duration kMaxOpenFor = 300ms;

CircuitBreakerConfig StressConfig(Compatibility mode, bool automatic,
                                  OutcomeOrder order = OutcomeOrder::kLinearizable) {
  CircuitBreakerConfig c;
  c.failure_rate_threshold = 50;
  c.slow_call_rate_threshold = 50;
  c.slow_call_duration_threshold = kSlow;
  c.permitted_number_of_calls_in_half_open_state = kPermitted;
  c.sliding_window_type = SlidingWindowType::kCountBased;
  c.sliding_window_size = kWindow;
  c.minimum_number_of_calls = 3;
  c.wait_duration_in_open_state = kWait;
  c.automatic_transition_from_open_to_half_open_enabled = automatic;
  c.compatibility = mode;
  c.outcome_order = order;
  return c;
}

// Collects invariant violations from any thread; the test reports them at the
// end (the first few messages, and the count).
class Violations {
 public:
  void Add(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (messages_.size() < 10) messages_.push_back(std::move(what));
    ++count_;
  }
  void ExpectNone() const {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(count_, 0);
    for (const std::string& m : messages_) ADD_FAILURE() << m;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> messages_;
  int count_ = 0;
};

// Keeps simulated time and the workers' progress in step without sleeping:
// the clock thread may run at most kLead ticks ahead of the slowest worker,
// and a worker waits (yielding) when it gets more than kLead ticks ahead of
// the clock. With kItersPerTick iterations per 10 ms tick, an OPEN period of
// 200 ms spans about 40 iterations of each worker.
class Pacer {
 public:
  static constexpr int kItersPerTick = 2;
  static constexpr int kLead = 3;

  explicit Pacer(int workers) : iterations_(static_cast<std::size_t>(workers)) {
    for (auto& i : iterations_) i.store(0);
  }

  // Worker `index` finished iteration `n` (from 1); may wait for the clock.
  void WorkerAt(int index, int n) {
    iterations_[static_cast<std::size_t>(index)].store(n);
    while (ticks_.load() + kLead < n / kItersPerTick) std::this_thread::yield();
  }
  void WorkerDone(int index) { iterations_[static_cast<std::size_t>(index)].store(kDone); }

  // The slowest worker's iteration, or kDone when all are done.
  int Slowest() const {
    int slowest = kDone;
    for (const auto& i : iterations_) slowest = std::min(slowest, i.load());
    return slowest;
  }
  bool AllDone() const { return Slowest() == kDone; }

  // Runs `advance` whenever the clock may move; returns when all are done.
  template <typename F>
  void RunTicker(F advance) {
    for (;;) {
      const int slowest = Slowest();
      if (slowest == kDone) return;
      if (ticks_.load() < slowest / kItersPerTick + kLead) {
        advance();
        ticks_.fetch_add(1);
      } else {
        std::this_thread::yield();
      }
    }
  }

 private:
  static constexpr int kDone = 1 << 30;
  std::vector<std::atomic<int>> iterations_;
  std::atomic<int> ticks_{0};
};

// `max_buffered`: the largest window (closed or probe) a COUNT_BASED breaker
// can report.
void CheckSnapshot(const CircuitBreakerMetrics& m, Violations& v,
                   int max_buffered = std::max(kWindow, kPermitted)) {
  if (m.buffered_calls != m.successful_calls + m.failed_calls) {
    v.Add("buffered != successful + failed: " + std::to_string(m.buffered_calls) + " vs " +
          std::to_string(m.successful_calls) + " + " + std::to_string(m.failed_calls));
  }
  if (m.buffered_calls < 0 || m.buffered_calls > max_buffered) {
    v.Add("buffered out of range: " + std::to_string(m.buffered_calls));
  }
  if (m.slow_calls != m.slow_successful_calls + m.slow_failed_calls ||
      m.slow_calls > m.buffered_calls || m.slow_failed_calls > m.failed_calls ||
      m.slow_successful_calls > m.successful_calls) {
    v.Add("slow counts do not add up: slow=" + std::to_string(m.slow_calls) +
          " buffered=" + std::to_string(m.buffered_calls));
  }
  for (float rate : {m.failure_rate, m.slow_call_rate}) {
    if (rate != -1.0f && !(rate >= 0.0f && rate <= 100.0f)) {
      v.Add("rate out of range: " + std::to_string(rate));
    }
  }
  if (m.not_permitted_calls < 0) v.Add("negative not_permitted_calls");
}

// Checks that transitions arrive one at a time and form a chain.
class ChainListener : public CircuitBreakerListener {
 public:
  // A listener of outcomes keeps every outcome on the locked path, in order;
  // kRelaxed needs one that only wants transitions.
  explicit ChainListener(Violations& v, unsigned interests = kAllEvents)
      : v_(v), interests_(interests) {}
  unsigned interests() const override { return interests_; }
  void OnTransition(const TransitionEvent& e) override {
    if (inside_.exchange(true)) v_.Add("two OnTransition calls at once");
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (e.from != last_) {
        v_.Add(std::string("transition chain broken: last to=") + std::string(StateName(last_)) +
               ", next from=" + std::string(StateName(e.from)));
      }
      last_ = e.to;
      ++count_;
      events_.push_back(e);
    }
    inside_.store(false);
  }
  std::vector<TransitionEvent> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  State last() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_;
  }
  int count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }

 private:
  Violations& v_;
  const unsigned interests_;
  std::atomic<bool> inside_{false};
  mutable std::mutex mu_;
  State last_ = State::kClosed;
  int count_ = 0;
  std::vector<TransitionEvent> events_;
};

enum class Act { kSuccess, kSlowSuccess, kFailure, kIgnore, kDrop, kOpenFor };

Act DrawAct(std::mt19937& rng, bool allow_open_for) {
  const int r = static_cast<int>(rng() % 100);
  if (r < 30) return Act::kSuccess;
  if (r < 38) return Act::kSlowSuccess;
  if (r < 78) return Act::kFailure;
  if (r < 88) return Act::kIgnore;
  if (allow_open_for && r < 90) return Act::kOpenFor;
  return Act::kDrop;
}

void Resolve(Permit& p, Act act, std::mt19937& rng) {
  switch (act) {
    case Act::kSuccess:
      p.Success(std::chrono::milliseconds(rng() % 40));
      break;
    case Act::kSlowSuccess:
      p.Success(kSlow + 1ms);
      break;
    case Act::kFailure:
      p.Failure(std::chrono::milliseconds(rng() % 80));
      break;
    case Act::kIgnore:
      p.Ignore();
      break;
    case Act::kOpenFor:
      p.Record(Outcome::OpenFor(std::chrono::milliseconds(1 + rng() % 300)));
      break;
    case Act::kDrop: {
      Permit gone = std::move(p);
    } break;
  }
}

// After every thread has joined: the breaker must still reach CLOSED through
// successful probes. A leaked half-open slot shows up as a "half_open_full"
// rejection although nobody holds a permit.
void ExpectReachesClosed(CircuitBreaker& cb, ManualClock& clock) {
  for (int round = 0; round < 50 && cb.state() != State::kClosed; ++round) {
    const State s = cb.state();
    if (s == State::kOpen) clock.Advance(std::max(kWait, kMaxOpenFor) + 1ms);
    Result<Permit> p = cb.TryAcquire();
    if (!p) {
      ASSERT_NE(p.error().reason(), "half_open_full")
          << "a half-open slot was lost: nobody holds a permit";
      continue;
    }
    p->Success(Duration::zero());
  }
  EXPECT_EQ(cb.state(), State::kClosed) << StateName(cb.state());
}

// ---------------------------------------------------------------------------
// Checked half-open admission (kDefault, no operator thread).
//
// Permits do not tell whether they hold a half-open slot, and the transition
// listener runs after the breaker's lock is released, so neither a listener
// nor a state() read after TryAcquire can attribute a permit to a half-open
// epoch while outcomes are being reported concurrently. So the workers split
// their work with a reader-writer gate:
//   - under the shared side they only call TryAcquire()/state()/metrics();
//     the clock thread advances under the shared side too;
//   - they report outcomes (and drop permits) only under the exclusive side,
//     one at a time.
// Without an operator thread and without max_wait_duration_in_half_open_state,
// only an outcome report can end a HALF_OPEN epoch (a verdict) or leave
// CLOSED; TryAcquire and the automatic-transition timer can only move OPEN to
// HALF_OPEN. Hence, within a shared phase:
//   - a state that is HALF_OPEN stays in the same epoch to the end of the
//     phase, and a CLOSED state stays CLOSED;
//   - a successful TryAcquire followed by state() == HALF_OPEN therefore took
//     a slot of the half-open epoch current at the end of the phase, and every
//     slot taken in the phase is seen this way.
// Under the exclusive side, the reporter knows whether the epoch survived its
// report: it survived iff the state is still HALF_OPEN (leaving and
// re-entering HALF_OPEN needs an acquire). The shadow counter `ho_used` thus
// tracks the breaker's own count of slots in use exactly (acquired minus
// given back by Ignore/drop of a current-epoch permit; a success or failure
// keeps its slot until the verdict), and we can check both directions:
//   - ho_used <= permitted after every half-open acquire (no over-admission);
//   - a "half_open_full" seen in a shared phase means ho_used == permitted at
//     the next exclusive section (no slot leaked), because slots are only
//     taken, never given back, during a shared phase.
// The race between reports and acquires is exercised by the chaos test below.

class CheckedHalfOpenAdmission : public ::testing::TestWithParam<bool> {};

INSTANTIATE_TEST_SUITE_P(AutomaticTransition, CheckedHalfOpenAdmission, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("On") : std::string("Off");
                         });

TEST_P(CheckedHalfOpenAdmission, NeverMoreThanPermittedAndNoSlotLost) {
  constexpr int kIterations = 4000;
  constexpr std::uint64_t kNone = ~std::uint64_t{0};
  ManualClock clock;
  Violations v;
  auto created =
      CircuitBreaker::Create("stress", StressConfig(Compatibility::kDefault, GetParam()), clock);
  ASSERT_TRUE(created.has_value()) << created.error();
  std::unique_ptr<CircuitBreaker> cb = std::move(created).value();
  auto chain = std::make_shared<ChainListener>(v);
  cb->AddListener(chain);

  std::shared_mutex gate;
  // Written only under the exclusive side of `gate`.
  std::atomic<std::uint64_t> shadow_epoch{0};
  std::atomic<int> ho_used{0};
  std::atomic<std::uint64_t> full_seen_epoch{kNone};
  Pacer pacer(kWorkers);
  std::atomic<int> half_open_admissions{0};
  std::atomic<int> half_open_full_rejections{0};

  struct Held {
    Permit permit;
    bool half_open;
    std::uint64_t epoch;
  };

  auto exclusive_resolve = [&](std::vector<Held>& held, std::size_t i, Act act, std::mt19937& rng) {
    std::unique_lock<std::shared_mutex> lock(gate);
    const std::uint64_t epoch = shadow_epoch.load();
    if (full_seen_epoch.load() == epoch && cb->state() == State::kHalfOpen &&
        ho_used.load() != kPermitted) {
      v.Add("half_open_full while only " + std::to_string(ho_used.load()) +
            " slots are in use: a slot leaked");
    }
    full_seen_epoch.store(kNone);
    Held h = std::move(held[i]);
    held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    const bool current_slot = h.half_open && h.epoch == epoch;
    Resolve(h.permit, act, rng);
    if (current_slot && (act == Act::kIgnore || act == Act::kDrop)) ho_used.fetch_sub(1);
    if (cb->state() != State::kHalfOpen) {
      // The half-open epoch (if any) ended with this report; slots of a later
      // epoch start from zero.
      shadow_epoch.fetch_add(1);
      ho_used.store(0);
    }
  };

  auto worker = [&](int index) {
    std::mt19937 rng(1234u + static_cast<unsigned>(index));
    std::vector<Held> held;
    for (int it = 0; it < kIterations; ++it) {
      {
        std::shared_lock<std::shared_mutex> lock(gate);
        std::optional<CircuitBreakerMetrics> prev;
        const int attempts = 1 + static_cast<int>(rng() % 3);
        for (int a = 0; a < attempts && held.size() < 4; ++a) {
          Result<Permit> p = cb->TryAcquire();
          const State after = cb->state();
          if (p) {
            const bool ho = after == State::kHalfOpen;
            if (ho) {
              half_open_admissions.fetch_add(1);
              const int used = ho_used.fetch_add(1) + 1;
              if (used > kPermitted) {
                v.Add("half-open slots in use: " + std::to_string(used));
              }
            }
            held.push_back({std::move(p).value(), ho, shadow_epoch.load()});
          } else if (p.error().reason() == "half_open_full") {
            half_open_full_rejections.fetch_add(1);
            full_seen_epoch.store(shadow_epoch.load());
          } else if (p.error().reason() != "open") {
            v.Add("unexpected rejection: " + p.error().ToString());
          }
          CircuitBreakerMetrics m = cb->metrics();
          CheckSnapshot(m, v);
          // No transition can leave a state and come back to it within a
          // shared phase, so the counter of one state only grows here.
          if (prev && prev->state == m.state && m.not_permitted_calls < prev->not_permitted_calls) {
            v.Add("not_permitted_calls decreased within " + std::string(StateName(m.state)));
          }
          prev = m;
        }
      }
      if (!held.empty() && rng() % 2 == 0) {
        const std::size_t i = rng() % held.size();
        exclusive_resolve(held, i, DrawAct(rng, /*allow_open_for=*/false), rng);
      }
      pacer.WorkerAt(index, it + 1);  // holds no lock while it waits
    }
    while (!held.empty()) exclusive_resolve(held, 0, DrawAct(rng, false), rng);
    pacer.WorkerDone(index);
  };

  std::thread ticker([&] {
    pacer.RunTicker([&] {
      std::shared_lock<std::shared_mutex> lock(gate);
      clock.Advance(kStep);
    });
  });
  std::vector<std::thread> workers;
  for (int i = 0; i < kWorkers; ++i) workers.emplace_back(worker, i);
  for (std::thread& t : workers) t.join();
  ticker.join();

  v.ExpectNone();
  // The run must actually have exercised half-open admission and rejection.
  EXPECT_GT(half_open_admissions.load(), 20);
  EXPECT_GT(half_open_full_rejections.load(), 0);
  EXPECT_GT(chain->count(), 10);
  EXPECT_EQ(chain->last(), cb->state());
  ExpectReachesClosed(*cb, clock);

  cb.reset();
  clock.Advance(1h);  // no timer may still point at the destroyed breaker
}

// ---------------------------------------------------------------------------
// Chaos: workers, the clock and an operator all at once, in both modes.

struct ChaosParam {
  Compatibility mode;
  bool automatic;
  OutcomeOrder order = OutcomeOrder::kLinearizable;
};

class CircuitBreakerChaos : public ::testing::TestWithParam<ChaosParam> {};

INSTANTIATE_TEST_SUITE_P(
    Variants, CircuitBreakerChaos,
    ::testing::Values(ChaosParam{Compatibility::kDefault, false},
                      ChaosParam{Compatibility::kDefault, true},
                      ChaosParam{Compatibility::kResilience4j, false},
                      ChaosParam{Compatibility::kResilience4j, true},
                      ChaosParam{Compatibility::kDefault, false, OutcomeOrder::kRelaxed},
                      ChaosParam{Compatibility::kResilience4j, true, OutcomeOrder::kRelaxed}),
    [](const ::testing::TestParamInfo<ChaosParam>& info) {
      return std::string(info.param.mode == Compatibility::kDefault ? "Default" : "Resilience4j") +
             (info.param.automatic ? "AutoOn" : "AutoOff") +
             (info.param.order == OutcomeOrder::kRelaxed ? "Relaxed" : "");
    });

TEST_P(CircuitBreakerChaos, WorkersClockAndOperatorTogether) {
  constexpr int kIterations = 4000;
  ManualClock clock;
  Violations v;
  const ChaosParam param = GetParam();
  auto created = CircuitBreaker::Create(
      "chaos", StressConfig(param.mode, param.automatic, param.order), clock);
  ASSERT_TRUE(created.has_value()) << created.error();
  std::unique_ptr<CircuitBreaker> cb = std::move(created).value();
  // kRelaxed counts failures without the lock only while no listener wants
  // outcomes one by one.
  auto chain = std::make_shared<ChainListener>(
      v, param.order == OutcomeOrder::kRelaxed
             ? CircuitBreakerListener::kAllEvents & ~CircuitBreakerListener::kOutcomeEvents
             : CircuitBreakerListener::kAllEvents);
  cb->AddListener(chain);

  Pacer pacer(kWorkers);
  std::atomic<int> admitted{0};

  auto worker = [&](int index) {
    std::mt19937 rng(777u + static_cast<unsigned>(index));
    std::vector<Permit> held;
    for (int it = 0; it < kIterations; ++it) {
      if (rng() % 8 == 0) {
        // The callable form: classify by the returned Status.
        const bool ok = rng() % 2 == 0;
        Status s = cb->Call([&] { return ok ? Status() : Status::Unavailable("down"); });
        if (!s.ok() && s.code() != StatusCode::kUnavailable &&
            s.code() != StatusCode::kCircuitOpen) {
          v.Add("Call returned " + s.ToString());
        }
      } else if (held.size() < 4) {
        Result<Permit> p = cb->TryAcquire();
        if (p) {
          admitted.fetch_add(1);
          held.push_back(std::move(p).value());
        } else if (p.error().code() != StatusCode::kCircuitOpen) {
          v.Add("rejection with code " + p.error().ToString());
        }
      }
      if (!held.empty() && rng() % 2 == 0) {
        const std::size_t i = rng() % held.size();
        Permit p = std::move(held[i]);
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
        Resolve(p, DrawAct(rng, /*allow_open_for=*/true), rng);
      }
      if (rng() % 4 == 0) CheckSnapshot(cb->metrics(), v);
      pacer.WorkerAt(index, it + 1);
    }
    for (Permit& p : held) Resolve(p, DrawAct(rng, true), rng);
    pacer.WorkerDone(index);
  };

  std::thread ticker([&] { pacer.RunTicker([&] { clock.Advance(kStep); }); });

  // Acts about every 30 iterations of the slowest worker.
  std::thread op([&] {
    std::mt19937 rng(99u);
    int last = 0;
    while (!pacer.AllDone()) {
      const int now = pacer.Slowest();
      if (now < last + 30) {
        std::this_thread::yield();
        continue;
      }
      last = now;
      OverrideOptions o;
      o.reason = "stress";
      o.actor = "operator-thread";
      if (rng() % 2 == 0) o.expires_after = std::chrono::milliseconds(20 + rng() % 200);
      switch (rng() % 10) {
        case 0:
          cb->ForceOpen(o);
          break;
        case 1:
          cb->ForceClosed(o);
          break;
        case 2:
          cb->Disable(o);
          break;
        case 3:
          cb->MetricsOnly(o);
          break;
        case 4:
          cb->Reset("stress", "operator-thread");
          break;
        case 5:
          cb->TransitionToClosed();
          break;
        case 6:
          (void)cb->TransitionToOpen();  // Refused from METRICS_ONLY in kResilience4j.
          break;
        case 7:
          (void)cb->TransitionToHalfOpen();  // Refused from CLOSED, METRICS_ONLY there.
          break;
        case 8:
          (void)cb->active_override();
          break;
        case 9: {
          auto extra = std::make_shared<CircuitBreakerListener>();
          const std::uint64_t id = cb->AddListener(extra);
          (void)cb->IsQuiescent();
          if (!cb->RemoveListener(id)) v.Add("RemoveListener lost a listener");
          break;
        }
      }
      CheckSnapshot(cb->metrics(), v);
    }
  });

  std::vector<std::thread> workers;
  for (int i = 0; i < kWorkers; ++i) workers.emplace_back(worker, i);
  for (std::thread& t : workers) t.join();
  ticker.join();
  op.join();

  v.ExpectNone();
  EXPECT_GT(admitted.load(), 100);
  EXPECT_GT(chain->count(), 10);
  EXPECT_EQ(chain->last(), cb->state());

  // No permit lost: leave any operator state the breaker may have been left
  // in, then it must recover through probes. An OPEN/HALF_OPEN/CLOSED end
  // state is recovered from as it is.
  const State s = cb->state();
  if (s != State::kClosed && s != State::kOpen && s != State::kHalfOpen) {
    cb->Reset("end of stress");
  }
  ExpectReachesClosed(*cb, clock);
  // And it still trips and recovers normally.
  for (int i = 0; i < kWindow && cb->state() == State::kClosed; ++i) {
    Result<Permit> p = cb->TryAcquire();
    ASSERT_TRUE(p.has_value());
    p->Failure(Duration::zero());
  }
  EXPECT_EQ(cb->state(), State::kOpen);
  ExpectReachesClosed(*cb, clock);

  cb.reset();
  clock.Advance(1h);  // no timer may still point at the destroyed breaker
}

// Many threads on the CLOSED fast path, with the window flipping between
// "clean" (no writes) and "holding failures" under them.
TEST(CircuitBreakerStress, FastPathSuccessesRaceWithFailures) {
  for (SlidingWindowType type : {SlidingWindowType::kCountBased, SlidingWindowType::kTimeBased}) {
    ManualClock clock;
    CircuitBreakerConfig c = StressConfig(Compatibility::kDefault, false);
    c.sliding_window_type = type;
    c.sliding_window_size = type == SlidingWindowType::kCountBased ? 50 : 2;
    c.minimum_number_of_calls = 50;
    c.failure_rate_threshold = 100;  // only an all-failure window trips
    c.slow_call_rate_threshold = 100;
    auto created = CircuitBreaker::Create("fast", c, clock);
    ASSERT_TRUE(created.has_value()) << created.error();
    std::unique_ptr<CircuitBreaker> cb = std::move(created).value();
    const int max_buffered = type == SlidingWindowType::kCountBased ? 50 : 1 << 30;
    Violations v;
    std::atomic<int> done{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kWorkers; ++i) {
      threads.emplace_back([&, i] {
        std::mt19937 rng(42u + static_cast<unsigned>(i));
        for (int it = 0; it < 3000; ++it) {
          Result<Permit> p = cb->TryAcquire();
          if (!p) {
            v.Add("rejected: " + p.error().ToString());
            continue;
          }
          if (rng() % 50 == 0) {
            p->Failure(Duration::zero());
          } else {
            p->Success(Duration::zero());
          }
          if (it % 64 == 0) CheckSnapshot(cb->metrics(), v, max_buffered);
        }
        done.fetch_add(1);
      });
    }
    std::thread ticker([&] {
      while (done.load() < kWorkers) {
        clock.Advance(1ms);
        std::this_thread::yield();
      }
    });
    for (std::thread& t : threads) t.join();
    ticker.join();
    v.ExpectNone();
    EXPECT_EQ(cb->state(), State::kClosed);
    CircuitBreakerMetrics m = cb->metrics();
    CheckSnapshot(m, v, max_buffered);
    if (type == SlidingWindowType::kCountBased) {
      EXPECT_EQ(m.buffered_calls, 50) << "a full window after 12000 calls";
    }
  }
}

// A clean TIME_BASED window: threads count successes in their own slot words
// while another folds them and moves the clock; each must be counted once.
TEST(CircuitBreakerStress, TimeBasedSuccessesFoldedWhileCountedAreEachCountedOnce) {
  ManualClock clock;
  CircuitBreakerConfig c = StressConfig(Compatibility::kDefault, false);
  c.sliding_window_type = SlidingWindowType::kTimeBased;
  c.sliding_window_size = 30;  // seconds: the ticker below moves at most 8
  auto created = CircuitBreaker::Create("time", c, clock);
  ASSERT_TRUE(created.has_value()) << created.error();
  std::unique_ptr<CircuitBreaker> cb = std::move(created).value();
  constexpr int kCalls = 4000;
  std::atomic<int> done{0};
  std::atomic<int> rejected{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kWorkers; ++i) {
    threads.emplace_back([&] {
      for (int it = 0; it < kCalls; ++it) {
        Result<Permit> p = cb->TryAcquire();
        if (!p) {
          rejected.fetch_add(1);
          continue;
        }
        p->Success(Duration::zero());
      }
      done.fetch_add(1);
    });
  }
  std::thread ticker([&] {
    for (int ticks = 0; done.load() < kWorkers; std::this_thread::yield()) {
      (void)cb->metrics();  // a fold while the workers count
      if (ticks < 80) {
        clock.Advance(100ms);
        ++ticks;
      }
    }
  });
  for (std::thread& t : threads) t.join();
  ticker.join();
  EXPECT_EQ(rejected.load(), 0);
  EXPECT_EQ(cb->metrics().buffered_calls, kWorkers * kCalls);
}

// ---------------------------------------------------------------------------
// OutcomeOrder::kRelaxed: failures that cannot trip the window are counted in
// the reporting thread's own slot and applied by the next lock holder. The
// applied order is not observable from outside, so these tests choose reports
// for which every order a thread's own order allows gives the same window, and
// check it exactly.

// Runs `threads` threads that each call `before`, wait for one another, then
// report failures on `cb` until they are rejected. Returns how many failures
// they reported.
std::int64_t FailUntilRejected(CircuitBreaker& cb, int threads,
                               const std::function<void()>& before) {
  std::atomic<int> ready{0};
  std::atomic<std::int64_t> failures{0};
  std::vector<std::thread> running;
  for (int i = 0; i < threads; ++i) {
    running.emplace_back([&] {
      before();
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();
      for (;;) {
        Result<Permit> p = cb.TryAcquire();
        if (!p) break;
        p->Failure(1ms);
        failures.fetch_add(1);
      }
    });
  }
  for (std::thread& t : running) t.join();
  return failures.load();
}

// `cb` is OPEN after exactly one transition, by failure rate, with `buffered`
// calls and `failed` failures in the window when it tripped.
void ExpectOneTripByFailureRate(const CircuitBreaker& cb, const ChainListener& chain, int buffered,
                                int failed) {
  ASSERT_EQ(cb.state(), State::kOpen);
  const std::vector<TransitionEvent> events = chain.events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].reason, TransitionReason::kFailureRate);
  EXPECT_EQ(events[0].counts.buffered_calls, buffered);
  EXPECT_EQ(events[0].counts.failed_calls, failed);
  EXPECT_EQ(events[0].counts.failure_rate, 100.0f * static_cast<float>(failed) / buffered);
}

struct Reported {
  std::int64_t successes = 0, slow_successes = 0, failures = 0, slow_failures = 0, ignored = 0;
  void Add(const Reported& o) {
    successes += o.successes;
    slow_successes += o.slow_successes;
    failures += o.failures;
    slow_failures += o.slow_failures;
    ignored += o.ignored;
  }
};

// Threads report random outcomes at once. With a window larger than all the
// calls, the window after them is the same whatever order they were applied
// in: a replay gives every outcome reported, once. With a window smaller than
// that (full, so successes and failures are counted without the lock while it
// holds failures) the counts depend on the order, but once the threads are
// done every counted outcome must have been applied: a window's worth of
// successes then leaves it clean.
TEST(CircuitBreakerStress, RelaxedOrderAppliesEveryOutcomeOnce) {
  constexpr int kThreads = kWorkers;
  constexpr int kCalls = 3000;
  for (const int window : {kThreads * kCalls, 64}) {
    for (const Compatibility mode : {Compatibility::kDefault, Compatibility::kResilience4j}) {
      SCOPED_TRACE("window " + std::to_string(window) +
                   (mode == Compatibility::kDefault ? " default" : " resilience4j"));
      ManualClock clock;
      CircuitBreakerConfig c = StressConfig(mode, false, OutcomeOrder::kRelaxed);
      c.sliding_window_size = window;
      c.minimum_number_of_calls = window;
      c.failure_rate_threshold = 100;  // never trips: every call gets a permit
      c.slow_call_rate_threshold = 100;
      auto created = CircuitBreaker::Create("relaxed", c, clock);
      ASSERT_TRUE(created.has_value()) << created.error();
      std::unique_ptr<CircuitBreaker> cb = std::move(created).value();
      Violations v;
      std::vector<Reported> reported(kThreads);
      std::atomic<int> started{0};
      std::vector<std::thread> threads;
      for (int i = 0; i < kThreads; ++i) {
        threads.emplace_back([&, i] {
          std::mt19937 rng(2024u + static_cast<unsigned>(i));
          Reported& r = reported[static_cast<std::size_t>(i)];
          // All at once, so that their reports overlap.
          started.fetch_add(1);
          while (started.load() < kThreads) std::this_thread::yield();
          for (int it = 0; it < kCalls; ++it) {
            Result<Permit> p = cb->TryAcquire();
            if (!p) {
              v.Add("rejected: " + p.error().ToString());
              continue;
            }
            switch (rng() % 10) {
              case 0:
              case 1:
              case 2:
                p->Failure(1ms);
                ++r.failures;
                break;
              case 3:
                p->Failure(kSlow + 1ms);
                ++r.slow_failures;
                break;
              case 4:
                p->Success(kSlow + 1ms);
                ++r.slow_successes;
                break;
              case 5:
                p->Ignore();
                ++r.ignored;
                break;
              default:
                p->Success(1ms);
                ++r.successes;
                break;
            }
            if (it % 128 == 0) CheckSnapshot(cb->metrics(), v, window);
          }
        });
      }
      for (std::thread& t : threads) t.join();
      v.ExpectNone();
      Reported all;
      for (const Reported& r : reported) all.Add(r);

      const CircuitBreakerTotals t = cb->totals();
      EXPECT_EQ(t.calls[0], all.successes + all.slow_successes);
      EXPECT_EQ(t.calls[1], all.failures + all.slow_failures);
      EXPECT_EQ(t.calls[2], all.ignored);
      EXPECT_EQ(t.slow_successful_calls, all.slow_successes);
      EXPECT_EQ(t.slow_failed_calls, all.slow_failures);
      const CircuitBreakerMetrics m = cb->metrics();
      EXPECT_EQ(m.state, State::kClosed);
      EXPECT_EQ(m.late_outcomes, 0);
      if (window == kThreads * kCalls) {
        EXPECT_EQ(m.buffered_calls,
                  all.successes + all.slow_successes + all.failures + all.slow_failures);
        EXPECT_EQ(m.failed_calls, all.failures + all.slow_failures);
        EXPECT_EQ(m.slow_failed_calls, all.slow_failures);
        EXPECT_EQ(m.slow_successful_calls, all.slow_successes);
      } else {
        EXPECT_EQ(m.buffered_calls, window);
        for (int i = 0; i < window; ++i) cb->TryAcquire()->Success(1ms);
        const CircuitBreakerMetrics clean = cb->metrics();
        EXPECT_EQ(clean.buffered_calls, window);
        EXPECT_EQ(clean.failed_calls, 0);
        EXPECT_EQ(clean.slow_calls, 0);
      }
    }
  }
}

// Every thread reports successes, waits until all have, then reports failures
// until it is rejected. In any order the failures are applied in, the failure
// rate first reaches 50 % at the failure that makes them as many as the
// successes; the breaker must trip exactly there, and every later failure is
// still accounted for (late in kDefault, in the tripped window in
// kResilience4j).
TEST(CircuitBreakerStress, RelaxedOrderTripsExactlyWhereEveryOrderReachesTheThreshold) {
  constexpr int kThreads = kWorkers;
  constexpr int kSuccessesEach = 250;
  constexpr int kSuccesses = kThreads * kSuccessesEach;
  for (const Compatibility mode : {Compatibility::kDefault, Compatibility::kResilience4j}) {
    SCOPED_TRACE(mode == Compatibility::kDefault ? "default" : "resilience4j");
    ManualClock clock;
    CircuitBreakerConfig c = StressConfig(mode, false, OutcomeOrder::kRelaxed);
    c.sliding_window_size = 4 * kSuccesses;
    c.minimum_number_of_calls = 100;
    c.failure_rate_threshold = 50;
    auto created = CircuitBreaker::Create("relaxed-trip", c, clock);
    ASSERT_TRUE(created.has_value()) << created.error();
    std::unique_ptr<CircuitBreaker> cb = std::move(created).value();
    Violations v;
    auto chain = std::make_shared<ChainListener>(v, CircuitBreakerListener::kTransitionEvents);
    cb->AddListener(chain);
    const std::int64_t failed = FailUntilRejected(*cb, kThreads, [&] {
      for (int it = 0; it < kSuccessesEach; ++it) cb->TryAcquire()->Success(1ms);
    });
    v.ExpectNone();
    ExpectOneTripByFailureRate(*cb, *chain, 2 * kSuccesses, kSuccesses);

    EXPECT_GE(failed, kSuccesses);
    const CircuitBreakerMetrics m = cb->metrics();
    if (mode == Compatibility::kDefault) {
      EXPECT_EQ(m.buffered_calls, 2 * kSuccesses);
      EXPECT_EQ(m.failed_calls, kSuccesses);
      EXPECT_EQ(m.late_outcomes, failed - kSuccesses);
    } else {
      EXPECT_EQ(m.buffered_calls, kSuccesses + failed);
      EXPECT_EQ(m.failed_calls, failed);
      EXPECT_EQ(m.late_outcomes, 0);
    }
    const CircuitBreakerTotals t = cb->totals();
    EXPECT_EQ(t.calls[0], kSuccesses);
    EXPECT_EQ(t.calls[1], failed);
  }
}

// A full window of successes, so that failures are counted without the lock
// within kRelaxed's allowances; threads then report only failures. In every
// order the failure rate first reaches 50 % at the 50th failure, each one
// replacing a success: the breaker must trip exactly there (a counted failure
// never pushes the window past the threshold unnoticed), and every later
// failure, counted or not, is still accounted for.
TEST(CircuitBreakerStress, RelaxedOrderAllowancesNeverOvershootTheThreshold) {
  constexpr int kThreads = kWorkers;
  constexpr int kWindow = 100;
  for (int round = 0; round < 20; ++round) {
    for (const Compatibility mode : {Compatibility::kDefault, Compatibility::kResilience4j}) {
      SCOPED_TRACE((mode == Compatibility::kDefault ? "default, round " : "resilience4j, round ") +
                   std::to_string(round));
      ManualClock clock;
      CircuitBreakerConfig c = StressConfig(mode, false, OutcomeOrder::kRelaxed);
      c.sliding_window_size = kWindow;
      c.minimum_number_of_calls = kWindow;
      c.failure_rate_threshold = 50;
      auto created = CircuitBreaker::Create("relaxed-allowance", c, clock);
      ASSERT_TRUE(created.has_value()) << created.error();
      std::unique_ptr<CircuitBreaker> cb = std::move(created).value();
      for (int i = 0; i < kWindow; ++i) cb->TryAcquire()->Success(1ms);
      Violations v;
      auto chain = std::make_shared<ChainListener>(v, CircuitBreakerListener::kTransitionEvents);
      cb->AddListener(chain);
      const std::int64_t failed = FailUntilRejected(*cb, kThreads, [] {});
      v.ExpectNone();
      ExpectOneTripByFailureRate(*cb, *chain, kWindow, kWindow / 2);
      ASSERT_GE(failed, kWindow / 2);
      const CircuitBreakerMetrics m = cb->metrics();
      EXPECT_EQ(m.buffered_calls, kWindow);
      if (mode == Compatibility::kDefault) {
        EXPECT_EQ(m.failed_calls, kWindow / 2);
        EXPECT_EQ(m.late_outcomes, failed - kWindow / 2);
      } else {
        EXPECT_EQ(m.failed_calls, std::min<std::int64_t>(failed, kWindow));
        EXPECT_EQ(m.late_outcomes, 0);
      }
      EXPECT_EQ(cb->totals().calls[1], failed);
    }
  }
}

// One thread reports only failures, another only successes, taking turns: one
// failure, then nine successes, so that the window's true failure rate stays
// at 10 %. The failing thread records its failures under the lock once its
// allowance is used up, folding only its own slot; the other thread never
// takes the lock. Its successes must still count: the breaker must never trip
// (a failure that could trip the window folds every slot first), and once the
// threads are done the window holds about one failure in ten.
TEST(CircuitBreakerStress, RelaxedOrderCountsThreadsThatOnlySucceed) {
  constexpr int kRounds = 3000;
  for (const Compatibility mode : {Compatibility::kDefault, Compatibility::kResilience4j}) {
    SCOPED_TRACE(mode == Compatibility::kDefault ? "default" : "resilience4j");
    ManualClock clock;
    CircuitBreakerConfig c = StressConfig(mode, false, OutcomeOrder::kRelaxed);
    c.sliding_window_size = 100;
    c.minimum_number_of_calls = 100;
    c.failure_rate_threshold = 25;
    auto created = CircuitBreaker::Create("relaxed-turns", c, clock);
    ASSERT_TRUE(created.has_value()) << created.error();
    std::unique_ptr<CircuitBreaker> cb = std::move(created).value();
    std::atomic<int> turn{0};  // Even: the failing thread's; odd: the other's.
    std::atomic<int> rejected{0};
    const auto report = [&](int parity, int calls, bool fail) {
      for (int round = 0; round < kRounds; ++round) {
        while (turn.load(std::memory_order_acquire) != 2 * round + parity) {
          std::this_thread::yield();
        }
        for (int i = 0; i < calls; ++i) {
          Result<Permit> p = cb->TryAcquire();
          if (!p) {
            rejected.fetch_add(1);
            continue;
          }
          fail ? p->Failure(1ms) : p->Success(1ms);
        }
        turn.store(2 * round + parity + 1, std::memory_order_release);
      }
    };
    std::thread failing(report, 0, 1, true);
    std::thread succeeding(report, 1, 9, false);
    failing.join();
    succeeding.join();
    EXPECT_EQ(rejected.load(), 0);
    const CircuitBreakerMetrics m = cb->metrics();
    EXPECT_EQ(m.state, State::kClosed);
    EXPECT_EQ(m.buffered_calls, 100);
    EXPECT_GE(m.failed_calls, 5);
    EXPECT_LE(m.failed_calls, 15);
    const CircuitBreakerTotals t = cb->totals();
    EXPECT_EQ(t.calls[0], 9 * kRounds);
    EXPECT_EQ(t.calls[1], kRounds);
  }
}

}  // namespace
}  // namespace fusebox
