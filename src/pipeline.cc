// Pipeline: building, and the failure paths of the breaker stage. The stages
// themselves are templates in pipeline.h.
#include "fusebox/pipeline.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "per_breaker_policies.h"

namespace fusebox {
// A keyed pipeline's per-key policies (per_breaker_policies.h).
struct Pipeline::PerKey : internal::PerBreakerPolicies {
  using internal::PerBreakerPolicies::PerBreakerPolicies;
};

Pipeline::Builder& Pipeline::Builder::WithRateLimiter(std::shared_ptr<RateLimiter> limiter) {
  return Set(rate_limiter_, std::move(limiter), "rate_limiter");
}

Pipeline::Builder& Pipeline::Builder::WithBulkhead(std::shared_ptr<Bulkhead> bulkhead) {
  return Set(bulkhead_, std::move(bulkhead), "bulkhead");
}

Pipeline::Builder& Pipeline::Builder::WithCircuitBreaker(std::shared_ptr<CircuitBreaker> breaker) {
  return Set(breaker_, std::move(breaker), "circuit_breaker");
}

Pipeline::Builder& Pipeline::Builder::WithRetry(std::shared_ptr<Retry> retry,
                                                RetryRecording recording) {
  recording_ = recording;
  return Set(retry_, std::move(retry), "retry");
}

Pipeline::Builder& Pipeline::Builder::WithTimeout(std::shared_ptr<Timeout> timeout) {
  return Set(timeout_, std::move(timeout), "timeout");
}

Pipeline::Builder& Pipeline::Builder::WithOutcomeClassifier(
    std::function<OutcomeKind(const Status&)> classifier) {
  classifier_ = std::move(classifier);
  return *this;
}

Pipeline::Builder& Pipeline::Builder::WithRetryAfter(RetryAfter retry_after) {
  retry_after_ = retry_after;
  return *this;
}

Pipeline::Builder& Pipeline::Builder::WithRegistry(std::shared_ptr<Registry> registry,
                                                   std::string config_name) {
  config_name_ = std::move(config_name);
  return Set(registry_, std::move(registry), "registry");
}

Pipeline::Builder& Pipeline::Builder::WithBulkheadPerKey(BulkheadOptions options) {
  bulkhead_per_key_ = options;
  return *this;
}

Pipeline::Builder& Pipeline::Builder::WithRateLimiterPerKey(RateLimiterOptions options) {
  rate_limiter_per_key_ = options;
  return *this;
}

Result<std::unique_ptr<Pipeline>> Pipeline::Builder::Build() {
  if (null_given_) return Status::InvalidArgument(std::string(null_stage_) + " must not be null");
  if (registry_ && breaker_) {
    return Status::InvalidArgument(
        "circuit_breaker and registry are exclusive: a keyed pipeline "
        "takes its breakers from the registry");
  }
  if (bulkhead_per_key_ || rate_limiter_per_key_) {
    if (!registry_)
      return Status::InvalidArgument("bulkhead and rate limiter per key need a registry");
    if (bulkhead_per_key_ && bulkhead_) {
      return Status::InvalidArgument("bulkhead and bulkhead per key are exclusive");
    }
    if (rate_limiter_per_key_ && rate_limiter_) {
      return Status::InvalidArgument("rate_limiter and rate limiter per key are exclusive");
    }
  }
  if (bulkhead_per_key_) {
    if (Status v = bulkhead_per_key_->Validate(); !v.ok()) {
      return Status::InvalidArgument("bulkhead per key: " + std::string(v.message()));
    }
  }
  if (rate_limiter_per_key_) {
    if (Status v = rate_limiter_per_key_->Validate(); !v.ok()) {
      return Status::InvalidArgument("rate limiter per key: " + std::string(v.message()));
    }
  }
  if (recording_ != RetryRecording::kEachAttempt && recording_ != RetryRecording::kFinalResult) {
    return Status::InvalidArgument("retry recording must be kEachAttempt or kFinalResult");
  }
  if (retry_after_ != RetryAfter::kOpensBreaker && retry_after_ != RetryAfter::kDelaysRetry) {
    return Status::InvalidArgument("retry_after must be kOpensBreaker or kDelaysRetry");
  }
  // Every stage measures or waits on time: one clock for all, or their
  // deadlines and durations would not mean the same thing.
  const Clock* clock = nullptr;
  const char* clock_owner = "";
  auto check = [&](const Clock* c, const char* stage) -> Status {
    if (clock == nullptr) {
      clock = c;
      clock_owner = stage;
    } else if (c != clock) {
      return Status::InvalidArgument(std::string(stage) + " uses a different clock than " +
                                     clock_owner);
    }
    return Status();
  };
  Status s;
  if (rate_limiter_ && !(s = check(&rate_limiter_->clock(), "rate_limiter")).ok()) return s;
  if (bulkhead_ && !(s = check(&bulkhead_->clock(), "bulkhead")).ok()) return s;
  if (breaker_ && !(s = check(&breaker_->clock(), "circuit_breaker")).ok()) return s;
  if (registry_ && !(s = check(&registry_->clock(), "registry")).ok()) return s;
  if (retry_ && !(s = check(&retry_->clock(), "retry")).ok()) return s;
  if (timeout_ && !(s = check(&timeout_->clock(), "timeout")).ok()) return s;
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(*this)));
}

Pipeline::Pipeline(Builder builder)
    : rate_limiter_(builder.rate_limiter_.get()),
      bulkhead_(builder.bulkhead_.get()),
      breaker_(builder.breaker_.get()),
      retry_(builder.retry_.get()),
      timeout_(builder.timeout_.get()),
      clock_(breaker_ != nullptr
                 ? &breaker_->clock()
                 : (builder.registry_ ? &builder.registry_->clock()
                                      : (timeout_ != nullptr ? &timeout_->clock() : nullptr))),
      registry_(builder.registry_.get()),
      stages_{rate_limiter_, bulkhead_, breaker_,
              (breaker_ != nullptr && breaker_->precise_call_timing()) ||
                  (timeout_ != nullptr && timeout_->precise_timing())},
      recording_(builder.recording_),
      retry_after_(builder.retry_after_),
      builder_(std::move(builder)) {
  if (builder_.bulkhead_per_key_ || builder_.rate_limiter_per_key_) {
    per_key_ = std::make_unique<PerKey>(builder_.bulkhead_per_key_, builder_.rate_limiter_per_key_,
                                        *clock_);
  }
}

Pipeline::~Pipeline() = default;

Outcome Pipeline::FailureOutcome(const Status& failure, Duration elapsed) const {
  const OutcomeKind kind =
      builder_.classifier_ ? builder_.classifier_(failure) : OutcomeKind::kFailure;
  if (kind == OutcomeKind::kFailure && retry_after_ == RetryAfter::kOpensBreaker) {
    if (const std::optional<TimePoint> hint = failure.retry_at()) {
      const TimePoint now = clock_->Now();
      if (*hint > now) return Outcome::OpenFor(*hint - now, elapsed);
    }
  }
  return Outcome{kind, elapsed};
}

Pipeline::Stages Pipeline::StagesOf(CircuitBreaker& breaker) const {
  return Stages{rate_limiter_, bulkhead_, &breaker,
                stages_.precise || breaker.precise_call_timing()};
}

Result<Pipeline::KeyedStages> Pipeline::StagesFor(Result<std::shared_ptr<CircuitBreaker>> breaker) {
  if (!breaker) return std::move(breaker).error();
  KeyedStages k;
  k.breaker = std::move(*breaker);
  k.stages = StagesOf(*k.breaker);
  if (per_key_ != nullptr) {
    Result<std::pair<Bulkhead*, RateLimiter*>> policies = per_key_->For(k.breaker);
    if (!policies) return std::move(policies).error();
    if (policies->first != nullptr) k.stages.bulkhead = policies->first;
    if (policies->second != nullptr) k.stages.rate_limiter = policies->second;
  }
  return k;
}

Status Pipeline::BreakerVerdict(CircuitBreaker* breaker) {
  if (breaker == nullptr) return Status();
  const State state = breaker->state();
  if (state != State::kOpen && state != State::kForcedOpen) return Status();
  // Ask the breaker itself: it refuses with its retry_at, or, if its wait has
  // just ended, admits (the permit is given back unused and the loop goes on).
  Result<Permit> probe = breaker->TryAcquire();
  if (!probe) return std::move(probe).error();
  return Status();
}

}  // namespace fusebox
