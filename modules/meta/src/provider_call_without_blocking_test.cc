// ProviderCall::StartWithoutBlocking(): the event loop's half of Start() when
// the provider circuits share a store. Several registries on one
// InProcessSharedState stand for the instances of a fleet (the Redis store
// runs the same rules; the Node fleet test drives a real redis-server).
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "fusebox/meta/provider_call.h"
#include "fusebox/testing/in_process_shared_state.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox::meta {
namespace {

using std::chrono::seconds;
using testing::InProcessSharedState;
using testing::ManualClock;

using Started = std::variant<ProviderCall, ProviderError, PendingProviderCall>;

const ProviderError kRateLimited{
    .code = ConnCode::kConn008RateLimit, .http_status = 429, .retry_after = seconds(10)};
const ProviderError kTransient{.code = ConnCode::kConn003Transient, .http_status = 503};

// A fleet on a ManualClock: `here` is the instance under test, `other`
// another one on the same store. Calls the scenarios leave running are kept
// in `running`.
struct Fleet {
  Fleet() : store(std::make_shared<InProcessSharedState>(clock)) {
    here = Instance();
    other = Instance();
  }

  // A registry whose provider templates share `store`, as the Node binding
  // and the gateway add them.
  std::unique_ptr<Registry> Instance() {
    RegistryOptions o;
    o.clock = &clock;
    std::unique_ptr<Registry> r = std::move(*Registry::Create(std::move(o)));
    CircuitBreakerConfig transient = TransientCircuitConfig();
    CircuitBreakerConfig quota = QuotaCircuitConfig();
    transient.shared_state = store;
    quota.shared_state = store;
    EXPECT_TRUE(r->AddConfig(std::string(kTransientConfigName), transient).ok());
    EXPECT_TRUE(r->AddConfig(std::string(kQuotaConfigName), quota).ok());
    return r;
  }

  // One call on `registry` through Start(), ending with `error` (nullptr:
  // success); false when a circuit refused it.
  bool Call(Registry& registry, const ProviderError* error) {
    auto started = ProviderCall::Start(registry, key);
    if (!std::holds_alternative<ProviderCall>(started)) return false;
    std::get<ProviderCall>(std::move(started)).Finish(error);
    return true;
  }

  // Starts a call on `registry` and keeps it running (a probe holding the
  // fleet's lease, when the wait of a circuit is over).
  void StartRunning(Registry& registry) {
    auto started = ProviderCall::Start(registry, key);
    ASSERT_TRUE(std::holds_alternative<ProviderCall>(started));
    running.push_back(std::get<ProviderCall>(std::move(started)));
  }

  CircuitBreaker& Circuit(Registry& registry, const char* suffix) {
    return *registry.Find(key + ":" + suffix);
  }

  ManualClock clock;
  std::shared_ptr<InProcessSharedState> store;
  std::unique_ptr<Registry> here;
  std::unique_ptr<Registry> other;
  std::vector<ProviderCall> running;
  const std::string key = *ProviderCircuitKey("instagram", Workload::kRead, "17841400008460056");
};

std::variant<ProviderCall, ProviderError> Complete(Started started) {
  if (auto* pending = std::get_if<PendingProviderCall>(&started))
    return std::move(*pending).Complete();
  if (auto* refused = std::get_if<ProviderError>(&started)) return *refused;
  return std::get<ProviderCall>(std::move(started));
}

TEST(ProviderCallWithoutBlocking, AFreshViewDecidesWithoutAskingTheStore) {
  Fleet f;
  // A new circuit re-reads the fleet's view first: the only store call.
  Started first = ProviderCall::StartWithoutBlocking(*f.here, f.key);
  ASSERT_TRUE(std::holds_alternative<PendingProviderCall>(first));
  EXPECT_EQ(f.store->counters().reads, 0);
  std::variant<ProviderCall, ProviderError> admitted = Complete(std::move(first));
  ASSERT_TRUE(std::holds_alternative<ProviderCall>(admitted));
  EXPECT_EQ(f.store->counters().reads, 2);  // each circuit once
  std::get<ProviderCall>(std::move(admitted)).Finish(&kRateLimited);

  const InProcessSharedState::Counters before = f.store->counters();
  // The quota circuit OPEN: refused on the spot, the refusal RunProviderCall gives.
  Started refused = ProviderCall::StartWithoutBlocking(*f.here, f.key);
  ASSERT_TRUE(std::holds_alternative<ProviderError>(refused));
  EXPECT_EQ(std::get<ProviderError>(refused).code, ConnCode::kConn008RateLimit);
  EXPECT_TRUE(std::get<ProviderError>(refused).circuit_open);
  EXPECT_EQ(std::get<ProviderError>(refused).retry_after, seconds(10));
  // Over again, the probe closes it; then CLOSED calls decide by themselves.
  f.clock.Advance(seconds(10) + Duration(1));
  ASSERT_TRUE(f.Call(*f.here, nullptr));
  const InProcessSharedState::Counters closed = f.store->counters();
  for (int i = 0; i < 100; ++i) {
    Started s = ProviderCall::StartWithoutBlocking(*f.here, f.key);
    ASSERT_TRUE(std::holds_alternative<ProviderCall>(s)) << i;
    std::get<ProviderCall>(std::move(s)).Finish(nullptr);
  }
  EXPECT_EQ(f.store->counters().reads, before.reads);
  EXPECT_EQ(f.store->counters().probes_granted, closed.probes_granted);
  EXPECT_EQ(f.store->counters().probes_busy, closed.probes_busy);
}

TEST(ProviderCallWithoutBlocking, WithoutASharedStateItNeverPends) {
  ManualClock clock;
  RegistryOptions o;
  o.clock = &clock;
  std::unique_ptr<Registry> registry = std::move(*Registry::Create(std::move(o)));
  const std::string key = "provider:instagram:read:1";
  Started s = ProviderCall::StartWithoutBlocking(*registry, key);
  ASSERT_TRUE(std::holds_alternative<ProviderCall>(s));
  std::get<ProviderCall>(std::move(s)).Finish(&kRateLimited);
  EXPECT_TRUE(
      std::holds_alternative<ProviderError>(ProviderCall::StartWithoutBlocking(*registry, key)));
  clock.Advance(seconds(10) + Duration(1));
  Started probe = ProviderCall::StartWithoutBlocking(*registry, key);
  ASSERT_TRUE(std::holds_alternative<ProviderCall>(probe));
  EXPECT_EQ(registry->Find(key + ":quota")->state(), State::kHalfOpen);
}

// The quota circuit's wait is over: the transient permit is taken on the
// spot, and the start stops where the quota circuit would ask for the fleet's
// probe lease. Completing it asks; dropping it gives the transient permit back.
TEST(ProviderCallWithoutBlocking, PendsWhereTheQuotaCircuitWouldAskForTheProbeLease) {
  Fleet f;
  ASSERT_TRUE(f.Call(*f.here, &kRateLimited));
  f.clock.Advance(seconds(10) + Duration(1));
  const InProcessSharedState::Counters before = f.store->counters();
  CircuitBreaker& transient = f.Circuit(*f.here, "transient");
  CircuitBreaker& quota = f.Circuit(*f.here, "quota");
  {
    Started dropped = ProviderCall::StartWithoutBlocking(*f.here, f.key);
    ASSERT_TRUE(std::holds_alternative<PendingProviderCall>(dropped));
    EXPECT_EQ(quota.state(), State::kOpen);
  }
  Started started = ProviderCall::StartWithoutBlocking(*f.here, f.key);
  ASSERT_TRUE(std::holds_alternative<PendingProviderCall>(started));
  EXPECT_EQ(f.store->counters().probes_granted, before.probes_granted);
  EXPECT_EQ(f.store->counters().reads, before.reads);
  std::variant<ProviderCall, ProviderError> probe = Complete(std::move(started));
  ASSERT_TRUE(std::holds_alternative<ProviderCall>(probe));
  EXPECT_EQ(f.store->counters().probes_granted, before.probes_granted + 1);
  EXPECT_EQ(quota.state(), State::kHalfOpen);
  std::get<ProviderCall>(std::move(probe)).Finish(nullptr);
  EXPECT_EQ(quota.state(), State::kClosed);
  // The dropped start recorded nothing: the transient circuit saw the first
  // call and the probe, both successes (Meta answered).
  const CircuitBreakerTotals t = transient.totals();
  EXPECT_EQ(t.calls[static_cast<int>(OutcomeKind::kSuccess)], 2);
  EXPECT_EQ(t.calls[static_cast<int>(OutcomeKind::kIgnored)], 0);
}

TEST(ProviderCallWithoutBlocking, PendsWhereTheTransientCircuitWouldAskForTheProbeLease) {
  Fleet f;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.Call(*f.here, &kTransient));
  ASSERT_EQ(f.Circuit(*f.here, "transient").state(), State::kOpen);
  Started refused = ProviderCall::StartWithoutBlocking(*f.here, f.key);
  ASSERT_TRUE(std::holds_alternative<ProviderError>(refused));
  EXPECT_EQ(std::get<ProviderError>(refused).code, ConnCode::kConn003Transient);
  f.clock.Advance(seconds(30) + Duration(1));
  const InProcessSharedState::Counters before = f.store->counters();
  Started started = ProviderCall::StartWithoutBlocking(*f.here, f.key);
  ASSERT_TRUE(std::holds_alternative<PendingProviderCall>(started));
  EXPECT_EQ(f.store->counters().probes_granted, before.probes_granted);
  ASSERT_TRUE(std::holds_alternative<ProviderCall>(Complete(std::move(started))));
  EXPECT_EQ(f.store->counters().probes_granted, before.probes_granted + 1);
}

// Everything the start decided and recorded, to compare two fleets.
std::string Summary(Fleet& f, const std::variant<ProviderCall, ProviderError>& result) {
  std::string s;
  if (const auto* e = std::get_if<ProviderError>(&result)) {
    s = "refused " + e->message() + " open=" + std::to_string(int(e->circuit_open)) +
        " retry_after=" + std::to_string(e->retry_after.value_or(seconds(-1)).count());
  } else {
    s = "call";
  }
  for (const char* suffix : {"transient", "quota"}) {
    const CircuitBreaker& c = f.Circuit(*f.here, suffix);
    const CircuitBreakerTotals t = c.totals();
    s += std::string("; ") + suffix + " " + std::string(StateName(c.state())) +
         " rejected=" + std::to_string(t.not_permitted_calls) +
         " ignored=" + std::to_string(t.calls[static_cast<int>(OutcomeKind::kIgnored)]);
  }
  const InProcessSharedState::Counters n = f.store->counters();
  s += "; reads=" + std::to_string(n.reads) + " granted=" + std::to_string(n.probes_granted) +
       " busy=" + std::to_string(n.probes_busy);
  return s;
}

struct Scenario {
  const char* name;
  // Brings `f` to the moment of the start under test.
  void (*setup)(Fleet& f);
  // Whether the start without blocking stops for the store.
  bool pends;
};

// Scenario steps: this instance holds the key's circuits, then the other
// one's rate limit opens the quota circuit (seen here through the store)...
void QuotaOpenedElsewhere(Fleet& f) {
  ASSERT_TRUE(f.Call(*f.here, nullptr));
  ASSERT_TRUE(f.Call(*f.other, &kRateLimited));
}

// ... and the quota circuit's wait is over.
void QuotaWaitOver(Fleet& f) {
  QuotaOpenedElsewhere(f);
  f.clock.Advance(seconds(10) + Duration(1));
}

// Completing a pending start gives what Start() gives: the same call or
// refusal, recorded the same way, with the same store calls. Each scenario
// runs on two identical fleets, one started each way.
TEST(ProviderCallWithoutBlocking, CompletingAPendingStartGivesWhatStartGives) {
  const Scenario scenarios[] = {
      {"a new key on a closed fleet", [](Fleet&) {}, true},
      {"a known, closed key", [](Fleet& f) { ASSERT_TRUE(f.Call(*f.here, nullptr)); }, false},
      {"a new key whose quota another instance opened",
       [](Fleet& f) { ASSERT_TRUE(f.Call(*f.other, &kRateLimited)); }, true},
      {"a new key whose transient circuit another instance opened",
       [](Fleet& f) {
         for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.Call(*f.other, &kTransient));
       },
       true},
      {"the quota opened elsewhere and seen here", &QuotaOpenedElsewhere, false},
      {"the quota's wait over, the lease free", &QuotaWaitOver, true},
      {"the quota's wait over, its lease held by the other instance's probe",
       [](Fleet& f) {
         QuotaWaitOver(f);
         f.StartRunning(*f.other);
       },
       true},
      {"the transient circuit's wait over, its lease held elsewhere",
       [](Fleet& f) {
         ASSERT_TRUE(f.Call(*f.here, nullptr));
         for (int i = 0; i < 3; ++i) ASSERT_TRUE(f.Call(*f.other, &kTransient));
         f.clock.Advance(seconds(30) + Duration(1));
         f.StartRunning(*f.other);
       },
       true},
  };
  for (const Scenario& sc : scenarios) {
    SCOPED_TRACE(sc.name);
    Fleet blocking;
    Fleet loop;
    sc.setup(blocking);
    sc.setup(loop);
    const std::variant<ProviderCall, ProviderError> started =
        ProviderCall::Start(*blocking.here, blocking.key);
    Started without = ProviderCall::StartWithoutBlocking(*loop.here, loop.key);
    EXPECT_EQ(std::holds_alternative<PendingProviderCall>(without), sc.pends);
    const std::variant<ProviderCall, ProviderError> completed = Complete(std::move(without));
    EXPECT_EQ(Summary(loop, completed), Summary(blocking, started));
  }
}

}  // namespace
}  // namespace fusebox::meta
