// registry_table.h: the registry's data structures below its lock and its
// events: the lists of its LRU queue, and the hash table that a hit reads
// without a lock (src/registry.cc holds the registry itself).
#ifndef FUSEBOX_SRC_REGISTRY_TABLE_H_
#define FUSEBOX_SRC_REGISTRY_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "hazard.h"

namespace fusebox::registry_internal {

// Links of the LRU queue and of the list of breakers set aside, both
// guarded by Impl::mu.
struct Links {
  Links* prev = this;
  Links* next = this;

  void Unlink() noexcept {
    prev->next = next;
    next->prev = prev;
    prev = next = this;
  }
};

// A circular list with a sentinel: front() is the newest, back() the oldest.
class List {
 public:
  bool empty() const noexcept { return head_.next == &head_; }
  Links* back() noexcept { return empty() ? nullptr : head_.prev; }
  void PushFront(Links* l) noexcept { InsertAfter(&head_, l); }
  void PushBack(Links* l) noexcept { InsertAfter(head_.prev, l); }
  // Moves every element of `other` to the back of this list, in order.
  void SpliceBack(List& other) noexcept {
    while (!other.empty()) {
      Links* newest = other.head_.next;
      newest->Unlink();
      PushBack(newest);
    }
  }
  template <typename F>
  void ForEach(F&& f) {
    for (Links* l = head_.next; l != &head_;) {
      Links* next = l->next;
      f(l);
      l = next;
    }
  }

 private:
  static void InsertAfter(Links* at, Links* l) noexcept {
    l->prev = at;
    l->next = at->next;
    at->next->prev = l;
    at->next = l;
  }
  Links head_;
};

// Open addressing with linear probing. A slot keeps the full hash, so a probe
// looks at an entry only when the hashes are equal. Deletion shifts the
// following entries back (no tombstones). Load factor <= 1/2.
//
// Written by one writer at a time (under Impl::mu), read without a lock:
// slots are atomics, and an array replaced by a larger one is kept (frozen)
// until the table dies, since a reader may still be walking it; together
// they take less than twice the memory of the newest. A reader that finds
// an entry validates it after publishing its hazard (FindShared()).
template <typename Entry>
class Table {
 public:
  // The newest array is published in `*current`, which the registry holds
  // (Registry::table_array_): a hit loads it from there, not through Impl.
  explicit Table(std::atomic<void*>* current) : current_(current) {
    current_->store(&Publish(kInitial), std::memory_order_relaxed);
  }

  // Under Impl::mu only.
  Entry* Find(std::uint64_t hash, std::string_view key) const noexcept {
    const Array& a = Current();
    for (std::size_t i = hash & a.mask;; i = (i + 1) & a.mask) {
      const Slot& s = a.slots()[i];
      Entry* e = s.entry.load(std::memory_order_relaxed);
      if (e == nullptr) return nullptr;
      if (e->Is(hash, key)) return e;
    }
  }

  // Without a lock: the entry for `key`, published in `hazard`, or nullptr
  // with `hazard` clear, when it is not there or a writer moved it meanwhile
  // (the caller then asks again under the lock). Once `hazard` names the
  // entry and the slot still holds it, a writer that unlinks it afterwards
  // finds the hazard (see hazard.h) and does not free it.
  // `*slot` is where it was found. `current`: the table's (Table()).
  [[gnu::always_inline]] static Entry* FindShared(const std::atomic<void*>& current,
                                                  std::uint64_t hash, std::string_view key,
                                                  internal::HazardSlot& hazard,
                                                  std::size_t* slot) noexcept {
    const Array* a = Load(current);
    std::size_t i = hash & a->mask;
    for (std::size_t probes = 0; probes <= a->mask; ++probes, i = (i + 1) & a->mask) {
      const Slot& s = a->slots()[i];
      Entry* e = s.entry.load(std::memory_order_acquire);
      if (e == nullptr) return nullptr;
      if (s.hash.load(std::memory_order_relaxed) != hash) continue;
      if (!Holds(current, a, s, e, hazard)) break;
      if (e->Is(hash, key)) [[likely]] {
        *slot = i;
        return e;
      }
      hazard.store(nullptr, std::memory_order_relaxed);
    }
    hazard.store(nullptr, std::memory_order_relaxed);
    return nullptr;
  }

  // Without a lock: `e`, published in `hazard`, if slot `i` of the current
  // array holds it; else nullptr with `hazard` clear. The check a hint gets
  // (FindShared()'s, at one slot): `e` is not dereferenced unless it holds.
  [[gnu::always_inline]] static Entry* FindAt(const std::atomic<void*>& current, std::size_t i,
                                              Entry* e, internal::HazardSlot& hazard) noexcept {
    const Array* a = Load(current);
    if (i > a->mask) return nullptr;
    const Slot& s = a->slots()[i];
    if (s.entry.load(std::memory_order_acquire) != e) return nullptr;
    if (Holds(current, a, s, e, hazard)) return e;
    hazard.store(nullptr, std::memory_order_relaxed);
    return nullptr;
  }

  // FindAt() for two entries at once, with one hazard check: `e1` in `h1`
  // and `e2` in `h2` if slots `i1` and `i2` of the current array hold them;
  // else false with both hazards clear.
  [[gnu::always_inline]] static bool FindTwoAt(const std::atomic<void*>& current, std::size_t i1,
                                               Entry* e1, internal::HazardSlot& h1, std::size_t i2,
                                               Entry* e2, internal::HazardSlot& h2) noexcept {
    const Array* a = Load(current);
    if (i1 > a->mask || i2 > a->mask) return false;
    const Slot& s1 = a->slots()[i1];
    const Slot& s2 = a->slots()[i2];
    if (s1.entry.load(std::memory_order_acquire) != e1 ||
        s2.entry.load(std::memory_order_acquire) != e2) {
      return false;
    }
    h1.store(e1, std::memory_order_relaxed);
    h2.store(e2, std::memory_order_relaxed);
    internal::LightBarrier();
    if (Load(current) == a && s1.entry.load(std::memory_order_acquire) == e1 &&
        s2.entry.load(std::memory_order_acquire) == e2) {
      return true;
    }
    h1.store(nullptr, std::memory_order_relaxed);
    h2.store(nullptr, std::memory_order_relaxed);
    return false;
  }

  // Under Impl::mu only, as are Erase() and ForEach().
  void Insert(Entry* e) {
    const Array& a = Current();
    if ((count_ + 1) * 2 > a.mask + 1) Grow(a);
    Place(Current(), e);
    ++count_;
  }

  void Erase(Entry* e) noexcept {
    Array& a = Current();
    Slot* const slots = a.slots();
    std::size_t i = e->hash & a.mask;
    while (slots[i].entry.load(std::memory_order_relaxed) != e) i = (i + 1) & a.mask;
    // Backward shift: move later entries of the run into the hole when their
    // home slot does not lie (cyclically) in (hole, j]. A reader may miss an
    // entry while it moves: it then asks again under the lock.
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & a.mask;; j = (j + 1) & a.mask) {
      Entry* moved = slots[j].entry.load(std::memory_order_relaxed);
      if (moved == nullptr) break;
      const std::size_t home = moved->hash & a.mask;
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (stays) continue;
      slots[hole].hash.store(moved->hash, std::memory_order_relaxed);
      slots[hole].entry.store(moved, std::memory_order_release);
      hole = j;
    }
    slots[hole].entry.store(nullptr, std::memory_order_release);
    slots[hole].hash.store(0, std::memory_order_relaxed);
    --count_;
  }

  template <typename F>
  void ForEach(F&& f) const {
    const Array& a = Current();
    for (std::size_t i = 0; i <= a.mask; ++i) {
      if (Entry* e = a.slots()[i].entry.load(std::memory_order_relaxed)) f(e);
    }
  }

 private:
  static constexpr std::size_t kInitial = 16;
  struct Slot {
    std::atomic<std::uint64_t> hash{0};
    std::atomic<Entry*> entry{nullptr};
  };
  // The mask, then the slots in the same block: a reader goes from the array
  // to its slot with no pointer to load in between.
  struct Array {
    static std::unique_ptr<Array, void (*)(Array*)> New(std::size_t size) {
      static_assert(sizeof(Array) % alignof(Slot) == 0);
      void* mem = ::operator new(sizeof(Array) + size * sizeof(Slot));
      auto* a = new (mem) Array(size - 1);
      std::uninitialized_default_construct_n(a->slots(), size);
      return {a, [](Array* dead) {
                std::destroy_n(dead->slots(), dead->mask + 1);
                dead->~Array();
                ::operator delete(dead);
              }};
    }
    Slot* slots() noexcept { return reinterpret_cast<Slot*>(this + 1); }
    const Slot* slots() const noexcept { return reinterpret_cast<const Slot*>(this + 1); }
    const std::size_t mask;

   private:
    explicit Array(std::size_t m) : mask(m) {}
  };

  // Publishes `e`, read from `s` of `a`, in `hazard`, then checks that the
  // table still holds it there: from then on a writer that unlinks it finds
  // the hazard and does not free it (hazard.h). Leaves `hazard` set either
  // way.
  [[gnu::always_inline]] static bool Holds(const std::atomic<void*>& current, const Array* a,
                                           const Slot& s, Entry* e,
                                           internal::HazardSlot& hazard) noexcept {
    hazard.store(e, std::memory_order_relaxed);
    internal::LightBarrier();
    return Load(current) == a && s.entry.load(std::memory_order_acquire) == e;
  }

  static void Place(Array& a, Entry* e) noexcept {
    std::size_t i = e->hash & a.mask;
    while (a.slots()[i].entry.load(std::memory_order_relaxed) != nullptr) i = (i + 1) & a.mask;
    a.slots()[i].hash.store(e->hash, std::memory_order_relaxed);
    a.slots()[i].entry.store(e, std::memory_order_release);
  }

  Array& Publish(std::size_t size) {
    arrays_.push_back(Array::New(size));
    return *arrays_.back();
  }

  void Grow(const Array& old) {
    Array& grown = Publish((old.mask + 1) * 2);
    for (std::size_t i = 0; i <= old.mask; ++i) {
      if (Entry* e = old.slots()[i].entry.load(std::memory_order_relaxed)) Place(grown, e);
    }
    current_->store(&grown, std::memory_order_release);
  }

  // The newest array, as a reader sees it.
  [[gnu::always_inline]] static const Array* Load(const std::atomic<void*>& current) noexcept {
    return static_cast<const Array*>(current.load(std::memory_order_acquire));
  }
  // The newest array, for the writer (under Impl::mu) and Find().
  Array& Current() const noexcept {
    return *static_cast<Array*>(current_->load(std::memory_order_relaxed));
  }

  std::vector<std::unique_ptr<Array, void (*)(Array*)>>
      arrays_;  // every array published, newest last
  std::atomic<void*>* const current_;
  std::size_t count_ = 0;
};

}  // namespace fusebox::registry_internal

#endif  // FUSEBOX_SRC_REGISTRY_TABLE_H_
