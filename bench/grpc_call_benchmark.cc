// fusebox::grpc::Call()'s cost against a bare unary call, in the same run:
// one Ask to the in-process Probe server on 127.0.0.1 (modules/grpc/test),
// bare, through Call() under a CLOSED breaker, and through Call() with a
// Registry key, and on a channel with fusebox's interceptor
// (MakeInterceptorFactory); plus the local refusals of an OPEN circuit (no
// network) by Call() and by the interceptor's hijack.
// Run with
//   flock /tmp/fusebox-bench.lock ./build/release/bench/fusebox_grpc_bench
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// docs/performance.md quotes the medians.
#include <benchmark/benchmark.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/client_interceptor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/grpc/call.h"
#include "fusebox/grpc/interceptor.h"
#include "fusebox/registry.h"
#include "probe_server.h"

namespace fusebox::grpc {
namespace {

struct Fixture {
  testing::ProbeServer server;
  std::unique_ptr<fuseboxtest::Probe::Stub> stub = server.NewStub();
  std::unique_ptr<CircuitBreaker> breaker = *CircuitBreaker::Create("probe", {});
  std::unique_ptr<Registry> registry = *Registry::Create({});
  // A channel whose unary calls run under the breaker of their method.
  std::shared_ptr<Registry> intercepted_registry = *Registry::Create({});
  std::unique_ptr<fuseboxtest::Probe::Stub> intercepted_stub =
      InterceptedStub(server.address(), intercepted_registry);

  static std::unique_ptr<fuseboxtest::Probe::Stub> InterceptedStub(
      const std::string& target, std::shared_ptr<Registry> registry) {
    std::vector<std::unique_ptr<::grpc::experimental::ClientInterceptorFactoryInterface>> f;
    f.push_back(MakeInterceptorFactory(std::move(registry)));
    return fuseboxtest::Probe::NewStub(::grpc::experimental::CreateCustomChannelWithInterceptors(
        target, ::grpc::InsecureChannelCredentials(), ::grpc::ChannelArguments(), std::move(f)));
  }
};

Fixture& Shared() {
  static Fixture* fixture = new Fixture();  // leaked: gRPC outlives static destruction badly
  return *fixture;
}

void BM_GrpcBareCall(benchmark::State& state) {
  Fixture& f = Shared();
  fuseboxtest::AskRequest request;
  fuseboxtest::AskReply reply;
  for (auto _ : state) {
    ::grpc::ClientContext context;
    ::grpc::Status s = f.stub->Ask(&context, request, &reply);
    if (!s.ok()) state.SkipWithError("call failed");
  }
}
BENCHMARK(BM_GrpcBareCall)->UseRealTime();

void BM_GrpcCallUnderBreaker(benchmark::State& state) {
  Fixture& f = Shared();
  fuseboxtest::AskRequest request;
  fuseboxtest::AskReply reply;
  for (auto _ : state) {
    ::grpc::ClientContext context;
    ::grpc::Status s = Call(*f.breaker, context, [&](::grpc::ClientContext& c) {
      return f.stub->Ask(&c, request, &reply);
    });
    if (!s.ok()) state.SkipWithError("call failed");
  }
}
BENCHMARK(BM_GrpcCallUnderBreaker)->UseRealTime();

void BM_GrpcCallUnderRegistryKey(benchmark::State& state) {
  Fixture& f = Shared();
  fuseboxtest::AskRequest request;
  fuseboxtest::AskReply reply;
  for (auto _ : state) {
    ::grpc::ClientContext context;
    ::grpc::Status s = Call(*f.registry, "probe/Ask", context, [&](::grpc::ClientContext& c) {
      return f.stub->Ask(&c, request, &reply);
    });
    if (!s.ok()) state.SkipWithError("call failed");
  }
}
BENCHMARK(BM_GrpcCallUnderRegistryKey)->UseRealTime();

void BM_GrpcOpenCircuitRefusal(benchmark::State& state) {
  std::unique_ptr<CircuitBreaker> breaker = *CircuitBreaker::Create("open", {});
  (void)breaker->TransitionToOpen();
  for (auto _ : state) {
    ::grpc::ClientContext context;
    ::grpc::Status s =
        Call(*breaker, context, [](::grpc::ClientContext&) { return ::grpc::Status::OK; });
    benchmark::DoNotOptimize(s);
  }
}
BENCHMARK(BM_GrpcOpenCircuitRefusal);

void BM_GrpcInterceptedCall(benchmark::State& state) {
  Fixture& f = Shared();
  fuseboxtest::AskRequest request;
  fuseboxtest::AskReply reply;
  for (auto _ : state) {
    ::grpc::ClientContext context;
    ::grpc::Status s = f.intercepted_stub->Ask(&context, request, &reply);
    if (!s.ok()) state.SkipWithError("call failed");
  }
}
BENCHMARK(BM_GrpcInterceptedCall)->UseRealTime();

// The interceptor's refusal: the call is created and hijacked, nothing is
// sent (the channel never connects).
void BM_GrpcInterceptorOpenCircuitRefusal(benchmark::State& state) {
  Fixture& f = Shared();
  std::shared_ptr<Registry> registry = *Registry::Create({});
  (void)(*registry->Get("fuseboxtest.Probe/Ask"))->TransitionToOpen();
  auto stub = Fixture::InterceptedStub(f.server.address(), registry);
  fuseboxtest::AskRequest request;
  fuseboxtest::AskReply reply;
  for (auto _ : state) {
    ::grpc::ClientContext context;
    ::grpc::Status s = stub->Ask(&context, request, &reply);
    if (s.error_code() != ::grpc::StatusCode::UNAVAILABLE) state.SkipWithError("not refused");
  }
}
BENCHMARK(BM_GrpcInterceptorOpenCircuitRefusal);

}  // namespace
}  // namespace fusebox::grpc
