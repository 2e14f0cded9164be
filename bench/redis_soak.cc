// A soak of fusebox::redis: several instances (each its own RedisSharedState
// and Registry, hence its own Redis connections) call many circuits from
// several threads while a driver trips circuits the way a rate-limited
// dependency does, and Redis is restarted twice. Reports what issue 5 asks:
// calls per second, commands sent to Redis per call in the steady state, how
// long an OPEN takes to reach every instance (p50/p99), probes per recovery,
// and what happened to calls during the outages.
//
//   ./build/release/bench/fusebox_redis_soak [--seconds 30] [--instances 4]
//       [--threads 2] [--circuits 10000] [--trips-per-second 20]
//
// Needs redis-server (Debian: redis-server); starts its own on a free
// loopback port with the test harness (tests/redis/redis_server.h).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/redis/shared_state.h"
#include "fusebox/registry.h"
#include "tests/redis/redis_server.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

struct Flags {
  int seconds = 30;
  int instances = 4;
  int threads = 2;
  int circuits = 10000;
  int trips_per_second = 20;
};

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const int v = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seconds"))
      f.seconds = v;
    else if (!std::strcmp(argv[i], "--instances"))
      f.instances = v;
    else if (!std::strcmp(argv[i], "--threads"))
      f.threads = v;
    else if (!std::strcmp(argv[i], "--circuits"))
      f.circuits = v;
    else if (!std::strcmp(argv[i], "--trips-per-second"))
      f.trips_per_second = v;
    else {
      std::fprintf(stderr, "unknown flag %s\n", argv[i]);
      std::exit(2);
    }
  }
  return f;
}

std::string Key(int i) { return "soak:read:" + std::to_string(i) + ":quota"; }

// Per circuit the driver tripped: when (steady_clock ns), when each other
// instance saw it OPEN through the fleet, and how many probes (HALF_OPEN
// admissions, any instance) its recovery took.
struct Trip {
  std::int64_t at = 0;
  std::vector<double> arrivals_ms;
  int probes = 0;
  bool closed = false;
};
struct Propagation {
  std::mutex mu;
  std::map<std::string, Trip, std::less<>> trips;
  // [start, end] of each Redis outage (steady_clock ns).
  std::vector<std::pair<std::int64_t, std::int64_t>> outages;
  std::int64_t wrong_rejections = 0;  // a circuit nobody tripped, rejected
};

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

class SeesOpen final : public fusebox::CircuitBreakerListener {
 public:
  explicit SeesOpen(Propagation& p) : p_(p) {}
  void OnTransition(const fusebox::TransitionEvent& e) override {
    const std::int64_t now = NowNs();
    std::lock_guard<std::mutex> lock(p_.mu);
    auto it = p_.trips.find(e.breaker);
    if (it == p_.trips.end() || it->second.closed) return;
    Trip& t = it->second;
    if (e.to == fusebox::State::kOpen && e.reason == fusebox::TransitionReason::kSharedOpen &&
        e.from != fusebox::State::kOpen && t.probes == 0) {
      t.arrivals_ms.push_back((now - t.at) / 1e6);
    } else if (e.to == fusebox::State::kHalfOpen) {
      ++t.probes;
    } else if (e.to == fusebox::State::kClosed && e.from == fusebox::State::kHalfOpen) {
      t.closed = true;
    }
  }

 private:
  Propagation& p_;
};

struct Instance {
  std::shared_ptr<fusebox::redis::RedisSharedState> store;
  std::unique_ptr<fusebox::Registry> registry;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * (v.size() - 1) + 0.5))];
}

}  // namespace

// Over 80 lines on purpose: the soak's script, start to report, read top to
// bottom like the run it drives.
int main(int argc, char** argv) {
  const Flags flags = ParseFlags(argc, argv);
  auto server = fusebox::redis::testing::RedisServer::Start();
  if (!server) {
    std::fprintf(stderr, "redis-server: %s\n", std::string(server.error().message()).c_str());
    return 1;
  }

  Propagation propagation;
  std::vector<Instance> fleet;
  for (int i = 0; i < flags.instances; ++i) {
    fusebox::redis::SharedStateOptions o;
    o.connection = (*server)->connection_options(milliseconds(100));
    o.connection.connect_timeout = milliseconds(100);
    o.down_for = seconds(1);
    auto store = fusebox::redis::RedisSharedState::Create(o);
    if (!store) return 1;
    fusebox::RegistryOptions ro;
    ro.max_breakers = static_cast<std::size_t>(flags.circuits) * 2;
    ro.default_config.sliding_window_size = 20;
    ro.default_config.minimum_number_of_calls = 20;
    ro.default_config.permitted_number_of_calls_in_half_open_state = 1;
    ro.default_config.wait_duration_in_open_state = seconds(1);
    ro.default_config.shared_state = *store;
    ro.default_config.shared_probe_lease = seconds(5);
    auto listener = std::make_shared<SeesOpen>(propagation);
    ro.on_create = [listener](fusebox::CircuitBreaker& b) { b.AddListener(listener); };
    auto registry = fusebox::Registry::Create(ro);
    if (!registry) return 1;
    fleet.push_back({*store, std::move(*registry)});
  }
  for (int i = 0; i < 200 && !std::all_of(fleet.begin(), fleet.end(),
                                          [](const Instance& x) { return x.store->healthy(); });
       ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }

  // Every instance creates its breakers and reads their circuits first, so
  // that an arrival measured below is a push to a breaker that exists, not
  // the first read of one created later.
  {
    std::vector<std::thread> warmers;
    for (auto& inst : fleet) {
      warmers.emplace_back([&] {
        for (int c = 0; c < flags.circuits; ++c) {
          auto b = inst.registry->Get(Key(c));
          if (!b) continue;
          if (auto p = (*b)->TryAcquire()) p->Success(milliseconds(1));
        }
      });
    }
    for (auto& w : warmers) w.join();
  }

  // Circuits the driver tripped and that may still be OPEN: the workers make
  // their calls fail as the dependency would, until the probe of their
  // recovery, which succeeds.
  std::vector<std::atomic<std::int64_t>> open_until(flags.circuits);
  std::atomic<bool> stop{false};
  std::atomic<bool> outage{false};
  std::atomic<std::int64_t> calls{0}, rejected{0}, outage_calls{0}, outage_rejected{0},
      exceptions{0};

  std::vector<std::thread> workers;
  for (int inst = 0; inst < flags.instances; ++inst) {
    for (int t = 0; t < flags.threads; ++t) {
      workers.emplace_back([&, inst, t] {
        std::mt19937_64 rng(static_cast<std::uint64_t>(inst * 1000 + t));
        std::uniform_int_distribution<int> pick(0, flags.circuits - 1);
        std::vector<std::string> keys;
        keys.reserve(flags.circuits);
        for (int i = 0; i < flags.circuits; ++i) keys.push_back(Key(i));
        fusebox::Registry& registry = *fleet[inst].registry;
        // Published in batches: a shared counter bumped on every call would
        // measure its own contention.
        std::int64_t local_calls = 0, local_rejected = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          if (local_calls == 256) {
            calls.fetch_add(local_calls, std::memory_order_relaxed);
            local_calls = 0;
          }
          try {
            const int c = pick(rng);
            auto b = registry.Get(keys[c]);
            if (!b) continue;
            const bool during_outage = outage.load(std::memory_order_relaxed);
            auto permit = (*b)->TryAcquire();
            ++local_calls;
            if (during_outage) outage_calls.fetch_add(1, std::memory_order_relaxed);
            if (!permit) {
              ++local_rejected;
              if (during_outage) outage_rejected.fetch_add(1, std::memory_order_relaxed);
              if (open_until[c].load(std::memory_order_relaxed) == 0) {
                std::lock_guard<std::mutex> lock(propagation.mu);
                ++propagation.wrong_rejections;
              }
              continue;
            }
            permit->Success(milliseconds(1));
          } catch (...) {
            exceptions.fetch_add(1);
          }
        }
        calls.fetch_add(local_calls);
        rejected.fetch_add(local_rejected);
      });
    }
  }

  // The driver: trips a random closed circuit on a random instance with a
  // Retry-After of 1 s, as a 429 would.
  std::atomic<std::int64_t> trips{0};
  std::thread driver([&] {
    std::mt19937_64 rng(42);
    std::uniform_int_distribution<int> pick(0, flags.circuits - 1);
    std::uniform_int_distribution<int> who(0, flags.instances - 1);
    const auto period = std::chrono::microseconds(1000000 / std::max(1, flags.trips_per_second));
    while (!stop.load()) {
      const int c = pick(rng);
      if (open_until[c].load() == 0) {
        auto b = fleet[who(rng)].registry->Get(Key(c));
        if (b && (*b)->state() == fusebox::State::kClosed) {
          auto permit = (*b)->TryAcquire();
          if (permit) {
            open_until[c].store(1);
            {
              std::lock_guard<std::mutex> lock(propagation.mu);
              propagation.trips[Key(c)].at = NowNs();
            }
            permit->Record(fusebox::Outcome::OpenFor(seconds(1)));
            trips.fetch_add(1);
          }
        }
      }
      std::this_thread::sleep_for(period);
    }
  });

  auto commands = [&] {
    std::int64_t n = 0;
    for (auto& i : fleet) n += i.store->stats().commands + i.store->stats().pings;
    return n;
  };

  // Phases: steady, restart, steady, restart, steady. Commands per call are
  // measured over the second half of the first steady third (every breaker
  // has been created and has read its circuit by then).
  const auto start = Clock::now();
  const auto third = seconds(flags.seconds) / 3;
  std::this_thread::sleep_for(third / 2);
  const std::int64_t steady_commands0 = commands();
  const std::int64_t steady_calls0 = calls.load();
  const auto steady_t0 = Clock::now();
  std::this_thread::sleep_for(third / 2);
  const std::int64_t steady_commands = commands() - steady_commands0;
  const std::int64_t steady_calls = calls.load() - steady_calls0;
  const double steady_seconds = std::chrono::duration<double>(Clock::now() - steady_t0).count();

  auto do_outage = [&] {
    const std::int64_t outage_start = NowNs();
    outage.store(true);
    if (!(*server)->Restart().ok()) std::fprintf(stderr, "restart failed\n");
    // The outage lasts until every instance is subscribed again.
    for (int i = 0; i < 500 && !std::all_of(fleet.begin(), fleet.end(),
                                            [](const Instance& x) { return x.store->healthy(); });
         ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    outage.store(false);
    std::lock_guard<std::mutex> lock(propagation.mu);
    propagation.outages.emplace_back(outage_start, NowNs());
  };
  do_outage();
  std::this_thread::sleep_for(third);
  do_outage();
  std::this_thread::sleep_for(third);
  stop.store(true);
  driver.join();
  for (auto& w : workers) w.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  std::int64_t leases = 0, closes_lost = 0, errors = 0, refused = 0, subscribes = 0;
  for (auto& i : fleet) {
    const auto s = i.store->stats();
    leases += s.leases_granted;
    closes_lost += s.closes_lost;
    errors += s.errors;
    refused += s.refused;
    subscribes += s.subscribes;
  }
  const double calls_per_second = calls.load() / elapsed;
  // A trip is "steady" when no outage began within 3 s after it (its OPEN
  // of 1 s, the recovery, and the push all happened with Redis up).
  std::vector<double> steady_arrivals, outage_arrivals;
  int recoveries = 0, single_probe = 0, max_probes = 0, outage_trips = 0;
  std::int64_t wrong;
  {
    std::lock_guard<std::mutex> lock(propagation.mu);
    wrong = propagation.wrong_rejections;
    for (const auto& [key, t] : propagation.trips) {
      bool near_outage = false;
      for (const auto& [a, b] : propagation.outages) {
        if (t.at <= b && a <= t.at + 3'000'000'000) near_outage = true;
      }
      auto& arrivals = near_outage ? outage_arrivals : steady_arrivals;
      arrivals.insert(arrivals.end(), t.arrivals_ms.begin(), t.arrivals_ms.end());
      if (near_outage) {
        ++outage_trips;
        continue;
      }
      if (!t.closed) continue;
      ++recoveries;
      if (t.probes == 1) ++single_probe;
      max_probes = std::max(max_probes, t.probes);
    }
  }
  std::printf(
      "fusebox redis soak: %d instances x %d threads, %d circuits, %.1f s, Redis restarted twice\n",
      flags.instances, flags.threads, flags.circuits, elapsed);
  std::printf("  calls                      %" PRId64 " (%.0f per second), rejected %" PRId64 "\n",
              calls.load(), calls_per_second, rejected.load());
  std::printf("  Redis commands per call    %.6f in the steady state (%" PRId64
              " commands in %.1f s, incl. heartbeats)\n",
              steady_calls > 0 ? double(steady_commands) / steady_calls : 0.0, steady_commands,
              steady_seconds);
  std::printf(
      "  OPEN reaches an instance   p50 %.2f ms, p99 %.2f ms, max %.2f ms (%zu arrivals,"
      " trips away from outages)\n",
      Percentile(steady_arrivals, 0.5), Percentile(steady_arrivals, 0.99),
      Percentile(steady_arrivals, 1.0), steady_arrivals.size());
  std::printf(
      "    near an outage           p50 %.2f ms, p99 %.2f ms (%zu arrivals, %d trips:"
      " learned by resync once the subscriber is back)\n",
      Percentile(outage_arrivals, 0.5), Percentile(outage_arrivals, 0.99), outage_arrivals.size(),
      outage_trips);
  std::printf(
      "  probes per recovery        exactly 1 in %d of %d recoveries away from outages"
      " (max %d); trips %" PRId64 ", leases granted %" PRId64
      ", closes that lost their lease %" PRId64 "\n",
      single_probe, recoveries, max_probes, trips.load(), leases, closes_lost);
  std::printf("  during the outages         %" PRId64 " calls, %" PRId64
              " rejected; exceptions %" PRId64 "; rejections of never-tripped circuits %" PRId64
              "\n",
              outage_calls.load(), outage_rejected.load(), exceptions.load(), wrong);
  std::printf("  store                      %" PRId64 " errors, %" PRId64
              " calls refused while down, %" PRId64 " subscriptions\n",
              errors, refused, subscribes);
  return exceptions.load() == 0 && wrong == 0 && single_probe == recoveries ? 0 : 1;
}
