#include "hazard.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace fusebox::internal {

std::atomic<bool> asymmetric_barriers{false};
constinit thread_local ThreadRecord* this_thread_record = nullptr;

namespace {

std::atomic<ThreadRecord*> records{nullptr};

ThreadRecord* AcquireRecord() {
  for (ThreadRecord* r = records.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    bool owned = false;
    if (!r->owned.load(std::memory_order_relaxed) &&
        r->owned.compare_exchange_strong(owned, true, std::memory_order_acquire)) {
      return r;
    }
  }
  auto* r = new ThreadRecord;  // NOLINT(cppcoreguidelines-owning-memory): lives for ever
  ThreadRecord* head = records.load(std::memory_order_relaxed);
  do {
    r->next = head;
  } while (!records.compare_exchange_weak(head, r, std::memory_order_release,
                                          std::memory_order_relaxed));
  return r;
}

// Gives the record back when its thread exits. Slots still filled (a lent
// breaker not yet given back) stay filled: the next owner skips them.
struct RecordOwner {
  ThreadRecord* record = nullptr;
  ~RecordOwner() {
    if (record == nullptr) return;
    this_thread_record = nullptr;
    record->owned.store(false, std::memory_order_release);
    record = nullptr;
  }
};

long Membarrier(int cmd) noexcept { return syscall(__NR_membarrier, cmd, 0U, 0); }

}  // namespace

// The owner (with a destructor, so with a TLS guard) is touched only here.
ThreadRecord& AttachThisThread() {
  thread_local RecordOwner owner;
  if (owner.record == nullptr) owner.record = AcquireRecord();
  this_thread_record = owner.record;
  return *owner.record;
}

bool EnableAsymmetricBarriers() noexcept {
  static const bool kEnabled = [] {
#if defined(FUSEBOX_HAZARD_FENCES_ONLY)
    return false;
#else
    const long supported = Membarrier(MEMBARRIER_CMD_QUERY);
    const bool ok = supported > 0 && (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
                    Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
    asymmetric_barriers.store(ok, std::memory_order_relaxed);
    return ok;
#endif
  }();
  return kEnabled;
}

void HeavyBarrier() noexcept {
  if (asymmetric_barriers.load(std::memory_order_relaxed) &&
      Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
    return;
  }
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void CollectHazards(std::vector<const void*>& out) {
  out.clear();
  for (ThreadRecord* r = records.load(std::memory_order_acquire); r != nullptr; r = r->next) {
    for (const HazardSlot& s : r->slots) {
      if (const void* p = s.load(std::memory_order_acquire)) out.push_back(p);
    }
  }
  std::sort(out.begin(), out.end());
}

}  // namespace fusebox::internal
