// Tests for Registry::Borrow() and the lock-free lookup under it: a lent
// breaker is the key's breaker, counts as in use for every eviction path,
// survives Remove() until given back, moves and is given back exactly once
// (on any thread), a thread's fifth borrow at once still works, a
// RegistryKey's remembered place is never taken for another entry, and
// lookups racing every writer stay correct (run under tsan and asan).
// BorrowPair() lends what two Borrow()s lend, under the same protections.

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/registry.h"
#include "fusebox/testing/manual_clock.h"
#include "registry_race.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;

class RegistryBorrowTest : public ::testing::Test {
 protected:
  void Build(std::size_t max_breakers = 5000) {
    RegistryOptions o;
    o.clock = &clock_;
    o.max_breakers = max_breakers;
    o.on_event = [this](const RegistryEvent& e) {
      if (e.kind == RegistryEvent::Kind::kEvictedIdle || e.kind == RegistryEvent::Kind::kEvictedLru)
        dropped_.emplace_back(e.key);
    };
    registry_ = *Registry::Create(std::move(o));
  }

  BorrowedBreaker Borrow(std::string_view key) {
    Result<BorrowedBreaker> b = registry_->Borrow(key);
    EXPECT_TRUE(b.has_value()) << b.error();
    return b ? std::move(*b) : BorrowedBreaker();
  }

  ManualClock clock_;
  std::vector<std::string> dropped_;
  std::unique_ptr<Registry> registry_;  // after clock_: destroyed first
};

TEST_F(RegistryBorrowTest, LendsTheKeysBreakerAsGetDoes) {
  Build();
  BorrowedBreaker created = Borrow("meta:read:1:quota");  // a miss creates it
  ASSERT_TRUE(created);
  EXPECT_EQ(created->name(), "meta:read:1:quota");
  std::shared_ptr<CircuitBreaker> got = *registry_->Get("meta:read:1:quota");
  EXPECT_EQ(got.get(), created.get());
  BorrowedBreaker hit = Borrow("meta:read:1:quota");
  EXPECT_EQ(hit.get(), created.get());
  EXPECT_EQ(registry_->Borrow(RegistryKey("meta:read:1:quota"))->get(), created.get());
  EXPECT_EQ(registry_->size(), 1u);

  EXPECT_EQ(registry_->Borrow("").error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Borrow("k", "no-such-template").error().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(RegistryBorrowTest, ABorrowedBreakerIsNotDroppedWhenIdle) {
  Build();
  BorrowedBreaker b = Borrow("lent");
  (void)Borrow("given-back");
  clock_.Advance(16min);
  EXPECT_EQ(registry_->Sweep(), 1u);
  EXPECT_EQ(dropped_, std::vector<std::string>{"given-back"});
  EXPECT_NE(registry_->Find("lent"), nullptr);
  b = BorrowedBreaker();  // given back
  EXPECT_EQ(registry_->Sweep(), 1u);
  EXPECT_EQ(registry_->Find("lent"), nullptr);
}

TEST_F(RegistryBorrowTest, ABorrowedBreakerIsNotDroppedByTheLruBound) {
  Build(/*max_breakers=*/2);
  BorrowedBreaker a = Borrow("a");
  (void)Borrow("b");
  (void)Borrow("c");  // over the bound: "a" is the oldest but lent
  EXPECT_EQ(dropped_, std::vector<std::string>{"b"});
  EXPECT_EQ(registry_->Find("a").get(), a.get());
  a = BorrowedBreaker();
  clock_.Advance(1min);  // the next sweep looks at what was set aside
  (void)Borrow("d");
  EXPECT_EQ(registry_->Find("a"), nullptr) << "given back: evictable again";
}

TEST_F(RegistryBorrowTest, ATimeGivenByTheCallerIsTheUseThatCounts) {
  // Borrow(key, config, coarse_now) touches the entry at the caller's time,
  // not at a read of its own: "a", asked for with a time as old as its
  // creation, is idle by then; "b", asked for at the clock's time, is not.
  Build();
  (void)Borrow("a");
  (void)Borrow("b");
  const TimePoint created = clock_.CoarseNow();
  clock_.Advance(10min);
  ASSERT_TRUE(registry_->Borrow("b", "default", clock_.CoarseNow()).has_value());
  ASSERT_TRUE(registry_->Borrow("a", "default", created).has_value());
  clock_.Advance(6min);  // the idle timeout is 15 min
  EXPECT_EQ(registry_->Sweep(), 1u);
  EXPECT_EQ(dropped_, std::vector<std::string>{"a"});
}

TEST_F(RegistryBorrowTest, AKeptKeyBorrowedAtTheCallersTimeIsUsedThen) {
  // Borrow(RegistryKey, config, coarse_now): the same, through the key's
  // remembered place (both keys were found once already).
  Build();
  const RegistryKey a("a");
  const RegistryKey b("b");
  ASSERT_TRUE(registry_->Borrow(a).has_value());
  ASSERT_TRUE(registry_->Borrow(b).has_value());
  const TimePoint created = clock_.CoarseNow();
  clock_.Advance(10min);
  ASSERT_TRUE(registry_->Borrow(b, "default", clock_.CoarseNow()).has_value());
  Result<BorrowedBreaker> old = registry_->Borrow(a, "default", created);
  ASSERT_TRUE(old.has_value());
  EXPECT_EQ(old->get(), registry_->Find("a").get());
  old = BorrowedBreaker();
  clock_.Advance(6min);
  EXPECT_EQ(registry_->Sweep(), 1u);
  EXPECT_EQ(dropped_, std::vector<std::string>{"a"});
  // A miss creates from the template named.
  EXPECT_EQ(registry_->Borrow(RegistryKey("c"), "no-such-template", created).error().code(),
            StatusCode::kInvalidArgument);
}

TEST_F(RegistryBorrowTest, RemoveKeepsALentBreakerAliveUntilItIsGivenBack) {
  Build();
  std::weak_ptr<CircuitBreaker> weak = *registry_->Get("k");
  BorrowedBreaker b = Borrow("k");
  EXPECT_TRUE(registry_->Remove("k"));
  EXPECT_EQ(registry_->Find("k"), nullptr);
  ASSERT_FALSE(weak.expired()) << "freed while lent";
  Result<Permit> p = b->TryAcquire();  // still a working breaker (asan: no use after free)
  ASSERT_TRUE(p.has_value());
  p->Success(1ms);
  EXPECT_NE(registry_->Get("k")->get(), b.get()) << "a new breaker for the key";
  EXPECT_FALSE(weak.expired()) << "a later writer freed it while still lent";
  b = BorrowedBreaker();
  registry_->Sweep();  // a later writer frees it
  EXPECT_TRUE(weak.expired());
}

TEST_F(RegistryBorrowTest, AFifthBorrowOnOneThreadIsStillLentAndProtected) {
  Build();
  std::vector<BorrowedBreaker> lent;
  lent.reserve(6);
  for (int i = 0; i < 6; ++i) lent.push_back(Borrow("k" + std::to_string(i)));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(lent[i]->name(), "k" + std::to_string(i));
  clock_.Advance(16min);
  EXPECT_EQ(registry_->Sweep(), 0u) << "every lent breaker is in use";
  BorrowedBreaker again = Borrow("k5");  // a hit with every slot taken
  EXPECT_EQ(again.get(), lent[5].get());
  again = BorrowedBreaker();
  lent.clear();
  EXPECT_EQ(registry_->Sweep(), 5u) << "all given back; k5 was just used";
  clock_.Advance(16min);
  EXPECT_EQ(registry_->Sweep(), 1u);
}

TEST_F(RegistryBorrowTest, AMovedBorrowIsGivenBackOnceByItsLastHolder) {
  Build();
  BorrowedBreaker first = Borrow("k");
  CircuitBreaker* breaker = first.get();
  BorrowedBreaker second = std::move(first);
  EXPECT_FALSE(first);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(second.get(), breaker);
  first = BorrowedBreaker();  // destroying the moved-from one gives nothing back
  clock_.Advance(16min);
  EXPECT_EQ(registry_->Sweep(), 0u);
  BorrowedBreaker third;
  third = std::move(second);
  EXPECT_EQ(registry_->Sweep(), 0u);
  std::thread([lent = std::move(third)]() mutable { lent = BorrowedBreaker(); }).join();
  EXPECT_EQ(registry_->Sweep(), 1u) << "given back on another thread";
}

// Borrows (with calls on the lent breaker), pairs, Gets, Finds, Removes and
// sweeps racing on a registry small enough to evict all the time. Half the lookups
// go through RegistryKeys the threads share, so their hints are written and
// checked by several threads while the entries they name move and go.
TEST_F(RegistryBorrowTest, ConcurrentBorrowsAndWritersStayConsistent) {
  RegistryOptions o;
  o.max_breakers = 16;
  o.max_breakers_hard = 24;
  registry_ = *Registry::Create(std::move(o));
  constexpr int kThreads = 4;
  std::latch start(kThreads);
  std::atomic<int> wrong{0};
  std::vector<RegistryKey> shared_keys;
  shared_keys.reserve(64);
  for (int k = 0; k < 64; ++k) shared_keys.emplace_back("k" + std::to_string(k));
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      start.arrive_and_wait();
      std::vector<BorrowedBreaker> kept;  // up to six at once: past the four slots
      for (int i = 0; i < 4000; ++i) {
        const unsigned id = rng() % 64;
        const std::string key = "k" + std::to_string(id);
        const unsigned op = rng() % 100;
        if (op < 10) {
          // Two shared keys at once: each lent breaker must be its key's.
          const unsigned id2 = rng() % 64;
          Registry::BorrowedPair pair = registry_->BorrowPair(
              shared_keys[id], "default", shared_keys[id2], "default", registry_->CoarseNow());
          if (!testing::IsKeysBreaker(pair.first, key) ||
              !testing::IsKeysBreaker(pair.second, shared_keys[id2].key())) {
            ++wrong;
            continue;
          }
          if (Result<Permit> p = (*pair.second)->TryAcquire()) p->Success(1ms);
          if (op < 3) kept.push_back(std::move(*pair.first));
          if (kept.size() > 6) kept.erase(kept.begin());
        } else if (op < 60) {
          Result<BorrowedBreaker> b =
              op % 2 == 0 ? registry_->Borrow(shared_keys[id]) : registry_->Borrow(key);
          if (!b || ((*b)->name() != key && (*b)->name() != "overflow:default")) {
            ++wrong;
            continue;
          }
          if (Result<Permit> p = (*b)->TryAcquire()) p->Success(1ms);
          if (op < 15) kept.push_back(std::move(*b));
          if (kept.size() > 6) kept.erase(kept.begin());
        } else if (op < 75) {
          if (!testing::IsKeysBreaker(
                  op % 2 == 0 ? registry_->Get(shared_keys[id]) : registry_->Get(key), key)) {
            ++wrong;
          }
        } else {
          testing::FindRemoveOrSweep(*registry_, key, op, wrong);
        }
      }
      for (const BorrowedBreaker& b : kept) {
        if (b->name().empty()) ++wrong;  // still alive (asan)
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(registry_->size(), 24u);
}

// A RegistryKey remembers where it was found; the next lookup looks there
// first. These pin that the hint is only ever a shortcut to the same answer.

// A key whose hash agrees with `key`'s in its low 16 bits (so that it has
// the same home slot in any table of up to 65,536 slots) and whose length is
// the same (so that its entry is the same size and likely to be allocated
// where a freed one of `key`'s was).
std::string SameHomeSlot(const std::string& key) {
  const std::uint64_t want = RegistryKey::Hash(key) & 0xFFFF;
  for (std::uint64_t i = 0;; ++i) {
    std::string other = std::to_string(i);
    other.insert(0, key.size() - other.size(), 'x');
    if (other != key && (RegistryKey::Hash(other) & 0xFFFF) == want) return other;
  }
}

TEST_F(RegistryBorrowTest, AKeysHintIsNotTakenForAnEntryAllocatedWhereItsEntryWas) {
  Build();
  const RegistryKey key("meta:read:act_1:quota");
  const CircuitBreaker* first = Borrow(key.key()).get();
  ASSERT_EQ(registry_->Borrow(key).value().get(), first);  // the hint is set
  ASSERT_TRUE(registry_->Remove(key.key()));
  ASSERT_EQ(registry_->size(), 0u);
  // Most likely in the same slot, at the same address: only the serial tells
  // the two entries apart.
  const std::string other = SameHomeSlot(key.key());
  ASSERT_TRUE(registry_->Get(other).has_value());
  Result<BorrowedBreaker> again = registry_->Borrow(key);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ((*again)->name(), key.key());
  EXPECT_EQ(registry_->size(), 2u);
  EXPECT_EQ(registry_->Find(other)->name(), other);
}

TEST_F(RegistryBorrowTest, AKeysHintFollowsItsEntryAcrossGrowthAndMoves) {
  Build();
  const RegistryKey key("meta:read:act_1:quota");
  const std::shared_ptr<CircuitBreaker> breaker = registry_->Get(key).value();
  // The table grows from 16 slots past 1,024; removing keys shifts others
  // back into their places.
  for (int i = 0; i < 600; ++i) ASSERT_TRUE(registry_->Get("k" + std::to_string(i)).has_value());
  for (int i = 0; i < 600; i += 3) ASSERT_TRUE(registry_->Remove("k" + std::to_string(i)));
  EXPECT_EQ(registry_->Get(key).value(), breaker);
  EXPECT_EQ(registry_->Borrow(key).value().get(), breaker.get());
  EXPECT_EQ(registry_->Borrow(key).value().get(), breaker.get());
}

TEST_F(RegistryBorrowTest, AnAssignedKeyForgetsTheHintOfTheKeyItWas) {
  Build();
  RegistryKey key("a");
  const CircuitBreaker* a = registry_->Borrow(key).value().get();
  const CircuitBreaker* b = registry_->Borrow(RegistryKey("b")).value().get();
  key = RegistryKey("b");
  EXPECT_EQ(registry_->Borrow(key).value().get(), b);
  const RegistryKey c("a");
  key = c;
  EXPECT_EQ(registry_->Borrow(key).value().get(), a);
  RegistryKey copy(key);
  EXPECT_EQ(copy.key(), "a");
  EXPECT_EQ(copy.hash(), RegistryKey::Hash("a"));
  EXPECT_EQ(registry_->Get(copy).value().get(), a);
}

TEST_F(RegistryBorrowTest, OneKeyUsedWithTwoRegistriesGetsEachItsOwnBreaker) {
  Build();
  std::unique_ptr<Registry> second = *Registry::Create({});
  const RegistryKey key("meta:read:act_1:quota");
  for (int i = 0; i < 3; ++i) {
    const CircuitBreaker* mine = registry_->Borrow(key).value().get();
    const CircuitBreaker* theirs = second->Borrow(key).value().get();
    EXPECT_NE(mine, theirs);
    EXPECT_EQ(mine, registry_->Find(key.key()).get());
    EXPECT_EQ(theirs, second->Find(key.key()).get());
  }
}

// BorrowPair(): two kept keys at one clock read, as two Borrow()s.

TEST_F(RegistryBorrowTest, APairLendsWhatTwoBorrowsLend) {
  Build();
  const RegistryKey a("meta:read:1:transient");
  const RegistryKey b("meta:read:1:quota");
  const TimePoint now = clock_.CoarseNow();
  for (int round = 0; round < 3; ++round) {  // cold (both created), then by the hints
    Registry::BorrowedPair pair = registry_->BorrowPair(a, "default", b, "default", now);
    ASSERT_TRUE(pair.first.has_value()) << pair.first.error();
    ASSERT_TRUE(pair.second.has_value()) << pair.second.error();
    EXPECT_EQ((*pair.first)->name(), a.key());
    EXPECT_EQ((*pair.second)->name(), b.key());
    EXPECT_EQ(pair.first->get(), registry_->Find(a.key()).get());
    EXPECT_EQ(pair.second->get(), registry_->Find(b.key()).get());
  }
  EXPECT_EQ(registry_->size(), 2u);
  // One key twice: the same breaker, lent twice.
  Registry::BorrowedPair twice = registry_->BorrowPair(b, "default", b, "default", now);
  EXPECT_EQ(twice.first->get(), twice.second->get());
  // Each miss creates from its own template, and fails alone.
  ASSERT_TRUE(registry_->AddConfig("quota", {}).ok());
  const RegistryKey c("meta:read:2:quota");
  Registry::BorrowedPair mixed = registry_->BorrowPair(a, "no-such-template", c, "quota", now);
  EXPECT_EQ(mixed.first->get(), registry_->Find(a.key()).get()) << "a hit: the template unused";
  ASSERT_TRUE(mixed.second.has_value());
  EXPECT_EQ((*mixed.second)->name(), c.key());
  const RegistryKey d("meta:read:3:quota");
  Registry::BorrowedPair missing = registry_->BorrowPair(a, "default", d, "no-such", now);
  EXPECT_TRUE(missing.first.has_value());
  EXPECT_EQ(missing.second.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Find(d.key()), nullptr);
}

TEST_F(RegistryBorrowTest, APairIsAUseOfBothKeysAtTheCallersTime) {
  Build();
  const RegistryKey a("a");
  const RegistryKey b("b");
  const TimePoint created = clock_.CoarseNow();
  (void)registry_->BorrowPair(a, "default", b, "default", created);  // creates both
  (void)registry_->BorrowPair(a, "default", b, "default", created);  // finds them: the hints
  (void)Borrow("c");
  // Each pair below goes by the hints. It touches both keys, then runs the
  // idle sweep when one is due (once a minute): at 10 min nothing is idle,
  // at 16 min "c" is (the idle timeout is 15 min), "a" and "b" just used.
  clock_.Advance(10min);
  (void)registry_->BorrowPair(a, "default", b, "default", clock_.CoarseNow());
  EXPECT_TRUE(dropped_.empty());
  clock_.Advance(6min);
  (void)registry_->BorrowPair(a, "default", b, "default", clock_.CoarseNow());
  EXPECT_EQ(dropped_, std::vector<std::string>{"c"}) << "the pair ran the sweep that was due";
  // At the time given, not at a read of its own: as old as the entries,
  // both are idle at the next sweep.
  clock_.Advance(10min);
  (void)registry_->BorrowPair(b, "default", a, "default", created);
  EXPECT_EQ(registry_->Sweep(), 2u);
}

TEST_F(RegistryBorrowTest, ALentPairIsInUseUntilGivenBack) {
  Build();
  const RegistryKey a("a");
  const RegistryKey b("b");
  std::weak_ptr<CircuitBreaker> weak_a = *registry_->Get(a);
  std::weak_ptr<CircuitBreaker> weak_b = *registry_->Get(b);
  (void)registry_->BorrowPair(a, "default", b, "default", clock_.CoarseNow());  // the hints
  Registry::BorrowedPair pair =
      registry_->BorrowPair(a, "default", b, "default", clock_.CoarseNow());
  clock_.Advance(16min);
  EXPECT_EQ(registry_->Sweep(), 0u) << "both lent";
  EXPECT_TRUE(registry_->Remove("a"));
  EXPECT_TRUE(registry_->Remove("b"));
  registry_->Sweep();
  ASSERT_FALSE(weak_a.expired()) << "freed while lent";
  ASSERT_FALSE(weak_b.expired()) << "freed while lent";
  for (Result<BorrowedBreaker>* lent : {&pair.first, &pair.second}) {
    Result<Permit> p = (**lent)->TryAcquire();  // asan: no use after free
    ASSERT_TRUE(p.has_value());
    p->Success(1ms);
  }
  pair.first = BorrowedBreaker();
  registry_->Sweep();
  EXPECT_TRUE(weak_a.expired());
  EXPECT_FALSE(weak_b.expired()) << "the second is still lent";
  pair.second = BorrowedBreaker();
  registry_->Sweep();
  EXPECT_TRUE(weak_b.expired());
}

TEST_F(RegistryBorrowTest, APairWithFewerThanTwoFreeSlotsIsStillLentAndProtected) {
  Build();
  const RegistryKey a("a");
  const RegistryKey b("b");
  std::vector<BorrowedBreaker> lent;
  for (std::size_t taken = 3; taken <= 4; ++taken) {  // one slot left, then none
    (void)registry_->BorrowPair(a, "default", b, "default", clock_.CoarseNow());  // hints set
    while (lent.size() < taken) lent.push_back(Borrow("k" + std::to_string(lent.size())));
    std::weak_ptr<CircuitBreaker> weak_a = registry_->Find("a");
    std::weak_ptr<CircuitBreaker> weak_b = registry_->Find("b");
    Registry::BorrowedPair pair =
        registry_->BorrowPair(a, "default", b, "default", clock_.CoarseNow());
    EXPECT_EQ(pair.first->get(), weak_a.lock().get()) << taken << " slots taken";
    EXPECT_EQ(pair.second->get(), weak_b.lock().get()) << taken << " slots taken";
    ASSERT_TRUE(registry_->Remove("a"));
    ASSERT_TRUE(registry_->Remove("b"));
    registry_->Sweep();
    EXPECT_FALSE(weak_a.expired()) << "freed while lent, " << taken << " slots taken";
    EXPECT_FALSE(weak_b.expired()) << "freed while lent, " << taken << " slots taken";
    pair.first = BorrowedBreaker();
    pair.second = BorrowedBreaker();
    registry_->Sweep();
    EXPECT_TRUE(weak_a.expired());
    EXPECT_TRUE(weak_b.expired());
  }
}

TEST_F(RegistryBorrowTest, APairsHintsAreNotTakenForEntriesAllocatedWhereTheirsWere) {
  // Either key's entry dropped and another key's allocated where it was: the
  // pair must notice from that key's serial, whichever of the two it is.
  for (int stale = 0; stale < 2; ++stale) {
    Build();  // a fresh registry each time, as in the one-key test above
    const RegistryKey first("meta:read:act_1:transient");
    const RegistryKey second("meta:read:act_1:quota");
    const RegistryKey& gone = stale == 0 ? first : second;
    (void)registry_->BorrowPair(first, "default", second, "default", clock_.CoarseNow());
    (void)registry_->BorrowPair(first, "default", second, "default", clock_.CoarseNow());
    ASSERT_TRUE(registry_->Remove(gone.key()));
    ASSERT_EQ(registry_->size(), 1u);
    const std::string other = SameHomeSlot(gone.key());
    ASSERT_TRUE(registry_->Get(other).has_value());
    Registry::BorrowedPair pair =
        registry_->BorrowPair(first, "default", second, "default", clock_.CoarseNow());
    EXPECT_EQ((*pair.first)->name(), first.key()) << "stale " << stale;
    EXPECT_EQ((*pair.second)->name(), second.key()) << "stale " << stale;
    EXPECT_EQ(registry_->Find(other)->name(), other);
  }
}

}  // namespace
}  // namespace fusebox
