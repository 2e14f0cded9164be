// UpstreamPool and AsyncUpstreamPool against a real HTTP server
// (FakeUpstream) over loopback.
#include "apps/gateway/upstream_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <future>
#include <memory>
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

UpstreamConfig ConfigFor(const FakeUpstream& upstream) {
  UpstreamConfig config;
  config.name = "graph";
  config.host = "127.0.0.1";
  config.port = upstream.port();
  return config;
}

std::future<Result<UpstreamReply>> AsyncGet(AsyncUpstreamPool& pool, std::string target,
                                            Duration timeout = std::chrono::seconds(10)) {
  auto promise = std::make_shared<std::promise<Result<UpstreamReply>>>();
  std::future<Result<UpstreamReply>> reply = promise->get_future();
  UpstreamRequest request;
  request.target = std::move(target);
  request.timeout = timeout;
  pool.Send(std::move(request),
            [promise](Result<UpstreamReply> r) { promise->set_value(std::move(r)); });
  return reply;
}

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
