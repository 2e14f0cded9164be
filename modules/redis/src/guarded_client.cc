#include "src/guarded_client.h"

#include <algorithm>

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
                                                             Duration down_for, Clock& clock,
                                                             PoolOptions pool) {
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
  if (pool.max_waiters < 0) {
    return Status::InvalidArgument("max_waiters must be >= 0, got " +
                                   std::to_string(pool.max_waiters));
  }
  if (pool.max_wait <= Duration::zero()) return Status::InvalidArgument("max_wait must be > 0");
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
      new GuardedClient(std::move(connection), std::move(*gate), pooled_connections, pool));
}

GuardedClient::GuardedClient(ConnectionOptions connection, std::unique_ptr<CircuitBreaker> gate,
                             int pooled_connections, PoolOptions pool)
    : connection_(std::move(connection)), gate_(std::move(gate)), pool_options_(pool) {
  gate_->AddListener(std::make_shared<DownCounter>(counters_.down_periods));
  for (int i = 0; i < pooled_connections; ++i) {
    pool_.push_back(std::make_unique<Slot>());
    free_.push_back(pool_.back().get());
  }
}

Status GuardedClient::Ensure(std::unique_ptr<Connection>& conn, Duration budget) {
  if (conn != nullptr && !conn->broken()) {
    if (OnPrimary(*conn)) return Status();
    conn.reset();  // Made before the failover the sentinels announced.
  }
  Status s;
  if (budget >= connection_.connect_timeout && conn != nullptr) {
    s = conn->Reconnect();
  } else {
    // A new connection; when the budget is shorter, it bounds the connect
    // (and handshake).
    ConnectionOptions bounded = connection_;
    bounded.connect_timeout = std::min(budget, connection_.connect_timeout);
    Result<std::unique_ptr<Connection>> c = Connection::Connect(std::move(bounded));
    if (!c) return c.error();
    conn = std::move(*c);
  }
  if (!s.ok() || OnPrimary(*conn)) return s;
  const std::string where = conn->options().Endpoint();
  conn.reset();
  return Status::Unavailable("redis " + where +
                             ": a sentinel named it, but the primary announced is elsewhere "
                             "(the sentinels have not all seen the failover yet)");
}

bool GuardedClient::FollowPrimary(std::string endpoint) {
  std::lock_guard<std::mutex> lock(primary_mu_);
  if (primary_ == endpoint) return false;
  primary_ = std::move(endpoint);
  return true;
}

bool GuardedClient::OnPrimary(const Connection& conn) {
  if (connection_.sentinels.empty()) return true;
  const std::string endpoint = conn.options().Endpoint();
  std::lock_guard<std::mutex> lock(primary_mu_);
  return primary_.empty() || primary_ == endpoint;
}

Result<GuardedClient::Slot*> GuardedClient::Acquire(Deadline deadline) {
  std::unique_lock<std::mutex> lock(pool_mu_);
  if (free_.empty()) {
    if (waiting_ >= pool_options_.max_waiters) {
      counters_.pool_queue_full.fetch_add(1, std::memory_order_relaxed);
      return Status::Unavailable("redis " + connection_.Endpoint() + ": every connection busy (" +
                                 std::to_string(pool_.size()) + ") and " +
                                 std::to_string(waiting_) + " callers waiting");
    }
    counters_.pool_waits.fetch_add(1, std::memory_order_relaxed);
    ++waiting_;
    counters_.pool_waiting.fetch_add(1, std::memory_order_relaxed);
    const Deadline own = DeadlineAfter(pool_options_.max_wait);
    const bool got =
        pool_cv_.wait_until(lock, std::min(deadline, own), [this] { return !free_.empty(); });
    --waiting_;
    counters_.pool_waiting.fetch_sub(1, std::memory_order_relaxed);
    if (!got) {
      counters_.pool_wait_timeouts.fetch_add(1, std::memory_order_relaxed);
      return Status(StatusCode::kTimeout, "redis " + connection_.Endpoint() +
                                              ": no connection free in time (" +
                                              std::to_string(pool_.size()) + " busy)");
    }
  }
  Slot* slot = free_.back();
  free_.pop_back();
  counters_.pool_in_use.fetch_add(1, std::memory_order_relaxed);
  return slot;
}

void GuardedClient::Release(Slot* slot) {
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    free_.push_back(slot);
  }
  counters_.pool_in_use.fetch_sub(1, std::memory_order_relaxed);
  pool_cv_.notify_one();
}

Status GuardedClient::OutOfTime(const std::string& detail) {
  counters_.timeouts.fetch_add(1, std::memory_order_relaxed);
  return Status(StatusCode::kTimeout,
                "redis " + connection_.Endpoint() + ": out of the caller's time: " + detail);
}

void GuardedClient::RecordFailure() {
  counters_.errors.fetch_add(1, std::memory_order_relaxed);
  if (Result<Permit> permit = gate_->TryAcquire()) permit->Failure(Duration::zero());
}

}  // namespace fusebox::redis::internal
