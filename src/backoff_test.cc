// Tests for the interval functions in fusebox/backoff.h.

#include "fusebox/backoff.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <string>
#include <vector>

namespace fusebox {
namespace {

using namespace std::chrono_literals;

// Doubles converted to nanoseconds may round by a nanosecond or so.
constexpr Duration kSlack = 1us;

std::vector<Duration> Draw(const IntervalFunction& f, int n) {
  std::vector<Duration> out;
  for (int attempt = 1; attempt <= n; ++attempt) out.push_back(f(attempt));
  return out;
}

TEST(Backoff, FixedIsAlwaysTheSame) {
  IntervalFunction f = backoff::Fixed(2s);
  for (int attempt : {1, 2, 3, 10, 1000}) EXPECT_EQ(f(attempt), 2s) << attempt;
}

TEST(Backoff, ExponentialGrowsAndIsCapped) {
  backoff::ExponentialOptions o;
  o.initial = 500ms;
  o.multiplier = 2;
  o.max = 3s;
  IntervalFunction f = backoff::Exponential(o);
  EXPECT_EQ(f(1), 500ms);
  EXPECT_EQ(f(2), 1s);
  EXPECT_EQ(f(3), 2s);
  EXPECT_EQ(f(4), 3s);
  EXPECT_EQ(f(5), 3s);
  EXPECT_EQ(f(1000), 3s) << "no overflow for large attempts";
}

TEST(Backoff, ExponentialDefaultsAreResilience4js) {
  IntervalFunction f = backoff::Exponential({});
  EXPECT_EQ(f(1), 500ms);
  EXPECT_NEAR(static_cast<double>(f(2).count()), 750e6, 1e3);
  EXPECT_NEAR(static_cast<double>(f(3).count()), 1125e6, 1e3);
  // No bound by default, but a huge attempt must not wrap around.
  EXPECT_GT(f(200), 1h);
}

TEST(Backoff, ExponentialWithMultiplierOneIsFixed) {
  backoff::ExponentialOptions o;
  o.initial = 300ms;
  o.multiplier = 1;
  IntervalFunction f = backoff::Exponential(o);
  for (int attempt = 1; attempt < 20; ++attempt) EXPECT_EQ(f(attempt), 300ms);
}

// Resilience4j's IntervalFunction.ofExponentialBackoff truncates to whole
// milliseconds at every step: the trace, 7 ms x 1.3.
TEST(Backoff, WholeMillisecondsTruncatesAtEveryStepAsResilience4j) {
  IntervalFunction exact = backoff::Exponential({.initial = 7ms, .multiplier = 1.3});
  IntervalFunction r4j =
      backoff::Exponential({.initial = 7ms, .multiplier = 1.3, .whole_milliseconds = true});
  EXPECT_EQ(Draw(r4j, 5), (std::vector<Duration>{7ms, 9ms, 11ms, 14ms, 18ms}));
  const double exact_ms = std::chrono::duration<double, std::milli>(exact(4)).count();
  EXPECT_NEAR(exact_ms, 15.379, 1e-6);
}

TEST(Backoff, WholeMillisecondsTruncatesInitialAndCap) {
  IntervalFunction f = backoff::Exponential(
      {.initial = 7900us, .multiplier = 2, .max = 30500us, .whole_milliseconds = true});
  EXPECT_EQ(Draw(f, 4), (std::vector<Duration>{7ms, 14ms, 28ms, 30ms}));
}

TEST(Backoff, WholeMillisecondsStopsAtAFixedPointAndSaturates) {
  // 7 x 1.1 = 7.7 truncates back to 7, for ever.
  IntervalFunction stuck =
      backoff::Exponential({.initial = 7ms, .multiplier = 1.1, .whole_milliseconds = true});
  EXPECT_EQ(stuck(1'000'000'000), 7ms);
  IntervalFunction huge =
      backoff::Exponential({.initial = 1s, .multiplier = 10, .whole_milliseconds = true});
  EXPECT_EQ(huge(1'000'000'000), Duration::max());
}

TEST(Backoff, WholeMillisecondsJitterIsWholeAndCappedAfterTheSpread) {
  IntervalFunction f = backoff::ExponentialJitter({.initial = 1000ms,
                                                   .multiplier = 1,
                                                   .max = 1200ms,
                                                   .jitter = 0.5,
                                                   .seed = 7,
                                                   .whole_milliseconds = true});
  bool capped = false;
  for (int i = 0; i < 200; ++i) {
    const Duration d = f(1);
    EXPECT_EQ(d % 1ms, Duration::zero()) << d.count();
    EXPECT_GE(d, 500ms);
    EXPECT_LE(d, 1200ms);
    capped = capped || d == 1200ms;
  }
  EXPECT_TRUE(capped);
}

TEST(Backoff, ExponentialJitterStaysWithinProportionalBounds) {
  backoff::JitterOptions o;
  o.initial = 1s;
  o.multiplier = 2;
  o.max = 10s;
  o.jitter = 0.5;
  o.seed = 42;
  IntervalFunction f = backoff::ExponentialJitter(o);
  for (int round = 0; round < 50; ++round) {
    for (int attempt = 1; attempt <= 8; ++attempt) {
      const double base = std::min(1e9 * (1 << (attempt - 1)), 10e9);
      const Duration d = f(attempt);
      EXPECT_GE(d, Duration(static_cast<Duration::rep>(base * 0.5)) - kSlack) << attempt;
      EXPECT_LE(d, Duration(static_cast<Duration::rep>(base * 1.5)) + kSlack) << attempt;
    }
  }
}

TEST(Backoff, ExponentialJitterSpreadsTheWaits) {
  backoff::JitterOptions o;
  o.initial = 1s;
  o.jitter = 0.5;
  o.seed = 7;
  IntervalFunction f = backoff::ExponentialJitter(o);
  std::vector<Duration> firsts;
  for (int i = 0; i < 100; ++i) firsts.push_back(f(1));
  const auto [lo, hi] = std::minmax_element(firsts.begin(), firsts.end());
  EXPECT_LT(*lo, 800ms) << "draws should cover the range";
  EXPECT_GT(*hi, 1200ms) << "draws should cover the range";
}

TEST(Backoff, ExponentialJitterIsReproducibleBySeed) {
  backoff::JitterOptions o;
  o.initial = 100ms;
  o.multiplier = 1.5;
  o.jitter = 0.5;
  o.seed = 12345;
  std::vector<Duration> a = Draw(backoff::ExponentialJitter(o), 20);
  std::vector<Duration> b = Draw(backoff::ExponentialJitter(o), 20);
  EXPECT_EQ(a, b);
  o.seed = 54321;
  std::vector<Duration> c = Draw(backoff::ExponentialJitter(o), 20);
  EXPECT_NE(a, c);
}

TEST(Backoff, ExponentialJitterZeroIsPlainExponential) {
  backoff::JitterOptions o;
  o.initial = 500ms;
  o.multiplier = 2;
  o.max = 3s;
  o.jitter = 0;
  IntervalFunction f = backoff::ExponentialJitter(o);
  EXPECT_EQ(f(1), 500ms);
  EXPECT_EQ(f(2), 1s);
  EXPECT_EQ(f(4), 3s);
  EXPECT_EQ(f(9), 3s);
}

TEST(Backoff, FullJitterStaysWithinZeroAndTheCappedExponential) {
  backoff::ExponentialOptions o;
  o.initial = 100ms;
  o.multiplier = 2;
  o.max = 1s;
  IntervalFunction f = backoff::FullJitter(o, 9);
  Duration largest = Duration::zero();
  for (int round = 0; round < 50; ++round) {
    for (int attempt = 1; attempt <= 10; ++attempt) {
      const Duration cap = std::min<Duration>(100ms * (1 << (attempt - 1)), 1s);
      const Duration d = f(attempt);
      EXPECT_GE(d, Duration::zero());
      EXPECT_LE(d, cap + kSlack) << attempt;
      largest = std::max(largest, d);
    }
  }
  EXPECT_GT(largest, 500ms) << "draws should reach into the upper range";
  EXPECT_EQ(Draw(backoff::FullJitter(o, 9), 10), Draw(backoff::FullJitter(o, 9), 10));
}

TEST(Backoff, DecorrelatedJitterStaysWithinItsBounds) {
  const Duration initial = 100ms;
  const Duration max = 2s;
  IntervalFunction f = backoff::DecorrelatedJitter(initial, max, 3);
  for (int round = 0; round < 20; ++round) {
    Duration prev = initial;
    for (int attempt = 1; attempt <= 15; ++attempt) {
      const Duration d = f(attempt);
      EXPECT_GE(d, initial - kSlack) << attempt;
      EXPECT_LE(d, max + kSlack) << attempt;
      EXPECT_LE(d, prev * 3 + kSlack) << attempt;
      prev = d;
    }
  }
  EXPECT_EQ(Draw(backoff::DecorrelatedJitter(initial, max, 3), 15),
            Draw(backoff::DecorrelatedJitter(initial, max, 3), 15));
  EXPECT_NE(Draw(backoff::DecorrelatedJitter(initial, max, 3), 15),
            Draw(backoff::DecorrelatedJitter(initial, max, 4), 15));
}

TEST(Backoff, DecorrelatedJitterReachesTheCap) {
  IntervalFunction f = backoff::DecorrelatedJitter(100ms, 1s, 11);
  Duration largest = Duration::zero();
  for (int attempt = 1; attempt <= 200; ++attempt) largest = std::max(largest, f(attempt));
  EXPECT_GT(largest, 500ms);
  EXPECT_LE(largest, 1s + kSlack);
}

bool Mentions(const Status& s, const std::string& field) {
  return s.message().find(field) != std::string_view::npos;
}

TEST(Backoff, ValidateAcceptsDefaults) {
  EXPECT_TRUE(backoff::Validate(backoff::ExponentialOptions{}).ok());
  EXPECT_TRUE(backoff::Validate(backoff::JitterOptions{}).ok());
}

// max may equal initial: a fixed wait, written as an exponential one.
TEST(Backoff, ValidateAcceptsMaxEqualToInitial) {
  backoff::ExponentialOptions o;
  o.max = o.initial;
  EXPECT_TRUE(backoff::Validate(o).ok());
}

TEST(Backoff, ValidateNamesTheFieldAtFault) {
  {
    backoff::ExponentialOptions o;
    o.initial = -1ms;
    Status s = backoff::Validate(o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Mentions(s, "initial")) << s;
  }
  {
    backoff::ExponentialOptions o;
    o.multiplier = 0.5;
    Status s = backoff::Validate(o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Mentions(s, "multiplier")) << s;
  }
  {
    backoff::ExponentialOptions o;
    o.multiplier = std::numeric_limits<double>::quiet_NaN();
    Status s = backoff::Validate(o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Mentions(s, "multiplier")) << s;
  }
  for (double jitter : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    backoff::JitterOptions o;
    o.jitter = jitter;
    Status s = backoff::Validate(o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << jitter;
    EXPECT_TRUE(Mentions(s, "jitter")) << s;
  }
  {
    backoff::JitterOptions o;
    o.multiplier = 0.9;
    Status s = backoff::Validate(o);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(Mentions(s, "multiplier")) << s;
  }
  for (double jitter : {0.0, 1.0}) {
    backoff::JitterOptions o;
    o.jitter = jitter;
    EXPECT_TRUE(backoff::Validate(o).ok()) << jitter;
  }
}

}  // namespace
}  // namespace fusebox
