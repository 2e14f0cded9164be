// fusebox/pipeline.h: rate limiter, bulkhead, breaker, retry and timeout
// around one call, in one documented order.
//
// A Pipeline runs a callable through the stages it was built with, always in
// seed 003's order:
//
//   RateLimiter -> Bulkhead -> CircuitBreaker -> Retry -> Timeout -> call
//
// and each stage says no with its own code, so the caller knows which one did:
//
//   stage            refuses with        when
//   RateLimiter      kRateLimited        no permit now (or within its timeout)
//   Bulkhead         kBulkheadFull       no free slot (or none within its wait)
//   CircuitBreaker   kCircuitOpen        OPEN, FORCED_OPEN, or HALF_OPEN full
//   Retry            kRetriesExhausted   out of attempts or time budget
//   Timeout          kTimeout            the attempt reached its deadline
//
// Why this order (docs/policies.md has the long version):
//   - the rate limiter first: a call over the rate costs nothing further, not
//     even a bulkhead slot, and retries inside do not draw more permits (they
//     are bounded by the retry policy and by the breaker instead);
//   - the bulkhead before the breaker: it bounds the callers a slow dependency
//     can hold before the breaker has seen enough calls to open, and one slot
//     covers a call with all its retries and backoff waits;
//   - the breaker outside the retry: a refusal is never retried, and an OPEN
//     breaker stops a retry loop before its next wait (the retry storm);
//   - the timeout innermost: each attempt gets the full deadline, and a timed-
//     out attempt is a failure the breaker and the retry both see.
// The order is fixed because every other order has a known failure mode (a
// retry outside the bulkhead queues retries for slots; a timeout outside the
// retry hides which attempt was slow from the breaker). Policies compose in
// any order by nesting their Execute() calls, if needed.
//
// Retries and the breaker: RetryRecording says whether the breaker records
// every attempt (the default: the breaker sees the dependency's real failure
// rate, and each attempt takes its own permit, so an OPEN breaker refuses the
// next attempt) or only the final result of the whole loop (one permit per
// logical call; the breaker sees the failure rate users see). Either way the
// loop checks the breaker before each backoff wait and stops at once, with
// kCircuitOpen and its retry_at, if the breaker has opened.
//
// Retry-After: a failure whose Status carries retry_at() in the future is
// recorded as Outcome::OpenFor(retry_at - now) when RetryAfter::kOpensBreaker
// (the default, with a breaker): the dependency said "stop", so every caller
// stops until then, and the retry loop returns kCircuitOpen instead of waiting.
// With kDelaysRetry the breaker records a plain failure and the retry waits for
// the hint (see retry.h).
//
//   auto pipeline = *fusebox::Pipeline::Builder()
//                        .WithRateLimiter(std::move(*limiter))
//                        .WithBulkhead(std::move(*bulkhead))
//                        .WithCircuitBreaker(breaker)
//                        .WithRetry(std::move(*retry))
//                        .WithTimeout(std::move(*timeout))
//                        .Build();
//   fusebox::Result<Reply> r = pipeline->Execute([&](const std::stop_token& stop) {
//     return client.Get(url, stop);
//   });
//
// A keyed pipeline: one definition, run per key. Built WithRegistry()
// instead of WithCircuitBreaker(), it takes each call's breaker from the
// registry by key (the registry's bounds, eviction and overflow breakers
// apply), and, where WithBulkheadPerKey() / WithRateLimiterPerKey() say so, a
// bulkhead and a rate limiter of that breaker's own (made on first use, dropped
// once the registry has dropped the breaker; keys answered by an overflow
// breaker share its policies). Retry, timeout, classifier, and a fixed bulkhead
// or rate limiter given as usual are shared by every key.
//
//   auto pipeline = *fusebox::Pipeline::Builder()
//                        .WithRegistry(registry, "graph-api")
//                        .WithBulkheadPerKey({.max_concurrent_calls = 10})
//                        .WithRetry(retry)
//                        .WithTimeout(timeout)
//                        .Build();
//   fusebox::Result<Reply> r = pipeline->Execute("graph:read:" + account, call);
//
// A keyed pipeline refuses Execute(fn) and an unkeyed one Execute(key, fn),
// both with kInvalidArgument (reason "keyed_pipeline_needs_key",
// "pipeline_not_keyed"). Per call a keyed pipeline adds the registry lookup
// (docs/performance.md): Registry::Borrow(), the breaker lent for the whole
// call so that no sweep drops it meanwhile; with per-key policies
// Registry::Get() (a shared_ptr, by which they are found) and one sharded map
// lookup.
//
// Retry loops are counted by the Retry itself (Retry::loop_counts(), reported
// by MetricsCollector::AddRetry()): a loop ended by the breaker opening between
// attempts counts as failed_with_retry; a call the breaker refused before its
// first attempt is no loop.
//
// The callable may take a std::stop_token (see internal/policy_call.h); it
// gets the timeout's token, or one that never stops without a timeout stage.
// An exception thrown by the callable is recorded by the breaker as a failure
// (of duration zero), frees every slot, and propagates unchanged; it is not
// retried.
//
// Cost: once built, a call allocates nothing (a failed retry loop's
// kRetriesExhausted message aside). With every stage and a successful first
// attempt it adds a few tens of nanoseconds to the callable
// (docs/performance.md).
//
// Thread-safe. The policies may be shared with other pipelines.
#ifndef FUSEBOX_PIPELINE_H_
#define FUSEBOX_PIPELINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "fusebox/bulkhead.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/internal/policy_call.h"
#include "fusebox/rate_limiter.h"
#include "fusebox/registry.h"
#include "fusebox/result.h"
#include "fusebox/retry.h"
#include "fusebox/status.h"
#include "fusebox/timeout.h"

namespace fusebox {

// What the breaker records when a Retry runs inside it.
enum class RetryRecording : std::uint8_t {
  // Every attempt is a call of its own to the breaker: a permit and an
  // outcome each. Default.
  kEachAttempt,
  // One permit for the whole loop; the outcome of the last attempt (with that
  // attempt's duration) is recorded once the loop ends.
  kFinalResult,
};

// What a failure's retry_at() means to the breaker stage.
enum class RetryAfter : std::uint8_t {
  // Outcome::OpenFor: the breaker opens until then. Default.
  kOpensBreaker,
  // A plain failure; the retry stage waits for it.
  kDelaysRetry,
};

class Pipeline {
 public:
  // Collects the stages. Each With*() replaces an earlier call for the same
  // stage. The pipeline shares ownership of the policies.
  //
  // Not thread-safe.
  class Builder {
   public:
    Builder() = default;

    Builder& WithRateLimiter(std::shared_ptr<RateLimiter> limiter);
    Builder& WithBulkhead(std::shared_ptr<Bulkhead> bulkhead);
    Builder& WithCircuitBreaker(std::shared_ptr<CircuitBreaker> breaker);
    // Default recording: kEachAttempt.
    Builder& WithRetry(std::shared_ptr<Retry> retry,
                       RetryRecording recording = RetryRecording::kEachAttempt);
    Builder& WithTimeout(std::shared_ptr<Timeout> timeout);
    // How a failed attempt's Status counts for the breaker. Default (unset):
    // every failure is a failure. Returning kIgnored suits a client error that
    // says nothing about the dependency's health.
    Builder& WithOutcomeClassifier(std::function<OutcomeKind(const Status&)> classifier);
    // Default: kOpensBreaker.
    Builder& WithRetryAfter(RetryAfter retry_after);
    // Keyed (see above): each call's breaker is the registry's for its key,
    // from template `config_name`. Exclusive with WithCircuitBreaker().
    Builder& WithRegistry(std::shared_ptr<Registry> registry, std::string config_name = "default");
    // Keyed: a bulkhead (rate limiter) per breaker of the registry, made from
    // `options` on the registry's clock. Exclusive with WithBulkhead()
    // (WithRateLimiter()); needs WithRegistry().
    Builder& WithBulkheadPerKey(BulkheadOptions options);
    Builder& WithRateLimiterPerKey(RateLimiterOptions options);

    // Fails with kInvalidArgument when a stage was given a null policy ("bulkhead
    // must not be null"), when the stages run on different clocks ("timeout
    // uses a different clock than circuit_breaker"), when exclusive stages are
    // both given, or when per-key options are invalid or lack a registry. On
    // success the pipeline takes the stages and the builder is left empty.
    Result<std::unique_ptr<Pipeline>> Build();

   private:
    friend class Pipeline;

    template <typename T>
    Builder& Set(std::shared_ptr<T>& field, std::shared_ptr<T> policy, const char* stage) {
      if (!policy) {
        null_given_ = true;
        null_stage_ = stage;
      }
      field = std::move(policy);
      return *this;
    }

    bool null_given_ = false;
    const char* null_stage_ = "";
    std::shared_ptr<RateLimiter> rate_limiter_;
    std::shared_ptr<Bulkhead> bulkhead_;
    std::shared_ptr<CircuitBreaker> breaker_;
    std::shared_ptr<Retry> retry_;
    std::shared_ptr<Timeout> timeout_;
    RetryRecording recording_ = RetryRecording::kEachAttempt;
    RetryAfter retry_after_ = RetryAfter::kOpensBreaker;
    std::function<OutcomeKind(const Status&)> classifier_ = nullptr;
    std::shared_ptr<Registry> registry_;
    std::string config_name_ = "default";
    std::optional<BulkheadOptions> bulkhead_per_key_;
    std::optional<RateLimiterOptions> rate_limiter_per_key_;
  };

  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;
  ~Pipeline();

  // Runs `fn` through every stage (see above). Returns the first refusal, or
  // what the last attempt returned (kTimeout for one that timed out), or
  // kRetriesExhausted.
  template <typename F>
  internal::PolicyReturn<F> Execute(F&& fn);

  // Keyed: the same, with the breaker (and per-key policies) of `key`. Also
  // fails as Registry::Get() does (an empty key, say).
  template <typename F>
  internal::PolicyReturn<F> Execute(std::string_view key, F&& fn);
  // The same, without hashing the key again.
  template <typename F>
  internal::PolicyReturn<F> Execute(const RegistryKey& key, F&& fn);

  // Null for a keyed pipeline's per-key stages (and its breaker).
  RateLimiter* rate_limiter() const noexcept { return rate_limiter_; }
  Bulkhead* bulkhead() const noexcept { return bulkhead_; }
  CircuitBreaker* circuit_breaker() const noexcept { return breaker_; }
  Retry* retry() const noexcept { return retry_; }
  Timeout* timeout() const noexcept { return timeout_; }

 private:
  template <typename Ret>
  struct Attempt {
    Ret ret;
    Duration elapsed;
  };
  // The stages of one call: the pipeline's own, or a key's.
  struct Stages {
    RateLimiter* rate_limiter = nullptr;
    Bulkhead* bulkhead = nullptr;
    CircuitBreaker* breaker = nullptr;
    // Time attempts with precise clock reads (the breaker's or the timeout's
    // timing asks for them).
    bool precise = false;
  };
  // A key's stages, for the length of one call, with per-key policies.
  // Holding the breaker keeps its per-key bulkhead and rate limiter alive
  // too (see PerKey). Without per-key policies the breaker is borrowed.
  struct KeyedStages {
    std::shared_ptr<CircuitBreaker> breaker;
    Stages stages;
  };
  struct PerKey;

  explicit Pipeline(Builder builder);

  // The stages of a call through `breaker` (a key's), without per-key policies.
  Stages StagesOf(CircuitBreaker& breaker) const;
  // The same with the key's per-key policies, if any.
  Result<KeyedStages> StagesFor(Result<std::shared_ptr<CircuitBreaker>> breaker);
  // Execute(key, fn) for a std::string_view or a RegistryKey.
  template <typename Key, typename F>
  internal::PolicyReturn<F> ExecuteKeyed(const Key& key, F& fn);
  template <typename F>
  internal::PolicyReturn<F> Run(const Stages& st, F& fn);
  template <typename F>
  internal::PolicyReturn<F> Guarded(const Stages& st, F& fn);
  template <typename F>
  internal::PolicyReturn<F> Loop(const Stages& st, F& fn, CircuitBreaker* per_attempt,
                                 Outcome* last);
  template <typename F>
  Attempt<internal::PolicyReturn<F>> RunAttempt(const Stages& st, F& fn);

  // The breaker's outcome for a failed attempt (classifier, Retry-After).
  Outcome FailureOutcome(const Status& failure, Duration elapsed) const;
  // OK, or the breaker's refusal when it is open now: checked before a
  // backoff wait.
  static Status BreakerVerdict(CircuitBreaker* breaker);
  TimePoint ReadClock(bool precise) const noexcept {
    return precise ? clock_->Now() : clock_->CoarseNow();
  }

  // Raw pointers on the hot path; builder_ keeps the policies alive.
  RateLimiter* rate_limiter_;
  Bulkhead* bulkhead_;
  CircuitBreaker* breaker_;
  Retry* retry_;
  Timeout* timeout_;
  Clock* clock_;
  Registry* registry_;
  // The pipeline's own stages (a keyed pipeline's breaker left null).
  Stages stages_;
  RetryRecording recording_;
  RetryAfter retry_after_;
  const Builder builder_;
  // Keyed with per-key policies: the policies by breaker. Null otherwise.
  std::unique_ptr<PerKey> per_key_;
};

// ---------------------------------------------------------------------------
// The stages, inline: the callable's type is never erased.

template <typename F>
internal::PolicyReturn<F> Pipeline::Execute(F&& fn) {
  if (registry_ != nullptr) [[unlikely]]
    return Status::Rejected(StatusCode::kInvalidArgument, "keyed_pipeline_needs_key");
  return Run(stages_, fn);
}

template <typename F>
internal::PolicyReturn<F> Pipeline::Execute(std::string_view key, F&& fn) {
  return ExecuteKeyed(key, fn);
}

template <typename F>
internal::PolicyReturn<F> Pipeline::Execute(const RegistryKey& key, F&& fn) {
  return ExecuteKeyed(key, fn);
}

template <typename Key, typename F>
internal::PolicyReturn<F> Pipeline::ExecuteKeyed(const Key& key, F& fn) {
  if (registry_ == nullptr) [[unlikely]]
    return Status::Rejected(StatusCode::kInvalidArgument, "pipeline_not_keyed");
  if (per_key_ == nullptr) {
    // Lent, not shared: no reference count touched. The registry does not
    // drop the breaker while `b` lives, that is for the whole call, retries
    // and backoff waits included, and until an exception has passed.
    Result<BorrowedBreaker> b = registry_->Borrow(key, builder_.config_name_);
    if (!b) [[unlikely]]
      return std::move(b).error();
    return Run(StagesOf(**b), fn);
  }
  // Per-key policies are found by the breaker's shared_ptr (PerKey::For).
  Result<KeyedStages> k = StagesFor(registry_->Get(key, builder_.config_name_));
  if (!k) [[unlikely]]
    return std::move(k).error();
  return Run(k->stages, fn);
}

template <typename F>
internal::PolicyReturn<F> Pipeline::Run(const Stages& st, F& fn) {
  if (st.rate_limiter != nullptr) {
    Status s = st.rate_limiter->Acquire();
    if (!s.ok()) [[unlikely]]
      return s;
  }
  if (st.bulkhead != nullptr) {
    Result<BulkheadPermit> slot = st.bulkhead->Acquire();
    if (!slot) [[unlikely]]
      return std::move(slot).error();
    return Guarded(st, fn);  // The slot is freed on the way out, also on a throw.
  }
  return Guarded(st, fn);
}

template <typename F>
internal::PolicyReturn<F> Pipeline::Guarded(const Stages& st, F& fn) {
  if (st.breaker != nullptr && retry_ != nullptr && recording_ == RetryRecording::kFinalResult) {
    Result<Permit> permit = st.breaker->TryAcquire();
    if (!permit) return std::move(permit).error();
    Outcome last;
    try {
      internal::PolicyReturn<F> r = Loop(st, fn, nullptr, &last);
      permit->Record(last);
      return r;
    } catch (...) {
      permit->Failure(Duration::zero());
      throw;
    }
  }
  return Loop(st, fn, st.breaker, nullptr);
}

template <typename F>
internal::PolicyReturn<F> Pipeline::Loop(const Stages& st, F& fn, CircuitBreaker* per_attempt,
                                         Outcome* last) {
  const TimePoint start = retry_ != nullptr ? retry_->LoopStart() : TimePoint();
  for (int attempt = 1;; ++attempt) {
    std::optional<Permit> permit;
    if (per_attempt != nullptr) {
      Result<Permit> p = per_attempt->TryAcquire();
      if (!p) {  // kCircuitOpen is never retried.
        if (retry_ != nullptr && attempt > 1) retry_->CountLoop(false, attempt);
        return std::move(p).error();
      }
      permit.emplace(std::move(*p));
    }
    Attempt<internal::PolicyReturn<F>> a = [&] {
      try {
        return RunAttempt(st, fn);
      } catch (...) {
        if (permit) permit->Failure(Duration::zero());
        throw;
      }
    }();
    const Status& s = internal::StatusOf(a.ret);
    if (permit || last != nullptr) {
      const Outcome o = s.ok() ? Outcome::Success(a.elapsed) : FailureOutcome(s, a.elapsed);
      if (permit) permit->Record(o);
      if (last != nullptr) *last = o;
    }
    if (retry_ == nullptr) return std::move(a.ret);
    if (s.ok()) {
      retry_->CountLoop(true, attempt);
      return std::move(a.ret);
    }
    const RetryDecision d = retry_->Decide(attempt, s, start);
    if (d.action != RetryDecision::Action::kRetry) {
      retry_->CountLoop(false, attempt);
      if (d.action == RetryDecision::Action::kGiveUp) return std::move(a.ret);
      return Retry::Exhausted(attempt, d, s);
    }
    // Never wait towards a breaker that has opened meanwhile: stop now.
    if (Status open = BreakerVerdict(st.breaker); !open.ok()) {
      retry_->CountLoop(false, attempt + 1);  // The loop meant to retry.
      return open;
    }
    retry_->clock().SleepFor(d.wait);
  }
}

template <typename F>
Pipeline::Attempt<internal::PolicyReturn<F>> Pipeline::RunAttempt(const Stages& st, F& fn) {
  if (timeout_ != nullptr) {
    Timeout::Watch watch = timeout_->Start(st.precise);
    internal::PolicyReturn<F> r = internal::InvokeWithToken(fn, watch.token());
    if (watch.Finish(internal::StatusOf(r))) return {Timeout::TimedOut(), watch.elapsed()};
    return {std::move(r), watch.elapsed()};
  }
  if (st.breaker == nullptr) return {internal::InvokePlain(fn), Duration::zero()};
  const TimePoint start = ReadClock(st.precise);
  internal::PolicyReturn<F> r = internal::InvokePlain(fn);
  const TimePoint end = ReadClock(st.precise);
  return {std::move(r), end > start ? end - start : Duration::zero()};
}

}  // namespace fusebox

#endif  // FUSEBOX_PIPELINE_H_
