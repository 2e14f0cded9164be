// StaleIfErrorReader (core) over RunProviderCall (meta), with the ProviderError
// to Status mapping of docs/stale_cache.md: seed 000's reads end to end.

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "fusebox/meta/provider_call.h"
#include "fusebox/registry.h"
#include "fusebox/stale_cache.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox::meta {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

class StaleCacheMetaTest : public ::testing::Test {
 protected:
  StaleCacheMetaTest() {
    RegistryOptions o;
    o.clock = &clock_;
    registry_ = std::move(*Registry::Create(std::move(o)));
    store_ = *MemorySnapshotStore::Create({.clock = &clock_});
    reader_ = *StaleIfErrorReader::Create({.store = store_.get(), .fresh_for = seconds(60)});
    circuit_ = *ProviderCircuitKey("instagram", Workload::kRead, "1784");
  }

  // Reads `path` through the reader, the provider circuits and a fake Graph
  // API whose next answer is `answer_` (or "<path>@<call number>").
  Result<CachedRead> Read(const std::string& path) {
    return reader_->Read(SnapshotKey(path, {{"limit", "25"}}), [&]() -> Result<std::string> {
      ProviderResult<std::string> r =
          RunProviderCall(*registry_, circuit_, [&]() -> ProviderResult<std::string> {
            ++calls_;
            if (answer_) return *answer_;
            return path + "@" + std::to_string(calls_);
          });
      if (r) return *r;
      return r.error().ToStatus(clock_.Now());
    });
  }

  testing::ManualClock clock_;
  std::unique_ptr<Registry> registry_;
  std::unique_ptr<MemorySnapshotStore> store_;
  std::unique_ptr<StaleIfErrorReader> reader_;
  std::string circuit_;
  int calls_ = 0;
  std::optional<ProviderError> answer_;
};

TEST_F(StaleCacheMetaTest, Seed000SequenceThroughRunProviderCall) {
  ASSERT_TRUE(Read("posts"));
  clock_.Advance(minutes(10) - seconds(10));
  ASSERT_TRUE(Read("insights"));
  clock_.Advance(seconds(10));
  ASSERT_EQ(calls_, 2);

  // Stats meets CONN_008 with Retry-After 60 s: quota circuit OPEN, error out.
  answer_ = ProviderError{
      .code = ConnCode::kConn008RateLimit, .http_status = 429, .retry_after = seconds(60)};
  auto stats = Read("stats");
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.error().code(), StatusCode::kRateLimited);
  // The Retry-After travels as retry_at.
  ASSERT_TRUE(stats.error().retry_at().has_value());
  EXPECT_EQ(calls_, 3);
  EXPECT_EQ(registry_->Find(circuit_ + ":quota")->state(), State::kOpen);

  // Posts: stale snapshot, provider not called.
  auto posts = Read("posts");
  ASSERT_TRUE(posts);
  EXPECT_TRUE(posts->stale);
  EXPECT_EQ(posts->value, "posts@1");
  EXPECT_EQ(posts->age, minutes(10));
  EXPECT_EQ(posts->hidden_error.code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(calls_, 3);

  // Insights: fresh snapshot, nothing called.
  auto insights = Read("insights");
  ASSERT_TRUE(insights);
  EXPECT_FALSE(insights->stale);
  EXPECT_EQ(insights->source, ReadSource::kFreshSnapshot);
  EXPECT_EQ(calls_, 3);

  // After the Retry-After, one probe closes the quota circuit.
  answer_.reset();
  clock_.Advance(seconds(60) + Duration(1));
  auto probe = Read("stats");
  ASSERT_TRUE(probe) << probe.error();
  EXPECT_FALSE(probe->stale);
  EXPECT_EQ(calls_, 4);
  EXPECT_EQ(registry_->Find(circuit_ + ":quota")->state(), State::kClosed);
}

TEST_F(StaleCacheMetaTest, Conn003ServesStaleConn009AndConn010Never) {
  ASSERT_TRUE(Read("posts"));
  clock_.Advance(minutes(5));
  answer_ = ProviderError{.code = ConnCode::kConn003Transient, .http_status = 503};
  auto transient = Read("posts");
  ASSERT_TRUE(transient);
  EXPECT_TRUE(transient->stale);
  for (ConnCode code : {ConnCode::kConn009Authorization, ConnCode::kConn010Invalid}) {
    answer_ = ProviderError{.code = code, .http_status = 400};
    auto r = Read("posts");
    ASSERT_FALSE(r) << ConnCodeName(code);
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace fusebox::meta
