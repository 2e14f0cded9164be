// fusebox/redis/shared_state.h: the fleet's circuit state in Redis.
//
// RedisSharedState implements fusebox::SharedState (fusebox/shared_state.h)
// on one Redis primary, so that every instance of a service opens a circuit
// when one of them trips it and exactly one of them probes afterwards:
//
//   auto fleet = fusebox::redis::RedisSharedState::Create(
//       {.connection = *fusebox::redis::ParseRedisUrl("redis://:pw@redis:6379/0")});
//   if (!fleet) return fleet.error();
//   fusebox::CircuitBreakerConfig config{.shared_state = *fleet};
//
// What it costs: nothing per call. A CLOSED or OPEN circuit is decided from
// the breaker's own memory; Redis hears of trips, probe leases and closes (one
// script each, sent by a background thread except AcquireProbe()), and pushes
// changes back on a dedicated subscriber connection. A breaker reads Redis
// once when it is created and once after each reconnect of the subscriber.
// The subscriber PINGs after `heartbeat` of silence, so a connection that
// died without a word is noticed within heartbeat + command timeout: that is
// the bound on how late a push can be (staleness S).
//
// What happens when Redis fails: every failure is "no news" and the breakers
// go on locally (fail-open). The store is guarded by its own CircuitBreaker:
// after `failure_threshold` failed commands in a row it sends nothing for
// `down_for`, then lets one command try; so a dead or paused Redis costs no
// latency per call and no reconnect storm. When the subscriber is back, every
// breaker re-reads its circuit and re-sends an OPEN still running (extend-only,
// so a replay never shortens a longer OPEN).
//
// A trip acknowledged by the primary alone is lost if it dies before its
// replica has it; with connection.wait_replicas the background thread asks
// (WAIT) and counts the answer, never the caller (docs/distributed.md).
//
// Nothing written is a timestamp of this process: only PX durations, timed by
// the Redis server's clock (docs/distributed.md).
//
// Thread-safe.
#ifndef FUSEBOX_REDIS_SHARED_STATE_H_
#define FUSEBOX_REDIS_SHARED_STATE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/redis/circuit_scripts.h"
#include "fusebox/redis/connection.h"
#include "fusebox/redis/options.h"
#include "fusebox/result.h"
#include "fusebox/shared_state.h"

namespace fusebox::redis {

namespace internal {
class GuardedClient;
class SentinelWatch;
}  // namespace internal

// What the store tells its owner about its link to Redis, for a log: the
// fleet's state is invisible otherwise when Redis fails (every failure is
// "no news" to the breakers).
struct SharedStateEvent {
  enum class Kind : std::uint8_t {
    // The subscriber is connected and the store's breaker closed: the
    // fleet's state is shared (again, when a kLost came before).
    kConnected,
    // It is not any more, or was never reached: the breakers fail open.
    kLost,
    // Redis refused the credentials (AUTH failed, or NOAUTH: a password is
    // required). Repeated at each reconnect attempt while it lasts.
    kAuthFailed,
    // Every breaker was asked to re-read its circuit (pushes may have been
    // missed) and to re-send an OPEN still running.
    kResync,
  };
  Kind kind = Kind::kConnected;
  // The error (a Status message: names the endpoint, never the password),
  // or what caused a resync.
  std::string detail{};
  // kConnected: whether a kLost came before (a recovery).
  bool recovered = false;
};

// "redis_connected", "redis_lost", "redis_auth_failed", "redis_resync".
std::string_view SharedStateEventKindName(SharedStateEvent::Kind kind) noexcept;

struct SharedStateOptions {
  // Where Redis is; see ParseRedisUrl(). Its command_timeout bounds every
  // command, hence how long AcquireProbe() and Read() may block a caller.
  // Its wait_replicas (?wait_replicas=N) makes the background thread WAIT
  // for N replicas after each trip and override, counted in stats().
  ConnectionOptions connection{};
  // Key prefix (Keyspace). Default: "fusebox:v1:".
  std::string prefix{Keyspace::kDefaultPrefix};
  // A recovery marker outlives the OPEN time by max(OPEN time, min_grace):
  // how long the fleet waits for a probe before an unprobed circuit counts
  // as closed. Default: 60 s.
  Duration min_grace = std::chrono::seconds(60);
  // The subscriber PINGs after this long without a message (> 0).
  // Default: 1 s.
  Duration heartbeat = std::chrono::seconds(1);
  // The store's own breaker: this many failed commands in a row (>= 1) stop
  // all traffic to Redis for down_for (> 0). Defaults: 3, 5 s.
  int failure_threshold = 3;
  Duration down_for = std::chrono::seconds(5);
  // Connections for the calls that block a caller (Read, AcquireProbe), made
  // when first needed (>= 1). A call that finds all busy fails open at once
  // rather than queue behind a slow Redis. Default: 4.
  int sync_connections = 4;
  // Trips, closes and releases waiting for the background thread (>= 1);
  // beyond it the oldest are dropped (counted; a resync replays OPENs).
  // Default: 10,000.
  std::size_t max_queue = 10000;
  // Times the store's breaker and the pauses between reconnect attempts.
  // Default: SystemClock(). Must outlive the store.
  Clock* clock = nullptr;
  // Receives the store's events (SharedStateEvent), on the subscriber's
  // thread. Must not block nor call back into the store. Default: none.
  std::function<void(const SharedStateEvent&)> on_event = nullptr;
};

// Counters since Create().
struct SharedStateStats {
  // Round trips for reads, leases, trips, closes and releases (a connect's
  // handshake not counted), and those that failed (I/O error, timeout, error
  // reply, connect failure).
  std::int64_t commands = 0;
  // The subscriber's heartbeat PINGs.
  std::int64_t pings = 0;
  std::int64_t errors = 0;
  // Calls answered "unavailable" without contacting Redis (store breaker
  // open, or every sync connection busy).
  std::int64_t refused = 0;
  // Times the store's breaker opened (fail-open periods).
  std::int64_t down_periods = 0;
  // Subscriber connections made, the first one included.
  std::int64_t subscribes = 0;
  // Sentinel mode: primaries followed, the first one included: times a
  // sentinel named a primary other than the last one (on +switch-master, or
  // on watching again after a break).
  std::int64_t failovers = 0;
  // Change events received, and those naming a circuit nobody here uses.
  std::int64_t events = 0;
  // AcquireProbe() answers.
  std::int64_t leases_granted = 0;
  std::int64_t leases_busy = 0;
  // Trips, closes, releases dropped (queue full, or Redis unavailable).
  std::int64_t dropped = 0;
  // Trips, closes, releases and overrides sent a second time, on a new
  // connection, because the server had dropped the one they were sent on
  // (a restart, CLIENT KILL, its idle `timeout`, a failover) and the first
  // try failed before an answer. Never after a timeout: the server may be
  // running the first one.
  std::int64_t resent = 0;
  // Close() answers that found the lease lost (expired or fenced).
  std::int64_t closes_lost = 0;
  // Trips and overrides whose time ran out while they waited in the queue
  // (behind a WAIT, a reconnect): not sent, for they would end later than
  // the breaker that queued them meant.
  std::int64_t expired_in_queue = 0;
  // Resyncs of every breaker (subscriber reconnected, or trips replayed).
  std::int64_t resyncs = 0;
  // Subscriber connects refused for their credentials.
  std::int64_t auth_failures = 0;
  // With connection.wait_replicas > 0: trips and overrides that WAIT said
  // had reached that many replicas, and those it did not within
  // wait_timeout (or that could not be asked: the WAIT failed or was
  // refused). Both stay 0 without it.
  std::int64_t replica_acks = 0;
  std::int64_t replica_ack_shortfalls = 0;
};

// One circuit as Redis holds it (RedisSharedState::ListFleet()).
struct FleetCircuit {
  // The circuit id (a breaker's name).
  std::string circuit;
  // Its state, the time left of it, and the override in force.
  ReadResult view;
};

struct FleetListing {
  // By circuit id.
  std::vector<FleetCircuit> circuits;
  // True when the cap or the scan's bound was reached before Redis had been
  // scanned whole: more circuits may be OPEN or overridden.
  bool truncated = false;
};

// One instance's heartbeat as Redis holds it (RedisSharedState::
// ListInstances()). Written by other processes: untrusted.
struct InstanceFigures {
  // The instance id it published under (at most kMaxInstanceIdBytes).
  std::string id;
  // What it published (PublishInstance's `json`, at most
  // kMaxInstanceJsonBytes): parse it as hostile input.
  std::string json;
  // How long ago, by the Redis server's clock (no skew between instances).
  Duration age = Duration::zero();
};

struct InstanceListing {
  // By id.
  std::vector<InstanceFigures> instances;
  // Entries older than the listing's max_age (or malformed) deleted by it.
  std::int64_t dropped = 0;
  // True when a cap was reached: more instances may be live.
  bool truncated = false;
};

class RedisSharedState final : public SharedState {
 public:
  // Validates the options and starts the background threads. Does not need
  // Redis to be up: until it is, every call fails open.
  static Result<std::shared_ptr<RedisSharedState>> Create(SharedStateOptions options);

  ~RedisSharedState() override;
  RedisSharedState(const RedisSharedState&) = delete;
  RedisSharedState& operator=(const RedisSharedState&) = delete;

  SubscriptionId Subscribe(std::string_view circuit,
                           std::shared_ptr<SharedStateListener> listener) override;
  void Unsubscribe(SubscriptionId id) override;
  Result<SharedCircuitView> Read(std::string_view circuit) override;
  void Trip(std::string_view circuit, Duration open_for, std::string_view reason) override;
  ProbeLease AcquireProbe(std::string_view circuit, Duration lease_for) override;
  void Close(std::string_view circuit, std::string_view token) override;
  void Release(std::string_view circuit, std::string_view token) override;
  void PublishOverride(std::string_view circuit, const SharedOverride& setting) override;
  SubscriptionId WatchOverrides(std::shared_ptr<SharedOverrideWatcher> watcher) override;

  // True while the subscriber is connected and the store's breaker is closed:
  // the fleet's state is being shared (a gateway's readiness).
  bool healthy() const;
  SharedStateStats stats() const;
  SharedStateHealth health() const override;
  // Waits until the background thread has sent every trip, close and release
  // queued so far (or dropped them). For tests and orderly shutdown.
  void Flush();
  // Every circuit Redis knows to be OPEN or recovering (a trip key) or
  // under an override, whichever instance made it so: SCAN ... COUNT 512 over
  // this store's prefix, then one read per circuit found, at most
  // `max_circuits` (<= kMaxFleetCircuits) circuits and kMaxFleetScanSteps
  // SCAN calls, through the store's breaker on a pooled connection. Each
  // command is bounded by the command timeout; the walk ends at `budget`,
  // answering what it read by then (truncated). kUnavailable or kTimeout when
  // Redis cannot answer.
  static constexpr std::size_t kMaxFleetCircuits = 1000;
  static constexpr int kMaxFleetScanSteps = 200;
  Result<FleetListing> ListFleet(std::size_t max_circuits, Duration budget);
  // Instance heartbeats (src/fleet_instances.cc): ONE hash per prefix,
  // "<prefix>{instances}" (one key, hence one Redis Cluster slot; never a
  // SCAN of the keyspace), field = instance id, value =
  // {"at_ms":<Redis server time>,"figures":<json>}.
  static constexpr std::size_t kMaxInstanceIdBytes = 128;
  static constexpr std::size_t kMaxInstanceJsonBytes = 1024;
  // Entries one listing reads at most (HSCAN), and answers at most.
  static constexpr std::size_t kMaxInstancesScanned = 2000;
  static constexpr std::size_t kMaxInstances = 500;
  // Writes `id`'s heartbeat, stamped with the Redis server's time, and makes
  // the whole hash expire `ttl` after the last heartbeat of any instance.
  // kInvalidArgument for an empty or longer id (or one with control bytes),
  // a `json` that is not an object of at most kMaxInstanceJsonBytes, or a
  // ttl < 1 ms; kUnavailable or kTimeout when Redis cannot answer.
  Status PublishInstance(std::string_view id, std::string_view json, Duration ttl, Duration budget);
  // The heartbeats at most `max_age` old (by the server's clock), at most
  // `max_instances` (<= kMaxInstances) of them, by id; older or malformed
  // entries met on the way are deleted (HDEL), within one script that reads
  // at most kMaxInstancesScanned entries.
  Result<InstanceListing> ListInstances(Duration max_age, std::size_t max_instances,
                                        Duration budget);
  // The store's own breaker (its state, metrics, listeners).
  CircuitBreaker& store_breaker();

 private:
  struct Op {
    enum class Kind : std::uint8_t { kTrip, kClose, kRelease, kOverride, kRefresh };
    Kind kind = Kind::kTrip;
    std::string circuit;
    Duration open_for = Duration::zero();
    std::string reason;
    std::string token;
    SharedOverride override_{};
    // kRefresh: who wants the view.
    std::weak_ptr<SharedStateListener> listener{};
    // On clock_, set by Enqueue(): a trip's open_for and an override's
    // expiry count from here, not from when the worker sends them.
    TimePoint queued_at{};
  };
  using Listeners = std::vector<std::shared_ptr<SharedStateListener>>;

  RedisSharedState(SharedStateOptions options, Keyspace keyspace,
                   std::unique_ptr<internal::GuardedClient> client);

  void Enqueue(Op op);
  // WorkerLoop() only.
  bool LeftAfterQueue(Op& op) const;
  bool Send(const Op& op);
  // client_->RunOn() on worker_conn_, run once more on a new connection when
  // the server dropped one that had worked (WorkerLoop() only).
  template <typename T, typename F>
  Result<T> RunOnWorker(F&& fn);
  void WorkerLoop();
  void SubscriberLoop();
  Status SubscriberConnect();
  // Tells options_.on_event when healthy() changed since it was last told
  // (subscriber thread only).
  void ReportHealth();
  void Emit(SharedStateEvent::Kind kind, std::string detail, bool recovered = false);
  // The subscriber's PING after a silence (through the store's breaker while
  // it is not closed, so that its answer can close it). Not ok: no answer.
  Status Heartbeat();
  void Deliver(const PubSubMessage& message);
  void ResyncAll(std::string_view why);
  // Worker thread only, with connection.wait_replicas > 0: one WAIT on each
  // node that the trips and overrides sent since the last (unacked_) were
  // written to, counted per op; nothing when none was sent.
  void AwaitReplicas();
  void OweAck(std::string_view circuit);
  std::string WaitForReplicas(std::string_view key);
  // Sentinel mode: reads the sentinel's announcements and moves to the
  // primary named (subscriber thread only).
  void FollowSentinels();
  // Pauses the calling background thread for about `d`, or until Stop.
  void Pause(Duration d);
  Listeners ListenersOf(std::string_view circuit);

  const SharedStateOptions options_;
  Clock& clock_;
  const CircuitScripts scripts_;
  // Redis behind the store's breaker, and the pool for Read/AcquireProbe.
  const std::unique_ptr<internal::GuardedClient> client_;

  std::mutex listeners_mu_;
  SubscriptionId next_id_ = 1;
  std::map<SubscriptionId, std::pair<std::string, std::shared_ptr<SharedStateListener>>> by_id_;
  std::multimap<std::string, SubscriptionId, std::less<>> by_circuit_;
  std::map<SubscriptionId, std::shared_ptr<SharedOverrideWatcher>> watchers_;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::condition_variable flushed_cv_;
  std::deque<Op> queue_;
  std::uint64_t enqueued_ = 0;
  std::uint64_t done_ = 0;
  bool stop_ = false;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<Connection> worker_conn_;  // WorkerLoop() only.

  std::unique_ptr<Connection> sub_conn_;  // SubscriberLoop() only.
  // Sentinel mode only, else null; SubscriberLoop() only.
  std::unique_ptr<internal::SentinelWatch> sentinel_watch_;
  std::atomic<bool> subscribed_{false};
  // Set when a trip could not be sent: the subscriber resyncs everyone once
  // Redis answers again, so that OPENs are replayed.
  std::atomic<bool> resync_wanted_{false};

  struct Counters {
    std::atomic<std::int64_t> pings{0}, subscribes{0}, events{0}, leases_granted{0}, leases_busy{0},
        dropped{0}, closes_lost{0}, expired_in_queue{0}, resyncs{0}, auth_failures{0}, failovers{0},
        replica_acks{0}, replica_ack_shortfalls{0}, resent{0};
  };
  // WorkerLoop() only: a key of each trip and override written since the
  // last AwaitReplicas() (where its WAIT goes); when AwaitReplicas() last
  // warned, and the shortfalls since (said in the next warning).
  std::vector<std::string> unacked_;
  TimePoint ack_warned_at_{};
  std::int64_t ack_shortfalls_unsaid_ = 0;
  // When the subscriber last proved that pushes arrive (a subscribe, a
  // message, a heartbeat answered), on clock_: health().staleness.
  std::atomic<Duration::rep> last_heard_ns_{0};
  // SubscriberLoop() only: what ReportHealth() last told (nothing yet: -1),
  // and the subscriber's last error, for a kLost.
  int reported_healthy_ = -1;
  std::string last_error_;
  mutable Counters counters_;

  std::thread worker_;
  std::thread subscriber_;
};

}  // namespace fusebox::redis

#endif  // FUSEBOX_REDIS_SHARED_STATE_H_
