// The circuit scripts against a real redis-server: T1-T4, T10, T12, T13 of
// the shared-state notes, the events they publish, and their validation.
// Several "instances" are separate connections, one per thread. TTLs are
// milliseconds; waits poll Redis with a bound, never sleep a fixed time.
#include "fusebox/redis/circuit_scripts.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <latch>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/redis/redis_server.h"

namespace fusebox::redis {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using testing::PollUntil;
using testing::Pttl;
using testing::RedisServer;
using testing::RedisServerOptions;
using Action = TripResult::Action;
using Outcome = AcquireResult::Outcome;
using State = ReadResult::State;

class CircuitScriptsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisServer::Start();
    ASSERT_TRUE(server.has_value()) << server.error();
    server_ = std::move(*server);
    conn_ = NewConnection();
  }

  std::unique_ptr<Connection> NewConnection() {
    auto conn = server_->Connect();
    EXPECT_TRUE(conn.has_value()) << conn.error();
    return conn ? std::move(*conn) : nullptr;
  }

  TripResult MustTrip(std::string_view circuit, Duration open_for, Duration grace,
                      std::string_view reason = "test") {
    Result<TripResult> r = scripts_.Trip(*conn_, circuit, open_for, grace, reason);
    EXPECT_TRUE(r.has_value()) << r.error();
    return r.value_or(TripResult{});
  }

  AcquireResult MustAcquire(Connection& conn, std::string_view circuit, std::string_view token,
                            Duration lease_for) {
    Result<AcquireResult> r = scripts_.Acquire(conn, circuit, token, lease_for);
    EXPECT_TRUE(r.has_value()) << r.error();
    return r.value_or(AcquireResult{});
  }

  State ReadState(std::string_view circuit) {
    Result<ReadResult> r = scripts_.Read(*conn_, circuit);
    EXPECT_TRUE(r.has_value()) << r.error();
    return r ? r->state : State::kClosed;
  }

  // Waits, on Redis, until the OPEN time of `circuit` is over.
  void WaitHalfOpen(std::string_view circuit) {
    ASSERT_TRUE(PollUntil([&] { return ReadState(circuit) == State::kHalfOpen; }))
        << "circuit " << circuit << " never became half-open";
  }

  std::int64_t Calls(const std::string& command) {
    auto calls = server_->CommandCalls();
    EXPECT_TRUE(calls.has_value()) << calls.error();
    if (!calls) return -1;
    auto it = calls->find(command);
    return it == calls->end() ? 0 : it->second;
  }

  std::string Get(std::string_view key) {
    Result<Reply> r = conn_->Command({"GET", key});
    return r && r->is_string() ? r->str : "(nil)";
  }

  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<Connection> conn_;
  CircuitScripts scripts_;
  Keyspace keys_;
};

// --- T1: extend-only -------------------------------------------------------------

TEST_F(CircuitScriptsTest, T1_ShorterTripIsKeptLongerExtends) {
  const CircuitKeys k = keys_.Keys("meta:ig:1784");
  TripResult t = MustTrip("meta:ig:1784", seconds(60), seconds(60), "first");
  EXPECT_EQ(t.action, Action::kOpened);
  EXPECT_EQ(t.gen, 1);
  EXPECT_EQ(t.remaining, seconds(60));
  EXPECT_GT(Pttl(*conn_, k.open), 59'000);
  EXPECT_GT(Pttl(*conn_, k.trip), 119'000);  // OPEN + grace

  t = MustTrip("meta:ig:1784", seconds(10), seconds(60), "shorter");
  EXPECT_EQ(t.action, Action::kKept);
  EXPECT_EQ(t.gen, 1);
  EXPECT_GT(t.remaining, seconds(59));
  EXPECT_LE(t.remaining, seconds(60));
  EXPECT_GT(Pttl(*conn_, k.open), 59'000);
  // The reason describes the OPEN in force, so a kept trip leaves it.
  EXPECT_EQ(*conn_->Command({"HGET", k.trip, "reason"}), Reply::String("first"));

  t = MustTrip("meta:ig:1784", seconds(120), seconds(60), "longer");
  EXPECT_EQ(t.action, Action::kExtended);
  EXPECT_EQ(t.gen, 2);
  EXPECT_EQ(t.remaining, seconds(120));
  EXPECT_GT(Pttl(*conn_, k.open), 119'000);
  EXPECT_GT(Pttl(*conn_, k.trip), 179'000);
  EXPECT_EQ(*conn_->Command({"HGET", k.trip, "reason"}), Reply::String("longer"));
  EXPECT_EQ(Get(k.open), "2");

  Result<ReadResult> read = scripts_.Read(*conn_, "meta:ig:1784");
  ASSERT_TRUE(read.has_value()) << read.error();
  EXPECT_EQ(read->state, State::kOpen);
  EXPECT_GT(read->remaining, seconds(119));
}

TEST_F(CircuitScriptsTest, T1_ConcurrentTripsEndAtTheLongest) {
  constexpr int kThreads = 8;
  constexpr int kTripsPerThread = 10;
  std::vector<std::unique_ptr<Connection>> conns;
  for (int i = 0; i < kThreads; ++i) conns.push_back(NewConnection());
  std::vector<std::vector<std::int64_t>> lengths_ms(kThreads);
  std::mt19937 rng(20251104);
  std::uniform_int_distribution<std::int64_t> length(1'000, 100'000);
  std::int64_t max_ms = 0;
  for (auto& l : lengths_ms) {
    for (int j = 0; j < kTripsPerThread; ++j) {
      l.push_back(length(rng));
      max_ms = std::max(max_ms, l.back());
    }
  }
  std::atomic<int> opened{0}, extended{0}, failed{0};
  std::latch start(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      for (std::int64_t ms : lengths_ms[i]) {
        Result<TripResult> r =
            scripts_.Trip(*conns[i], "shared", milliseconds(ms), seconds(1), "race");
        if (!r) {
          ++failed;
        } else if (r->action == Action::kOpened) {
          ++opened;
        } else if (r->action == Action::kExtended) {
          ++extended;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(opened.load(), 1);
  const std::int64_t pttl = Pttl(*conn_, keys_.Keys("shared").open);
  EXPECT_LE(pttl, max_ms);
  EXPECT_GT(pttl, max_ms - 5'000) << "max " << max_ms;  // minus the time the test took
  // gen counts the trips that changed the OPEN time.
  EXPECT_EQ(Get(keys_.Keys("shared").open), std::to_string(1 + extended.load()));
}

TEST_F(CircuitScriptsTest, T1_PersistentOpenKeyIsRepaired) {
  const CircuitKeys k = keys_.Keys("c");
  ASSERT_TRUE(conn_->Command({"SET", k.open, "9"}).has_value());  // no TTL
  Result<ReadResult> read = scripts_.Read(*conn_, "c");
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->state, State::kOpen);
  EXPECT_EQ(read->remaining, kNoExpiry);
  AcquireResult a = MustAcquire(*conn_, "c", NewToken(), seconds(1));
  EXPECT_EQ(a.outcome, Outcome::kOpen);
  EXPECT_EQ(a.remaining, kNoExpiry);

  const TripResult t = MustTrip("c", seconds(10), seconds(5));
  EXPECT_EQ(t.action, Action::kExtended);
  EXPECT_EQ(t.remaining, seconds(10));
  const std::int64_t pttl = Pttl(*conn_, k.open);
  EXPECT_GT(pttl, 9'000);
  EXPECT_LE(pttl, 10'000);
  EXPECT_GT(Pttl(*conn_, k.trip), 14'000);
}

// --- T2: exactly one probe ----------------------------------------------------------

TEST_F(CircuitScriptsTest, T2_ExactlyOneProbeAmongConcurrentAcquirers) {
  MustTrip("c", milliseconds(50), seconds(30));
  AcquireResult early = MustAcquire(*conn_, "c", NewToken(), seconds(10));
  EXPECT_EQ(early.outcome, Outcome::kOpen);
  EXPECT_LE(early.remaining, milliseconds(50));
  WaitHalfOpen("c");

  constexpr int kAcquirers = 12;  // 12 connections, one per thread
  std::vector<std::unique_ptr<Connection>> conns;
  std::vector<std::string> tokens;
  for (int i = 0; i < kAcquirers; ++i) {
    conns.push_back(NewConnection());
    tokens.push_back(NewToken());
  }
  std::vector<Result<AcquireResult>> results(kAcquirers, Status::Internal("not run"));
  std::latch start(kAcquirers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kAcquirers; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      results[i] = scripts_.Acquire(*conns[i], "c", tokens[i], seconds(10));
    });
  }
  for (std::thread& t : threads) t.join();
  int probes = 0, busy = 0;
  std::string winner;
  for (int i = 0; i < kAcquirers; ++i) {
    ASSERT_TRUE(results[i].has_value()) << results[i].error();
    if (results[i]->outcome == Outcome::kProbe) {
      ++probes;
      winner = tokens[i];
      EXPECT_EQ(results[i]->remaining, seconds(10));
    } else if (results[i]->outcome == Outcome::kBusy) {
      ++busy;
      EXPECT_GT(results[i]->remaining, seconds(9));
      EXPECT_LE(results[i]->remaining, seconds(10));
    }
  }
  EXPECT_EQ(probes, 1);
  EXPECT_EQ(busy, kAcquirers - 1);
  EXPECT_EQ(Get(keys_.Keys("c").lease), winner);
}

// --- T3: lease holder crash ---------------------------------------------------------

TEST_F(CircuitScriptsTest, T3_CrashedHolderLeaseExpiresThenExactlyOneProbe) {
  MustTrip("c", milliseconds(20), seconds(30));
  WaitHalfOpen("c");
  // The holder takes the lease and "crashes": never closes, never releases.
  ASSERT_EQ(MustAcquire(*conn_, "c", NewToken(), milliseconds(300)).outcome, Outcome::kProbe);
  auto other = NewConnection();
  const AcquireResult busy = MustAcquire(*other, "c", NewToken(), seconds(10));
  EXPECT_EQ(busy.outcome, Outcome::kBusy);
  EXPECT_LE(busy.remaining, milliseconds(300));
  EXPECT_EQ(ReadState("c"), State::kHalfOpen);

  ASSERT_TRUE(PollUntil([&] { return Pttl(*conn_, keys_.Keys("c").lease) == -2; }))
      << "the lease never expired";

  constexpr int kAcquirers = 4;
  std::vector<std::unique_ptr<Connection>> conns;
  for (int i = 0; i < kAcquirers; ++i) conns.push_back(NewConnection());
  std::vector<std::string> tokens(kAcquirers);
  std::vector<Outcome> outcomes(kAcquirers, Outcome::kClosed);
  std::latch start(kAcquirers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kAcquirers; ++i) {
    threads.emplace_back([&, i] {
      tokens[i] = NewToken();
      start.arrive_and_wait();
      Result<AcquireResult> r = scripts_.Acquire(*conns[i], "c", tokens[i], seconds(10));
      if (r) outcomes[i] = r->outcome;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(std::count(outcomes.begin(), outcomes.end(), Outcome::kProbe), 1);
  EXPECT_EQ(std::count(outcomes.begin(), outcomes.end(), Outcome::kBusy), kAcquirers - 1);

  // Never stuck: the new holder closes the circuit.
  const int winner = static_cast<int>(std::find(outcomes.begin(), outcomes.end(), Outcome::kProbe) -
                                      outcomes.begin());
  ASSERT_LT(winner, kAcquirers);
  Result<CloseResult> closed = scripts_.Close(*conns[winner], "c", tokens[winner]);
  ASSERT_TRUE(closed.has_value()) << closed.error();
  EXPECT_EQ(*closed, CloseResult::kClosed);
  EXPECT_EQ(ReadState("c"), State::kClosed);
  // A closed circuit leaves no keys behind.
  EXPECT_EQ(*conn_->Command({"DBSIZE"}), Reply::Integer(0));
}

// --- T4: fencing --------------------------------------------------------------------

TEST_F(CircuitScriptsTest, T4_TripDuringAProbeFencesTheHolder) {
  MustTrip("c", milliseconds(20), seconds(30));
  WaitHalfOpen("c");
  auto holder = NewConnection();
  const std::string token = NewToken();
  ASSERT_EQ(MustAcquire(*holder, "c", token, seconds(30)).outcome, Outcome::kProbe);

  // Another instance's in-flight call hits the rate limit: it trips.
  const TripResult t = MustTrip("c", seconds(5), seconds(30), "rate_limited");
  EXPECT_EQ(t.action, Action::kOpened);
  EXPECT_EQ(t.gen, 2);
  EXPECT_EQ(Pttl(*conn_, keys_.Keys("c").lease), -2) << "the trip must delete the lease";

  Result<CloseResult> close = scripts_.Close(*holder, "c", token);
  ASSERT_TRUE(close.has_value()) << close.error();
  EXPECT_EQ(*close, CloseResult::kLost);
  Result<ReadResult> read = scripts_.Read(*conn_, "c");
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(read->state, State::kOpen);
  EXPECT_GT(read->remaining, seconds(4));
  EXPECT_LE(read->remaining, seconds(5));
}

TEST_F(CircuitScriptsTest, T4_ReleaseWithAWrongTokenDeletesNothing) {
  MustTrip("c", milliseconds(20), seconds(30));
  WaitHalfOpen("c");
  const std::string token = NewToken();
  ASSERT_EQ(MustAcquire(*conn_, "c", token, seconds(30)).outcome, Outcome::kProbe);

  Result<bool> released = scripts_.Release(*conn_, "c", NewToken());
  ASSERT_TRUE(released.has_value()) << released.error();
  EXPECT_FALSE(*released);
  EXPECT_EQ(Get(keys_.Keys("c").lease), token);
  Result<CloseResult> close = scripts_.Close(*conn_, "c", "not-the-token");
  ASSERT_TRUE(close.has_value());
  EXPECT_EQ(*close, CloseResult::kLost);
  EXPECT_EQ(Get(keys_.Keys("c").lease), token);
  EXPECT_EQ(ReadState("c"), State::kHalfOpen);

  released = scripts_.Release(*conn_, "c", token);
  ASSERT_TRUE(released.has_value());
  EXPECT_TRUE(*released);
  EXPECT_EQ(Pttl(*conn_, keys_.Keys("c").lease), -2);
  // Given back: the next acquirer probes at once, and the circuit is still
  // waiting for a verdict.
  EXPECT_EQ(MustAcquire(*conn_, "c", NewToken(), seconds(30)).outcome, Outcome::kProbe);
  EXPECT_EQ(ReadState("c"), State::kHalfOpen);
}

TEST_F(CircuitScriptsTest, T4_CloseWhileOpenAgainReportsReopened) {
  MustTrip("c", milliseconds(20), seconds(30));
  WaitHalfOpen("c");
  const std::string token = NewToken();
  ASSERT_EQ(MustAcquire(*conn_, "c", token, seconds(30)).outcome, Outcome::kProbe);
  // An open key written without the trip script (which would have fenced the
  // lease), e.g. by an operator: Close must not close an OPEN circuit.
  ASSERT_TRUE(conn_->Command({"SET", keys_.Keys("c").open, "7", "PX", "5000"}).has_value());
  Result<CloseResult> close = scripts_.Close(*conn_, "c", token);
  ASSERT_TRUE(close.has_value());
  EXPECT_EQ(*close, CloseResult::kReopened);
  EXPECT_EQ(Pttl(*conn_, keys_.Keys("c").lease), -2);
  EXPECT_EQ(ReadState("c"), State::kOpen);
}

// --- T10: NOSCRIPT ------------------------------------------------------------------

TEST_F(CircuitScriptsTest, T10_ScriptFlushAndRestartBetweenCalls) {
  ASSERT_TRUE(server_->ScriptFlush().ok());
  ASSERT_TRUE(server_->ResetStats().ok());
  // Each script falls back to EVAL once after a flush, then runs by EVALSHA.
  for (int round = 0; round < 2; ++round) {
    const std::string circuit = "c" + std::to_string(round);
    EXPECT_EQ(MustTrip(circuit, milliseconds(10), seconds(30)).action, Action::kOpened);
    WaitHalfOpen(circuit);
    const std::string token = NewToken();
    EXPECT_EQ(MustAcquire(*conn_, circuit, token, seconds(30)).outcome, Outcome::kProbe);
    Result<bool> released = scripts_.Release(*conn_, circuit, token);
    ASSERT_TRUE(released.has_value()) << released.error();
    EXPECT_TRUE(*released);
    EXPECT_EQ(MustAcquire(*conn_, circuit, token, seconds(30)).outcome, Outcome::kProbe);
    Result<CloseResult> closed = scripts_.Close(*conn_, circuit, token);
    ASSERT_TRUE(closed.has_value()) << closed.error();
    EXPECT_EQ(*closed, CloseResult::kClosed);
  }
  EXPECT_EQ(Calls("eval"), 4);      // one per script
  EXPECT_EQ(Calls("evalsha"), 10);  // 5 calls per round

  // A restart loses the cache too (and every key: no persistence here).
  ASSERT_TRUE(server_->Restart().ok());
  Result<TripResult> r = scripts_.Trip(*conn_, "c", seconds(5), seconds(5), "after restart");
  if (!r) {
    // The old socket died with the server: the caller reconnects.
    EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
    ASSERT_TRUE(conn_->Reconnect().ok());
    r = scripts_.Trip(*conn_, "c", seconds(5), seconds(5), "after restart");
  }
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->action, Action::kOpened);
  EXPECT_EQ(Calls("eval"), 1);
  EXPECT_EQ(Calls("evalsha"), 1);
  EXPECT_EQ(MustAcquire(*conn_, "c", NewToken(), seconds(1)).outcome, Outcome::kOpen);
}

// --- T12: grace expiry --------------------------------------------------------------

TEST_F(CircuitScriptsTest, T12_NoProbeDuringGraceThenClosed) {
  // OPEN long enough that the read right after the trip still finds it open
  // on a loaded machine (20 ms was not: the read came late under load).
  MustTrip("c", milliseconds(500), milliseconds(300));
  EXPECT_EQ(ReadState("c"), State::kOpen);
  WaitHalfOpen("c");
  Result<ReadResult> read = scripts_.Read(*conn_, "c");
  ASSERT_TRUE(read.has_value());
  if (read->state == State::kHalfOpen) {
    EXPECT_LE(read->remaining, milliseconds(300));
  }
  ASSERT_TRUE(PollUntil([&] { return ReadState("c") == State::kClosed; }))
      << "the trip key never expired";
  EXPECT_EQ(Pttl(*conn_, keys_.Keys("c").trip), -2);
  const AcquireResult a = MustAcquire(*conn_, "c", NewToken(), seconds(1));
  EXPECT_EQ(a.outcome, Outcome::kClosed);
  EXPECT_EQ(Pttl(*conn_, keys_.Keys("c").lease), -2) << "no lease taken on a closed circuit";
}

// --- T13: Cluster readiness ----------------------------------------------------------

TEST(CircuitScriptsCluster, T13_KeySlotMatchesRedisAndScriptsRunOnACluster) {
  auto server = RedisServer::Start(RedisServerOptions{.cluster_enabled = true});
  ASSERT_TRUE(server.has_value()) << server.error();
  RedisServer& s = **server;
  const Keyspace ks;
  const std::vector<std::string> circuits = {"c",   "meta:ig:1784:insights", "a b",          "a}b",
                                             "{x}", "\xc3\xa9t\xc3\xa9",     "ig:1784}:open"};
  for (const std::string& circuit : circuits) {
    const CircuitKeys k = ks.Keys(circuit);
    for (const std::string& key : {k.open, k.trip, k.lease, circuit, ks.channel()}) {
      Result<Reply> slot = s.Admin({"CLUSTER", "KEYSLOT", key});
      ASSERT_TRUE(slot.has_value()) << slot.error();
      EXPECT_EQ(*slot, Reply::Integer(KeySlot(key))) << key;
    }
    EXPECT_EQ(KeySlot(k.open), KeySlot(k.trip));
    EXPECT_EQ(KeySlot(k.open), KeySlot(k.lease));
  }

  // One node owning every slot: a script touching a key not in KEYS, or keys
  // of two slots, fails there (CROSSSLOT), so running them proves the layout.
  Result<Reply> add = s.Admin({"CLUSTER", "ADDSLOTSRANGE", "0", "16383"});
  ASSERT_TRUE(add.has_value() && add->is_status()) << (add ? add->ToString() : "");
  ASSERT_TRUE(PollUntil([&] {
    Result<Reply> info = s.Admin({"CLUSTER", "INFO"});
    return info && info->is_string() && info->str.find("cluster_state:ok") != std::string::npos;
  })) << "cluster never became ok";
  auto conn = s.Connect();
  ASSERT_TRUE(conn.has_value()) << conn.error();
  const CircuitScripts scripts;
  for (const std::string& circuit : circuits) {
    Result<TripResult> t = scripts.Trip(**conn, circuit, milliseconds(10), seconds(30), "r");
    ASSERT_TRUE(t.has_value()) << circuit << ": " << t.error();
    ASSERT_TRUE(PollUntil([&] {
      Result<ReadResult> r = scripts.Read(**conn, circuit);
      return r && r->state == State::kHalfOpen;
    }));
    const std::string token = NewToken();
    Result<AcquireResult> a = scripts.Acquire(**conn, circuit, token, seconds(30));
    ASSERT_TRUE(a.has_value()) << circuit << ": " << a.error();
    EXPECT_EQ(a->outcome, Outcome::kProbe);
    Result<bool> released = scripts.Release(**conn, circuit, token);
    ASSERT_TRUE(released.has_value()) << circuit << ": " << released.error();
    a = scripts.Acquire(**conn, circuit, token, seconds(30));
    ASSERT_TRUE(a.has_value());
    Result<CloseResult> c = scripts.Close(**conn, circuit, token);
    ASSERT_TRUE(c.has_value()) << circuit << ": " << c.error();
    EXPECT_EQ(*c, CloseResult::kClosed);
  }
}

// --- Events -----------------------------------------------------------------------

TEST_F(CircuitScriptsTest, SubscriberSeesOpenForOpenedAndExtendedNoneForKeptAndClosed) {
  auto sub = server_->Connect(seconds(1));
  ASSERT_TRUE(sub.has_value()) << sub.error();
  const std::vector<std::string> channels = {keys_.channel()};
  ASSERT_TRUE((*sub)->Subscribe(channels).ok());
  const auto next_event = [&]() -> CircuitEvent {
    Result<std::optional<PubSubMessage>> m = (*sub)->ReadMessage(seconds(5));
    EXPECT_TRUE(m.has_value() && m->has_value()) << (m ? "timed out" : m.error().ToString());
    if (!m || !m->has_value()) return {};
    EXPECT_EQ((*m)->channel, "fusebox:v1:events");
    Result<CircuitEvent> e = ParseEvent((*m)->payload);
    EXPECT_TRUE(e.has_value()) << e.error();
    return e.value_or(CircuitEvent{});
  };

  MustTrip("a b:c", seconds(60), seconds(60));   // opened
  MustTrip("a b:c", seconds(10), seconds(60));   // kept: publishes nothing
  MustTrip("a b:c", seconds(120), seconds(60));  // extended
  EXPECT_EQ(next_event(), (CircuitEvent{"a b:c", CircuitEvent::Kind::kOpen, 1, seconds(60)}));
  // Messages on one connection arrive in publish order, so the next one being
  // the extension proves the kept trip published nothing.
  EXPECT_EQ(next_event(), (CircuitEvent{"a b:c", CircuitEvent::Kind::kOpen, 2, seconds(120)}));

  MustTrip("d", milliseconds(20), seconds(30));
  EXPECT_EQ(next_event().kind, CircuitEvent::Kind::kOpen);
  WaitHalfOpen("d");
  const std::string token = NewToken();
  ASSERT_EQ(MustAcquire(*conn_, "d", token, seconds(30)).outcome, Outcome::kProbe);
  Result<CloseResult> close = scripts_.Close(*conn_, "d", token);
  ASSERT_TRUE(close.has_value());
  ASSERT_EQ(*close, CloseResult::kClosed);
  EXPECT_EQ(next_event(), (CircuitEvent{"d", CircuitEvent::Kind::kClosed, 0, Duration::zero()}));
  // A lost close publishes nothing.
  ASSERT_EQ(*scripts_.Close(*conn_, "d", token), CloseResult::kLost);
  Result<std::optional<PubSubMessage>> none = (*sub)->ReadMessage(milliseconds(50));
  ASSERT_TRUE(none.has_value());
  EXPECT_FALSE(none->has_value());
}

// --- Keyspace, validation, tokens ------------------------------------------------------

TEST_F(CircuitScriptsTest, ConfigurablePrefixIsUsedForKeysAndChannel) {
  Result<Keyspace> ks = Keyspace::Create("tenant7:fb:");
  ASSERT_TRUE(ks.has_value());
  const CircuitScripts scripts(*ks);
  auto sub = server_->Connect(seconds(1));
  ASSERT_TRUE(sub.has_value());
  const std::vector<std::string> channels = {"tenant7:fb:events"};
  ASSERT_TRUE((*sub)->Subscribe(channels).ok());
  Result<TripResult> t = scripts.Trip(*conn_, "c", seconds(5), seconds(5), "r");
  ASSERT_TRUE(t.has_value()) << t.error();
  EXPECT_GT(Pttl(*conn_, "tenant7:fb:{c}:open"), 4'000);
  EXPECT_EQ(Pttl(*conn_, "fusebox:v1:{c}:open"), -2);
  EXPECT_EQ(ReadState("c"), State::kClosed);  // the default keyspace knows nothing
  Result<std::optional<PubSubMessage>> m = (*sub)->ReadMessage(seconds(5));
  ASSERT_TRUE(m.has_value() && m->has_value());
  EXPECT_EQ((*m)->payload, "c open 1 5000");
}

TEST_F(CircuitScriptsTest, InvalidArgumentsAreRejectedWithoutARoundTrip) {
  ASSERT_TRUE(server_->ResetStats().ok());
  const auto code = [](const auto& r) {
    return r.has_value() ? StatusCode::kOk : r.error().code();
  };
  EXPECT_EQ(code(scripts_.Trip(*conn_, "", seconds(1), seconds(1), "r")),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(scripts_.Trip(*conn_, "}c", seconds(1), seconds(1), "r")),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(scripts_.Trip(*conn_, "c", Duration::zero(), seconds(1), "r")),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(scripts_.Trip(*conn_, "c", seconds(1), -milliseconds(1), "r")),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(scripts_.Trip(*conn_, "c", kMaxScriptDuration + seconds(1), seconds(1), "r")),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(scripts_.Acquire(*conn_, "c", "", seconds(1))), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(scripts_.Acquire(*conn_, "c", std::string(129, 't'), seconds(1))),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(scripts_.Acquire(*conn_, "c", "t", Duration::zero())),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(scripts_.Close(*conn_, "", "t")), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(scripts_.Release(*conn_, "c", "")), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(scripts_.Read(*conn_, "")), StatusCode::kInvalidArgument);
  Result<TripResult> t = scripts_.Trip(*conn_, "c", Duration::zero(), seconds(1), "r");
  EXPECT_THAT(std::string(t.error().message()), HasSubstr("open_for must be > 0"));
  EXPECT_THAT(std::string(t.error().message()), HasSubstr("circuit \"c\""));
  EXPECT_EQ(Calls("evalsha"), 0);
  EXPECT_EQ(Calls("pttl"), 0);
}

TEST_F(CircuitScriptsTest, SubMillisecondDurationsRoundUp) {
  const TripResult t = MustTrip("c", std::chrono::microseconds(1), Duration::zero());
  EXPECT_EQ(t.action, Action::kOpened);
  EXPECT_EQ(t.remaining, milliseconds(1));
}

TEST(NewToken, Is128RandomBitsInHex) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const std::string t = NewToken();
    ASSERT_EQ(t.size(), 32u);
    EXPECT_EQ(t.find_first_not_of("0123456789abcdef"), std::string::npos) << t;
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 1000u);
}

TEST_F(CircuitScriptsTest, StoppedServerIsUnavailable) {
  ASSERT_TRUE(server_->Stop().ok());
  Result<ReadResult> r = scripts_.Read(*conn_, "c");
  if (r.has_value()) r = scripts_.Read(*conn_, "c");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
  Result<TripResult> t = scripts_.Trip(*conn_, "c", seconds(1), seconds(1), "r");
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code(), StatusCode::kUnavailable);
}

}  // namespace
}  // namespace fusebox::redis
