// RedisSharedState: three kinds of connection, each with one job.
//
//   - sync_ (a small pool): Read() and AcquireProbe(), on the caller's thread,
//     because the caller needs the answer. One command each, bounded by the
//     command timeout; a caller that finds every connection busy fails open
//     instead of queueing behind a slow Redis.
//   - worker_conn_: Trip(), Close(), Release(), sent in order by one
//     background thread, so that callers never wait for them; with
//     wait_replicas, each trip and override is followed by a WAIT there.
//   - sub_conn_: SUBSCRIBE to the events channel, read by another background
//     thread that pushes each change to the breakers of that circuit, PINGs
//     after a silence, and after every (re)subscribe asks every breaker to
//     resync (re-read, replay its OPEN).
//   - In Sentinel mode, sentinel_watch_: the same thread listens for
//     +switch-master on a sentinel; a failover drops sub_conn_, so that the
//     resubscribe on the new primary (and its resync) happens at once, and
//     tells the client, which remakes the other connections before their
//     next command.
//
// Every command passes the store's own CircuitBreaker first (GuardedClient).
#include "fusebox/redis/shared_state.h"

#include <algorithm>
#include <utility>

#include "src/guarded_client.h"
#include "src/sentinel.h"

namespace fusebox::redis {
namespace {

// How long the subscriber waits for a message at a time: bounds how long a
// shutdown waits for it; the heartbeat is counted over several waits.
constexpr Duration kSubscriberPoll = std::chrono::milliseconds(50);
constexpr Duration kFirstBackoff = std::chrono::milliseconds(50);
// At most one "redis_replica_ack_short" warning this often: a replica down
// for an hour must not write one line per trip.
constexpr Duration kAckWarnEvery = std::chrono::seconds(10);
// At most this many trips and overrides are sent before their WAIT, however
// long the queue stays full.
constexpr std::size_t kMaxUnacked = 64;

Status Validate(const SharedStateOptions& o) {
  auto bad = [](const char* field, const char* rule) {
    return Status::InvalidArgument(std::string("SharedStateOptions.") + field + " " + rule);
  };
  if (o.min_grace < Duration::zero()) return bad("min_grace", "must be >= 0");
  if (o.heartbeat <= Duration::zero()) return bad("heartbeat", "must be > 0");
  if (o.max_queue < 1) return bad("max_queue", "must be >= 1");
  return Status();
}

// Redis refused the credentials: AUTH's error (Connection: "...: AUTH:
// WRONGPASS ..."), or NOAUTH when a password is required and none was given.
bool IsAuthFailure(const Status& s) {
  const std::string_view m = s.message();
  return m.find(": AUTH: ") != std::string_view::npos ||
         m.find("NOAUTH") != std::string_view::npos ||
         m.find("WRONGPASS") != std::string_view::npos;
}

}  // namespace

std::string_view SharedStateEventKindName(SharedStateEvent::Kind kind) noexcept {
  switch (kind) {
    case SharedStateEvent::Kind::kConnected:
      return "redis_connected";
    case SharedStateEvent::Kind::kLost:
      return "redis_lost";
    case SharedStateEvent::Kind::kAuthFailed:
      return "redis_auth_failed";
    case SharedStateEvent::Kind::kResync:
      return "redis_resync";
  }
  return "redis_unknown";
}

Result<std::shared_ptr<RedisSharedState>> RedisSharedState::Create(SharedStateOptions options) {
  if (Status s = Validate(options); !s.ok()) return s;
  Result<Keyspace> keyspace = Keyspace::Create(options.prefix);
  if (!keyspace) return keyspace.error();
  Clock& clock = options.clock != nullptr ? *options.clock : SystemClock();
  Result<std::unique_ptr<internal::GuardedClient>> client =
      internal::GuardedClient::Create(options.connection, options.sync_connections,
                                      options.failure_threshold, options.down_for, clock);
  if (!client) {
    return Status::InvalidArgument("SharedStateOptions: " + std::string(client.error().message()));
  }
  std::shared_ptr<RedisSharedState> store(
      new RedisSharedState(std::move(options), std::move(*keyspace), std::move(*client)));
  store->worker_ = std::thread([s = store.get()] { s->WorkerLoop(); });
  store->subscriber_ = std::thread([s = store.get()] { s->SubscriberLoop(); });
  return store;
}

RedisSharedState::RedisSharedState(SharedStateOptions options, Keyspace keyspace,
                                   std::unique_ptr<internal::GuardedClient> client)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : SystemClock()),
      scripts_(std::move(keyspace)),
      client_(std::move(client)) {
  last_heard_ns_.store(clock_.Now().time_since_epoch().count(), std::memory_order_relaxed);
  if (!options_.connection.sentinels.empty()) {
    sentinel_watch_ = std::make_unique<internal::SentinelWatch>(options_.connection);
  }
}

CircuitBreaker& RedisSharedState::store_breaker() { return client_->gate(); }

RedisSharedState::~RedisSharedState() {
  stopping_.store(true, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stop_ = true;
  }
  queue_cv_.notify_all();
  // The worker sends what is queued first (a lease release above all), each
  // bounded by the command timeout, or refused at once while Redis is down.
  if (worker_.joinable()) worker_.join();
  if (subscriber_.joinable()) subscriber_.join();
}

// --- Subscriptions ----------------------------------------------------------

SharedState::SubscriptionId RedisSharedState::Subscribe(
    std::string_view circuit, std::shared_ptr<SharedStateListener> listener) {
  SubscriptionId id;
  {
    std::lock_guard<std::mutex> lock(listeners_mu_);
    id = next_id_++;
    by_id_.emplace(id, std::make_pair(std::string(circuit), listener));
    by_circuit_.emplace(std::string(circuit), id);
  }
  // Read it in the background, so that the new breaker shows the fleet's
  // state (an override, an OPEN) before its first call would read it.
  // Always, even before the subscriber is up: its first subscribe's resync
  // only marks the breakers it knows stale (they re-read on their next
  // call), so a breaker made meanwhile that no call reaches would never
  // read (issue 16: B's quota breaker stayed closed under A's override).
  // While Redis is down the read is refused at once by the store's breaker.
  Op op{Op::Kind::kRefresh, std::string(circuit), Duration::zero(), {}, {}};
  op.listener = listener;
  Enqueue(std::move(op));
  return id;
}

SharedState::SubscriptionId RedisSharedState::WatchOverrides(
    std::shared_ptr<SharedOverrideWatcher> watcher) {
  std::lock_guard<std::mutex> lock(listeners_mu_);
  const SubscriptionId id = next_id_++;
  watchers_.emplace(id, std::move(watcher));
  return id;
}

void RedisSharedState::Unsubscribe(SubscriptionId id) {
  std::shared_ptr<SharedStateListener> dropped;  // Released outside the lock.
  std::shared_ptr<SharedOverrideWatcher> dropped_watcher;
  std::lock_guard<std::mutex> lock(listeners_mu_);
  if (auto w = watchers_.find(id); w != watchers_.end()) {
    dropped_watcher = std::move(w->second);
    watchers_.erase(w);
    return;
  }
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  auto [first, last] = by_circuit_.equal_range(it->second.first);
  for (auto c = first; c != last; ++c) {
    if (c->second == id) {
      by_circuit_.erase(c);
      break;
    }
  }
  dropped = std::move(it->second.second);
  by_id_.erase(it);
}

RedisSharedState::Listeners RedisSharedState::ListenersOf(std::string_view circuit) {
  Listeners out;
  std::lock_guard<std::mutex> lock(listeners_mu_);
  auto [first, last] = by_circuit_.equal_range(circuit);
  for (auto c = first; c != last; ++c) out.push_back(by_id_.at(c->second).second);
  return out;
}

// --- Calls that block their caller -----------------------------------------

Result<SharedCircuitView> RedisSharedState::Read(std::string_view circuit) {
  Result<ReadResult> r = client_->Run<ReadResult>(
      [&](Connection& c) { return scripts_.Read(c, circuit); }, SharedStateBudget());
  if (!r) return r.error();
  SharedCircuitView view;
  view.override_in_force = std::move(r->override_in_force);
  switch (r->state) {
    case ReadResult::State::kOpen:
      view.kind = SharedCircuitView::Kind::kOpen;
      view.open_remaining = std::min(r->remaining, kMaxScriptDuration);
      break;
    case ReadResult::State::kHalfOpen:
      view.kind = SharedCircuitView::Kind::kRecovering;
      break;
    case ReadResult::State::kClosed:
      break;
  }
  return view;
}

ProbeLease RedisSharedState::AcquireProbe(std::string_view circuit, Duration lease_for) {
  std::string token = NewToken();
  Result<AcquireResult> r = client_->Run<AcquireResult>(
      [&](Connection& c) {
        return scripts_.Acquire(c, circuit, token, std::min(lease_for, kMaxScriptDuration));
      },
      SharedStateBudget());
  if (!r) return ProbeLease{};
  switch (r->outcome) {
    case AcquireResult::Outcome::kProbe:
      counters_.leases_granted.fetch_add(1, std::memory_order_relaxed);
      return ProbeLease{ProbeLease::Verdict::kProbe, lease_for, std::move(token)};
    case AcquireResult::Outcome::kBusy:
      counters_.leases_busy.fetch_add(1, std::memory_order_relaxed);
      return ProbeLease{ProbeLease::Verdict::kBusy, r->remaining};
    case AcquireResult::Outcome::kOpen:
      return ProbeLease{ProbeLease::Verdict::kOpen, std::min(r->remaining, kMaxScriptDuration)};
    case AcquireResult::Outcome::kClosed:
      break;
  }
  return ProbeLease{ProbeLease::Verdict::kClosed};
}

// --- Calls sent in the background ---------------------------------------------

void RedisSharedState::Trip(std::string_view circuit, Duration open_for, std::string_view reason) {
  Enqueue(Op{Op::Kind::kTrip, std::string(circuit), open_for, std::string(reason), {}});
}

void RedisSharedState::Close(std::string_view circuit, std::string_view token) {
  Enqueue(Op{Op::Kind::kClose, std::string(circuit), Duration::zero(), {}, std::string(token)});
}

void RedisSharedState::Release(std::string_view circuit, std::string_view token) {
  Enqueue(Op{Op::Kind::kRelease, std::string(circuit), Duration::zero(), {}, std::string(token)});
}

void RedisSharedState::PublishOverride(std::string_view circuit, const SharedOverride& setting) {
  Op op{Op::Kind::kOverride, std::string(circuit), Duration::zero(), {}, {}};
  op.override_ = setting;
  Enqueue(std::move(op));
}

void RedisSharedState::Enqueue(Op op) {
  op.queued_at = clock_.Now();
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    if (queue_.size() >= options_.max_queue) {
      // The oldest goes: a later trip of the same circuit supersedes it, and
      // a resync replays every OPEN still running.
      if (queue_.front().kind == Op::Kind::kTrip) resync_wanted_.store(true);
      queue_.pop_front();
      ++done_;
      counters_.dropped.fetch_add(1, std::memory_order_relaxed);
    }
    queue_.push_back(std::move(op));
    ++enqueued_;
  }
  queue_cv_.notify_one();
}

void RedisSharedState::Flush() {
  std::unique_lock<std::mutex> lock(queue_mu_);
  const std::uint64_t target = enqueued_;
  flushed_cv_.wait(lock, [&] { return done_ >= target; });
}

// What is left of a trip's OPEN or an override's expiry once it leaves the
// queue: the breaker counted it from the moment it queued the op, and a
// write sent late must not end later than that (a replayed OPEN sent after
// a WAIT on a replica that is gone would otherwise reopen a circuit whose
// probe is already running elsewhere). False when nothing is left.
bool RedisSharedState::LeftAfterQueue(Op& op) const {
  const Duration waited = std::max(clock_.Now() - op.queued_at, Duration::zero());
  switch (op.kind) {
    case Op::Kind::kTrip:
      if (op.open_for <= waited) return false;
      op.open_for -= waited;
      return true;
    case Op::Kind::kOverride: {
      Duration& left = op.override_.expires_after;
      if (left == Duration::zero()) return true;  // Until changed.
      if (left <= waited) return false;
      left -= waited;
      return true;
    }
    case Op::Kind::kClose:
    case Op::Kind::kRelease:
    case Op::Kind::kRefresh:
      return true;
  }
  return true;
}

// A connection idle since the last op may have been closed by the server
// meanwhile: its idle `timeout`, CLIENT KILL, a restart, a demoted primary.
// The first command on it fails with no answer and breaks it; the op is then
// run once more on a new connection rather than dropped (and the OPEN or
// close it carried lost until a resync). Every op here is safe to run twice:
// a trip extends the same OPEN, an override sets the same value, a release
// and a close are fenced by their token (a close run twice is counted in
// closes_lost, the lease being gone). Not after a timeout: the server may be
// running the first one, and a second would cost the worker another wait.
template <typename T, typename F>
Result<T> RedisSharedState::RunOnWorker(F&& fn) {
  const bool worked = worker_conn_ != nullptr && !worker_conn_->broken();
  Result<T> r = client_->RunOn<T>(worker_conn_, fn);
  if (r.has_value() || !worked || worker_conn_ == nullptr || !worker_conn_->broken() ||
      worker_conn_->broken_by_timeout()) {
    return r;
  }
  counters_.resent.fetch_add(1, std::memory_order_relaxed);
  return client_->RunOn<T>(worker_conn_, fn);
}

// Sends one op on worker_conn_; false when it could not be sent.
bool RedisSharedState::Send(const Op& op) {
  switch (op.kind) {
    case Op::Kind::kTrip: {
      const Duration open_for = std::clamp(op.open_for, Duration(1), kMaxScriptDuration);
      const Duration grace = std::min(std::max(open_for, options_.min_grace), kMaxScriptDuration);
      const bool sent = RunOnWorker<TripResult>([&](Connection& c) {
                          return scripts_.Trip(c, op.circuit, open_for, grace, op.reason);
                        }).has_value();
      if (!sent) resync_wanted_.store(true);
      if (sent) OweAck(op.circuit);
      return sent;
    }
    case Op::Kind::kClose: {
      Result<CloseResult> r = RunOnWorker<CloseResult>(
          [&](Connection& c) { return scripts_.Close(c, op.circuit, op.token); });
      if (r.has_value() && *r != CloseResult::kClosed) {
        counters_.closes_lost.fetch_add(1, std::memory_order_relaxed);
      }
      return r.has_value();
    }
    case Op::Kind::kRelease:
      return RunOnWorker<bool>(
                 [&](Connection& c) { return scripts_.Release(c, op.circuit, op.token); })
          .has_value();
    case Op::Kind::kRefresh:
      // The breaker reads for itself (once: a call may have read already).
      if (std::shared_ptr<SharedStateListener> l = op.listener.lock()) l->OnSharedRefresh();
      return true;
    case Op::Kind::kOverride: {
      const bool sent = RunOnWorker<bool>([&](Connection& c) -> Result<bool> {
                          Status st = scripts_.Override(c, op.circuit, op.override_);
                          if (!st.ok()) return st;
                          return true;
                        }).has_value();
      if (sent) OweAck(op.circuit);
      return sent;
    }
  }
  return false;
}

void RedisSharedState::WorkerLoop() {
  for (;;) {
    Op op;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // Stopping, and everything was sent.
      op = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!LeftAfterQueue(op)) {
      counters_.expired_in_queue.fetch_add(1, std::memory_order_relaxed);
    } else if (!Send(op)) {
      counters_.dropped.fetch_add(1, std::memory_order_relaxed);
    }
    if (!unacked_.empty()) {
      bool drained = false;
      {
        std::lock_guard<std::mutex> lock(queue_mu_);
        drained = queue_.empty();
      }
      if (drained || unacked_.size() >= kMaxUnacked) AwaitReplicas();
    }
    {
      std::lock_guard<std::mutex> lock(queue_mu_);
      ++done_;
    }
    flushed_cv_.notify_all();
  }
}

// A trip or override was written: with wait_replicas, a WAIT is owed on the
// node that took it (AwaitReplicas()).
void RedisSharedState::OweAck(std::string_view circuit) {
  if (options_.connection.wait_replicas == 0) return;
  unacked_.push_back(scripts_.keyspace().Keys(circuit).open);
}

// WAIT on the connection that wrote: Redis answers how many replicas have
// acknowledged every write this connection made to that node, once
// `wait_replicas` have or when wait_timeout has passed. Sent once the queue
// is drained (or kMaxUnacked ops in), one per node written, so that a burst
// of trips (a resync replaying every OPEN) costs one WAIT rather than one
// each, and an op queued behind them waits at most one wait_timeout per
// node. Only this thread waits: callers queued their trip and went on. The
// answer, even a short one, is not a failure of Redis (the store's breaker
// is not told). An I/O error breaks the connection, remade (or counted as
// failed) by the next command; it and an error reply (a replica, an ACL
// without WAIT) are shortfalls, warned.
void RedisSharedState::AwaitReplicas() {
  struct Owed {
    std::string server;  // ServerOf() its keys
    std::string key;     // the first of them: where the WAIT goes
    std::int64_t ops = 0;
  };
  std::vector<Owed> owed;
  for (std::string& key : std::exchange(unacked_, {})) {
    std::string server = worker_conn_ != nullptr ? worker_conn_->ServerOf(key) : std::string();
    auto it =
        std::find_if(owed.begin(), owed.end(), [&](const Owed& w) { return w.server == server; });
    if (it == owed.end()) {
      owed.push_back({std::move(server), std::move(key), 1});
    } else {
      ++it->ops;
    }
  }
  const ConnectionOptions& o = options_.connection;
  for (const Owed& w : owed) {
    std::string detail = WaitForReplicas(w.key);
    if (detail.empty()) {
      counters_.replica_acks.fetch_add(w.ops, std::memory_order_relaxed);
      continue;
    }
    counters_.replica_ack_shortfalls.fetch_add(w.ops, std::memory_order_relaxed);
    ack_shortfalls_unsaid_ += w.ops;
    const TimePoint now = SystemClock().Now();  // A log's rate is a matter of real time.
    if (ack_warned_at_ != TimePoint{} && now - ack_warned_at_ < kAckWarnEvery) continue;
    ack_warned_at_ = now;
    o.Warn("redis_replica_ack_short",
           "redis " + (w.server.empty() ? o.Endpoint() : w.server) +
               ": a trip or override may be lost in a failover: " + detail + " (" +
               std::to_string(ack_shortfalls_unsaid_) + " shortfalls since the last warning)");
    ack_shortfalls_unsaid_ = 0;
  }
}

// One WAIT where a command with `key` goes: "" when enough replicas
// acknowledged, else what fell short.
std::string RedisSharedState::WaitForReplicas(std::string_view key) {
  const ConnectionOptions& o = options_.connection;
  if (worker_conn_ == nullptr || worker_conn_->broken())
    return "the connection broke before the WAIT";
  // The reply comes after up to wait_timeout: the socket's bound must
  // outlast it, then return to the command timeout.
  if (Status s = worker_conn_->SetCommandTimeout(o.wait_timeout + o.command_timeout); !s.ok()) {
    return std::string(s.message());
  }
  const std::string replicas = std::to_string(o.wait_replicas);
  const std::string ms =
      std::to_string(std::chrono::ceil<std::chrono::milliseconds>(o.wait_timeout).count());
  const std::string_view wait[] = {"WAIT", replicas, ms};
  Result<Reply> r = worker_conn_->CommandBeside(key, wait);
  if (!worker_conn_->broken()) (void)worker_conn_->SetCommandTimeout(o.command_timeout);
  if (!r) return std::string(r.error().message());
  if (!r->is_integer()) return std::string(worker_conn_->ErrorReplyStatus("WAIT", *r).message());
  if (r->integer >= o.wait_replicas) return "";
  return std::to_string(r->integer) + " of " + replicas + " replicas acknowledged within " + ms +
         " ms";
}

// --- The subscriber ---------------------------------------------------------------

void RedisSharedState::Pause(Duration d) {
  while (d > Duration::zero() && !stopping_.load(std::memory_order_relaxed)) {
    const Duration step = std::min(d, kSubscriberPoll);
    clock_.SleepFor(step);
    d -= step;
  }
}

Status RedisSharedState::SubscriberConnect() {
  const std::vector<std::string> channels{scripts_.keyspace().channel()};
  Result<bool> r = client_->RunOn<bool>(sub_conn_, [&](Connection& c) -> Result<bool> {
    if (Status s = c.Subscribe(channels); !s.ok()) return s;
    return true;
  });
  return r.has_value() ? Status() : r.error();
}

void RedisSharedState::Emit(SharedStateEvent::Kind kind, std::string detail, bool recovered) {
  if (!options_.on_event) return;
  options_.on_event(SharedStateEvent{kind, std::move(detail), recovered});
}

void RedisSharedState::ReportHealth() {
  const int now = healthy() ? 1 : 0;
  if (now == reported_healthy_) return;
  const bool recovered = reported_healthy_ == 0;
  reported_healthy_ = now;
  if (now == 1) {
    last_error_.clear();
    Emit(SharedStateEvent::Kind::kConnected, client_->connection().Describe(), recovered);
  } else {
    Emit(SharedStateEvent::Kind::kLost,
         last_error_.empty() ? "commands failed repeatedly: the store's breaker is open"
                             : last_error_);
  }
}

void RedisSharedState::SubscriberLoop() {
  Duration backoff = kFirstBackoff;
  Duration silence = Duration::zero();
  auto heard = [&] {
    last_heard_ns_.store(clock_.Now().time_since_epoch().count(), std::memory_order_relaxed);
  };
  while (!stopping_.load(std::memory_order_relaxed)) {
    FollowSentinels();
    if (sub_conn_ == nullptr || sub_conn_->broken() || !sub_conn_->subscribed()) {
      subscribed_.store(false, std::memory_order_relaxed);
      if (sub_conn_ != nullptr && !sub_conn_->broken()) (void)sub_conn_->Reconnect();
      if (Status s = SubscriberConnect(); !s.ok()) {
        last_error_ = std::string(s.message());
        if (IsAuthFailure(s)) {
          counters_.auth_failures.fetch_add(1, std::memory_order_relaxed);
          Emit(SharedStateEvent::Kind::kAuthFailed, last_error_);
        }
        ReportHealth();
        // Growing pauses, at most down_for: a dead Redis sees a bounded
        // number of connect attempts, never a storm.
        Pause(backoff);
        backoff = std::min(backoff * 2, options_.down_for);
        continue;
      }
      backoff = kFirstBackoff;
      silence = Duration::zero();
      heard();
      counters_.subscribes.fetch_add(1, std::memory_order_relaxed);
      // Anything published while nobody listened is lost (Pub/Sub is at most
      // once): every breaker re-reads, and re-sends an OPEN still running.
      resync_wanted_.store(false);
      ResyncAll("subscribed: pushes made meanwhile may be missed");
      subscribed_.store(true, std::memory_order_relaxed);
    }
    if (resync_wanted_.load(std::memory_order_relaxed) &&
        client_->gate().state() == State::kClosed) {
      resync_wanted_.store(false);
      ResyncAll("redis answers again: OPENs that could not be sent are replayed");
    }
    ReportHealth();
    Result<std::optional<PubSubMessage>> m = sub_conn_->ReadMessage(kSubscriberPoll);
    if (!m) {
      last_error_ = std::string(m.error().message());
      client_->RecordFailure();
      continue;  // Broken: reconnect above.
    }
    if (!m->has_value()) {
      silence += kSubscriberPoll;
      if (silence < options_.heartbeat) continue;
      // Proves the connection alive, so that a push is late by at most
      // heartbeat + command timeout; a dead one breaks here.
      silence = Duration::zero();
      counters_.pings.fetch_add(1, std::memory_order_relaxed);
      if (Status p = Heartbeat(); !p.ok()) {
        last_error_ = std::string(p.message());
      } else {
        heard();
      }
      continue;
    }
    silence = Duration::zero();
    heard();
    Deliver(**m);
  }
  subscribed_.store(false, std::memory_order_relaxed);
}

void RedisSharedState::FollowSentinels() {
  if (sentinel_watch_ == nullptr) return;
  std::optional<std::string> primary = sentinel_watch_->Poll(clock_.Now());
  if (!primary || !client_->FollowPrimary(std::move(*primary))) return;
  counters_.failovers.fetch_add(1, std::memory_order_relaxed);
  // Resubscribed (and resynced) on the new primary by the loop, now.
  if (sub_conn_ != nullptr && !client_->OnPrimary(*sub_conn_)) sub_conn_.reset();
}

Status RedisSharedState::Heartbeat() {
  // While the store's breaker is not closed, the PING asks it: once its wait
  // has passed the PING is its trial command, and the answer closes it (or
  // opens it again). Without this an idle instance, whose callers send
  // nothing, would keep a breaker opened by a brief pause open for good, and
  // be reported degraded for good. A PING the breaker refuses still proves
  // the connection alive, and its failure counts as before.
  if (client_->gate().state() != State::kClosed) {
    const std::int64_t refused = client_->counters().refused.load(std::memory_order_relaxed);
    Result<bool> r = client_->RunOn<bool>(sub_conn_, [](Connection& c) -> Result<bool> {
      if (Status s = c.Ping(); !s.ok()) return s;
      return true;
    });
    // Not refused: the breaker recorded the answer. (Only this thread runs
    // heartbeats; a caller refused meanwhile only makes this PING twice.)
    if (client_->counters().refused.load(std::memory_order_relaxed) == refused) {
      return r.has_value() ? Status() : r.error();
    }
  }
  Status p = sub_conn_->Ping();
  if (!p.ok()) client_->RecordFailure();
  return p;
}

void RedisSharedState::Deliver(const PubSubMessage& message) {
  if (message.channel != scripts_.keyspace().channel()) return;
  Result<CircuitEvent> event = ParseEvent(message.payload);
  if (!event) return;  // Not ours to understand (a newer writer?): ignored.
  counters_.events.fetch_add(1, std::memory_order_relaxed);
  if (event->kind == CircuitEvent::Kind::kOverride) {
    // Watchers first: one may create the circuit's breaker, which then hears
    // the override below like any other subscriber.
    std::vector<std::shared_ptr<SharedOverrideWatcher>> watchers;
    {
      std::lock_guard<std::mutex> lock(listeners_mu_);
      for (const auto& [id, w] : watchers_) watchers.push_back(w);
    }
    for (const auto& w : watchers) w->OnFleetOverride(event->circuit, event->override_);
  }
  for (const auto& l : ListenersOf(event->circuit)) {
    switch (event->kind) {
      case CircuitEvent::Kind::kOpen:
        l->OnSharedOpen(event->remaining);
        break;
      case CircuitEvent::Kind::kClosed:
        l->OnSharedClosed();
        break;
      case CircuitEvent::Kind::kOverride:
        l->OnSharedOverride(event->override_);
        break;
    }
  }
}

void RedisSharedState::ResyncAll(std::string_view why) {
  counters_.resyncs.fetch_add(1, std::memory_order_relaxed);
  Emit(SharedStateEvent::Kind::kResync, std::string(why));
  Listeners all;
  {
    std::lock_guard<std::mutex> lock(listeners_mu_);
    all.reserve(by_id_.size());
    for (const auto& [id, sub] : by_id_) all.push_back(sub.second);
  }
  for (const auto& l : all) l->OnSharedResync();
}

// --- Observation ------------------------------------------------------------------

bool RedisSharedState::healthy() const {
  return subscribed_.load(std::memory_order_relaxed) && client_->gate().state() == State::kClosed;
}

SharedStateHealth RedisSharedState::health() const {
  const SharedStateStats s = stats();
  SharedStateHealth h;
  h.healthy = healthy();
  h.errors = s.errors;
  h.fail_open_periods = s.down_periods;
  h.refused_calls = s.refused;
  h.leases_granted = s.leases_granted;
  h.lease_contention = s.leases_busy;
  h.events = s.events;
  h.dropped = s.dropped;
  h.expired_in_queue = s.expired_in_queue;
  h.resent = s.resent;
  h.closes_lost = s.closes_lost;
  h.resyncs = s.resyncs;
  h.replica_acks = s.replica_acks;
  h.replica_ack_shortfalls = s.replica_ack_shortfalls;
  h.staleness =
      std::max(Duration::zero(),
               clock_.Now() - TimePoint(Duration(last_heard_ns_.load(std::memory_order_relaxed))));
  return h;
}

SharedStateStats RedisSharedState::stats() const {
  auto get = [](const std::atomic<std::int64_t>& a) { return a.load(std::memory_order_relaxed); };
  SharedStateStats s;
  const internal::GuardedClient::Counters& c = client_->counters();
  s.commands = get(c.commands);
  s.pings = get(counters_.pings);
  s.errors = get(c.errors);
  s.refused = get(c.refused);
  s.down_periods = get(c.down_periods);
  s.subscribes = get(counters_.subscribes);
  s.failovers = get(counters_.failovers);
  s.events = get(counters_.events);
  s.leases_granted = get(counters_.leases_granted);
  s.leases_busy = get(counters_.leases_busy);
  s.dropped = get(counters_.dropped);
  s.resent = get(counters_.resent);
  s.closes_lost = get(counters_.closes_lost);
  s.expired_in_queue = get(counters_.expired_in_queue);
  s.resyncs = get(counters_.resyncs);
  s.auth_failures = get(counters_.auth_failures);
  s.replica_acks = get(counters_.replica_acks);
  s.replica_ack_shortfalls = get(counters_.replica_ack_shortfalls);
  return s;
}

}  // namespace fusebox::redis
