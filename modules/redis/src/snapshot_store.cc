#include "fusebox/redis/snapshot_store.h"

#include <string>
#include <utility>
#include <vector>

#include "fusebox/redis/connection.h"
#include "src/guarded_client.h"
#include "src/sentinel.h"

namespace fusebox::redis {
namespace {

// How often the Sentinel watch reads what its subscription received.
constexpr Duration kWatchPoll = std::chrono::milliseconds(100);

std::string Millis(Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

Status Unexpected(std::string_view op, const Reply& r) {
  return Status::Internal("redis snapshot store: unexpected reply to " + std::string(op) + ": " +
                          r.ToString());
}

}  // namespace

Result<std::unique_ptr<RedisSnapshotStore>> RedisSnapshotStore::Create(
    SnapshotStoreOptions options) {
  auto bad = [](const std::string& what) {
    return Status::InvalidArgument("SnapshotStoreOptions." + what);
  };
  if (options.max_age < std::chrono::milliseconds(1)) {
    return bad("max_age must be at least 1 ms");
  }
  if (options.max_value_bytes < 1) return bad("max_value_bytes must be >= 1");
  Clock& clock = options.clock != nullptr ? *options.clock : SystemClock();
  Result<std::unique_ptr<internal::GuardedClient>> client = internal::GuardedClient::Create(
      options.connection, options.connections, options.failure_threshold, options.down_for, clock,
      {.max_waiters = options.max_waiters, .max_wait = options.max_wait});
  if (!client) {
    return Status::InvalidArgument("SnapshotStoreOptions: " +
                                   std::string(client.error().message()));
  }
  return std::unique_ptr<RedisSnapshotStore>(
      new RedisSnapshotStore(std::move(options), std::move(*client)));
}

RedisSnapshotStore::RedisSnapshotStore(SnapshotStoreOptions options,
                                       std::unique_ptr<internal::GuardedClient> client)
    : options_(std::move(options)), client_(std::move(client)) {
  if (options_.connection.sentinels.empty()) return;
  watch_ = std::make_unique<internal::SentinelWatch>(options_.connection);
  watcher_ = std::thread([this] { WatchLoop(); });
}

RedisSnapshotStore::~RedisSnapshotStore() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

void RedisSnapshotStore::WatchLoop() {
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stop_) {
    lock.unlock();
    // Real time: the watch paces its own (re)subscribes with it.
    std::optional<std::string> primary = watch_->Poll(SystemClock().Now());
    if (primary && client_->FollowPrimary(std::move(*primary))) {
      failovers_.fetch_add(1, std::memory_order_relaxed);
    }
    lock.lock();
    stop_cv_.wait_for(lock, kWatchPoll, [this] { return stop_; });
  }
}

std::string RedisSnapshotStore::KeyOf(std::string_view key) const {
  std::string k = options_.prefix;
  k.append(key);
  return k;
}

Result<std::optional<Snapshot>> RedisSnapshotStore::Get(std::string_view key) {
  return GetWithin(key, internal::GuardedClient::kNoBudget);
}

Status RedisSnapshotStore::Put(std::string_view key, std::string value) {
  return PutWithin(key, std::move(value), internal::GuardedClient::kNoBudget);
}

Result<std::optional<Snapshot>> RedisSnapshotStore::GetWithin(std::string_view key,
                                                              Duration budget) {
  const std::string k = KeyOf(key);
  return client_->Run<std::optional<Snapshot>>(
      [&](Connection& c) -> Result<std::optional<Snapshot>> {
        Result<std::vector<Reply>> replies = c.Pipeline({{"GET", k}, {"PTTL", k}});
        if (!replies) return replies.error();
        const Reply& value = (*replies)[0];
        const Reply& pttl = (*replies)[1];
        if (value.is_nil()) return std::optional<Snapshot>();
        if (!value.is_string()) return Unexpected("GET", value);
        if (!pttl.is_integer()) return Unexpected("PTTL", pttl);
        // Written with PX max_age: what has run off the TTL is the age. A key
        // without TTL (written by something else) or gone between the two
        // commands reads as max_age old.
        const Duration left =
            pttl.integer >= 0 ? std::chrono::milliseconds(pttl.integer) : Duration::zero();
        const Duration age = left < options_.max_age ? options_.max_age - left : Duration::zero();
        return std::optional<Snapshot>(Snapshot{value.str, age});
      },
      budget);
}

Status RedisSnapshotStore::PutWithin(std::string_view key, std::string value, Duration budget) {
  if (value.size() > options_.max_value_bytes) {
    return Status::InvalidArgument(
        "redis snapshot store: value of " + std::to_string(value.size()) +
        " bytes exceeds max_value_bytes " + std::to_string(options_.max_value_bytes));
  }
  const std::string k = KeyOf(key);
  const std::string px = Millis(options_.max_age);
  Result<bool> r = client_->Run<bool>(
      [&](Connection& c) -> Result<bool> {
        Result<Reply> reply = c.Command({"SET", k, value, "PX", px});
        if (!reply) return reply.error();
        if (!reply->is_status()) return Unexpected("SET", *reply);
        return true;
      },
      budget);
  return r.has_value() ? Status() : r.error();
}

Status RedisSnapshotStore::Erase(std::string_view key) {
  const std::string k = KeyOf(key);
  Result<bool> r = client_->Run<bool>([&](Connection& c) -> Result<bool> {
    Result<Reply> reply = c.Command({"DEL", k});
    if (!reply) return reply.error();
    if (!reply->is_integer()) return Unexpected("DEL", *reply);
    return true;
  });
  return r.has_value() ? Status() : r.error();
}

RedisSnapshotStore::Stats RedisSnapshotStore::stats() const {
  const internal::GuardedClient::Counters& c = client_->counters();
  auto get = [](const std::atomic<std::int64_t>& n) { return n.load(std::memory_order_relaxed); };
  return Stats{.commands = get(c.commands),
               .errors = get(c.errors),
               .refused = get(c.refused),
               .timeouts = get(c.timeouts),
               .pool_waits = get(c.pool_waits),
               .pool_wait_timeouts = get(c.pool_wait_timeouts),
               .pool_queue_full = get(c.pool_queue_full),
               .pool_in_use = get(c.pool_in_use),
               .pool_waiting = get(c.pool_waiting),
               .pool_size = options_.connections,
               .failovers = failovers_.load(std::memory_order_relaxed)};
}

}  // namespace fusebox::redis
