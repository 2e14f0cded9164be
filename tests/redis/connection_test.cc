// fusebox::redis::Connection against a real redis-server on loopback.
#include "fusebox/redis/connection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/redis/redis_server.h"

namespace fusebox::redis {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RedisServer;
using testing::RedisServerOptions;

// Real time, measured only here in tests/ (library code never reads a clock).
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  milliseconds elapsed() const {
    return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start_);
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

class ConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisServer::Start();
    ASSERT_TRUE(server.has_value()) << server.error();
    server_ = std::move(*server);
    auto conn = server_->Connect();
    ASSERT_TRUE(conn.has_value()) << conn.error();
    conn_ = std::move(*conn);
  }

  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<Connection> conn_;
};

TEST_F(ConnectionTest, CommandsAreBinarySafeAndRepliesTyped) {
  const std::string value("a\0b\r\nc", 6);
  Result<Reply> r = conn_->Command({"SET", "k", value});
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(*r, Reply::StatusReply("OK"));
  r = conn_->Command({"GET", "k"});
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(*r, Reply::String(value));
  r = conn_->Command({"GET", "absent"});
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->is_nil());
  r = conn_->Command({"RPUSH", "list", "x", "y"});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, Reply::Integer(2));
  r = conn_->Command({"LRANGE", "list", "0", "-1"});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, Reply::Array({Reply::String("x"), Reply::String("y")}));
  // A command error is a reply, and the connection stays usable.
  r = conn_->Command({"INCR", "list"});
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->IsErrorCode("WRONGTYPE")) << r->ToString();
  EXPECT_FALSE(conn_->broken());
  EXPECT_TRUE(conn_->Ping().ok());
}

TEST_F(ConnectionTest, PipelineReadsRepliesInOrder) {
  Result<std::vector<Reply>> r =
      conn_->Pipeline({{"SET", "a", "1"}, {"INCR", "a"}, {"GET", "a"}, {"PTTL", "a"}});
  ASSERT_TRUE(r.has_value()) << r.error();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0], Reply::StatusReply("OK"));
  EXPECT_EQ((*r)[1], Reply::Integer(2));
  EXPECT_EQ((*r)[2], Reply::String("2"));
  EXPECT_EQ((*r)[3], Reply::Integer(-1));

  ASSERT_TRUE(conn_->Append({"INCR", "a"}).ok());
  ASSERT_TRUE(conn_->Append({"INCR", "a"}).ok());
  EXPECT_EQ(conn_->pending_replies(), 2u);
  // Command() while replies are unread would read the wrong reply: refused.
  Result<Reply> refused = conn_->Command({"GET", "a"});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(conn_->ReadReply().value_or(Reply::Nil()), Reply::Integer(3));
  EXPECT_EQ(conn_->ReadReply().value_or(Reply::Nil()), Reply::Integer(4));
  EXPECT_EQ(conn_->ReadReply().error().code(), StatusCode::kInvalidArgument);
}

TEST_F(ConnectionTest, SelectsTheDatabase) {
  ConnectionOptions options = server_->connection_options();
  options.db = 3;
  auto db3 = Connection::Connect(options);
  ASSERT_TRUE(db3.has_value()) << db3.error();
  ASSERT_TRUE((*db3)->Command({"SET", "only-in-3", "x"}).has_value());
  EXPECT_TRUE(conn_->Command({"GET", "only-in-3"})->is_nil());
  EXPECT_EQ(*(*db3)->Command({"GET", "only-in-3"}), Reply::String("x"));

  options.db = 99;  // redis-server has 16 databases by default
  auto bad = Connection::Connect(options);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.error().message()), HasSubstr("SELECT 99"));
}

TEST(Connection, ClosedPortFailsFastWithUnavailable) {
  // A port nobody listens on: start a server to learn a free port, stop it.
  auto server = RedisServer::Start();
  ASSERT_TRUE(server.has_value()) << server.error();
  ConnectionOptions options = (*server)->connection_options();
  ASSERT_TRUE((*server)->Stop().ok());
  options.connect_timeout = std::chrono::seconds(2);
  const Stopwatch watch;
  auto conn = Connection::Connect(options);
  const milliseconds elapsed = watch.elapsed();
  ASSERT_FALSE(conn.has_value());
  EXPECT_EQ(conn.error().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(conn.error().message()),
              HasSubstr("127.0.0.1:" + std::to_string(options.port) + ": connect"));
  // Refused at once, not after the connect timeout.
  EXPECT_LT(elapsed, milliseconds(500));
}

TEST(Connection, InvalidOptionsAreRejectedBeforeConnecting) {
  ConnectionOptions options;
  options.port = 70000;
  auto conn = Connection::Connect(options);
  ASSERT_FALSE(conn.has_value());
  EXPECT_EQ(conn.error().code(), StatusCode::kInvalidArgument);
}

TEST_F(ConnectionTest, CommandTimeoutAgainstClientPauseBreaksTheConnection) {
  ConnectionOptions options = server_->connection_options(milliseconds(100));
  auto conn = Connection::Connect(options);
  ASSERT_TRUE(conn.has_value()) << conn.error();
  ASSERT_TRUE(server_->Pause(std::chrono::seconds(1)).ok());

  const Stopwatch watch;
  Result<Reply> r = (*conn)->Command({"GET", "k"});
  const milliseconds elapsed = watch.elapsed();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("GET: timed out after 100 ms"));
  EXPECT_GE(elapsed, milliseconds(90));
  EXPECT_LT(elapsed, milliseconds(900));  // the timeout, not the 1 s pause
  EXPECT_TRUE((*conn)->broken());

  // Broken: later calls fail at once, without I/O, until Reconnect().
  const Stopwatch again;
  Result<Reply> r2 = (*conn)->Command({"GET", "k"});
  ASSERT_FALSE(r2.has_value());
  EXPECT_EQ(r2.error().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(r2.error().message()), HasSubstr("call Reconnect()"));
  EXPECT_LT(again.elapsed(), milliseconds(50));
  EXPECT_EQ((*conn)->Ping().code(), StatusCode::kUnavailable);

  // The harness' own connection is paused too, so its UNPAUSE returns when
  // the pause ends.
  ASSERT_TRUE(server_->Admin({"CLIENT", "UNPAUSE"}).has_value());
  ASSERT_TRUE((*conn)->Reconnect().ok());
  EXPECT_TRUE((*conn)->Ping().ok());
}

TEST_F(ConnectionTest, ServerRestartBreaksTheConnectionWithoutSigpipe) {
  ASSERT_TRUE(server_->Restart().ok());
  // The old socket is dead: the first write may still succeed (the kernel
  // buffers it), a later one gets EPIPE. Neither may kill the process.
  Status first = conn_->Ping();
  if (first.ok()) first = conn_->Ping();
  EXPECT_EQ(first.code(), StatusCode::kUnavailable) << first;
  EXPECT_TRUE(conn_->broken());
  ASSERT_TRUE(conn_->Reconnect().ok());
  EXPECT_TRUE(conn_->Ping().ok());

  ASSERT_TRUE(server_->Kill().ok());
  Result<Reply> r = conn_->Command({"SET", "a", "b"});
  if (r.has_value()) r = conn_->Command({"SET", "a", "b"});
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kUnavailable);
  Status s = conn_->Reconnect();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("connect"));
}

TEST(ConnectionAuth, PasswordAndWrongPassword) {
  const std::string password = "Pw-9f8e7d6c-not-logged";
  auto server = RedisServer::Start(RedisServerOptions{.password = password});
  ASSERT_TRUE(server.has_value()) << server.error();
  auto good = (*server)->Connect();
  ASSERT_TRUE(good.has_value()) << good.error();
  EXPECT_TRUE((*good)->Ping().ok());

  ConnectionOptions wrong = (*server)->connection_options();
  wrong.password = "Wrong-" + password;
  auto bad = Connection::Connect(wrong);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kUnavailable);
  const std::string message = bad.error().ToString();
  EXPECT_THAT(message, HasSubstr("AUTH"));
  EXPECT_THAT(message, HasSubstr("127.0.0.1:" + std::to_string((*server)->port())));
  EXPECT_THAT(message, Not(HasSubstr(password)));
  EXPECT_THAT(message, Not(HasSubstr("Pw-9f8e")));

  // Without a password every command is refused with NOAUTH, which maps to
  // kUnavailable (the store cannot be used).
  ConnectionOptions none = (*server)->connection_options();
  none.password.clear();
  auto anonymous = Connection::Connect(none);
  ASSERT_TRUE(anonymous.has_value()) << anonymous.error();
  Result<Reply> r = (*anonymous)->Command({"GET", "k"});
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->IsErrorCode("NOAUTH")) << r->ToString();
  EXPECT_EQ((*anonymous)->ErrorReplyStatus("GET", *r).code(), StatusCode::kUnavailable);
}

TEST_F(ConnectionTest, AclUserWithPassword) {
  Result<Reply> r = server_->Admin({"ACL", "SETUSER", "svc", "on", ">svc-pw", "~*", "&*", "+@all"});
  ASSERT_TRUE(r.has_value() && r->is_status()) << (r ? r->ToString() : r.error().ToString());
  ConnectionOptions options = server_->connection_options();
  options.username = "svc";
  options.password = "svc-pw";
  auto conn = Connection::Connect(options);
  ASSERT_TRUE(conn.has_value()) << conn.error();
  EXPECT_EQ(*(*conn)->Command({"ACL", "WHOAMI"}), Reply::String("svc"));

  options.password = "svc-wrong-pw";
  auto bad = Connection::Connect(options);
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(bad.error().ToString(), HasSubstr("user svc"));
  EXPECT_THAT(bad.error().ToString(), Not(HasSubstr("svc-wrong-pw")));
}

TEST_F(ConnectionTest, SubscriberReceivesMessagesAndAnswersPing) {
  auto sub = server_->Connect(milliseconds(500));
  ASSERT_TRUE(sub.has_value()) << sub.error();
  const std::vector<std::string> channels = {"ch1", "ch2"};
  ASSERT_TRUE((*sub)->Subscribe(channels).ok());
  EXPECT_TRUE((*sub)->subscribed());

  // Nothing published: times out, and the connection stays usable.
  Result<std::optional<PubSubMessage>> m = (*sub)->ReadMessage(milliseconds(20));
  ASSERT_TRUE(m.has_value()) << m.error();
  EXPECT_FALSE(m->has_value());
  EXPECT_FALSE((*sub)->broken());

  const std::string payload("x\0y", 3);
  EXPECT_EQ(*conn_->Command({"PUBLISH", "ch2", payload}), Reply::Integer(1));
  m = (*sub)->ReadMessage(std::chrono::seconds(5));
  ASSERT_TRUE(m.has_value()) << m.error();
  ASSERT_TRUE(m->has_value());
  EXPECT_EQ(**m, (PubSubMessage{"ch2", payload}));

  // A message published before PING arrives before the pong and is kept.
  ASSERT_TRUE(conn_->Command({"PUBLISH", "ch1", "before-ping"}).has_value());
  EXPECT_TRUE((*sub)->Ping().ok());
  m = (*sub)->ReadMessage(Duration::zero());
  ASSERT_TRUE(m.has_value() && m->has_value());
  EXPECT_EQ((*m)->payload, "before-ping");

  // Other commands are refused in subscriber mode (RESP2).
  Result<Reply> refused = (*sub)->Command({"GET", "k"});
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE((*sub)->broken());
}

TEST_F(ConnectionTest, KilledSubscriberIsBrokenAndCanResubscribe) {
  auto sub = server_->Connect(milliseconds(500));
  ASSERT_TRUE(sub.has_value()) << sub.error();
  const std::vector<std::string> channels = {"events"};
  ASSERT_TRUE((*sub)->Subscribe(channels).ok());
  Result<std::int64_t> killed = server_->KillPubSubClients();
  ASSERT_TRUE(killed.has_value()) << killed.error();
  EXPECT_EQ(*killed, 1);
  Result<std::optional<PubSubMessage>> m = (*sub)->ReadMessage(std::chrono::seconds(5));
  ASSERT_FALSE(m.has_value());
  EXPECT_EQ(m.error().code(), StatusCode::kUnavailable);
  EXPECT_TRUE((*sub)->broken());

  ASSERT_TRUE((*sub)->Reconnect().ok());
  EXPECT_FALSE((*sub)->subscribed());
  ASSERT_TRUE((*sub)->Subscribe(channels).ok());
  ASSERT_TRUE(conn_->Command({"PUBLISH", "events", "again"}).has_value());
  m = (*sub)->ReadMessage(std::chrono::seconds(5));
  ASSERT_TRUE(m.has_value() && m->has_value());
  EXPECT_EQ((*m)->payload, "again");
}

TEST_F(ConnectionTest, ErrorReplyStatusSeparatesTransientFromBugs) {
  EXPECT_EQ(conn_->ErrorReplyStatus("EVALSHA", Reply::Error("BUSY Redis is busy")).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(conn_->ErrorReplyStatus("SET", Reply::Error("READONLY You can't write")).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(conn_->ErrorReplyStatus("GET", Reply::Error("LOADING Redis is loading")).code(),
            StatusCode::kUnavailable);
  const Status bug = conn_->ErrorReplyStatus("EVAL", Reply::Error("ERR user_script:1: boom"));
  EXPECT_EQ(bug.code(), StatusCode::kInternal);
  EXPECT_THAT(std::string(bug.message()),
              HasSubstr("redis 127.0.0.1:" + std::to_string(server_->port()) + ": EVAL: ERR"));
}

}  // namespace
}  // namespace fusebox::redis
