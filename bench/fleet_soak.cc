// A fleet soak in processes: N instance processes (each its own
// RedisSharedState and Registry over C circuits) call their circuits while a
// driver trips some the way a rate-limited dependency does, and the Redis
// behind them fails over once: a single server restarted, a Sentinel-managed
// primary killed so that the sentinels promote its replica, or a Redis
// Cluster primary killed so that its replica takes over. The point is the protocol's
// load, not throughput: each process is light (one thread of calls, paced).
//
// Reports what issue 21 asks: Redis commands per call (steady state, and over
// the whole run), how long an OPEN takes to reach the other processes
// (p50/p99), probes per recovery, OPENs lost (a trip some process never saw),
// memory per instance and in Redis.
//
//   ./build/release/bench/fusebox_fleet_soak [--topology cluster|sentinel|single]
//       [--processes 32] [--circuits 100000] [--seconds 60] [--trips-per-second 10]
//
// Needs redis-server and redis-cli (Debian: redis-server, redis-tools); starts
// its own on free loopback ports with the test harness (tests/redis/).
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/redis/shared_state.h"
#include "fusebox/registry.h"
#include "tests/redis/redis_cluster.h"
#include "tests/redis/redis_server.h"

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

struct Flags {
  std::string topology = "cluster";
  int processes = 32;
  int circuits = 100000;
  int seconds = 60;
  int trips_per_second = 10;
  // Circuits the calls favour (and the driver trips among), so that a
  // tripped circuit is called again soon and its recovery happens in the run.
  int hot = 2000;
};

Flags ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string name = argv[i];
    const char* value = argv[i + 1];
    if (name == "--topology") {
      f.topology = value;
    } else if (name == "--processes") {
      f.processes = std::max(1, std::atoi(value));
    } else if (name == "--circuits") {
      f.circuits = std::max(100, std::atoi(value));
    } else if (name == "--seconds") {
      f.seconds = std::max(6, std::atoi(value));
    } else if (name == "--trips-per-second") {
      f.trips_per_second = std::max(1, std::atoi(value));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", name.c_str());
      std::exit(2);
    }
  }
  if (f.topology != "cluster" && f.topology != "single" && f.topology != "sentinel") {
    std::fprintf(stderr, "--topology is cluster, sentinel or single\n");
    std::exit(2);
  }
  f.hot = std::min(f.hot, f.circuits);
  return f;
}

std::string Key(int i) { return "fleet:read:" + std::to_string(i) + ":quota"; }
int IndexOf(std::string_view key) { return std::atoi(key.data() + 11); }

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// Shared with every process (mmap before fork): what the parent reads while
// they run.
struct Board {
  std::atomic<std::int64_t> calls[256];
  // Commands each instance's store sent (heartbeats included).
  std::atomic<std::int64_t> commands[256];
  std::atomic<int> ready;
  std::atomic<int> stop;
};

// What one instance saw, written to its result file at the end.
class Seen final : public fusebox::CircuitBreakerListener {
 public:
  void OnTransition(const fusebox::TransitionEvent& e) override {
    const std::int64_t now = NowNs();
    std::lock_guard<std::mutex> lock(mu_);
    const int c = IndexOf(e.breaker);
    if (e.to == fusebox::State::kOpen && e.reason == fusebox::TransitionReason::kSharedOpen &&
        e.from != fusebox::State::kOpen) {
      arrivals_.emplace_back(c, now);
    } else if (e.to == fusebox::State::kClosed &&
               (e.from == fusebox::State::kOpen || e.from == fusebox::State::kHalfOpen)) {
      closes_.emplace_back(c, now);
    } else if (e.to == fusebox::State::kForcedOpen && e.from != fusebox::State::kForcedOpen) {
      overrides_.emplace_back(c, now);
    }
  }
  // A call admitted while the breaker was HALF_OPEN: a probe of the
  // dependency. (A HALF_OPEN transition alone is not one: a breaker whose
  // wait ended asks the fleet for the probe lease and may be told no.)
  void Probe(int c) {
    const std::int64_t now = NowNs();
    std::lock_guard<std::mutex> lock(mu_);
    probes_.emplace_back(c, now);
  }
  void Write(std::ostream& out) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [c, t] : arrivals_) out << "arrival " << c << " " << t << "\n";
    for (const auto& [c, t] : probes_) out << "probe " << c << " " << t << "\n";
    for (const auto& [c, t] : overrides_) out << "override " << c << " " << t << "\n";
    for (const auto& [c, t] : closes_) out << "close " << c << " " << t << "\n";
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<int, std::int64_t>> arrivals_, probes_, overrides_, closes_;
};

std::int64_t RssKb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return 0;
}

struct Instance {
  std::shared_ptr<fusebox::redis::RedisSharedState> store;
  std::unique_ptr<fusebox::Registry> registry;
};

Instance MakeInstance(const fusebox::redis::ConnectionOptions& connection, int circuits,
                      std::shared_ptr<Seen> seen) {
  fusebox::redis::SharedStateOptions o;
  o.connection = connection;
  o.down_for = milliseconds(500);
  auto store = fusebox::redis::RedisSharedState::Create(o);
  if (!store) {
    std::fprintf(stderr, "store: %s\n", store.error().ToString().c_str());
    std::exit(1);
  }
  fusebox::RegistryOptions ro;
  ro.max_breakers = static_cast<std::size_t>(circuits) * 2;
  ro.default_config.sliding_window_size = 20;
  ro.default_config.minimum_number_of_calls = 20;
  ro.default_config.permitted_number_of_calls_in_half_open_state = 1;
  ro.default_config.wait_duration_in_open_state = seconds(2);
  ro.default_config.shared_state = *store;
  ro.default_config.shared_probe_lease = seconds(5);
  if (seen) ro.on_create = [seen](fusebox::CircuitBreaker& b) { b.AddListener(seen); };
  auto registry = fusebox::Registry::Create(ro);
  if (!registry) std::exit(1);
  return {*store, std::move(*registry)};
}

// One instance process: create every breaker (one read each), then call,
// paced, until told to stop; write what it saw.
int ChildMain(int id, const fusebox::redis::ConnectionOptions& connection, const Flags& flags,
              Board& board, const std::string& dir) {
  auto seen = std::make_shared<Seen>();
  Instance inst = MakeInstance(connection, flags.circuits, seen);
  for (int i = 0; i < 500 && !inst.store->healthy(); ++i)
    std::this_thread::sleep_for(milliseconds(10));
  const auto warm_start = Clock::now();
  for (int c = 0; c < flags.circuits; ++c) {
    auto b = inst.registry->Get(Key(c));
    if (b) {
      if (auto p = (*b)->TryAcquire()) p->Success(milliseconds(1));
    }
  }
  const double warm_s = std::chrono::duration<double>(Clock::now() - warm_start).count();
  const auto warm_stats = inst.store->stats();
  board.commands[id].store(warm_stats.commands + warm_stats.pings);
  board.ready.fetch_add(1);
  std::mt19937_64 rng(static_cast<std::uint64_t>(id) * 7919);
  std::uniform_int_distribution<int> any(0, flags.circuits - 1), hot(0, flags.hot - 1);
  std::uniform_int_distribution<int> coin(0, 9);
  std::vector<std::string> keys;
  keys.reserve(flags.circuits);
  for (int i = 0; i < flags.circuits; ++i) keys.push_back(Key(i));
  std::int64_t calls = 0, rejected = 0, exceptions = 0;
  while (board.stop.load(std::memory_order_relaxed) == 0) {
    for (int k = 0; k < 100; ++k) {
      try {
        const int c = coin(rng) < 9 ? hot(rng) : any(rng);
        auto b = inst.registry->Get(keys[c]);
        if (!b) continue;
        auto permit = (*b)->TryAcquire();
        ++calls;
        if (!permit) {
          ++rejected;
          continue;
        }
        if ((*b)->state() == fusebox::State::kHalfOpen) seen->Probe(c);
        permit->Success(milliseconds(1));
      } catch (...) {
        ++exceptions;
      }
    }
    board.calls[id].store(calls, std::memory_order_relaxed);
    const auto now = inst.store->stats();
    board.commands[id].store(now.commands + now.pings, std::memory_order_relaxed);
    std::this_thread::sleep_for(milliseconds(5));
  }
  const auto s = inst.store->stats();
  std::ofstream out(dir + "/instance-" + std::to_string(id));
  out << "calls " << calls << "\nrejected " << rejected << "\nexceptions " << exceptions
      << "\nrss_kb " << RssKb() << "\nwarm_ms " << static_cast<std::int64_t>(warm_s * 1000)
      << "\nwarm_commands " << warm_stats.commands << "\ncommands " << s.commands << "\npings "
      << s.pings << "\nleases " << s.leases_granted << "\nerrors " << s.errors << "\nsubscribes "
      << s.subscribes << "\nresyncs " << s.resyncs << "\nevents " << s.events << "\n";
  seen->Write(out);
  return exceptions == 0 ? 0 : 3;
}

// Commands every Redis node has processed (INFO stats, replication
// included), summed; a node that is gone counts what it had when last seen.
std::int64_t RedisCommands(std::vector<fusebox::redis::testing::RedisServer*> nodes) {
  static std::map<int, std::int64_t> last;
  std::int64_t n = 0;
  for (auto* s : nodes) {
    if (s->running()) {
      auto r = s->Admin({"INFO", "stats"});
      const std::size_t at =
          r && r->is_string() ? r->str.find("total_commands_processed:") : std::string::npos;
      if (at != std::string::npos) last[s->port()] = std::atoll(r->str.c_str() + at + 25);
    }
    n += last[s->port()];
  }
  return n;
}

std::int64_t RedisMemory(std::vector<fusebox::redis::testing::RedisServer*> nodes) {
  std::int64_t n = 0;
  for (auto* s : nodes) {
    if (!s->running()) continue;
    auto r = s->Admin({"INFO", "memory"});
    if (!r || !r->is_string()) continue;
    const std::size_t at = r->str.find("used_memory:");
    if (at != std::string::npos) n += std::atoll(r->str.c_str() + at + 12);
  }
  return n;
}

using fusebox::redis::testing::RedisServer;

// A primary, its replica and three sentinels (down-after 500 ms), started
// and waited for as tests/redis/sentinel_test.cc does.
struct SentinelSet {
  std::unique_ptr<RedisServer> primary, replica;
  std::vector<std::unique_ptr<RedisServer>> sentinels;

  std::string Url() const {
    std::string url = "redis-sentinel://";
    for (std::size_t i = 0; i < sentinels.size(); ++i) {
      url += (i == 0 ? "" : ",") + std::string("127.0.0.1:") + std::to_string(sentinels[i]->port());
    }
    return url + "/mymaster?connect_timeout=500ms&timeout=250ms";
  }
  // The port sentinel 0 names as the primary, or 0.
  int NamedPrimary() {
    auto r = sentinels[0]->Admin({"SENTINEL", "get-master-addr-by-name", "mymaster"});
    return r && r->is_array() && r->elements.size() == 2 ? std::atoi(r->elements[1].str.c_str())
                                                         : 0;
  }
};

std::unique_ptr<SentinelSet> StartSentinels() {
  auto set = std::make_unique<SentinelSet>();
  auto primary = RedisServer::Start();
  if (!primary) return nullptr;
  set->primary = std::move(*primary);
  auto replica = RedisServer::Start({.replica_of = set->primary->port()});
  if (!replica) return nullptr;
  set->replica = std::move(*replica);
  const auto synced = [&] {
    auto r = set->replica->Admin({"INFO", "replication"});
    return r && r->is_string() && r->str.find("master_link_status:up") != std::string::npos;
  };
  if (!fusebox::redis::testing::PollUntil(synced, seconds(10))) return nullptr;
  for (int i = 0; i < 3; ++i) {
    auto s = RedisServer::Start({.sentinel = fusebox::redis::testing::RedisSentinelConfig{
                                     .primary_port = set->primary->port()}});
    if (!s) return nullptr;
    set->sentinels.push_back(std::move(*s));
  }
  const auto acquainted = [&] {
    for (auto& s : set->sentinels) {
      auto replicas = s->Admin({"SENTINEL", "replicas", "mymaster"});
      auto others = s->Admin({"SENTINEL", "sentinels", "mymaster"});
      if (!replicas || replicas->elements.size() != 1 || !others || others->elements.size() != 2) {
        return false;
      }
    }
    return true;
  };
  if (!fusebox::redis::testing::PollUntil(acquainted, seconds(15))) return nullptr;
  return set;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(q * (v.size() - 1) + 0.5))];
}

std::int64_t Sum(const std::atomic<std::int64_t>* counts, int n) {
  std::int64_t total = 0;
  for (int i = 0; i < n; ++i) total += counts[i].load(std::memory_order_relaxed);
  return total;
}

}  // namespace

// Over 80 lines on purpose: the soak's script, start to report, read top to
// bottom like the run it drives.
int main(int argc, char** argv) {
  Flags flags = ParseFlags(argc, argv);
  flags.processes = std::min(flags.processes, 256);
  std::unique_ptr<fusebox::redis::testing::RedisServer> single;
  std::unique_ptr<fusebox::redis::testing::RedisCluster> cluster;
  std::unique_ptr<SentinelSet> sentinel;
  std::vector<fusebox::redis::testing::RedisServer*> nodes;
  fusebox::redis::ConnectionOptions connection;
  if (flags.topology == "cluster") {
    auto c = fusebox::redis::testing::RedisCluster::Start();
    if (!c) {
      std::fprintf(stderr, "cluster: %s\n", c.error().ToString().c_str());
      return 1;
    }
    cluster = std::move(*c);
    for (auto& n : cluster->nodes()) nodes.push_back(n.get());
    connection = cluster->options();
  } else if (flags.topology == "sentinel") {
    sentinel = StartSentinels();
    if (sentinel == nullptr) {
      std::fprintf(stderr, "sentinel set did not start\n");
      return 1;
    }
    nodes = {sentinel->primary.get(), sentinel->replica.get()};
    connection = *fusebox::redis::ParseRedisUrl(sentinel->Url());
  } else {
    auto s = fusebox::redis::testing::RedisServer::Start();
    if (!s) return 1;
    single = std::move(*s);
    nodes.push_back(single.get());
    connection = single->connection_options(milliseconds(250));
  }
  connection.connect_timeout = milliseconds(500);
  connection.command_timeout = milliseconds(250);

  char tmpl[] = "/tmp/fusebox-fleet-soak-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  void* shared =
      mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) return 1;
  Board& board = *new (shared) Board();
  const auto start = Clock::now();
  std::vector<pid_t> children;
  for (int i = 0; i < flags.processes; ++i) {
    const pid_t pid = fork();
    if (pid == 0) _exit(ChildMain(i, connection, flags, board, dir));
    children.push_back(pid);
  }
  while (board.ready.load() < flags.processes) std::this_thread::sleep_for(milliseconds(50));
  const double warm_s = std::chrono::duration<double>(Clock::now() - start).count();
  const std::int64_t redis_memory_warm = RedisMemory(nodes);

  // The driver (this process): trips a hot closed circuit with a Retry-After
  // of 2 s, as a 429 would, at a steady rate.
  Instance driver = MakeInstance(connection, flags.circuits, nullptr);
  std::map<int, std::int64_t> trips;  // circuit -> when (last trip)
  std::vector<std::pair<int, std::int64_t>> trip_log;
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int> pick(0, flags.hot - 1);
  auto trip_one = [&] {
    const int c = pick(rng);
    auto b = driver.registry->Get(Key(c));
    if (!b || (*b)->state() != fusebox::State::kClosed) return;
    auto permit = (*b)->TryAcquire();
    if (!permit) return;
    trip_log.emplace_back(c, NowNs());
    permit->Record(fusebox::Outcome::OpenFor(seconds(2)));
  };
  // And, once a second, an operator forces a cold circuit (one the calls
  // seldom reach, so that only the push can tell an instance) open for 2 s.
  std::vector<std::pair<int, std::int64_t>> override_log;
  std::uniform_int_distribution<int> cold(flags.hot, flags.circuits - 1);
  auto override_one = [&] {
    const int c = cold(rng);
    override_log.emplace_back(c, NowNs());
    driver.store->PublishOverride(Key(c), {.kind = fusebox::SharedOverride::Kind::kForcedOpen,
                                           .expires_after = seconds(2),
                                           .reason = "soak",
                                           .actor = "driver"});
  };
  auto run_for = [&](Clock::duration d) {
    const auto until = Clock::now() + d;
    const auto period = std::chrono::microseconds(1000000 / flags.trips_per_second);
    for (int tick = 0; Clock::now() < until; ++tick) {
      trip_one();
      if (tick % flags.trips_per_second == 0 && flags.circuits > flags.hot) override_one();
      std::this_thread::sleep_for(period);
    }
  };

  // Phases: steady (commands per call measured), failover, steady.
  const auto third = seconds(flags.seconds) / 3;
  const std::int64_t cmd0 = RedisCommands(nodes), calls0 = Sum(board.calls, flags.processes);
  const std::int64_t sent0 = Sum(board.commands, flags.processes);
  run_for(third);
  const std::int64_t steady_cmds = RedisCommands(nodes) - cmd0;
  const std::int64_t steady_sent = Sum(board.commands, flags.processes) - sent0;
  const std::int64_t steady_calls = Sum(board.calls, flags.processes) - calls0;
  const std::int64_t fault_at = NowNs();
  std::int64_t converged_ns = 0;
  if (cluster) {
    const int victim = cluster->OwnerPort(0);
    (void)cluster->ByPort(victim)->Kill();
    std::thread waiter([&] {
      if (cluster->WaitConverged(seconds(30)).ok()) converged_ns = NowNs() - fault_at;
    });
    run_for(third);
    waiter.join();
  } else if (sentinel) {
    const int promoted = sentinel->replica->port();
    (void)sentinel->primary->Kill();
    std::thread waiter([&] {
      if (fusebox::redis::testing::PollUntil([&] { return sentinel->NamedPrimary() == promoted; },
                                             seconds(30))) {
        converged_ns = NowNs() - fault_at;
      }
    });
    run_for(third);
    waiter.join();
  } else {
    (void)single->Restart();
    converged_ns = NowNs() - fault_at;
    run_for(third);
  }
  run_for(third);
  const std::int64_t total_cmds = RedisCommands(nodes) - cmd0;
  const std::int64_t total_calls = Sum(board.calls, flags.processes) - calls0;
  const std::int64_t total_sent = Sum(board.commands, flags.processes) - sent0;
  const std::int64_t redis_memory = RedisMemory(nodes);
  // Let the last recoveries finish, then stop everyone.
  std::this_thread::sleep_for(seconds(3));
  board.stop.store(1);
  int failed_children = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed_children;
  }

  // Merge what each instance saw.
  std::map<std::pair<int, std::int64_t>, std::vector<double>> arrivals;    // trip -> ms each
  std::map<std::pair<int, std::int64_t>, std::vector<double>> overridden;  // override -> ms each
  // trip -> when each instance's call was admitted HALF_OPEN, and when the
  // first instance saw it closed: a HALF_OPEN admission after that is a call
  // told "closed" by the fleet before the push arrived, not a probe.
  std::map<std::pair<int, std::int64_t>, std::vector<std::int64_t>> probe_times;
  std::map<std::pair<int, std::int64_t>, std::int64_t> first_close;
  std::int64_t rss_total = 0, rss_max = 0, exceptions = 0, leases = 0, resyncs = 0, errors = 0;
  // The trip of circuit `c` that an event at `t` belongs to: the last before.
  auto trip_of = [&](int c, std::int64_t t) -> std::optional<std::pair<int, std::int64_t>> {
    std::optional<std::pair<int, std::int64_t>> best;
    for (const auto& [tc, tt] : trip_log) {
      if (tc == c && tt <= t) best = std::make_pair(tc, tt);
    }
    return best;
  };
  for (int i = 0; i < flags.processes; ++i) {
    std::ifstream in(dir + "/instance-" + std::to_string(i));
    std::set<std::pair<int, std::int64_t>> counted;
    for (std::string word; in >> word;) {
      if (word == "override") {
        int c = 0;
        std::int64_t t = 0;
        in >> c >> t;
        std::optional<std::pair<int, std::int64_t>> which;
        for (const auto& o : override_log) {
          if (o.first == c && o.second <= t) which = o;
        }
        if (which && counted.insert(*which).second) {
          overridden[*which].push_back((t - which->second) / 1e6);
        }
        continue;
      }
      if (word == "close") {
        int c = 0;
        std::int64_t t = 0;
        in >> c >> t;
        if (auto trip = trip_of(c, t)) {
          auto [it, fresh] = first_close.emplace(*trip, t);
          if (!fresh) it->second = std::min(it->second, t);
        }
        continue;
      }
      if (word == "arrival" || word == "probe") {
        int c = 0;
        std::int64_t t = 0;
        in >> c >> t;
        auto trip = trip_of(c, t);
        if (!trip) continue;
        if (word == "probe") {
          probe_times[*trip].push_back(t);
        } else if (counted.insert(*trip).second) {
          arrivals[*trip].push_back((t - trip->second) / 1e6);
        }
        continue;
      }
      std::int64_t v = 0;
      in >> v;
      if (word == "rss_kb") {
        rss_total += v;
        rss_max = std::max(rss_max, v);
      } else if (word == "exceptions") {
        exceptions += v;
      } else if (word == "leases") {
        leases += v;
      } else if (word == "resyncs") {
        resyncs += v;
      } else if (word == "errors") {
        errors += v;
      }
    }
  }
  // Trips away from the fault (none within 5 s after it began or before it
  // converged): how many instances never saw them, and their probes.
  const std::int64_t fault_end = fault_at + std::max<std::int64_t>(converged_ns, 0);
  int steady_trips = 0, one_probe = 0, recovered = 0, max_probes = 0;
  std::int64_t lost = 0, fault_lost = 0;
  std::vector<double> arrivals_ms, fault_arrivals_ms;
  for (const auto& trip : trip_log) {
    const std::vector<double>& a = arrivals[trip];
    if (trip.second >= fault_at - 3'000'000'000 && trip.second <= fault_end + 5'000'000'000) {
      fault_arrivals_ms.insert(fault_arrivals_ms.end(), a.begin(), a.end());
      fault_lost += flags.processes - static_cast<std::int64_t>(a.size());
      continue;
    }
    ++steady_trips;
    arrivals_ms.insert(arrivals_ms.end(), a.begin(), a.end());
    lost += flags.processes - static_cast<std::int64_t>(a.size());
    if (probe_times.count(trip) != 0) {
      const auto closed = first_close.find(trip);
      int n = 0;
      for (std::int64_t t : probe_times[trip]) {
        if (closed == first_close.end() || t <= closed->second) ++n;
      }
      ++recovered;
      if (n == 1) ++one_probe;
      max_probes = std::max(max_probes, n);
    }
  }
  std::printf("fusebox fleet soak: %s, %d instance processes x %d circuits, %d s after warm-up\n",
              flags.topology.c_str(), flags.processes, flags.circuits, flags.seconds);
  std::printf(
      "  warm-up                    %.1f s (every instance creates and reads every circuit)\n",
      warm_s);
  std::printf("  calls                      %" PRId64 " (%.0f per second)\n", total_calls,
              total_calls / (3.0 * std::chrono::duration<double>(third).count()));
  std::vector<double> override_ms;
  std::int64_t overrides_lost = 0;
  int steady_overrides = 0;
  for (const auto& o : override_log) {
    if (o.second >= fault_at - 3'000'000'000 && o.second <= fault_end + 5'000'000'000) continue;
    ++steady_overrides;
    const std::vector<double>& a = overridden[o];
    override_ms.insert(override_ms.end(), a.begin(), a.end());
    overrides_lost += flags.processes - static_cast<std::int64_t>(a.size());
  }
  const auto per_call = [](std::int64_t n, std::int64_t calls) {
    return calls > 0 ? double(n) / calls : 0.0;
  };
  std::printf("  commands per call, sent    %.6f steady (%" PRId64 " by the instances for %" PRId64
              " calls, heartbeats included); %.6f over the run, fault included\n",
              per_call(steady_sent, steady_calls), steady_sent, steady_calls,
              per_call(total_sent, total_calls));
  std::printf("  commands per call, Redis   %.6f steady (%" PRId64
              " processed by all nodes:"
              " the driver's trips, replication and the harness included); %.6f over the run\n",
              per_call(steady_cmds, steady_calls), steady_cmds, per_call(total_cmds, total_calls));
  std::printf(
      "  OPEN reaches an instance   p50 %.2f ms, p99 %.2f ms, max %.2f ms (%zu arrivals,"
      " trips away from the fault)\n",
      Percentile(arrivals_ms, 0.5), Percentile(arrivals_ms, 0.99), Percentile(arrivals_ms, 1.0),
      arrivals_ms.size());
  std::printf("    near the fault           p50 %.2f ms, p99 %.2f ms (%zu arrivals)\n",
              Percentile(fault_arrivals_ms, 0.5), Percentile(fault_arrivals_ms, 0.99),
              fault_arrivals_ms.size());
  std::printf("  OPENs lost                 %" PRId64
              " instance-trips of %d trips x %d instances"
              " away from the fault; %" PRId64 " near it\n",
              lost, steady_trips, flags.processes, fault_lost);
  std::printf("  override reaches           p50 %.2f ms, p99 %.2f ms; lost %" PRId64
              " instance-overrides of %d overrides x %d instances away from the fault\n",
              Percentile(override_ms, 0.5), Percentile(override_ms, 0.99), overrides_lost,
              steady_overrides, flags.processes);
  std::printf(
      "  probes per recovery        exactly 1 in %d of %d recoveries away from the fault"
      " (max %d); leases granted %" PRId64 " for %zu trips; store errors %" PRId64
      " (a lease request that fails, fails open: a probe without a lease); HALF_OPEN"
      " admissions after the fleet had closed (told \"closed\" before the push) not counted\n",
      one_probe, recovered, max_probes, leases, trip_log.size(), errors);
  std::printf("  fault                      %s, converged in %.0f ms; resyncs %" PRId64 "\n",
              cluster    ? "cluster primary SIGKILLed, its replica promoted"
              : sentinel ? "primary SIGKILLed, the sentinels promoted its replica"
                         : "server restarted",
              converged_ns / 1e6, resyncs);
  std::printf(
      "  memory                     %.1f MB per instance (max %.1f); Redis %.1f MB after"
      " warm-up, %.1f MB at the end\n",
      rss_total / 1024.0 / flags.processes, rss_max / 1024.0, redis_memory_warm / 1048576.0,
      redis_memory / 1048576.0);
  std::printf("  exceptions %" PRId64 ", failed instance processes %d\n", exceptions,
              failed_children);
  std::error_code ec;
  if (std::getenv("FLEET_SOAK_KEEP") == nullptr)
    std::filesystem::remove_all(dir, ec);
  else
    std::printf("kept %s\n", dir.c_str());
  return exceptions == 0 && failed_children == 0 ? 0 : 1;
}
