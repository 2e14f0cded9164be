// UpstreamPool against a real HTTP server (FakeUpstream) over loopback.
#include "apps/gateway/upstream_client.h"

#include <gtest/gtest.h>

#include "apps/gateway/fake_upstream.h"

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

}  // namespace
}  // namespace fusebox::gateway
