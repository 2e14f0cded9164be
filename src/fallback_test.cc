// Unit tests of Fallback: only the named failures, reads by default, writes
// only by two explicit choices.
#include "fusebox/fallback.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "fusebox/pipeline.h"
#include "fusebox/retry.h"
#include "fusebox/testing/manual_clock.h"
#include "fusebox/timeout.h"
#include "src/policy_test_util.h"

namespace fusebox {
namespace {

using ::testing::HasSubstr;
using Items = std::vector<std::string>;

std::unique_ptr<Fallback<Items>> EmptyList(WriteFallback writes = WriteFallback::kNever) {
  auto f = Fallback<Items>::Create({
      .on_codes = {StatusCode::kCircuitOpen, StatusCode::kTimeout},
      .fn = [](const Status&) -> Result<Items> { return Items{}; },
      .writes = writes,
  });
  return MustCreate(std::move(f));
}

TEST(Fallback, CreateNamesTheBadField) {
  auto f = Fallback<Items>::Create({.on_codes = {}, .fn = [](const Status&) { return Items{}; }});
  EXPECT_EQ(f.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.error().message()), HasSubstr("on_codes must not be empty"));
  f = Fallback<Items>::Create(
      {.on_codes = {StatusCode::kOk}, .fn = [](const Status&) { return Items{}; }});
  EXPECT_THAT(std::string(f.error().message()), HasSubstr("on_codes must not contain OK"));
  f = Fallback<Items>::Create({.on_codes = {StatusCode::kTimeout}});
  EXPECT_THAT(std::string(f.error().message()), HasSubstr("fn must be set"));
}

TEST(Fallback, AnswersOnlyTheNamedFailures) {
  auto fallback = EmptyList();
  Result<Items> open =
      fallback->Recover(CallKind::kRead, Status::Rejected(StatusCode::kCircuitOpen, "open"));
  ASSERT_TRUE(open.has_value());
  EXPECT_TRUE(open->empty());
  Result<Items> bad = fallback->Recover(CallKind::kRead, Status::InvalidArgument("bad id"));
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error(), Status::InvalidArgument("bad id"));
  EXPECT_EQ(fallback->used(), 1);
}

TEST(Fallback, SuccessPassesThrough) {
  auto fallback = EmptyList();
  Result<Items> r = fallback->Recover(CallKind::kRead, Items{"a", "b"});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->size(), 2u);
  EXPECT_EQ(fallback->used(), 0);
}

TEST(Fallback, WritesAreNotAnsweredUnlessAllowed) {
  const Status timeout = Status::Rejected(StatusCode::kTimeout, "deadline_exceeded");
  auto reads_only = EmptyList();
  EXPECT_FALSE(reads_only->AppliesTo(CallKind::kWrite, timeout));
  Result<Items> w = reads_only->Recover(CallKind::kWrite, timeout);
  ASSERT_FALSE(w.has_value());
  EXPECT_EQ(w.error().code(), StatusCode::kTimeout);

  auto allowed = EmptyList(WriteFallback::kAllowed);
  EXPECT_TRUE(allowed->AppliesTo(CallKind::kWrite, timeout));
  EXPECT_TRUE(allowed->Recover(CallKind::kWrite, timeout).has_value());
}

TEST(Fallback, TheAnswerDependsOnTheFailureAndMayFail) {
  auto f = Fallback<int>::Create({
      .on_codes = {StatusCode::kCircuitOpen, StatusCode::kUnavailable},
      .fn = [](const Status& s) -> Result<int> {
        if (s.code() == StatusCode::kCircuitOpen) return -1;
        return Status::Unavailable("no cache either");
      },
  });
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(*(*f)->Recover(CallKind::kRead, Status::Rejected(StatusCode::kCircuitOpen, "open")),
            -1);
  Result<int> r = (*f)->Recover(CallKind::kRead, Status::Unavailable("down"));
  EXPECT_EQ(r.error(), Status::Unavailable("no cache either"));
}

TEST(Fallback, VoidMeansStatus) {
  auto f = Fallback<void>::Create({
      .on_codes = {StatusCode::kBulkheadFull},
      .fn = [](const Status&) { return Status(); },
  });
  ASSERT_TRUE(f.has_value());
  EXPECT_TRUE(
      (*f)->Recover(CallKind::kRead, Status::Rejected(StatusCode::kBulkheadFull, "x")).ok());
  EXPECT_EQ((*f)->Execute(CallKind::kRead, [] { return Status::Internal("bug"); }).code(),
            StatusCode::kInternal);
}

TEST(Fallback, ExecuteRunsAndRecovers) {
  auto fallback = EmptyList();
  int calls = 0;
  Result<Items> r = fallback->Execute(CallKind::kRead, [&]() -> Result<Items> {
    ++calls;
    return Status::Rejected(StatusCode::kTimeout, "deadline_exceeded");
  });
  EXPECT_TRUE(r.has_value());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(CallKindName(CallKind::kWrite), "write");
}

// A retry loop that ran out keeps its last attempt's code: with kTimeout in
// on_codes, "retries exhausted after timeouts" is answered as a timeout; other
// exhaustions are not, unless kRetriesExhausted is named.
TEST(Fallback, RetriesExhaustedMatchesByItsCause) {
  auto fallback = EmptyList();  // kCircuitOpen, kTimeout
  const Status after_timeouts =
      Status(StatusCode::kRetriesExhausted, "3 attempts").WithCause(StatusCode::kTimeout);
  const Status after_unavailable =
      Status(StatusCode::kRetriesExhausted, "3 attempts").WithCause(StatusCode::kUnavailable);
  EXPECT_TRUE(fallback->AppliesTo(CallKind::kRead, after_timeouts));
  EXPECT_FALSE(fallback->AppliesTo(CallKind::kRead, after_unavailable));
  EXPECT_FALSE(fallback->AppliesTo(CallKind::kWrite, after_timeouts)) << "reads only, still";
  auto any = MustCreate(Fallback<Items>::Create(
      {.on_codes = {StatusCode::kRetriesExhausted}, .fn = [](const Status&) { return Items{}; }}));
  EXPECT_TRUE(any->AppliesTo(CallKind::kRead, after_unavailable));
}

struct Item {
  std::string name;
};

// docs/policies.md's Fallback example, run: the code between the snippet
// markers is the block in the doc, character for character (the test
// docs.snippets, cmake/CheckDocSnippets.cmake, compares them). A load that
// times out on each of its three attempts is recovered by a fallback that
// names kTimeout.
TEST(FallbackDocs, PoliciesExampleRecoversACallThatTimedOutThreeTimes) {
  testing::ManualClock clock({.auto_advance = true});
  Pipeline::Builder builder;
  builder
      .WithRetry(MustCreate(Retry::Create(
          {.max_attempts = 3, .wait_duration = std::chrono::milliseconds(100)}, clock)))
      .WithTimeout(
          MustCreate(Timeout::Create({.timeout_duration = std::chrono::seconds(1)}, clock)));
  std::unique_ptr<Pipeline> pipeline = MustCreate(builder.Build());
  int calls = 0;
  auto load = [&]() -> Result<std::vector<Item>> {
    ++calls;
    clock.Advance(std::chrono::seconds(2));  // Past the deadline, every time.
    return std::vector<Item>{{"fresh"}};
  };
  Result<std::vector<Item>> bare = pipeline->Execute(load);
  ASSERT_EQ(bare.error().code(), StatusCode::kRetriesExhausted);
  EXPECT_EQ(bare.error().cause(), StatusCode::kTimeout);
  calls = 0;

  // [snippet policies-fallback]
  auto empty = *fusebox::Fallback<std::vector<Item>>::Create({
      .on_codes = {StatusCode::kCircuitOpen, StatusCode::kBulkheadFull, StatusCode::kTimeout},
      .fn = [](const fusebox::Status&) { return std::vector<Item>{}; },
  });
  auto items = empty->Recover(fusebox::CallKind::kRead, pipeline->Execute(load));
  // [end snippet policies-fallback]

  ASSERT_TRUE(items.has_value()) << items.error();
  EXPECT_TRUE(items->empty());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(empty->used(), 1);
}

}  // namespace
}  // namespace fusebox
