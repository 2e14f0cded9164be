// UpstreamPool and AsyncUpstreamPool against a real HTTP server
// (FakeUpstream) over loopback.
#include "apps/gateway/upstream_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/write.hpp>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "apps/gateway/fake_upstream.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox::gateway {
namespace {

TEST(UpstreamPool, ReusesKeepAliveConnections) {
  auto upstream = FakeUpstream::Start();
  ASSERT_TRUE(upstream.has_value()) << upstream.error().message();
  ASSERT_TRUE(
      (*upstream)->SetRoute({"GET", "/v19.0/*/comments", {{.body = R"({"data":[]})"}}}).ok());
  UpstreamConfig config;
  config.name = "graph";
  config.host = "127.0.0.1";
  config.port = (*upstream)->port();
  UpstreamPool pool(config);
  for (int i = 0; i < 50; ++i) {
    UpstreamRequest request;
    request.target = "/v19.0/178/comments";
    Result<UpstreamReply> reply = pool.Send(request);
    ASSERT_TRUE(reply.has_value()) << reply.error().message();
    EXPECT_EQ(reply->status, 200);
  }
  // Sequential calls share one keep-alive connection (an idle connection
  // was once taken for closed and dropped: one connection per call).
  EXPECT_EQ(pool.connections_opened(), 1u);
}

// An event loop on two threads, as the gateway runs it.
class Loop {
 public:
  Loop() {
    for (int i = 0; i < 2; ++i) threads_.emplace_back([this] { ioc_.run(); });
  }
  ~Loop() {
    work_.reset();
    for (std::thread& t : threads_) t.join();
  }
  boost::asio::io_context& ioc() { return ioc_; }

 private:
  boost::asio::io_context ioc_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(ioc_);
  std::vector<std::thread> threads_;
};

// An upstream named "graph" on 127.0.0.1: a FakeUpstream or a ClosingUpstream.
template <typename U>
UpstreamConfig ConfigFor(const U& upstream) {
  UpstreamConfig config;
  config.name = "graph";
  config.host = "127.0.0.1";
  config.port = upstream.port();
  return config;
}

std::future<Result<UpstreamReply>> AsyncSend(AsyncUpstreamPool& pool, UpstreamRequest request) {
  auto promise = std::make_shared<std::promise<Result<UpstreamReply>>>();
  std::future<Result<UpstreamReply>> reply = promise->get_future();
  pool.Send(std::move(request),
            [promise](Result<UpstreamReply> r) { promise->set_value(std::move(r)); });
  return reply;
}

std::future<Result<UpstreamReply>> AsyncGet(AsyncUpstreamPool& pool, std::string target,
                                            Duration timeout = std::chrono::seconds(10)) {
  UpstreamRequest request;
  request.target = std::move(target);
  request.timeout = timeout;
  return AsyncSend(pool, std::move(request));
}

// An upstream that answers one request per connection, with a keep-alive
// reply (`reply`, the bytes sent), then closes the connection: what a server
// with a short keep-alive timeout does to an idle pooled connection. Serves
// `n` connections on a thread of its own; closed(i) is ready once connection
// i is closed.
class ClosingUpstream {
 public:
  static constexpr std::string_view kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";

  explicit ClosingUpstream(int n, std::string_view reply = kOk) : n_(n), reply_(reply) {
    for (std::promise<void>& p : promises_) closed_.push_back(p.get_future().share());
    thread_ = std::thread([this] { Serve(); });
  }
  ~ClosingUpstream() {
    // Connections that were never made (a failing test): make them, so that
    // the thread ends.
    for (int i = served_.load(); i < n_; ++i) {
      boost::asio::ip::tcp::socket s(ioc_);
      boost::system::error_code ec;
      s.connect(acceptor_.local_endpoint(), ec);
    }
    thread_.join();
  }
  int port() const { return acceptor_.local_endpoint().port(); }
  std::shared_future<void> closed(int i) { return closed_[static_cast<std::size_t>(i)]; }
  int requests() const { return requests_.load(); }

 private:
  void Serve() {
    for (int i = 0; i < n_; ++i) {
      boost::system::error_code ec;
      boost::asio::ip::tcp::socket s(ioc_);
      acceptor_.accept(s, ec);
      served_.fetch_add(1);
      std::string in;
      if (!ec) boost::asio::read_until(s, boost::asio::dynamic_buffer(in), "\r\n\r\n", ec);
      if (!ec) {
        requests_.fetch_add(1);
        boost::asio::write(s, boost::asio::buffer(reply_), ec);
      }
      s.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
      s.close(ec);
      promises_[static_cast<std::size_t>(i)].set_value();
    }
  }

  const int n_;
  const std::string reply_;
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::acceptor acceptor_{ioc_, {boost::asio::ip::make_address("127.0.0.1"), 0}};
  std::vector<std::promise<void>> promises_{static_cast<std::size_t>(n_)};
  std::vector<std::shared_future<void>> closed_;
  std::atomic<int> served_{0};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

TEST(AsyncUpstreamPool, ReusesKeepAliveConnections) {
  auto upstream = FakeUpstream::Start();
  ASSERT_TRUE(upstream.has_value()) << upstream.error().message();
  ASSERT_TRUE((*upstream)
                  ->SetRoute({"GET",
                              "/v19.0/*/comments",
                              {{.headers = {{"X-Page", "1"}}, .body = R"({"data":[]})"}}})
                  .ok());
  Loop loop;
  AsyncUpstreamPool pool(loop.ioc(), ConfigFor(**upstream));
  for (int i = 0; i < 50; ++i) {
    Result<UpstreamReply> reply = AsyncGet(pool, "/v19.0/178/comments").get();
    ASSERT_TRUE(reply.has_value()) << reply.error().message();
    EXPECT_EQ(reply->status, 200);
    EXPECT_EQ(reply->body, R"({"data":[]})");
    EXPECT_EQ(reply->Header("x-page"), "1");
  }
  EXPECT_EQ(pool.connections_opened(), 1u);
  EXPECT_EQ((*upstream)->Calls("GET", "/v19.0/*/comments"), 50);
}

TEST(AsyncUpstreamPool, ConcurrentCallsEachGetTheirOwnReply) {
  auto upstream = FakeUpstream::Start({.threads = 2});
  ASSERT_TRUE(upstream.has_value()) << upstream.error().message();
  ASSERT_TRUE((*upstream)->SetRoute({"GET", "/v19.0/*/comments", {{.body = "{}"}}}).ok());
  ASSERT_TRUE((*upstream)->SetRoute({"GET", "/v19.0/*/media", {{.status = 404}}}).ok());
  Loop loop;
  AsyncUpstreamPool pool(loop.ioc(), ConfigFor(**upstream));
  std::vector<std::future<Result<UpstreamReply>>> replies;
  for (int i = 0; i < 40; ++i) {
    replies.push_back(AsyncGet(
        pool, i % 2 == 0 ? "/v19.0/" + std::to_string(i) + "/comments" : "/v19.0/x/media"));
  }
  for (int i = 0; i < 40; ++i) {
    Result<UpstreamReply> reply = replies[i].get();
    ASSERT_TRUE(reply.has_value()) << reply.error().message();
    EXPECT_EQ(reply->status, i % 2 == 0 ? 200 : 404) << i;
  }
  EXPECT_LE(pool.connections_opened(), 40u);
  // Idle connections are reused afterwards.
  const std::uint64_t opened = pool.connections_opened();
  ASSERT_TRUE(AsyncGet(pool, "/v19.0/1/comments").get().has_value());
  EXPECT_EQ(pool.connections_opened(), opened);
}

TEST(AsyncUpstreamPool, AConnectionDroppedMidCallIsAnErrorAndNotReused) {
  auto upstream = FakeUpstream::Start();
  ASSERT_TRUE(upstream.has_value()) << upstream.error().message();
  ASSERT_TRUE(
      (*upstream)->SetRoute({"GET", "/v19.0/*/comments", {{.drop = true}, {.body = "{}"}}}).ok());
  Loop loop;
  AsyncUpstreamPool pool(loop.ioc(), ConfigFor(**upstream));
  Result<UpstreamReply> dropped = AsyncGet(pool, "/v19.0/178/comments").get();
  ASSERT_FALSE(dropped.has_value());
  EXPECT_EQ(dropped.error().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(dropped.error().message()),
              ::testing::StartsWith("upstream graph: read: "));
  for (int i = 0; i < 3; ++i) {
    Result<UpstreamReply> reply = AsyncGet(pool, "/v19.0/178/comments").get();
    ASSERT_TRUE(reply.has_value()) << reply.error().message();
  }
  EXPECT_EQ(pool.connections_opened(), 2u);
}

TEST(AsyncUpstreamPool, AGetOnAnIdleConnectionTheUpstreamClosedGoesThroughOnANewOne) {
  // Idle pooled connections are taken without a peek (a system call per
  // request); one the upstream closed meanwhile costs a retry instead.
  ClosingUpstream upstream(2);
  const UpstreamConfig config = ConfigFor(upstream);
  Loop loop;
  AsyncUpstreamPool pool(loop.ioc(), config);
  Result<UpstreamReply> first = AsyncGet(pool, "/v19.0/178/comments").get();
  ASSERT_TRUE(first.has_value()) << first.error().message();
  upstream.closed(0).wait();  // the pooled connection is dead now

  Result<UpstreamReply> second = AsyncGet(pool, "/v19.0/178/comments").get();
  ASSERT_TRUE(second.has_value()) << second.error().message();
  EXPECT_EQ(second->status, 200);
  EXPECT_EQ(second->body, "{}");
  EXPECT_EQ(pool.connections_opened(), 2u);
  EXPECT_EQ(upstream.requests(), 2);
}

// Interim (1xx) responses come before the final one (RFC 9110 section 15.2):
// both pools skip them, and neither takes one for the answer.
TEST(AsyncUpstreamPool, InterimResponsesAreSkipped) {
  constexpr std::string_view kReply =
      "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"
      "HTTP/1.1 100 Continue\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
  ClosingUpstream upstream(2, kReply);
  const UpstreamConfig config = ConfigFor(upstream);
  Loop loop;
  AsyncUpstreamPool async_pool(loop.ioc(), config);
  Result<UpstreamReply> a = AsyncGet(async_pool, "/v19.0/178/comments").get();
  ASSERT_TRUE(a.has_value()) << a.error().message();
  EXPECT_EQ(a->status, 200);
  EXPECT_EQ(a->body, "{}");
  UpstreamPool pool(config);
  UpstreamRequest request;
  request.target = "/v19.0/178/comments";
  Result<UpstreamReply> b = pool.Send(request);
  ASSERT_TRUE(b.has_value()) << b.error().message();
  EXPECT_EQ(b->status, 200);
  EXPECT_EQ(b->body, "{}");
}

TEST(AsyncUpstreamPool, OnlyAnIdempotentRequestIsSentAgainAndOnlyOnce) {
  // Each route answers once, then drops every later request unanswered.
  auto upstream = FakeUpstream::Start();
  ASSERT_TRUE(upstream.has_value()) << upstream.error().message();
  ASSERT_TRUE((*upstream)->SetRoute({"GET", "/get", {{.body = "{}"}, {.drop = true}}}).ok());
  ASSERT_TRUE((*upstream)->SetRoute({"POST", "/post", {{.body = "{}"}, {.drop = true}}}).ok());
  Loop loop;
  AsyncUpstreamPool pool(loop.ioc(), ConfigFor(**upstream));

  ASSERT_TRUE(AsyncGet(pool, "/get").get().has_value());
  // Dropped on the reused connection, sent again on a new one, dropped again.
  Result<UpstreamReply> get = AsyncGet(pool, "/get").get();
  ASSERT_FALSE(get.has_value());
  EXPECT_EQ(get.error().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(get.error().message()), ::testing::StartsWith("upstream graph: read: "));
  EXPECT_EQ((*upstream)->Calls("GET", "/get"), 3);

  UpstreamRequest post;
  post.method = "POST";
  post.target = "/post";
  post.body = "{}";
  ASSERT_TRUE(AsyncSend(pool, post).get().has_value());
  // A POST is never sent twice.
  Result<UpstreamReply> again = AsyncSend(pool, post).get();
  ASSERT_FALSE(again.has_value());
  EXPECT_EQ(again.error().code(), StatusCode::kUnavailable);
  EXPECT_EQ((*upstream)->Calls("POST", "/post"), 2);
}

TEST(AsyncUpstreamPool, DeadlineAndRefusedConnectionAreErrorsNamingTheUpstream) {
  // The upstream holds its answer on a clock nobody advances.
  testing::ManualClock never;
  auto upstream = FakeUpstream::Start({.clock = &never});
  ASSERT_TRUE(upstream.has_value()) << upstream.error().message();
  ASSERT_TRUE((*upstream)
                  ->SetRoute({"GET", "/v19.0/*/comments", {{.latency = std::chrono::hours(1)}}})
                  .ok());
  Loop loop;
  AsyncUpstreamPool pool(loop.ioc(), ConfigFor(**upstream));
  Result<UpstreamReply> late =
      AsyncGet(pool, "/v19.0/178/comments", std::chrono::milliseconds(50)).get();
  ASSERT_FALSE(late.has_value());
  EXPECT_EQ(late.error().code(), StatusCode::kTimeout);
  EXPECT_EQ(late.error().message(), "upstream graph: deadline passed during read");
  (*upstream)->Stop();

  UpstreamConfig gone = ConfigFor(**upstream);  // nothing listens there now
  AsyncUpstreamPool refused_pool(loop.ioc(), gone);
  Result<UpstreamReply> refused = AsyncGet(refused_pool, "/v19.0/178/comments").get();
  ASSERT_FALSE(refused.has_value());
  EXPECT_EQ(refused.error().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(refused.error().message()),
              ::testing::StartsWith("upstream graph: connect: "));
}

}  // namespace
}  // namespace fusebox::gateway
