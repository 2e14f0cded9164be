#include "src/guarded_client.h"

namespace fusebox::redis::internal {
namespace {

// Counts the periods the store's breaker spends refusing (fail-open periods).
class DownCounter final : public CircuitBreakerListener {
 public:
  explicit DownCounter(std::atomic<std::int64_t>& n) : n_(n) {}
  unsigned interests() const override { return kTransitionEvents; }
  void OnTransition(const TransitionEvent& e) override {
    if (e.to == State::kOpen && e.from != State::kOpen) n_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::int64_t>& n_;
};

}  // namespace

Result<std::unique_ptr<GuardedClient>> GuardedClient::Create(ConnectionOptions connection,
                                                             int pooled_connections,
                                                             int failure_threshold,
                                                             Duration down_for, Clock& clock) {
  if (Status s = connection.Validate(); !s.ok()) return s;
  if (pooled_connections < 1) {
    return Status::InvalidArgument("connections must be >= 1, got " +
                                   std::to_string(pooled_connections));
  }
  if (failure_threshold < 1) {
    return Status::InvalidArgument("failure_threshold must be >= 1, got " +
                                   std::to_string(failure_threshold));
  }
  if (down_for <= Duration::zero()) return Status::InvalidArgument("down_for must be > 0");
  // failure_threshold failures in a row open it for down_for; then one
  // command decides. The rate rule only fires on 100 failures out of 100.
  CircuitBreakerConfig config{
      .failure_rate_threshold = 100,
      .permitted_number_of_calls_in_half_open_state = 1,
      .sliding_window_size = 100,
      .minimum_number_of_calls = 100,
      .wait_duration_in_open_state = down_for,
      .consecutive_failure_threshold = failure_threshold,
      .half_open_policy = HalfOpenPolicy::kAnyFailureReopens,
  };
  Result<std::unique_ptr<CircuitBreaker>> gate =
      CircuitBreaker::Create("redis " + connection.Endpoint(), std::move(config), clock);
  if (!gate) return gate.error();
  return std::unique_ptr<GuardedClient>(
      new GuardedClient(std::move(connection), std::move(*gate), pooled_connections));
}

GuardedClient::GuardedClient(ConnectionOptions connection, std::unique_ptr<CircuitBreaker> gate,
                             int pooled_connections)
    : connection_(std::move(connection)), gate_(std::move(gate)) {
  gate_->AddListener(std::make_shared<DownCounter>(counters_.down_periods));
  for (int i = 0; i < pooled_connections; ++i) pool_.push_back(std::make_unique<Slot>());
}

Status GuardedClient::Ensure(std::unique_ptr<Connection>& conn) {
  if (conn == nullptr) {
    Result<std::unique_ptr<Connection>> c = Connection::Connect(connection_);
    if (!c) return c.error();
    conn = std::move(*c);
    return Status();
  }
  if (conn->broken()) return conn->Reconnect();
  return Status();
}

void GuardedClient::RecordFailure() {
  counters_.errors.fetch_add(1, std::memory_order_relaxed);
  if (Result<Permit> permit = gate_->TryAcquire()) permit->Failure(Duration::zero());
}

}  // namespace fusebox::redis::internal
