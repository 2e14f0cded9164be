// grpc_client: what a C++ service that calls a gRPC dependency needs from
// fusebox, in one file. Each call goes through fusebox::grpc::Call() under
// the breaker a Registry holds for its key: one per method for GetStock
// ("inventory.Inventory/GetStock"), one per tenant for Reserve
// ("inventory.Inventory/Reserve:<tenant>"), made from the YAML instance of
// the method's name (Resilience4j's keys). Transitions go to stderr as JSON
// lines. The same breakers guard a second channel through fusebox's client
// interceptor, so that a generated stub needs no wrapping.
//
//   grpc_client --self-check application.yml
//       Starts an in-process Inventory server on 127.0.0.1 (a port gRPC
//       picks) scripted to fail for some tenants, then checks: a tenant whose
//       calls end UNAVAILABLE has its circuit opened and is refused locally,
//       without reaching the server, with a retry hint; RESOURCE_EXHAUSTED
//       with grpc-retry-pushback-ms keeps the circuit open for the server's
//       wait, not the breaker's; the caller's own faults open nothing; the
//       other tenants and the other method are still served; on the
//       intercepted channel, GetStock's failures open its circuit and the
//       interceptor refuses with the hint as a trailer. Exits 0 when
//       all of it holds (CI runs this).
//   grpc_client application.yml HOST:PORT TENANT... [--rounds N]
//       Calls GetStock, then Reserve for each tenant, N rounds (default 1),
//       on an Inventory server at HOST:PORT, printing each outcome.
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/event_log.h"
#include "fusebox/grpc/call.h"
#include "fusebox/grpc/interceptor.h"
#include "fusebox/observer.h"
#include "fusebox/registry.h"
#include "fusebox/yaml/config.h"
#include "inventory.grpc.pb.h"

namespace {

constexpr std::string_view kGetStock = "inventory.Inventory/GetStock";
constexpr std::string_view kReserve = "inventory.Inventory/Reserve";

// --- The client ------------------------------------------------------------------

struct Client {
  std::shared_ptr<fusebox::Registry> registry;
  std::unique_ptr<inventory::Inventory::Stub> stub;
};

fusebox::Result<Client> Connect(const std::string& config_path, const std::string& target) {
  FUSEBOX_ASSIGN_OR_RETURN(fusebox::yaml::Configuration config,
                           fusebox::yaml::LoadConfigFile(
                               config_path, {.environment = fusebox::yaml::FuseboxEnvironment()}));
  for (const char* instance : {"GetStock", "Reserve"}) {
    if (config.circuit_breakers.instance(instance) == nullptr) {
      return fusebox::Status::InvalidArgument(
          config_path + ": needs a resilience4j.circuitbreaker instance '" + instance + "'");
    }
  }
  FUSEBOX_ASSIGN_OR_RETURN(std::unique_ptr<fusebox::FileLineSink> stderr_sink,
                           fusebox::FileLineSink::Create("/dev/stderr"));
  FUSEBOX_ASSIGN_OR_RETURN(std::unique_ptr<fusebox::EventLog> events,
                           fusebox::EventLog::Create({.sink = std::move(stderr_sink)}));
  fusebox::RegistryOptions options;
  fusebox::ObserveRegistry(options, {std::shared_ptr<fusebox::EventLog>(std::move(events))});
  Client client;
  FUSEBOX_ASSIGN_OR_RETURN(client.registry, fusebox::Registry::Create(std::move(options)));
  FUSEBOX_RETURN_IF_ERROR(fusebox::yaml::ApplyToRegistry(config, *client.registry));
  client.stub = inventory::Inventory::NewStub(
      ::grpc::CreateChannel(target, ::grpc::InsecureChannelCredentials()));
  return client;
}

// The deadline every call gets: a dependency that hangs is a failure too.
void SetDeadline(::grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

// GetStock under the method's breaker.
::grpc::Status GetStock(Client& client, const std::string& sku, fusebox::grpc::CallInfo* info) {
  inventory::StockRequest request;
  request.set_sku(sku);
  inventory::StockReply reply;
  ::grpc::ClientContext context;
  SetDeadline(context);
  return fusebox::grpc::Call(
      *client.registry, kGetStock, context,
      [&](::grpc::ClientContext& c) { return client.stub->GetStock(&c, request, &reply); }, info,
      {.config_name = "GetStock"});
}

// Reserve under the tenant's breaker.
::grpc::Status Reserve(Client& client, const std::string& tenant, fusebox::grpc::CallInfo* info) {
  inventory::ReserveRequest request;
  request.set_tenant(tenant);
  request.set_sku("sku-1");
  request.set_quantity(1);
  inventory::ReserveReply reply;
  ::grpc::ClientContext context;
  SetDeadline(context);
  return fusebox::grpc::Call(
      *client.registry, std::string(kReserve) + ":" + tenant, context,
      [&](::grpc::ClientContext& c) { return client.stub->Reserve(&c, request, &reply); }, info,
      {.config_name = "Reserve"});
}

// The retry hint of a local refusal as any gRPC caller can read it: the
// number after "grpc-retry-pushback-ms: " in the status message.
std::optional<std::int64_t> HintFromMessage(const ::grpc::Status& s) {
  const std::string& message = s.error_message();
  constexpr std::string_view kLabel = "grpc-retry-pushback-ms: ";
  const std::size_t at = message.find(kLabel);
  if (at == std::string::npos) return std::nullopt;
  std::int64_t ms = 0;
  const char* first = message.data() + at + kLabel.size();
  const auto [end, ec] = std::from_chars(first, message.data() + message.size(), ms);
  if (ec != std::errc() || end == first) return std::nullopt;
  return ms;
}

void Print(std::string_view what, const ::grpc::Status& s, const fusebox::grpc::CallInfo& info) {
  const std::string name(what);
  if (s.ok()) {
    std::printf("%-22s OK\n", name.c_str());
  } else {
    std::printf("%-22s %s %s: %s\n", name.c_str(),
                std::string(fusebox::grpc::GrpcCodeName(static_cast<int>(s.error_code()))).c_str(),
                info.rejected ? "(refused locally)" : "(from the server)",
                s.error_message().c_str());
  }
}

// --- The scripted server of --self-check ------------------------------------------

// Answers GetStock with OK, and Reserve as scripted for the request's
// tenant (OK when not scripted), counting the calls it receives per tenant.
class ScriptedInventory final : public inventory::Inventory::Service {
 public:
  struct Answer {
    ::grpc::StatusCode code = ::grpc::StatusCode::OK;
    std::optional<std::string> pushback;  // the grpc-retry-pushback-ms trailer
  };

  void Script(const std::string& tenant, Answer answer) {
    const std::lock_guard lock(mu_);
    script_[tenant] = std::move(answer);
  }
  int calls(const std::string& tenant) const {
    const std::lock_guard lock(mu_);
    const auto it = calls_.find(tenant);
    return it == calls_.end() ? 0 : it->second;
  }
  void ScriptStock(::grpc::StatusCode code) {
    const std::lock_guard lock(mu_);
    stock_code_ = code;
  }
  int stock_calls() const {
    const std::lock_guard lock(mu_);
    return stock_calls_;
  }

  ::grpc::Status GetStock(::grpc::ServerContext* /*context*/,
                          const inventory::StockRequest* /*request*/,
                          inventory::StockReply* reply) override {
    const std::lock_guard lock(mu_);
    ++stock_calls_;
    if (stock_code_ != ::grpc::StatusCode::OK) return {stock_code_, "scripted failure"};
    reply->set_available(42);
    return ::grpc::Status::OK;
  }

  ::grpc::Status Reserve(::grpc::ServerContext* context, const inventory::ReserveRequest* request,
                         inventory::ReserveReply* reply) override {
    Answer answer;
    {
      const std::lock_guard lock(mu_);
      ++calls_[request->tenant()];
      const auto it = script_.find(request->tenant());
      if (it != script_.end()) answer = it->second;
    }
    if (answer.pushback) context->AddTrailingMetadata("grpc-retry-pushback-ms", *answer.pushback);
    if (answer.code != ::grpc::StatusCode::OK) return {answer.code, "scripted failure"};
    reply->set_reservation("r-" + request->tenant());
    return ::grpc::Status::OK;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, Answer, std::less<>> script_;
  std::map<std::string, int, std::less<>> calls_;
  int stock_calls_ = 0;
  ::grpc::StatusCode stock_code_ = ::grpc::StatusCode::OK;
};

int SelfCheck(const std::string& config_path) {
  ScriptedInventory service;
  int port = 0;
  ::grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", ::grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  const std::unique_ptr<::grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port <= 0) {
    std::fprintf(stderr, "grpc_client: could not start the loopback server\n");
    return 2;
  }
  auto client = Connect(config_path, "127.0.0.1:" + std::to_string(port));
  if (!client) {
    std::fprintf(stderr, "grpc_client: %s\n", std::string(client.error().message()).c_str());
    return 2;
  }
  Client& c = *client;

  int failures = 0;
  auto expect = [&failures](bool ok, const char* what) {
    std::printf("%s %s\n", ok ? "  PASS" : "  FAIL", what);
    if (!ok) ++failures;
  };
  fusebox::grpc::CallInfo info;
  ::grpc::Status s;

  // Healthy: everything reaches the server.
  for (int i = 0; i < 3; ++i) {
    s = Reserve(c, "alice", &info);
    Print("Reserve alice", s, info);
    if (!s.ok()) ++failures;
  }

  // bob's calls end UNAVAILABLE: Reserve's window is 4 calls at 50 %, so the
  // 4th opens bob's circuit and the rest are refused locally with the time
  // left of waitDurationInOpenState (20 s) as the hint.
  service.Script("bob", {::grpc::StatusCode::UNAVAILABLE, std::nullopt});
  for (int i = 0; i < 6; ++i) {
    s = Reserve(c, "bob", &info);
    Print("Reserve bob", s, info);
  }
  expect(service.calls("bob") == 4, "bob's server saw 4 calls, none after his circuit opened");
  expect(s.error_code() == ::grpc::StatusCode::UNAVAILABLE && info.rejected,
         "bob is refused locally with UNAVAILABLE");
  expect(info.status.code() == fusebox::StatusCode::kCircuitOpen,
         "the refusal's fusebox status is kCircuitOpen");
  const std::int64_t bob_hint = info.retry_pushback ? info.retry_pushback->count() : -1;
  expect(bob_hint > 0 && bob_hint <= 20'000, "bob's retry hint is within the breaker's 20 s wait");
  expect(HintFromMessage(s) == bob_hint,
         "the hint is in the status message as grpc-retry-pushback-ms");
  s = Reserve(c, "alice", &info);
  expect(s.ok() && service.calls("alice") == 4, "alice is still served (a breaker per tenant)");
  const int stock_before = service.stock_calls();
  s = GetStock(c, "sku-1", &info);
  expect(s.ok() && service.stock_calls() == stock_before + 1,
         "GetStock is still served (its breaker is the method's)");

  // carol is rate limited: RESOURCE_EXHAUSTED with a 120 s pushback opens her
  // circuit at the first answer, for the server's 120 s rather than the
  // breaker's 20 s.
  service.Script("carol", {::grpc::StatusCode::RESOURCE_EXHAUSTED, "120000"});
  s = Reserve(c, "carol", &info);
  Print("Reserve carol", s, info);
  expect(s.error_code() == ::grpc::StatusCode::RESOURCE_EXHAUSTED && !info.rejected &&
             info.status.code() == fusebox::StatusCode::kRateLimited,
         "carol's first call reaches the server and is classified as a rate limit");
  s = Reserve(c, "carol", &info);
  Print("Reserve carol", s, info);
  const std::int64_t carol_hint = info.retry_pushback ? info.retry_pushback->count() : -1;
  expect(info.rejected && service.calls("carol") == 1,
         "carol's second call is refused locally at once");
  expect(carol_hint > 20'000 && carol_hint <= 120'000,
         "carol's retry hint is the server's pushback, longer than the breaker's own wait");

  // dave's calls are his own fault (INVALID_ARGUMENT): counted as neither
  // success nor failure, they never open his circuit.
  service.Script("dave", {::grpc::StatusCode::INVALID_ARGUMENT, std::nullopt});
  for (int i = 0; i < 6; ++i) s = Reserve(c, "dave", &info);
  Print("Reserve dave", s, info);
  expect(service.calls("dave") == 6 && !info.rejected,
         "dave's INVALID_ARGUMENT answers all reach the server and open nothing");

  // The same breakers without wrapping each call: fusebox's client
  // interceptor on a second channel runs every unary call under the breaker
  // of its method (GetStock's instance: 5 calls at 50 %). Once GetStock
  // fails, its circuit opens and the interceptor answers the calls itself.
  {
    fusebox::grpc::InterceptorOptions options;
    options.call.config_name = "GetStock";
    std::vector<std::unique_ptr<::grpc::experimental::ClientInterceptorFactoryInterface>> f;
    f.push_back(fusebox::grpc::MakeInterceptorFactory(c.registry, std::move(options)));
    const auto stub =
        inventory::Inventory::NewStub(::grpc::experimental::CreateCustomChannelWithInterceptors(
            "127.0.0.1:" + std::to_string(port), ::grpc::InsecureChannelCredentials(),
            ::grpc::ChannelArguments(), std::move(f)));
    service.ScriptStock(::grpc::StatusCode::UNAVAILABLE);
    const int before = service.stock_calls();
    ::grpc::ClientContext* last = nullptr;
    std::vector<std::unique_ptr<::grpc::ClientContext>> contexts;
    for (int i = 0; i < 7; ++i) {
      inventory::StockRequest request;
      inventory::StockReply reply;
      contexts.push_back(std::make_unique<::grpc::ClientContext>());
      last = contexts.back().get();
      SetDeadline(*last);
      s = stub->GetStock(last, request, &reply);
      std::printf(
          "%-22s %s: %s\n", "GetStock (intercepted)",
          std::string(fusebox::grpc::GrpcCodeName(static_cast<int>(s.error_code()))).c_str(),
          s.error_message().c_str());
    }
    // The key is the method's name, as Call() used above: the same breaker,
    // whose window already holds that earlier success, so 4 failures fill
    // its 5 calls (80 % failed) and open it.
    expect(service.stock_calls() - before == 4,
           "intercepted GetStock: the server saw 4 calls, none after the circuit opened");
    const auto& trailers = last->GetServerTrailingMetadata();
    const auto hint = trailers.find("grpc-retry-pushback-ms");
    expect(
        s.error_code() == ::grpc::StatusCode::UNAVAILABLE && hint != trailers.end() &&
            HintFromMessage(s) == std::stoll(std::string(hint->second.data(), hint->second.size())),
        "intercepted GetStock: refused locally, the hint in the message and the trailer");
  }

  server->Shutdown();
  std::printf("%s\n", failures == 0 ? "self-check passed" : "self-check FAILED");
  return failures == 0 ? 0 : 1;
}

int Run(const std::string& config_path, const std::string& target,
        const std::vector<std::string>& tenants, int rounds) {
  auto client = Connect(config_path, target);
  if (!client) {
    std::fprintf(stderr, "grpc_client: %s\n", std::string(client.error().message()).c_str());
    return 2;
  }
  fusebox::grpc::CallInfo info;
  for (int round = 0; round < rounds; ++round) {
    const ::grpc::Status stock = GetStock(*client, "sku-1", &info);
    Print("GetStock", stock, info);
    for (const std::string& tenant : tenants) {
      const ::grpc::Status s = Reserve(*client, tenant, &info);
      Print("Reserve " + tenant, s, info);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 2 && args[0] == "--self-check") return SelfCheck(args[1]);
  if (args.size() >= 3) {
    int rounds = 1;
    std::vector<std::string> tenants;
    for (std::size_t i = 2; i < args.size(); ++i) {
      if (args[i] == "--rounds" && i + 1 < args.size()) {
        rounds = std::atoi(args[++i].c_str());
      } else {
        tenants.push_back(args[i]);
      }
    }
    if (rounds >= 1 && rounds <= 1000 && !tenants.empty()) {
      return Run(args[0], args[1], tenants, rounds);
    }
  }
  std::fprintf(stderr,
               "usage: grpc_client --self-check application.yml\n"
               "       grpc_client application.yml HOST:PORT TENANT... [--rounds N]\n");
  return 2;
}
