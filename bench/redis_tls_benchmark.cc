// Redis over TLS vs plain TCP, same run, against real redis-servers started
// by the test harness (tests/redis): one TLS-only (certificates from the
// test PKI, verified against its CA) and one plain.
//
//   BM_RedisGet/plain|tls       one GET round trip on an open connection
//   BM_RedisConnect/plain|tls   Connection::Connect (TCP, TLS handshake with
//                               the shared SSL_CTX, PING) and close
//   BM_TlsContextLoad/fill_caches:0|1
//                               what a connect would cost without the shared
//                               context: SSL_CTX_new + system store + ca_file;
//                               1 adds what making the shared one adds, the
//                               certificates' caches filled once
//                               (src/tls_certificate_caches.h)
//
// Run: flock /tmp/fusebox-bench.lock build/release/bench/fusebox_redis_bench
//        --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Figures: docs/performance.md.
#include <benchmark/benchmark.h>
#include <openssl/ssl.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "fusebox/redis/connection.h"
#include "src/tls_certificate_caches.h"
#include "tests/redis/redis_server.h"
#include "tests/redis/test_pki.h"

namespace {

using fusebox::redis::Connection;
using fusebox::redis::ConnectionOptions;
using fusebox::redis::testing::RedisServer;
using fusebox::redis::testing::RedisServerTls;
using fusebox::redis::testing::TestPki;

struct Servers {
  std::unique_ptr<TestPki> pki;
  std::unique_ptr<RedisServer> plain;
  std::unique_ptr<RedisServer> tls;
};

[[noreturn]] void Die(const fusebox::Status& s) {
  std::fprintf(stderr, "fusebox_redis_bench: %s\n", s.ToString().c_str());
  std::exit(1);
}

// Destroyed at exit, which stops the servers.
Servers& Get() {
  static std::unique_ptr<Servers> servers = [] {
    auto s = std::make_unique<Servers>();
    auto pki = TestPki::Create();
    if (!pki) Die(pki.error());
    s->pki = std::move(*pki);
    auto plain = RedisServer::Start();
    if (!plain) Die(plain.error());
    s->plain = std::move(*plain);
    RedisServerTls tls;
    tls.cert_file = s->pki->good_cert();
    tls.key_file = s->pki->server_key();
    tls.ca_cert_file = s->pki->ca_cert();
    tls.client_ca_file = s->pki->ca_cert();
    tls.host = "localhost";
    auto server = RedisServer::Start({.tls = tls});
    if (!server) Die(server.error());
    s->tls = std::move(*server);
    return s;
  }();
  return *servers;
}

ConnectionOptions Options(bool tls) {
  return tls ? Get().tls->connection_options() : Get().plain->connection_options();
}

void BM_RedisGet(benchmark::State& state) {
  auto conn = Connection::Connect(Options(state.range(0) == 1));
  if (!conn) Die(conn.error());
  (void)(*conn)->Command({"SET", "bench:k", "a-value-of-some-thirty-bytes.."});
  for (auto _ : state) {
    auto r = (*conn)->Command({"GET", "bench:k"});
    if (!r) Die(r.error());
    benchmark::DoNotOptimize(r->str.data());
  }
}
BENCHMARK(BM_RedisGet)->ArgName("tls")->Arg(0)->Arg(1);

void BM_RedisConnect(benchmark::State& state) {
  const ConnectionOptions options = Options(state.range(0) == 1);
  for (auto _ : state) {
    auto conn = Connection::Connect(options);
    if (!conn) Die(conn.error());
    // A plain connect sends nothing; ask once so both pay a round trip.
    if (!(*conn)->Ping().ok()) Die(fusebox::Status::Internal("PING failed"));
  }
}
BENCHMARK(BM_RedisConnect)->ArgName("tls")->Arg(0)->Arg(1);

void BM_TlsContextLoad(benchmark::State& state) {
  const std::string ca = Get().pki->ca_cert();
  const bool fill_caches = state.range(0) == 1;
  for (auto _ : state) {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_default_verify_paths(ctx);
    SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr);
    if (fill_caches) fusebox::internal::FillCertificateCaches(ctx);
    // Loading is lazy for a directory store; force what a handshake would.
    SSL* ssl = SSL_new(ctx);
    benchmark::DoNotOptimize(X509_STORE_get0_objects(SSL_CTX_get_cert_store(ctx)));
    SSL_free(ssl);
    SSL_CTX_free(ctx);
  }
}
BENCHMARK(BM_TlsContextLoad)->ArgName("fill_caches")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
