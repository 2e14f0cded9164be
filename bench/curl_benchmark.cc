// What fusebox::curl adds to a libcurl call (issue 17), against the bare call
// in the same run: one GET over a kept-alive loopback connection to the
// gateway's fake upstream (a real HTTP server, in-process), made
//   - bare: curl_easy_perform() with a write callback into a string;
//   - Perform(): fusebox::curl::Perform() (its multi handle, stop callback,
//     header parsing, classification);
//   - in a keyed pipeline: Perform() under Execute(key, fn) with a breaker per
//     key from a Registry, a retry and a time limit (the Timeout's watcher).
// Run with
//   ./build/release/bench/fusebox_curl_bench --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
// docs/performance.md quotes the medians. The wall time per call is mostly
// the loopback exchange and the server's work, equal in every case; the
// difference between rows is the adapter's.
#include <benchmark/benchmark.h>
#include <curl/curl.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stop_token>
#include <string>

#include "apps/gateway/fake_upstream.h"
#include "fusebox/curl/perform.h"
#include "fusebox/pipeline.h"
#include "fusebox/registry.h"
#include "fusebox/retry.h"
#include "fusebox/timeout.h"

namespace fusebox {
namespace {

// One server for the whole run.
const std::string& Url() {
  static const std::string url = [] {
    curl_global_init(CURL_GLOBAL_DEFAULT);
    auto up = gateway::FakeUpstream::Start({.threads = 1});
    if (!up) {
      std::fprintf(stderr, "fake upstream: %s\n", std::string(up.error().message()).c_str());
      std::abort();
    }
    if (!(*up)
             ->SetRoute({"GET", "/item", {{.body = R"({"id":"17841400000","name":"bench"})"}}})
             .ok()) {
      std::abort();
    }
    static std::unique_ptr<gateway::FakeUpstream> server = std::move(*up);
    return server->url() + "/item";
  }();
  return url;
}

CURL* Easy() {
  CURL* easy = curl_easy_init();
  curl_easy_setopt(easy, CURLOPT_URL, Url().c_str());
  return easy;
}

std::size_t Append(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

void BM_Curl_Bare(benchmark::State& state) {
  CURL* easy = Easy();
  std::string body;
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &Append);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &body);
  for (auto _ : state) {
    body.clear();
    long status = 0;
    if (curl_easy_perform(easy) != CURLE_OK) state.SkipWithError("transfer failed");
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
    benchmark::DoNotOptimize(status);
  }
  curl_easy_cleanup(easy);
}
BENCHMARK(BM_Curl_Bare)->UseRealTime();

void BM_Curl_Perform(benchmark::State& state) {
  CURL* easy = Easy();
  curl::Reply reply;
  for (auto _ : state) {
    if (!curl::Perform(easy, std::stop_token(), reply).ok()) state.SkipWithError("call failed");
  }
  curl_easy_cleanup(easy);
}
BENCHMARK(BM_Curl_Perform)->UseRealTime();

void BM_Curl_PerformInKeyedPipeline(benchmark::State& state) {
  std::shared_ptr<Registry> registry = *Registry::Create({});
  std::unique_ptr<Pipeline> pipeline =
      *Pipeline::Builder()
           .WithRegistry(registry)
           .WithRetry(*Retry::Create({.max_attempts = 2}))
           .WithTimeout(*Timeout::Create({.timeout_duration = std::chrono::seconds(5)}))
           .Build();
  CURL* easy = Easy();
  curl::Reply reply;
  const RegistryKey key("inventory:17841400000");
  for (auto _ : state) {
    const Status s = pipeline->Execute(
        key, [&](const std::stop_token& stop) { return curl::Perform(easy, stop, reply); });
    if (!s.ok()) state.SkipWithError("call failed");
  }
  curl_easy_cleanup(easy);
}
BENCHMARK(BM_Curl_PerformInKeyedPipeline)->UseRealTime();

}  // namespace
}  // namespace fusebox

BENCHMARK_MAIN();
