// fusebox::Registry against an explicit reference model of its eviction, on
// a ManualClock, step by step: random Gets (hits and insertions), Finds,
// holds, borrows (one key, or two through BorrowPair), failures, overrides,
// Removes, sweeps and clock steps.
//
// Where src/registry_test.cc's model checks what seed 000 promises (nothing
// protected is dropped, the bounds hold), this one predicts each drop exactly:
// the model keeps its own LRU queue with the documented second chance (a
// breaker asked for since it was queued goes back to the front), its own list
// of protected breakers set aside until the next sweep, and the idle rule;
// every kEvictedLru event must be the key the model names, in order, and
// every sweep's kEvictedIdle events the set it names. The seed is printed on
// failure (SCOPED_TRACE); the seeds are fixed, so a failure reproduces.

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <list>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/registry.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;
using Kind = RegistryEvent::Kind;

class ExactRegistryModel {
 public:
  explicit ExactRegistryModel(unsigned seed) : rng_(seed) {}

  void Run(int steps) {
    RegistryOptions o;
    o.clock = &clock_;
    o.max_breakers = kMax;
    o.max_breakers_hard = kHard;
    o.idle_timeout = kIdle;
    o.sweep_interval = std::chrono::hours(100000);  // sweeps only when the model asks
    o.on_event = [this](const RegistryEvent& e) {
      events_.push_back({e.kind, std::string(e.key)});
    };
    registry_ = std::move(*Registry::Create(std::move(o)));
    for (int step = 0; step < steps && !::testing::Test::HasFailure(); ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const int op = Pick(100);
      const std::string key = "provider:read:" + std::to_string(Pick(kUniverse)) + ":quota";
      if (op < 50) {
        DoGet(key);
      } else if (op < 62) {
        clock_.Advance(std::chrono::seconds(Pick(240)));
      } else if (op < 70) {
        DoHold(key);
      } else if (op < 76) {
        DoFail(key);
      } else if (op < 84) {
        DoForce(key);
      } else if (op < 92) {
        DoSweep();
      } else if (op < 96) {
        DoFind(key);
      } else {
        DoRemove(key);
      }
      Check();
    }
  }

 private:
  static constexpr std::size_t kMax = 8;
  static constexpr std::size_t kHard = 12;
  static constexpr int kUniverse = 24;
  static constexpr Duration kIdle = 15min;

  struct Event {
    Kind kind;
    std::string key;
  };

  struct Entry {
    std::weak_ptr<CircuitBreaker> breaker;  // weak: a strong one would be a use
    std::shared_ptr<CircuitBreaker> held;   // kept by "the caller"
    BorrowedBreaker lent;                   // borrowed by "the caller": also a use
    TimePoint last_get;
    TimePoint queued;
    bool set_aside = false;
    bool failed = false;  // a failure in its window
    bool forced = false;  // ForceOpen in force
    bool Protected() const { return held != nullptr || lent || failed || forced; }
  };

  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  // The registry's LRU bound, as documented: look at the back of the queue;
  // used since queued -> front; protected -> set aside; else drop.
  std::vector<std::string> EvictLru(std::size_t target, std::size_t limit) {
    std::vector<std::string> dropped;
    while (dropped.size() < limit && model_.size() > target && !queue_.empty()) {
      const std::string k = queue_.back();
      queue_.pop_back();
      Entry& m = model_.at(k);
      if (m.last_get > m.queued) {
        m.queued = m.last_get;
        queue_.push_front(k);
      } else if (m.Protected()) {
        m.set_aside = true;
        set_aside_.push_front(k);
      } else {
        model_.erase(k);
        dropped.push_back(k);
      }
    }
    return dropped;
  }

  std::vector<std::string> Taken(Kind kind) {
    std::vector<std::string> keys;
    for (const Event& e : events_) {
      if (e.kind == kind) keys.push_back(e.key);
    }
    return keys;
  }

  void DoGet(const std::string& key) {
    events_.clear();
    const TimePoint now = clock_.Now();
    Result<std::shared_ptr<CircuitBreaker>> r = registry_->Get(key);
    ASSERT_TRUE(r.has_value()) << r.error();
    auto it = model_.find(key);
    if (it != model_.end()) {
      EXPECT_EQ(*r, it->second.breaker.lock()) << "Get " << key << " changed its breaker";
      EXPECT_TRUE(events_.empty()) << "a hit emitted an event";
      it->second.last_get = now;
      return;
    }
    std::vector<std::string> expected;
    if (model_.size() >= kMax) expected = EvictLru(kMax - 1, 2);
    EXPECT_EQ(Taken(Kind::kEvictedLru), expected) << "Get " << key;
    if (model_.size() >= kHard) {
      EXPECT_EQ((*r)->name(), "overflow:default") << "Get " << key;
      return;
    }
    ASSERT_EQ((*r)->name(), key);
    EXPECT_EQ(Taken(Kind::kCreated), std::vector<std::string>{key});
    Entry& m = model_[key];
    m.breaker = *r;
    m.last_get = now;
    m.queued = now;
    queue_.push_front(key);
  }

  // Holds (Find: not a use) or borrows (Borrow: a use) an existing key's
  // breaker, or gives it back.
  void DoHold(const std::string& key) {
    auto it = model_.find(key);
    if (it == model_.end()) return;
    Entry& m = it->second;
    if (m.held || m.lent) {
      m.held.reset();
      m.lent = BorrowedBreaker();
    } else if (Pick(2) == 0) {
      m.held = registry_->Find(key);
    } else if (Pick(2) == 0) {
      DoBorrowPair(key);
    } else {
      events_.clear();
      Result<BorrowedBreaker> b = registry_->Borrow(key);
      ASSERT_TRUE(b.has_value()) << b.error();
      EXPECT_EQ(b->get(), m.breaker.lock().get()) << "Borrow " << key;
      EXPECT_TRUE(events_.empty()) << "a borrowed hit emitted an event";
      m.lent = std::move(*b);
      m.last_get = clock_.Now();
    }
  }

  // Borrows `key` (held by nobody) together with another existing key
  // through BorrowPair(): a use of both, at the time given. Through kept
  // keys, so that their hints go stale as entries go and come back.
  void DoBorrowPair(const std::string& key) {
    const std::string other = "provider:read:" + std::to_string(Pick(kUniverse)) + ":quota";
    auto it = model_.find(other);
    if (it == model_.end() || it->second.held || it->second.lent) return;
    events_.clear();
    Registry::BorrowedPair pair =
        registry_->BorrowPair(Kept(key), "default", Kept(other), "default", clock_.CoarseNow());
    ASSERT_TRUE(pair.first.has_value()) << pair.first.error();
    ASSERT_TRUE(pair.second.has_value()) << pair.second.error();
    EXPECT_EQ(pair.first->get(), model_.at(key).breaker.lock().get()) << "BorrowPair " << key;
    EXPECT_EQ(pair.second->get(), it->second.breaker.lock().get()) << "BorrowPair " << other;
    EXPECT_TRUE(events_.empty()) << "a borrowed hit emitted an event";
    model_.at(key).last_get = clock_.Now();
    it->second.last_get = clock_.Now();
    if (other == key) return;  // one key twice: given back at once
    model_.at(key).lent = std::move(*pair.first);
    it->second.lent = std::move(*pair.second);
  }

  const RegistryKey& Kept(const std::string& key) {
    return kept_.try_emplace(key, key).first->second;
  }

  void DoFail(const std::string& key) {
    auto it = model_.find(key);
    if (it == model_.end()) return;
    std::shared_ptr<CircuitBreaker> b = it->second.breaker.lock();
    ASSERT_NE(b, nullptr) << key;
    if (Result<Permit> p = b->TryAcquire()) {
      p->Failure(Duration::zero());
      it->second.failed = true;
    }
  }

  // ForceOpen, or Reset (which also clears the window) when forced.
  void DoForce(const std::string& key) {
    auto it = model_.find(key);
    if (it == model_.end()) return;
    std::shared_ptr<CircuitBreaker> b = it->second.breaker.lock();
    ASSERT_NE(b, nullptr) << key;
    if (it->second.forced) {
      b->Reset();
      it->second.failed = false;
    } else {
      OverrideOptions why;
      why.reason = "model";
      b->ForceOpen(why);
    }
    it->second.forced = !it->second.forced;
  }

  void DoSweep() {
    events_.clear();
    const TimePoint now = clock_.Now();
    registry_->Sweep();
    // What was set aside goes back to the back of the queue, in order.
    for (const std::string& k : set_aside_) model_.at(k).set_aside = false;
    queue_.splice(queue_.end(), set_aside_);
    std::set<std::string> idle;
    for (const auto& [k, m] : model_) {
      if (now - m.last_get >= kIdle && !m.Protected()) idle.insert(k);
    }
    for (const std::string& k : idle) {
      model_.erase(k);
      queue_.remove(k);
    }
    const std::vector<std::string> idle_taken = Taken(Kind::kEvictedIdle);
    EXPECT_EQ(std::set<std::string>(idle_taken.begin(), idle_taken.end()), idle) << "Sweep";
    EXPECT_EQ(idle_taken.size(), idle.size()) << "Sweep dropped a key twice";
    std::vector<std::string> lru;
    if (model_.size() > kMax) lru = EvictLru(kMax, SIZE_MAX);
    EXPECT_EQ(Taken(Kind::kEvictedLru), lru) << "Sweep";
  }

  void DoFind(const std::string& key) {
    auto it = model_.find(key);
    // Not a use: last_get stays.
    EXPECT_EQ(registry_->Find(key), it == model_.end() ? nullptr : it->second.breaker.lock());
  }

  void DoRemove(const std::string& key) {
    auto it = model_.find(key);
    const bool existed = it != model_.end();
    if (existed) {
      (it->second.set_aside ? set_aside_ : queue_).remove(key);
      model_.erase(it);
    }
    EXPECT_EQ(registry_->Remove(key), existed) << "Remove " << key;
  }

  void Check() {
    ASSERT_EQ(registry_->size(), model_.size());
    for (const auto& [k, m] : model_) {
      ASSERT_EQ(registry_->Find(k), m.breaker.lock()) << k;
    }
  }

  ManualClock clock_;
  std::mt19937 rng_;
  std::vector<Event> events_;
  std::map<std::string, Entry> model_;
  std::map<std::string, RegistryKey> kept_;  // their hints outlive entries
  std::list<std::string> queue_;             // front: most recently queued
  std::list<std::string> set_aside_;         // front: most recently set aside
  std::unique_ptr<Registry> registry_;       // after clock_: destroyed first
};

TEST(RegistryExactModel, EveryDropIsTheOneTheReferenceModelPredicts) {
  for (unsigned seed = 1; seed <= 300 && !::testing::Test::HasFailure(); ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    ExactRegistryModel(seed).Run(1000);
  }
}

// The registry's hash spreads seed 000's keys (which differ only in a few
// digits) over both ends of the word: the top 4 bits and the bottom bits
// (the slot): a hash that ignores some bytes or mixes poorly would pile
// keys into long probe runs.
TEST(RegistryKeyHash, SpreadsSeed000KeysOverShardsAndSlots) {
  constexpr int kKeys = 16000;
  std::set<std::uint64_t> hashes;
  std::vector<int> shards(16);
  std::vector<int> low(256);
  for (int i = 0; i < kKeys; ++i) {
    for (const std::string& key :
         {"meta:read:" + std::to_string(17841400000000000LL + i) + ":quota",
          "k" + std::to_string(i), "graph-api:write:" + std::to_string(i) + ":abcdefghijklmnop"}) {
      const std::uint64_t h = RegistryKey::Hash(key);
      EXPECT_EQ(h, RegistryKey(key).hash());
      hashes.insert(h);
      ++shards[h >> 60];
      ++low[h & 255];
    }
  }
  EXPECT_EQ(hashes.size(), 3u * kKeys) << "a collision among " << 3 * kKeys << " keys";
  // Expected 3,000 a shard and 187.5 a low byte; a fair hash stays well inside these.
  for (int n : shards) {
    EXPECT_GT(n, 2700);
    EXPECT_LT(n, 3300);
  }
  for (int n : low) {
    EXPECT_GT(n, 120);
    EXPECT_LT(n, 260);
  }
  // Every length up to 64 hashes every byte: changing any one changes the hash.
  std::string s(64, 'x');
  for (std::size_t n = 1; n <= s.size(); ++n) {
    const std::string base = s.substr(0, n);
    for (std::size_t i = 0; i < n; ++i) {
      std::string changed = base;
      changed[i] = 'y';
      EXPECT_NE(RegistryKey::Hash(base), RegistryKey::Hash(changed))
          << "length " << n << " byte " << i;
    }
    EXPECT_NE(RegistryKey::Hash(base), RegistryKey::Hash(s.substr(0, n - 1))) << "length " << n;
  }
}

}  // namespace
}  // namespace fusebox
