#include "fusebox/stale_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <fstream>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/snapshot_store.h"
#include "fusebox/testing/manual_clock.h"
#include "fusebox/testing/status_macros.h"

namespace fusebox {
namespace {

using std::chrono::hours;
using std::chrono::minutes;
using std::chrono::nanoseconds;
using std::chrono::seconds;

// --- MemorySnapshotStore ------------------------------------------------------

// Whether `store` holds `key`. A failed read fails the test (reported, never
// an abort) and reads as not held.
bool Holds(SnapshotStore& store, std::string_view key) {
  Result<std::optional<Snapshot>> got = store.Get(key);
  if (!got) {
    ADD_FAILURE() << "Get(\"" << key << "\") is " << got.error();
    return false;
  }
  return got->has_value();
}

// The snapshot `store` holds under `key`, into *out; a fatal failure when the
// read fails or finds nothing (call under ASSERT_NO_FATAL_FAILURE).
void ExpectHeld(SnapshotStore& store, std::string_view key, Snapshot* out) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(std::optional<Snapshot> got, store.Get(key));
  ASSERT_TRUE(got.has_value()) << "nothing held under \"" << key << "\"";
  *out = *std::move(got);
}

TEST(MemorySnapshotStore, CreateValidatesOptions) {
  auto none = MemorySnapshotStore::Create({.max_entries = 0});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(none.error().message(), "max_entries must be >= 1, got 0");
  auto no_clock = MemorySnapshotStore::Create({.clock = nullptr});
  ASSERT_FALSE(no_clock);
  EXPECT_EQ(no_clock.error().message(), "clock must be set");
}

TEST(MemorySnapshotStore, ReturnsValueAndAgeOnItsClock) {
  testing::ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto store, MemorySnapshotStore::Create({.clock = &clock}));
  EXPECT_FALSE(Holds(*store, "k"));
  ASSERT_TRUE(store->Put("k", "v1").ok());
  clock.Advance(seconds(7));
  auto got = store->Get("k");
  ASSERT_TRUE(got && got->has_value());
  EXPECT_EQ((*got)->value, "v1");
  EXPECT_EQ((*got)->age, seconds(7));
  ASSERT_TRUE(store->Put("k", "v2").ok());  // Replacing resets the age.
  Snapshot held;
  ASSERT_NO_FATAL_FAILURE(ExpectHeld(*store, "k", &held));
  EXPECT_EQ(held.age, Duration::zero());
  EXPECT_EQ(held.value, "v2");
  ASSERT_TRUE(store->Erase("k").ok());
  EXPECT_FALSE(Holds(*store, "k"));
  EXPECT_TRUE(store->Erase("absent").ok());
}

TEST(MemorySnapshotStore, EvictsLeastRecentlyUsed) {
  testing::ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto store,
                               MemorySnapshotStore::Create({.clock = &clock, .max_entries = 2}));
  ASSERT_TRUE(store->Put("a", "1").ok());
  ASSERT_TRUE(store->Put("b", "2").ok());
  EXPECT_TRUE(Holds(*store, "a"));  // "b" is now least recent.
  ASSERT_TRUE(store->Put("c", "3").ok());
  EXPECT_EQ(store->size(), 2u);
  EXPECT_TRUE(Holds(*store, "a"));
  EXPECT_FALSE(Holds(*store, "b"));
  EXPECT_TRUE(Holds(*store, "c"));
}

// --- SnapshotKey --------------------------------------------------------------

TEST(SnapshotKey, IgnoresParameterOrderAndSeparatesPages) {
  const std::string a = SnapshotKey("posts:acct-1", {{"cursor", "QVFI"}, {"limit", "25"}});
  const std::string b = SnapshotKey("posts:acct-1", {{"limit", "25"}, {"cursor", "QVFI"}});
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.rfind("posts:acct-1#p=", 0), 0u);
  EXPECT_EQ(a.size(), std::string("posts:acct-1#p=").size() + 16);
  EXPECT_NE(a, SnapshotKey("posts:acct-1", {{"cursor", "QVFJ"}, {"limit", "25"}}));
  EXPECT_NE(a, SnapshotKey("posts:acct-1", {{"cursor", "QVFI"}, {"limit", "50"}}));
  EXPECT_NE(a, SnapshotKey("posts:acct-2", {{"cursor", "QVFI"}, {"limit", "25"}}));
  // Length prefixes keep field boundaries apart.
  EXPECT_NE(SnapshotKey("k", {{"ab", "c"}}), SnapshotKey("k", {{"a", "bc"}}));
  EXPECT_EQ(SnapshotKey("k", {}), SnapshotKey("k", {}));
}

// The vectors the Node binding checks too (src/testdata/snapshot_keys.txt): a
// change of the hash, the sort or the prefix format splits the two languages'
// snapshots in a shared store, and fails here first.
TEST(SnapshotKey, MatchesTheSharedVectors) {
  std::ifstream in(FUSEBOX_CORE_TESTDATA "/snapshot_keys.txt");
  ASSERT_TRUE(in) << "cannot open snapshot_keys.txt";
  int cases = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    for (std::size_t start = 0;;) {
      const std::size_t tab = line.find('\t', start);
      fields.push_back(line.substr(start, tab - start));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    ASSERT_GE(fields.size(), 2u) << line;
    ASSERT_EQ(fields.size() % 2, 0u) << "a parameter without a value: " << line;
    std::vector<std::pair<std::string, std::string>> params;
    for (std::size_t i = 2; i < fields.size(); i += 2)
      params.emplace_back(fields[i], fields[i + 1]);
    EXPECT_EQ(SnapshotKey(fields[1], params), fields[0]) << line;
    ++cases;
  }
  EXPECT_GE(cases, 10);
}

// --- StaleIfErrorReader -------------------------------------------------------

class StaleIfErrorReaderTest : public ::testing::Test {
 protected:
  StaleIfErrorReaderTest() {
    store_ = *MemorySnapshotStore::Create({.clock = &clock_});
    reader_ = *StaleIfErrorReader::Create(
        {.store = store_.get(), .fresh_for = seconds(60), .max_stale_age = hours(1)});
  }

  // A fetch that counts its calls and returns `next_`.
  StaleIfErrorReader::Fetch Counting() {
    return [this]() -> Result<std::string> {
      ++calls_;
      return next_;
    };
  }

  testing::ManualClock clock_;
  std::unique_ptr<MemorySnapshotStore> store_;
  std::unique_ptr<StaleIfErrorReader> reader_;
  int calls_ = 0;
  Result<std::string> next_ = std::string("v1");
};

TEST_F(StaleIfErrorReaderTest, CreateValidatesOptions) {
  auto no_store = StaleIfErrorReader::Create({});
  ASSERT_FALSE(no_store);
  EXPECT_EQ(no_store.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(no_store.error().message(), "store must be set");
  auto negative = StaleIfErrorReader::Create({.store = store_.get(), .fresh_for = -seconds(1)});
  ASSERT_FALSE(negative);
  EXPECT_EQ(negative.error().message(), "fresh_for must be >= 0, got -1000000000 ns");
  auto short_stale = StaleIfErrorReader::Create(
      {.store = store_.get(), .fresh_for = seconds(60), .max_stale_age = seconds(59)});
  ASSERT_FALSE(short_stale);
  EXPECT_EQ(short_stale.error().message(),
            "max_stale_age must be >= fresh_for, got 59000000000 ns");
}

TEST_F(StaleIfErrorReaderTest, MissCallsAndStoresSnapshot) {
  auto r = reader_->Read("k", Counting());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->value, "v1");
  EXPECT_FALSE(r->stale);
  EXPECT_EQ(r->source, ReadSource::kCall);
  EXPECT_EQ(r->age, Duration::zero());
  EXPECT_EQ(calls_, 1);
  Snapshot held;
  ASSERT_NO_FATAL_FAILURE(ExpectHeld(*store_, "k", &held));
  EXPECT_EQ(held.value, "v1");
}

TEST_F(StaleIfErrorReaderTest, FreshSnapshotUpToFreshForCallsNothing) {
  ASSERT_TRUE(reader_->Read("k", Counting()));
  clock_.Advance(seconds(60));  // Exactly fresh_for: still fresh.
  auto r = reader_->Read("k", Counting());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->source, ReadSource::kFreshSnapshot);
  EXPECT_FALSE(r->stale);
  EXPECT_EQ(r->age, seconds(60));
  EXPECT_EQ(calls_, 1);
}

TEST_F(StaleIfErrorReaderTest, OldSnapshotIsRefreshed) {
  ASSERT_TRUE(reader_->Read("k", Counting()));
  clock_.Advance(seconds(60) + nanoseconds(1));
  next_ = std::string("v2");
  auto r = reader_->Read("k", Counting());
  ASSERT_TRUE(r);
  EXPECT_EQ(r->value, "v2");
  EXPECT_EQ(r->source, ReadSource::kCall);
  EXPECT_EQ(calls_, 2);
  Snapshot held;
  ASSERT_NO_FATAL_FAILURE(ExpectHeld(*store_, "k", &held));
  EXPECT_EQ(held.age, Duration::zero());
}

TEST_F(StaleIfErrorReaderTest, StaleAllowedFailuresServeLastGoodValue) {
  ASSERT_TRUE(reader_->Read("k", Counting()));
  for (StatusCode code : {StatusCode::kUnavailable, StatusCode::kCircuitOpen,
                          StatusCode::kRateLimited, StatusCode::kTimeout}) {
    clock_.Advance(minutes(2));
    next_ = Status(code, "down");
    auto r = reader_->Read("k", Counting());
    ASSERT_TRUE(r) << code;
    EXPECT_TRUE(r->stale);
    EXPECT_EQ(r->value, "v1");
    EXPECT_EQ(r->source, ReadSource::kStaleSnapshot);
    EXPECT_EQ(r->hidden_error.code(), code);
  }
  EXPECT_EQ(calls_, 5);
  // The age is the snapshot's, not reset by the failures.
  EXPECT_EQ(reader_->Read("k", Counting())->age, minutes(8));
}

TEST_F(StaleIfErrorReaderTest, OtherFailuresAreNeverHidden) {
  ASSERT_TRUE(reader_->Read("k", Counting()));
  clock_.Advance(minutes(2));
  for (StatusCode code : {StatusCode::kInvalidArgument, StatusCode::kInternal,
                          StatusCode::kRetriesExhausted, StatusCode::kBulkheadFull}) {
    next_ = Status(code, "no");
    auto r = reader_->Read("k", Counting());
    ASSERT_FALSE(r) << code;
    EXPECT_EQ(r.error().code(), code);
  }
}

TEST_F(StaleIfErrorReaderTest, NoSnapshotReturnsTheError) {
  next_ = Status(StatusCode::kRateLimited, "slow down");
  auto r = reader_->Read("k", Counting());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), StatusCode::kRateLimited);
  EXPECT_EQ(calls_, 1);
}

TEST_F(StaleIfErrorReaderTest, SnapshotOlderThanMaxStaleAgeIsNotServed) {
  ASSERT_TRUE(reader_->Read("k", Counting()));
  next_ = Status(StatusCode::kUnavailable, "down");
  clock_.Advance(hours(1));  // Exactly max_stale_age: still served.
  auto at = reader_->Read("k", Counting());
  ASSERT_TRUE(at);
  EXPECT_TRUE(at->stale);
  EXPECT_EQ(at->age, hours(1));
  clock_.Advance(nanoseconds(1));
  auto past = reader_->Read("k", Counting());
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error().code(), StatusCode::kUnavailable);
}

TEST_F(StaleIfErrorReaderTest, WritesAreNeverCachedNorServedStale) {
  ASSERT_TRUE(reader_->Read("k", Counting()));
  // Even with a fresh snapshot, a write calls.
  next_ = std::string("written");
  auto w = reader_->Read("k", Counting(), CallKind::kWrite);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->value, "written");
  EXPECT_EQ(calls_, 2);
  Snapshot held;
  ASSERT_NO_FATAL_FAILURE(ExpectHeld(*store_, "k", &held));
  EXPECT_EQ(held.value, "v1");  // Not stored.
  next_ = Status(StatusCode::kUnavailable, "down");
  auto failed = reader_->Read("k", Counting(), CallKind::kWrite);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code(), StatusCode::kUnavailable);
}

TEST_F(StaleIfErrorReaderTest, CustomClassifier) {
  auto reader = *StaleIfErrorReader::Create(
      {.store = store_.get(),
       .fresh_for = Duration::zero(),
       .may_serve_stale = [](const Status& s) { return s.code() == StatusCode::kInternal; }});
  ASSERT_TRUE(reader->Read("k", Counting()));
  clock_.Advance(seconds(1));
  next_ = Status(StatusCode::kInternal, "boom");
  EXPECT_TRUE(reader->Read("k", Counting())->stale);
  next_ = Status(StatusCode::kUnavailable, "down");
  EXPECT_FALSE(reader->Read("k", Counting()));
}

// A store whose Get fails: the read goes to the call.
class BrokenStore final : public SnapshotStore {
 public:
  Result<std::optional<Snapshot>> Get(std::string_view) override {
    return Status::Unavailable("store down");
  }
  Status Put(std::string_view, std::string) override { return Status::Unavailable("store down"); }
  Status Erase(std::string_view) override { return Status::Unavailable("store down"); }
};

TEST(StaleIfErrorReader, StoreErrorsNeverTurnAnAnswerIntoAnError) {
  BrokenStore store;
  auto reader = *StaleIfErrorReader::Create({.store = &store});
  auto r = reader->Read("k", [] { return Result<std::string>(std::string("v")); });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->value, "v");
}

TEST(StaleIfErrorReader, AStoreThatCannotLookIsReportedNotTakenForAMiss) {
  BrokenStore store;
  auto reader = *StaleIfErrorReader::Create({.store = &store});
  auto r = reader->Read("k", [] { return Result<std::string>(std::string("v")); });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->store_error.code(), StatusCode::kUnavailable);
}

// --- The defaults docs/stale_cache.md promises ----------------------------------

// fresh_for 60 s and max_stale_age 24 h when not set, both boundaries inclusive.
TEST(StaleIfErrorReader, DefaultsAreFreshFor60sAndStaleUpTo24h) {
  testing::ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto store, MemorySnapshotStore::Create({.clock = &clock}));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto reader, StaleIfErrorReader::Create({.store = store.get()}));
  int calls = 0;
  Result<std::string> next = std::string("v1");
  auto fetch = [&]() -> Result<std::string> {
    ++calls;
    return next;
  };
  ASSERT_TRUE(reader->Read("k", fetch));
  clock.Advance(seconds(60));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(CachedRead fresh, reader->Read("k", fetch));
  EXPECT_EQ(fresh.source, ReadSource::kFreshSnapshot);
  EXPECT_EQ(calls, 1);
  clock.Advance(nanoseconds(1));
  next = Status(StatusCode::kUnavailable, "down");
  FUSEBOX_ASSERT_OK_AND_ASSIGN(CachedRead refreshed, reader->Read("k", fetch));
  EXPECT_EQ(refreshed.source, ReadSource::kStaleSnapshot);
  EXPECT_EQ(calls, 2);
  clock.Advance(hours(24) - seconds(60) - nanoseconds(1));  // exactly 24 h old
  FUSEBOX_ASSERT_OK_AND_ASSIGN(CachedRead oldest, reader->Read("k", fetch));
  EXPECT_TRUE(oldest.stale);
  EXPECT_EQ(oldest.age, hours(24));
  clock.Advance(nanoseconds(1));
  auto past = reader->Read("k", fetch);
  ASSERT_FALSE(past);
  EXPECT_EQ(past.error().code(), StatusCode::kUnavailable);
  // max_stale_age may equal fresh_for (">= fresh_for").
  EXPECT_TRUE(StaleIfErrorReader::Create(
                  {.store = store.get(), .fresh_for = seconds(5), .max_stale_age = seconds(5)})
                  .has_value());
}

// max_entries 10000 when not set: the 10001st snapshot evicts the least recent.
TEST(MemorySnapshotStore, HoldsTenThousandEntriesByDefault) {
  testing::ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto store, MemorySnapshotStore::Create({.clock = &clock}));
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(store->Put("k" + std::to_string(i), "v").ok());
  EXPECT_EQ(store->size(), 10000u);
  EXPECT_TRUE(Holds(*store, "k0"));  // "k1" is now the least recently used.
  ASSERT_TRUE(store->Put("k10000", "v").ok());
  EXPECT_EQ(store->size(), 10000u);
  EXPECT_TRUE(Holds(*store, "k0"));
  EXPECT_FALSE(Holds(*store, "k1"));
}

// max_bytes 64 MiB when not set, counting the key's bytes with the value's.
TEST(MemorySnapshotStore, HoldsUpTo64MiBByDefault) {
  testing::ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto store, MemorySnapshotStore::Create({.clock = &clock}));
  constexpr std::size_t kMiB64 = std::size_t{64} << 20;
  ASSERT_TRUE(store->Put("k", std::string(kMiB64 - 1, 'x')).ok());
  EXPECT_EQ(store->bytes(), kMiB64);
  const Status over = store->Put("j", std::string(kMiB64, 'x'));
  EXPECT_EQ(over.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Holds(*store, "k"));
}

// --- MemorySnapshotStore bounds and TieredSnapshotStore -------------------------

TEST(MemorySnapshotStore, EvictsLeastRecentlyUsedBeyondMaxBytes) {
  testing::ManualClock clock;
  // Keys of 1 byte, values of 10: three fit in 33 bytes, a fourth evicts.
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto store,
                               MemorySnapshotStore::Create({.clock = &clock, .max_bytes = 33}));
  for (const char* k : {"a", "b", "c"}) ASSERT_TRUE(store->Put(k, std::string(10, 'x')).ok());
  EXPECT_EQ(store->bytes(), 33u);
  ASSERT_TRUE(store->Get("a").has_value());  // "b" is now the least recently used.
  ASSERT_TRUE(store->Put("d", std::string(10, 'y')).ok());
  EXPECT_FALSE(store->Get("b")->has_value());
  EXPECT_TRUE(store->Get("a")->has_value());
  EXPECT_EQ(store->bytes(), 33u);
  EXPECT_EQ(store->size(), 3u);
}

TEST(MemorySnapshotStore, RefusesASnapshotLargerThanMaxBytesAndDropsTheOlderOne) {
  testing::ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto store,
                               MemorySnapshotStore::Create({.clock = &clock, .max_bytes = 16}));
  ASSERT_TRUE(store->Put("k", "small").ok());
  const Status s = store->Put("k", std::string(100, 'x'));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("max_bytes 16"), std::string::npos) << s.message();
  EXPECT_FALSE(store->Get("k")->has_value());
  EXPECT_EQ(store->bytes(), 0u);
  EXPECT_FALSE(MemorySnapshotStore::Create({.max_bytes = 0}).has_value());
}

TEST(MemorySnapshotStore, PutAgedKeepsTheGivenAge) {
  testing::ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto store, MemorySnapshotStore::Create({.clock = &clock}));
  ASSERT_TRUE(store->PutAged("k", "v", seconds(30)).ok());
  clock.Advance(seconds(5));
  EXPECT_EQ((*store->Get("k"))->age, seconds(35));
  EXPECT_EQ(store->GetInMemory("k")->age, seconds(35));
}

// A remote tier on this process' memory that counts its calls and can be
// told to fail as a down, busy or slow Redis does.
class RemoteTier final : public SnapshotStore {
 public:
  explicit RemoteTier(Clock& clock) : mem_(*MemorySnapshotStore::Create({.clock = &clock})) {}
  Result<std::optional<Snapshot>> Get(std::string_view key) override {
    ++gets;
    if (!failure.ok()) return failure;
    return mem_->Get(key);
  }
  Result<std::optional<Snapshot>> GetWithin(std::string_view key, Duration budget) override {
    last_budget = budget;
    return Get(key);
  }
  Status Put(std::string_view key, std::string value) override {
    ++puts;
    if (!failure.ok()) return failure;
    return mem_->Put(key, std::move(value));
  }
  Status Erase(std::string_view key) override { return mem_->Erase(key); }
  MemorySnapshotStore& mem() { return *mem_; }

  int gets = 0;
  int puts = 0;
  Duration last_budget{};
  Status failure;

 private:
  std::unique_ptr<MemorySnapshotStore> mem_;
};

class TieredSnapshotStoreTest : public ::testing::Test {
 protected:
  testing::ManualClock clock_;
  std::unique_ptr<MemorySnapshotStore> local_ = *MemorySnapshotStore::Create({.clock = &clock_});
  RemoteTier remote_{clock_};
  std::unique_ptr<TieredSnapshotStore> store_ = *TieredSnapshotStore::Create(
      {.local = local_.get(), .remote = &remote_, .local_fresh_for = seconds(60)});
};

TEST_F(TieredSnapshotStoreTest, CreateValidatesOptions) {
  EXPECT_FALSE(TieredSnapshotStore::Create({.remote = &remote_}).has_value());
  EXPECT_FALSE(TieredSnapshotStore::Create({.local = local_.get()}).has_value());
  EXPECT_FALSE(TieredSnapshotStore::Create(
                   {.local = local_.get(), .remote = &remote_, .local_fresh_for = seconds(-1)})
                   .has_value());
}

TEST_F(TieredSnapshotStoreTest, WritesThroughAndServesAFreshLocalCopyWithoutTheRemote) {
  ASSERT_TRUE(store_->Put("k", "v").ok());
  EXPECT_EQ(remote_.puts, 1);
  EXPECT_TRUE(remote_.mem().Get("k")->has_value());
  clock_.Advance(seconds(60));
  for (int i = 0; i < 100; ++i) {
    Result<std::optional<Snapshot>> got = store_->Get("k");
    ASSERT_TRUE(got && *got);
    EXPECT_EQ((*got)->value, "v");
  }
  EXPECT_EQ(remote_.gets, 0);
  EXPECT_EQ(store_->GetInMemory("k")->age, seconds(60));
  EXPECT_EQ(store_->stats().local_hits, 100u);
}

TEST_F(TieredSnapshotStoreTest, ARemoteHitIsCopiedLocallyWithItsRemoteAge) {
  ASSERT_TRUE(remote_.mem().PutAged("k", "from-another-instance", seconds(7)).ok());
  Result<std::optional<Snapshot>> got = store_->GetWithin("k", std::chrono::milliseconds(80));
  ASSERT_TRUE(got && *got);
  EXPECT_EQ((*got)->age, seconds(7));
  EXPECT_EQ(remote_.last_budget, std::chrono::milliseconds(80));
  EXPECT_EQ(local_->GetInMemory("k")->age, seconds(7));
  // Now local, and still fresh: no second round trip.
  ASSERT_TRUE(store_->Get("k").has_value());
  EXPECT_EQ(remote_.gets, 1);
  EXPECT_EQ(store_->stats().remote_hits, 1u);
  EXPECT_EQ(store_->stats().local_hits, 1u);
}

TEST_F(TieredSnapshotStoreTest, AnOldLocalCopyGivesWayToAYoungerRemoteOne) {
  ASSERT_TRUE(local_->Put("k", "old").ok());
  clock_.Advance(seconds(120));
  ASSERT_TRUE(remote_.mem().PutAged("k", "new", seconds(3)).ok());
  EXPECT_EQ((*store_->Get("k"))->value, "new");
  // A remote copy older than the local one does not replace it.
  ASSERT_TRUE(local_->Put("j", "local").ok());
  ASSERT_TRUE(remote_.mem().PutAged("j", "remote", seconds(600)).ok());
  clock_.Advance(seconds(61));
  EXPECT_EQ((*store_->Get("j"))->value, "local");
}

TEST_F(TieredSnapshotStoreTest, ARemoteThatCannotAnswerLeavesTheLocalCopyToServe) {
  ASSERT_TRUE(store_->Put("k", "v").ok());
  clock_.Advance(hours(2));  // Past local_fresh_for: the remote is asked.
  remote_.failure = Status(StatusCode::kTimeout, "redis: out of the caller's time");
  Result<std::optional<Snapshot>> got = store_->Get("k");
  ASSERT_TRUE(got && *got);
  EXPECT_EQ((*got)->value, "v");
  EXPECT_EQ((*got)->age, hours(2));
  const TieredSnapshotStore::Stats stats = store_->stats();
  EXPECT_EQ(stats.remote_errors, 1u);
  EXPECT_EQ(stats.remote_timeouts, 1u);
  EXPECT_EQ(stats.local_on_remote_error, 1u);
}

TEST_F(TieredSnapshotStoreTest, ARemoteThatCannotAnswerIsAnErrorNotAMiss) {
  remote_.failure = Status::Unavailable("redis: every connection busy");
  Result<std::optional<Snapshot>> got = store_->Get("absent");
  ASSERT_FALSE(got.has_value());
  EXPECT_EQ(got.error().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store_->stats().misses, 0u);
  // A write while it is down still reaches the local tier.
  EXPECT_FALSE(store_->Put("k", "v").ok());
  EXPECT_EQ((*store_->Get("k"))->value, "v");
  EXPECT_EQ(store_->stats().remote_put_errors, 1u);
  remote_.failure = Status();
  EXPECT_FALSE(store_->Get("absent")->has_value());
  EXPECT_EQ(store_->stats().misses, 1u);
}

TEST_F(TieredSnapshotStoreTest, EraseRemovesBothCopies) {
  ASSERT_TRUE(store_->Put("k", "v").ok());
  ASSERT_TRUE(store_->Erase("k").ok());
  EXPECT_FALSE(local_->Get("k")->has_value());
  EXPECT_FALSE(remote_.mem().Get("k")->has_value());
}

TEST_F(StaleIfErrorReaderTest, ThrowingFetchPropagatesAndForgetsTheKey) {
  EXPECT_THROW(
      (void)reader_->Read("k", []() -> Result<std::string> { throw std::runtime_error("boom"); }),
      std::runtime_error);
  EXPECT_EQ(reader_->single_flight().InFlight(), 0u);
  EXPECT_TRUE(reader_->Read("k", Counting()));
}

// Meta's error contract mapped onto Status, as docs/stale_cache.md describes:
// CONN_003 (transient) -> kUnavailable and CONN_008 (rate limit) ->
// kRateLimited may be hidden; CONN_009 (authorization) and CONN_010 (invalid)
// -> kInvalidArgument never are. A rejection by an open circuit -> kCircuitOpen.
TEST_F(StaleIfErrorReaderTest, MetaConnCodesMapping) {
  ASSERT_TRUE(reader_->Read("k", Counting()));
  clock_.Advance(minutes(5));
  struct Case {
    const char* conn;
    StatusCode code;
    bool stale;
  };
  for (const Case& c : {Case{"CONN_003", StatusCode::kUnavailable, true},
                        Case{"CONN_008", StatusCode::kRateLimited, true},
                        Case{"CONN_009", StatusCode::kInvalidArgument, false},
                        Case{"CONN_010", StatusCode::kInvalidArgument, false}}) {
    next_ = Status(c.code, c.conn);
    auto r = reader_->Read("k", Counting());
    EXPECT_EQ(r.has_value(), c.stale) << c.conn;
    if (!r) {
      EXPECT_EQ(r.error().message(), c.conn);
    }
  }
}

// --- Seed 000's whole sequence -------------------------------------------------

// A fake Graph API: each endpoint answers with a value or a 429 with a
// Retry-After, and counts its calls.
struct FakeProvider {
  testing::ManualClock* clock;
  int calls = 0;
  bool rate_limited = false;
  Duration retry_after = seconds(60);

  Result<std::string> Get(const std::string& path) {
    ++calls;
    if (rate_limited) {
      return Status::Rejected(StatusCode::kRateLimited, "429", clock->Now() + retry_after);
    }
    return path + "@" + std::to_string(calls);
  }
};

TEST(StaleIfErrorReader, Seed000Sequence) {
  testing::ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto store, MemorySnapshotStore::Create({.clock = &clock}));
  auto reader = *StaleIfErrorReader::Create(
      {.store = store.get(), .fresh_for = seconds(60), .max_stale_age = hours(24)});
  // The read circuit of one account: opens on a rate limit for its
  // Retry-After; one probe decides.
  auto breaker = *CircuitBreaker::Create("meta:read:acct-1",
                                         {.permitted_number_of_calls_in_half_open_state = 1,
                                          .sliding_window_size = 10,
                                          .minimum_number_of_calls = 10},
                                         clock);
  FakeProvider provider{.clock = &clock};
  auto via_breaker = [&](std::string path) -> StaleIfErrorReader::Fetch {
    return [&, path] {
      return breaker->Call(
          [&] { return provider.Get(path); },
          [&](const Result<std::string>& r) {
            if (r) return Outcome::Success();
            if (r.error().code() == StatusCode::kRateLimited && r.error().retry_at()) {
              return Outcome::OpenFor(*r.error().retry_at() - clock.Now());
            }
            return Outcome::Failure();
          });
    };
  };
  const std::string stats = SnapshotKey("stats:acct-1", {});
  const std::string posts = SnapshotKey("posts:acct-1", {{"limit", "25"}, {"cursor", ""}});
  const std::string insights = SnapshotKey("insights:acct-1", {{"period", "day"}});

  // Earlier traffic left a posts snapshot (10 min old by the time it is
  // needed) and an insights snapshot (10 s old).
  ASSERT_TRUE(reader->Read(posts, via_breaker("/posts")));
  clock.Advance(minutes(10) - seconds(10));
  ASSERT_TRUE(reader->Read(insights, via_breaker("/insights")));
  clock.Advance(seconds(10));
  ASSERT_EQ(provider.calls, 2);

  // 1. Stats: no snapshot, the call meets a 429 with Retry-After 60 s; the
  //    breaker opens for it and the caller gets the rate limit.
  provider.rate_limited = true;
  auto s = reader->Read(stats, via_breaker("/stats"));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), StatusCode::kRateLimited);
  EXPECT_EQ(provider.calls, 3);
  EXPECT_EQ(breaker->state(), State::kOpen);
  EXPECT_EQ(breaker->metrics().retry_at, clock.Now() + seconds(60));

  // 2. Posts: the snapshot is stale; the breaker refuses without calling the
  //    provider, and the last good value is served, marked stale, with its age.
  auto p = reader->Read(posts, via_breaker("/posts"));
  ASSERT_TRUE(p);
  EXPECT_TRUE(p->stale);
  EXPECT_EQ(p->value, "/posts@1");
  EXPECT_EQ(p->age, minutes(10));
  EXPECT_EQ(p->hidden_error.code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(provider.calls, 3);
  EXPECT_EQ(breaker->metrics().not_permitted_calls, 1);

  // 3. Insights: fresh snapshot; neither the breaker nor the provider is asked.
  auto i = reader->Read(insights, via_breaker("/insights"));
  ASSERT_TRUE(i);
  EXPECT_FALSE(i->stale);
  EXPECT_EQ(i->source, ReadSource::kFreshSnapshot);
  EXPECT_EQ(i->value, "/insights@2");
  EXPECT_EQ(i->age, seconds(10));
  EXPECT_EQ(provider.calls, 3);
  EXPECT_EQ(breaker->metrics().not_permitted_calls, 1);

  // 4. Until the Retry-After has passed (OPEN includes its retry_at, as in
  //    Resilience4j: docs/semantics.md), stats is still refused uncalled.
  provider.rate_limited = false;
  clock.Advance(seconds(60));
  auto early = reader->Read(stats, via_breaker("/stats"));
  ASSERT_FALSE(early);
  EXPECT_EQ(early.error().code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(provider.calls, 3);

  // 5. 1 ns after the wait, one probe succeeds and closes the circuit; the
  //    snapshot is refreshed.
  clock.Advance(nanoseconds(1));
  auto probe = reader->Read(stats, via_breaker("/stats"));
  ASSERT_TRUE(probe) << probe.error();
  EXPECT_FALSE(probe->stale);
  EXPECT_EQ(probe->value, "/stats@4");
  EXPECT_EQ(provider.calls, 4);
  EXPECT_EQ(breaker->state(), State::kClosed);
  auto fresh_posts = reader->Read(posts, via_breaker("/posts"));
  ASSERT_TRUE(fresh_posts);
  EXPECT_FALSE(fresh_posts->stale);
  EXPECT_EQ(provider.calls, 5);
}

// --- SingleFlight -------------------------------------------------------------

TEST(SingleFlight, HundredConcurrentMissesMakeOneCall) {
  constexpr int kThreads = 100;
  SingleFlight<std::string> flight;
  std::atomic<int> calls{0};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::vector<Result<std::string>> results(kThreads, Status::Internal("unset"));
  std::latch started(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      started.count_down();
      results[t] = flight.Do("posts", [&]() -> Result<std::string> {
        calls.fetch_add(1);
        released.wait();  // Held until all others are waiting.
        return std::string("page-1");
      });
    });
  }
  started.wait();
  flight.AwaitWaitersForTesting("posts", kThreads - 1);
  EXPECT_EQ(flight.WaitersForTesting("posts"), static_cast<std::size_t>(kThreads - 1));
  release.set_value();
  for (auto& th : threads) th.join();
  EXPECT_EQ(calls.load(), 1);
  for (const auto& r : results) {
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, "page-1");
  }
  EXPECT_EQ(flight.InFlight(), 0u);
}

TEST(SingleFlight, WaitersShareTheError) {
  SingleFlight<std::string> flight;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  Result<std::string> leader = Status::Internal("unset");
  Result<std::string> waiter = Status::Internal("unset");
  std::thread a([&] {
    leader = flight.Do("k", [&]() -> Result<std::string> {
      released.wait();
      return Status(StatusCode::kRateLimited, "429");
    });
  });
  // Wait until `a` is the leader, then join as a waiter.
  while (flight.InFlight() == 0) std::this_thread::yield();
  std::thread b([&] {
    waiter = flight.Do("k", []() -> Result<std::string> { return std::string("never"); });
  });
  flight.AwaitWaitersForTesting("k", 1);
  release.set_value();
  a.join();
  b.join();
  ASSERT_FALSE(leader);
  ASSERT_FALSE(waiter);
  EXPECT_EQ(waiter.error().code(), StatusCode::kRateLimited);
  EXPECT_EQ(waiter.error(), leader.error());
}

TEST(SingleFlight, ThrowReachesEveryWaiterAndForgetsTheKey) {
  constexpr int kWaiters = 10;
  SingleFlight<int> flight;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> thrown{0};
  std::thread leader([&] {
    try {
      (void)flight.Do("k", [&]() -> Result<int> {
        released.wait();
        throw std::runtime_error("boom");
      });
    } catch (const std::runtime_error&) {
      thrown.fetch_add(1);
    }
  });
  while (flight.InFlight() == 0) std::this_thread::yield();
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&] {
      try {
        (void)flight.Do("k", []() -> Result<int> { return 1; });
      } catch (const std::runtime_error& e) {
        if (std::string(e.what()) == "boom") thrown.fetch_add(1);
      }
    });
  }
  flight.AwaitWaitersForTesting("k", kWaiters);
  release.set_value();
  leader.join();
  for (auto& w : waiters) w.join();
  EXPECT_EQ(thrown.load(), kWaiters + 1);
  EXPECT_EQ(flight.InFlight(), 0u);
  auto again = flight.Do("k", []() -> Result<int> { return 7; });
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, 7);
}

TEST(SingleFlight, DifferentKeysDoNotMerge) {
  SingleFlight<int> flight;
  int calls = 0;
  auto fn = [&]() -> Result<int> { return ++calls; };
  EXPECT_EQ(*flight.Do("a", fn), 1);
  EXPECT_EQ(*flight.Do("a", fn), 2);  // Sequential calls are not merged.
  EXPECT_EQ(*flight.Do("b", fn), 3);
}

}  // namespace
}  // namespace fusebox
