// Asking Redis Sentinel where the primary is, for Connection's connects in
// Sentinel mode (ConnectionOptions::sentinels).
//
// A sentinel is an ordinary Redis connection (the sentinels' password, the
// data options' TLS settings) made for one question and closed after it:
// discovery runs only when a connection is made or remade, which the stores
// pace with their own breaker, so a pooled sentinel connection would be idle
// almost always.
//
// SentinelWatch follows failovers as they happen: a subscription to
// +switch-master on one sentinel, read by the store's subscriber thread.
//
// Private to fusebox::redis. The functions are thread-safe (they share
// nothing); a SentinelWatch is not thread-safe (one thread uses it).
#ifndef FUSEBOX_REDIS_SRC_SENTINEL_H_
#define FUSEBOX_REDIS_SRC_SENTINEL_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "fusebox/clock.h"
#include "fusebox/redis/connection.h"
#include "fusebox/redis/options.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox::redis::internal {

// Options to reach sentinel `index` of `data.sentinels`, every wait bounded
// by `timeout`.
ConnectionOptions SentinelOptions(const ConnectionOptions& data, std::size_t index,
                                  Duration timeout);

// `SENTINEL get-master-addr-by-name data.master_name` on sentinel `index`,
// within `timeout`. kUnavailable when it cannot be asked, refuses, or does
// not know the name.
Result<SentinelAddress> AskSentinel(const ConnectionOptions& data, std::size_t index,
                                    Duration timeout);

// OK when ROLE on `conn` says "master"; kUnavailable when the server is a
// replica (a stale sentinel answer, or a demoted primary) or cannot say.
Status CheckIsPrimary(Connection& conn);

// Listens for `+switch-master` on one of data.sentinels at a time, so that a
// failover is followed when the sentinels announce it rather than when the
// old primary is demoted (which, after SENTINEL FAILOVER with the old primary
// alive, Sentinel does only seconds later: writes sent there meanwhile would
// be lost).
class SentinelWatch {
 public:
  // `data` must have sentinels.
  explicit SentinelWatch(ConnectionOptions data);
  ~SentinelWatch();
  SentinelWatch(const SentinelWatch&) = delete;
  SentinelWatch& operator=(const SentinelWatch&) = delete;

  // Keeps the subscription (subscribing when there is none, at most once per
  // growing pause, each attempt bounded by the connect timeout) and reads
  // what has arrived, without waiting. Returns the primary's "host:port"
  // (ConnectionOptions::Endpoint's form) when a failover of data.master_name
  // was announced, and after each (re)subscribe what that sentinel names
  // now, so that a failover announced while nobody listened is not missed.
  std::optional<std::string> Poll(TimePoint now);

 private:
  std::optional<std::string> Subscribe(TimePoint now);

  const ConnectionOptions data_;
  std::unique_ptr<Connection> conn_;  // Subscribed to +switch-master, or null.
  std::size_t next_ = 0;              // The sentinel to try next.
  TimePoint retry_at_{};
  Duration pause_{};
};

}  // namespace fusebox::redis::internal

#endif  // FUSEBOX_REDIS_SRC_SENTINEL_H_
