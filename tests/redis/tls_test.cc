// Redis over TLS (rediss://) against a real, TLS-only redis-server with
// certificates made by the openssl tool (test_pki.h): everything a plain
// connection does, each refusal named by the check that failed, mutual TLS,
// and two RedisSharedState instances sharing a trip over mutual TLS.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <latch>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/redis/connection.h"
#include "fusebox/redis/shared_state.h"
#include "fusebox/testing/manual_clock.h"
#include "tests/redis/redis_server.h"
#include "tests/redis/test_pki.h"

namespace fusebox::redis {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::PollUntil;
using testing::RedisServer;
using testing::RedisServerOptions;
using testing::RedisServerTls;
using testing::TestPki;

// Collects what the connection reports through ConnectionOptions::warn.
struct Warnings {
  std::mutex mu;
  std::vector<std::pair<std::string, std::string>> seen;

  std::function<void(std::string_view, std::string_view)> Sink() {
    return [this](std::string_view event, std::string_view message) {
      std::lock_guard<std::mutex> lock(mu);
      seen.emplace_back(std::string(event), std::string(message));
    };
  }
  int Count(std::string_view event) {
    std::lock_guard<std::mutex> lock(mu);
    int n = 0;
    for (const auto& [e, m] : seen) n += e == event ? 1 : 0;
    return n;
  }
};

class RedisTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto pki = TestPki::Create();
    ASSERT_TRUE(pki.has_value()) << pki.error();
    pki_ = std::move(*pki).release();
  }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  // A TLS-only server presenting `cert`; the harness itself verifies
  // nothing, so that servers with refused certificates still start.
  static std::unique_ptr<RedisServer> Server(const std::string& cert,
                                             std::string auth_clients = "optional",
                                             std::string password = "") {
    RedisServerTls tls;
    tls.cert_file = cert;
    tls.key_file = pki_->server_key();
    tls.ca_cert_file = pki_->ca_cert();
    tls.auth_clients = std::move(auth_clients);
    tls.client_cert = pki_->client_cert();
    tls.client_key = pki_->client_key();
    tls.insecure_skip_verify = true;
    auto server = RedisServer::Start({.password = std::move(password), .tls = tls});
    EXPECT_TRUE(server.has_value()) << server.error();
    return server ? std::move(*server) : nullptr;
  }

  // What a careful client uses: verify against the test CA, by name.
  static ConnectionOptions Verified(const RedisServer& server, std::string host = "localhost") {
    ConnectionOptions o = server.connection_options();
    o.host = std::move(host);
    o.ca_file = pki_->ca_cert();
    o.client_cert.clear();
    o.client_key.clear();
    o.insecure_skip_verify = false;
    return o;
  }

  static Status ConnectError(const ConnectionOptions& o) {
    auto conn = Connection::Connect(o);
    if (conn) return Status::Internal("connected, but should not have");
    return conn.error();
  }

  static TestPki* pki_;
};

TestPki* RedisTlsTest::pki_ = nullptr;

TEST_F(RedisTlsTest, CommandsScriptsPipelinesAndLargeValuesOverTls) {
  auto server = Server(pki_->good_cert());
  ASSERT_NE(server, nullptr);
  auto conn = Connection::Connect(Verified(*server));
  ASSERT_TRUE(conn.has_value()) << conn.error();
  Connection& c = **conn;
  EXPECT_EQ(*c.Command({"SET", "k", "v"}), Reply::StatusReply("OK"));
  EXPECT_EQ(*c.Command({"GET", "k"}), Reply::String("v"));
  EXPECT_EQ(*c.Command({"EVAL", "return redis.call('GET', KEYS[1]) .. ARGV[1]", "1", "k", "!"}),
            Reply::String("v!"));

  // Larger than a TLS record (16 KiB) and than a read chunk, both ways.
  std::string big(3 * 1024 * 1024 + 7, 'x');
  for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>('a' + i % 26);
  EXPECT_EQ(*c.Command({"SET", "big", big}), Reply::StatusReply("OK"));
  EXPECT_EQ(*c.Command({"GET", "big"}), Reply::String(big));

  std::vector<std::vector<std::string_view>> commands;
  std::vector<std::string> keys;
  for (int i = 0; i < 200; ++i) keys.push_back("p" + std::to_string(i));
  for (const std::string& k : keys) commands.push_back({"INCR", k});
  Result<std::vector<Reply>> replies = c.Pipeline(commands);
  ASSERT_TRUE(replies.has_value()) << replies.error();
  ASSERT_EQ(replies->size(), 200u);
  for (const Reply& r : *replies) EXPECT_EQ(r, Reply::Integer(1));

  // The server has no plain port: all of this went over TLS.
  auto port = c.Command({"CONFIG", "GET", "port"});
  ASSERT_TRUE(port.has_value());
  EXPECT_EQ(*port, Reply::Array({Reply::String("port"), Reply::String("0")}));
}

TEST_F(RedisTlsTest, SubscribePushAndPingOverTls) {
  auto server = Server(pki_->good_cert());
  ASSERT_NE(server, nullptr);
  auto sub = Connection::Connect(Verified(*server));
  auto pub = Connection::Connect(Verified(*server));
  ASSERT_TRUE(sub.has_value()) << sub.error();
  ASSERT_TRUE(pub.has_value()) << pub.error();
  const std::vector<std::string> channels = {"events"};
  ASSERT_TRUE((*sub)->Subscribe(channels).ok());
  auto none = (*sub)->ReadMessage(milliseconds(10));
  ASSERT_TRUE(none.has_value()) << none.error();
  EXPECT_FALSE(none->has_value());
  // Several messages in one burst: after the first, the rest are already
  // decrypted and buffered, which a poll() on the socket would not see.
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE((*pub)->Command({"PUBLISH", "events", "m" + std::to_string(i)}).has_value());
  }
  for (int i = 0; i < 5; ++i) {
    auto m = (*sub)->ReadMessage(seconds(10));
    ASSERT_TRUE(m.has_value()) << m.error();
    ASSERT_TRUE(m->has_value()) << i;
    EXPECT_EQ((*m)->payload, "m" + std::to_string(i));
  }
  EXPECT_TRUE((*sub)->Ping().ok());
  // A killed subscriber is broken, reconnects and subscribes again over TLS.
  ASSERT_TRUE(server->KillPubSubClients().has_value());
  auto gone = (*sub)->ReadMessage(seconds(10));
  ASSERT_FALSE(gone.has_value());
  EXPECT_TRUE((*sub)->broken());
  ASSERT_TRUE((*sub)->Reconnect().ok());
  ASSERT_TRUE((*sub)->Subscribe(channels).ok());
  ASSERT_TRUE((*pub)->Command({"PUBLISH", "events", "again"}).has_value());
  auto again = (*sub)->ReadMessage(seconds(10));
  ASSERT_TRUE(again.has_value() && again->has_value());
  EXPECT_EQ((*again)->payload, "again");
}

TEST_F(RedisTlsTest, TimeoutAndReconnectOverTls) {
  auto server = Server(pki_->good_cert());
  ASSERT_NE(server, nullptr);
  ConnectionOptions o = Verified(*server);
  o.command_timeout = milliseconds(100);
  auto conn = Connection::Connect(o);
  ASSERT_TRUE(conn.has_value()) << conn.error();
  ASSERT_TRUE(server->Suspend().ok());
  auto r = (*conn)->Command({"GET", "k"});
  ASSERT_TRUE(server->Resume().ok());
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("GET: timed out after 100 ms"));
  EXPECT_TRUE((*conn)->broken());
  ASSERT_TRUE(server->Restart().ok());
  ASSERT_TRUE((*conn)->Reconnect().ok());
  EXPECT_EQ(*(*conn)->Command({"PING"}), Reply::StatusReply("PONG"));
}

TEST_F(RedisTlsTest, VerifiesByIpAddressToo) {
  auto server = Server(pki_->good_cert());
  ASSERT_NE(server, nullptr);
  auto conn = Connection::Connect(Verified(*server, "127.0.0.1"));
  ASSERT_TRUE(conn.has_value()) << conn.error();
}

TEST_F(RedisTlsTest, EachRefusalSaysWhichCheckFailed) {
  struct Case {
    std::string cert;
    std::string says;
  } cases[] = {
      {pki_->wrong_host_cert(), "hostname mismatch"},
      {pki_->expired_cert(), "certificate expired"},
      {pki_->future_cert(), "certificate not yet valid"},
      {pki_->unknown_ca_cert(), "unknown CA"},
  };
  for (const Case& c : cases) {
    auto server = Server(c.cert);
    ASSERT_NE(server, nullptr);
    const Status s = ConnectError(Verified(*server));
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says)) << c.cert;
    EXPECT_THAT(std::string(s.message()), HasSubstr(": connect: ")) << s;
  }
  // An address the certificate does not name is refused the same way.
  auto wrong = Server(pki_->wrong_host_cert());
  ASSERT_NE(wrong, nullptr);
  const Status by_ip = ConnectError(Verified(*wrong, "127.0.0.1"));
  EXPECT_THAT(std::string(by_ip.message()), HasSubstr("hostname mismatch")) << by_ip;
  auto good = Server(pki_->good_cert());
  ASSERT_NE(good, nullptr);
  // Without ca_file only the system store is trusted: the test CA is unknown.
  ConnectionOptions system_only = Verified(*good);
  system_only.ca_file.clear();
  EXPECT_THAT(std::string(ConnectError(system_only).message()), HasSubstr("unknown CA"));
  // A TLS client on a plain port (which waits for a newline that never
  // comes) is told that the handshake got no answer.
  auto plain = RedisServer::Start();
  ASSERT_TRUE(plain.has_value()) << plain.error();
  ConnectionOptions on_plain = Verified(*good);
  on_plain.port = (*plain)->port();
  on_plain.connect_timeout = milliseconds(300);
  const Status no_tls = ConnectError(on_plain);
  EXPECT_THAT(std::string(no_tls.message()), HasSubstr("TLS handshake: timed out")) << no_tls;
  EXPECT_THAT(std::string(no_tls.message()), HasSubstr("a TLS port?")) << no_tls;
}

TEST_F(RedisTlsTest, InsecureSkipVerifyConnectsAnywayAndWarns) {
  auto server = Server(pki_->wrong_host_cert());
  ASSERT_NE(server, nullptr);
  Warnings warnings;
  ConnectionOptions o = Verified(*server);
  o.ca_file.clear();
  o.insecure_skip_verify = true;
  o.warn = warnings.Sink();
  auto conn = Connection::Connect(o);
  ASSERT_TRUE(conn.has_value()) << conn.error();
  EXPECT_EQ(warnings.Count("redis_tls_insecure"), 1);
  ASSERT_TRUE((*conn)->Reconnect().ok());
  EXPECT_EQ(warnings.Count("redis_tls_insecure"), 2) << "every unverified connect is logged";
}

TEST_F(RedisTlsTest, MutualTlsRequiredNamesTheMissingClientCertificate) {
  auto server = Server(pki_->good_cert(), "yes");
  ASSERT_NE(server, nullptr);
  const Status s = ConnectError(Verified(*server));
  EXPECT_THAT(std::string(s.message()), HasSubstr("requires a client certificate")) << s;
  ConnectionOptions with_cert = Verified(*server);
  with_cert.client_cert = pki_->client_cert();
  with_cert.client_key = pki_->client_key();
  auto conn = Connection::Connect(with_cert);
  ASSERT_TRUE(conn.has_value()) << conn.error();
  EXPECT_EQ(*(*conn)->Command({"PING"}), Reply::StatusReply("PONG"));
  // A certificate the server's CA did not sign is refused as such.
  ConnectionOptions foreign = with_cert;
  foreign.client_cert = pki_->unknown_ca_cert();
  foreign.client_key = pki_->server_key();
  const Status refused = ConnectError(foreign);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("refused the client certificate"))
      << refused;
}

TEST_F(RedisTlsTest, MutualTlsOptionalWorksWithAndWithoutClientCertificate) {
  auto server = Server(pki_->good_cert(), "optional");
  ASSERT_NE(server, nullptr);
  ConnectionOptions o = Verified(*server);
  auto anonymous = Connection::Connect(o);
  ASSERT_TRUE(anonymous.has_value()) << anonymous.error();
  o.client_cert = pki_->client_cert();
  o.client_key = pki_->client_key();
  auto with_cert = Connection::Connect(o);
  ASSERT_TRUE(with_cert.has_value()) << with_cert.error();
  EXPECT_EQ(*(*with_cert)->Command({"PING"}), Reply::StatusReply("PONG"));
}

TEST_F(RedisTlsTest, BadClientKeyFilesAreNamed) {
  auto server = Server(pki_->good_cert());
  ASSERT_NE(server, nullptr);
  ConnectionOptions o = Verified(*server);
  o.client_cert = pki_->client_cert();
  o.client_key = pki_->server_key();  // readable, but not this certificate's
  const Status mismatch = ConnectError(o);
  EXPECT_EQ(mismatch.code(), StatusCode::kInvalidArgument) << mismatch;
  EXPECT_THAT(std::string(mismatch.message()), HasSubstr("does not match client_cert"));
  o.client_key = pki_->dir() + "/no-such.key";
  const Status missing = ConnectError(o);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("client_key"));
  EXPECT_THAT(std::string(missing.message()), HasSubstr("no-such.key"));
  o = Verified(*server);
  o.ca_file = pki_->dir() + "/openssl.log";  // readable, no certificate in it
  EXPECT_THAT(std::string(ConnectError(o).message()), HasSubstr("ca_file"));
}

TEST_F(RedisTlsTest, RefusedAuthIsReportedWithoutThePassword) {
  const std::string password = "Tls-Pw-51c0";
  auto server = Server(pki_->good_cert(), "optional", password);
  ASSERT_NE(server, nullptr);
  Warnings warnings;
  ConnectionOptions o = Verified(*server);
  o.password = "Wrong-" + password;
  o.warn = warnings.Sink();
  const Status s = ConnectError(o);
  EXPECT_THAT(std::string(s.message()), HasSubstr("AUTH"));
  ASSERT_EQ(warnings.Count("redis_auth_failed"), 1);
  EXPECT_THAT(warnings.seen[0].second, Not(HasSubstr(password)));
  EXPECT_THAT(warnings.seen[0].second, HasSubstr("WRONGPASS"));
  o.password = password;
  auto conn = Connection::Connect(o);
  ASSERT_TRUE(conn.has_value()) << conn.error();
  EXPECT_EQ(warnings.Count("redis_auth_failed"), 1);
}

// The process keeps one TLS context per distinct settings, shared by every
// connection of every thread. OpenSSL 3.0 decodes a certificate's extensions
// on first use and caches them; two threads that both find the cache empty
// both fill it, the second overwriting what the first is reading (OpenSSL
// issue 32609, a data race ThreadSanitizer reports). The context fills the
// cache of every certificate it holds before it is shared, so threads that
// handshake at the same instant over a context none has used yet only read.
// Each round copies the files to new paths: a new context, untouched.
TEST_F(RedisTlsTest, ThreadsHandshakingAtOnceOverAFreshContextShareItSafely) {
  auto server = Server(pki_->good_cert(), "yes");
  ASSERT_NE(server, nullptr);
  constexpr int kRounds = 8;
  constexpr int kThreads = 4;
  static int contexts_made = 0;  // new paths under --gtest_repeat too
  for (int round = 0; round < kRounds; ++round) {
    const std::string dir = pki_->dir() + "/fresh" + std::to_string(contexts_made++);
    std::filesystem::create_directories(dir);
    ConnectionOptions o = Verified(*server);
    o.ca_file = dir + "/ca.crt";
    o.client_cert = dir + "/client.crt";
    o.client_key = dir + "/client.key";
    std::filesystem::copy_file(pki_->ca_cert(), o.ca_file);
    std::filesystem::copy_file(pki_->client_cert(), o.client_cert);
    std::filesystem::copy_file(pki_->client_key(), o.client_key);
    std::vector<Status> results(kThreads);
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        auto conn = Connection::Connect(o);
        results[t] = conn ? (*conn)->Ping() : conn.error();
      });
    }
    for (std::thread& t : threads) t.join();
    for (int t = 0; t < kThreads; ++t) {
      EXPECT_TRUE(results[t].ok()) << "round " << round << ", thread " << t << ": " << results[t];
    }
  }
}

TEST_F(RedisTlsTest, TwoInstancesShareATripOverMutualTls) {
  auto server = Server(pki_->good_cert(), "yes");
  ASSERT_NE(server, nullptr);
  SharedStateOptions o;
  o.connection = Verified(*server);
  o.connection.client_cert = pki_->client_cert();
  o.connection.client_key = pki_->client_key();
  o.connection.command_timeout = seconds(2);
  o.heartbeat = milliseconds(200);
  std::shared_ptr<RedisSharedState> a = *RedisSharedState::Create(o);
  std::shared_ptr<RedisSharedState> b = *RedisSharedState::Create(o);
  ASSERT_TRUE(PollUntil([&] { return a->healthy() && b->healthy(); }, seconds(30)));
  fusebox::testing::ManualClock clock;
  CircuitBreakerConfig config;
  config.sliding_window_size = 2;
  config.minimum_number_of_calls = 2;
  config.wait_duration_in_open_state = seconds(30);
  config.shared_state = a;
  auto ba = *CircuitBreaker::Create("tls:circuit", config, clock);
  config.shared_state = b;
  auto bb = *CircuitBreaker::Create("tls:circuit", config, clock);
  for (auto* x : {ba.get(), bb.get()}) {
    auto p = x->TryAcquire();
    ASSERT_TRUE(p.has_value());
    p->Success(milliseconds(1));
  }
  while (ba->state() == State::kClosed) {
    auto p = ba->TryAcquire();
    ASSERT_TRUE(p.has_value());
    p->Failure(milliseconds(1));
  }
  ASSERT_EQ(ba->state(), State::kOpen);
  EXPECT_TRUE(PollUntil([&] { return bb->state() == State::kOpen; }, seconds(30)))
      << "b never heard of a's trip over mutual TLS";
  EXPECT_EQ(a->stats().errors, 0);
  EXPECT_EQ(b->stats().errors, 0);
}

}  // namespace
}  // namespace fusebox::redis
