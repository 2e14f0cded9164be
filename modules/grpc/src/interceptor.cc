#include "fusebox/grpc/interceptor.h"

#include <grpcpp/support/client_interceptor.h>
#include <grpcpp/support/interceptor.h>
#include <grpcpp/support/status.h>
#include <grpcpp/support/string_ref.h>

#include <cstddef>
#include <optional>
#include <string>
#include <utility>

#include "refusal.h"

namespace fusebox::grpc {
namespace {

using Hook = ::grpc::experimental::InterceptionHookPoints;

// What a factory and the interceptors it made share: the interceptor of a
// call may outlive the channel (and its factory) with the ClientContext.
struct Shared {
  std::shared_ptr<Registry> registry;
  InterceptorOptions options;
};

// One call's interceptor, made by the factory for a unary call. gRPC runs a
// call's batches one after another (a later batch's hooks happen after an
// earlier batch's), so its members need no lock; they live as long as the
// call's ClientContext, which owns the interceptor.
class BreakerInterceptor final : public ::grpc::experimental::Interceptor {
 public:
  // `breaker` null: `refusal` is the registry's, the call is failed locally.
  BreakerInterceptor(std::shared_ptr<const Shared> shared, std::shared_ptr<CircuitBreaker> breaker,
                     std::string key, std::optional<internal::Refusal> refusal)
      : shared_(std::move(shared)),
        breaker_(std::move(breaker)),
        key_(std::move(key)),
        refusal_(std::move(refusal)) {}

  void Intercept(::grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(Hook::PRE_SEND_CANCEL)) {
      methods->Proceed();  // a no-op for this batch, which holds nothing else
      return;
    }
    bool hijack = false;
    if (methods->QueryInterceptionHookPoint(Hook::PRE_SEND_INITIAL_METADATA)) {
      hijack = Start();
    }
    // Hijacked: gRPC asks this interceptor for what the server would have
    // sent. No initial metadata, no message, the refusal as the status.
    if (methods->QueryInterceptionHookPoint(Hook::PRE_RECV_MESSAGE)) {
      methods->FailHijackedRecvMessage();
    }
    if (methods->QueryInterceptionHookPoint(Hook::PRE_RECV_STATUS)) {
      AnswerStatus(methods);
    }
    if (methods->QueryInterceptionHookPoint(Hook::POST_RECV_STATUS)) {
      Finish(methods);
    }
    if (hijack) {
      methods->Hijack();  // runs Intercept() again with the PRE_RECV hooks
    } else {
      methods->Proceed();
    }
  }

 private:
  // The call is about to be sent: take a permit, or prepare the refusal and
  // say to hijack.
  bool Start() {
    if (breaker_ == nullptr) return true;  // the registry refused the key
    Clock& clock = breaker_->clock();
    Result<Permit> permit = breaker_->TryAcquire();
    if (!permit) {
      refusal_ = internal::MakeRefusal(permit.error(), key_, clock.Now());
      return true;
    }
    permit_.emplace(std::move(*permit));
    start_ = clock.Now();
    return false;
  }

  void AnswerStatus(::grpc::experimental::InterceptorBatchMethods* methods) {
    if (!refusal_) return;  // not hijacked by this interceptor
    if (::grpc::Status* status = methods->GetRecvStatus(); status != nullptr) {
      *status = ::grpc::Status(static_cast<::grpc::StatusCode>(refusal_->code), refusal_->message);
    }
    if (refusal_->pushback) {
      auto* trailers = methods->GetRecvTrailingMetadata();
      if (trailers != nullptr) {
        // The map holds references: the text lives in this interceptor, as
        // long as the ClientContext that reads it.
        pushback_text_ = std::to_string(refusal_->pushback->count());
        trailers->emplace(::grpc::string_ref(kRetryPushbackKey.data(), kRetryPushbackKey.size()),
                          ::grpc::string_ref(pushback_text_));
      }
    }
  }

  // The call ended (or a refusal came back up): record what the server said.
  void Finish(::grpc::experimental::InterceptorBatchMethods* methods) {
    if (!permit_ || !permit_->pending()) return;
    const ::grpc::Status* status = methods->GetRecvStatus();
    const auto* trailers = methods->GetRecvTrailingMetadata();
    if (status == nullptr) return;  // the permit is given back
    std::optional<std::string_view> pushback;
    if (trailers != nullptr) {
      const auto it =
          trailers->find(::grpc::string_ref(kRetryPushbackKey.data(), kRetryPushbackKey.size()));
      if (it != trailers->end()) pushback = std::string_view(it->second.data(), it->second.size());
    }
    const Classification c =
        Classify(static_cast<int>(status->error_code()), pushback, shared_->options.call.rules);
    const Duration elapsed = breaker_->clock().Now() - start_;
    permit_->Record(BreakerOutcome(c, elapsed, shared_->options.call.rate_limit_opens_breaker));
  }

  std::shared_ptr<const Shared> shared_;
  // Declared before permit_: the permit points into the breaker.
  std::shared_ptr<CircuitBreaker> breaker_;
  std::string key_;
  std::optional<internal::Refusal> refusal_;
  std::optional<Permit> permit_;
  TimePoint start_{};
  std::string pushback_text_;
};

class BreakerInterceptorFactory final
    : public ::grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BreakerInterceptorFactory(std::shared_ptr<const Shared> shared)
      : shared_(std::move(shared)) {}

  ::grpc::experimental::Interceptor* CreateClientInterceptor(
      ::grpc::experimental::ClientRpcInfo* info) override {
    // Streams pass through unguarded (fusebox/grpc/interceptor.h).
    if (info->type() != ::grpc::experimental::ClientRpcInfo::Type::UNARY) return nullptr;
    std::string_view method = info->method() == nullptr ? "" : info->method();
    if (!method.empty() && method.front() == '/') method.remove_prefix(1);
    const InterceptorOptions& options = shared_->options;
    std::string key = options.key ? options.key(method) : std::string(method);
    Registry& registry = *shared_->registry;
    Result<std::shared_ptr<CircuitBreaker>> breaker = registry.Get(key, options.call.config_name);
    if (!breaker) {
      internal::Refusal refusal =
          internal::MakeRefusal(breaker.error(), key, registry.clock().Now());
      return new BreakerInterceptor(shared_, nullptr, std::move(key), std::move(refusal));
    }
    return new BreakerInterceptor(shared_, std::move(*breaker), std::move(key), std::nullopt);
  }

 private:
  std::shared_ptr<const Shared> shared_;
};

}  // namespace

std::unique_ptr<::grpc::experimental::ClientInterceptorFactoryInterface> MakeInterceptorFactory(
    std::shared_ptr<Registry> registry, InterceptorOptions options) {
  return std::make_unique<BreakerInterceptorFactory>(
      std::make_shared<const Shared>(Shared{std::move(registry), std::move(options)}));
}

}  // namespace fusebox::grpc
