// curl_service: what a C++ service that calls an HTTP dependency per account
// needs from fusebox, in one file. Breakers by key ("inventory:<account>")
// from a Registry configured with Resilience4j's YAML keys, a keyed Pipeline
// (breaker, retry, time limit) around a libcurl transfer, transitions as JSON
// lines on stderr, and Prometheus metrics on /metrics.
//
//   curl_service --self-check application.yml
//       Calls the service's own /metrics as a healthy dependency and a closed
//       port as a dead one, then reads its own /metrics: exits 0 when the dead
//       account's circuit opened and stopped calling, the healthy ones
//       stayed closed, and the metrics say so (CI runs this).
//   curl_service application.yml URL ACCOUNT... [--rounds N]
//       GETs URL/<account> for each account, N rounds (default 1), prints each
//       outcome, serves /metrics on 127.0.0.1:9464 meanwhile.
#include <curl/curl.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/curl/perform.h"
#include "fusebox/event_log.h"
#include "fusebox/http/classify.h"
#include "fusebox/metrics.h"
#include "fusebox/pipeline.h"
#include "fusebox/prometheus_http/metrics_server.h"
#include "fusebox/registry.h"
#include "fusebox/retry.h"
#include "fusebox/timeout.h"
#include "fusebox/yaml/config.h"

namespace {

constexpr char kDependency[] = "inventory";  // the YAML instance every key is made from

// Everything the service keeps for its lifetime.
struct Service {
  std::shared_ptr<fusebox::MetricsCollector> metrics;
  std::shared_ptr<fusebox::Registry> registry;
  std::unique_ptr<fusebox::Pipeline> pipeline;
  std::unique_ptr<fusebox::prometheus_http::MetricsServer> metrics_server;
  CURL* easy = nullptr;  // one transfer at a time: this service calls from one thread
  int attempts = 0;      // transfers started, retries included

  ~Service() {
    if (easy != nullptr) curl_easy_cleanup(easy);
  }
};

fusebox::Result<std::unique_ptr<Service>> Start(const std::string& config_path,
                                                std::uint16_t metrics_port) {
  FUSEBOX_ASSIGN_OR_RETURN(fusebox::yaml::Configuration config,
                           fusebox::yaml::LoadConfigFile(
                               config_path, {.environment = fusebox::yaml::FuseboxEnvironment()}));
  const fusebox::yaml::RetrySettings* retry_settings = config.retries.instance(kDependency);
  const fusebox::TimeoutOptions* timeout_options = config.time_limiters.instance(kDependency);
  if (retry_settings == nullptr || timeout_options == nullptr) {
    return fusebox::Status::InvalidArgument(
        config_path + ": needs resilience4j.retry and resilience4j.timelimiter instances '" +
        kDependency + "'");
  }

  auto service = std::make_unique<Service>();
  // With calls timed: resilience4j_circuitbreaker_calls_seconds_max, as Micrometer has it.
  service->metrics = std::make_shared<fusebox::MetricsCollector>(
      fusebox::MetricsCollectorOptions{.time_calls = true});
  FUSEBOX_ASSIGN_OR_RETURN(std::unique_ptr<fusebox::FileLineSink> stderr_sink,
                           fusebox::FileLineSink::Create("/dev/stderr"));
  FUSEBOX_ASSIGN_OR_RETURN(std::unique_ptr<fusebox::EventLog> events,
                           fusebox::EventLog::Create({.sink = std::move(stderr_sink)}));
  fusebox::RegistryOptions options;
  fusebox::ObserveRegistry(
      options, {service->metrics, std::shared_ptr<fusebox::EventLog>(std::move(events))});
  FUSEBOX_ASSIGN_OR_RETURN(service->registry, fusebox::Registry::Create(std::move(options)));
  FUSEBOX_RETURN_IF_ERROR(fusebox::yaml::ApplyToRegistry(config, *service->registry));

  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<fusebox::Retry> retry,
                           fusebox::Retry::Create(retry_settings->options));
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<fusebox::Timeout> timeout,
                           fusebox::Timeout::Create(*timeout_options));
  service->metrics->AddRetry(kDependency, *retry);
  service->metrics->AddTimeLimiter(kDependency, *timeout);
  FUSEBOX_ASSIGN_OR_RETURN(service->pipeline,
                           fusebox::Pipeline::Builder()
                               .WithRegistry(service->registry, kDependency)
                               .WithRetry(retry)
                               .WithTimeout(timeout)
                               .WithOutcomeClassifier(fusebox::http::BreakerOutcomeKind)
                               .Build());
  FUSEBOX_ASSIGN_OR_RETURN(service->metrics_server,
                           fusebox::prometheus_http::MetricsServer::Start(
                               *service->metrics, *service->registry, {.port = metrics_port}));
  service->easy = curl_easy_init();
  if (service->easy == nullptr) return fusebox::Status::Unavailable("curl_easy_init failed");
  return service;
}

// One call for `account`: through its breaker, retried and timed, or
// answered at once when its circuit is open.
fusebox::Status Call(Service& service, const std::string& url, const std::string& account,
                     fusebox::curl::Reply& reply) {
  return service.pipeline->Execute(
      std::string(kDependency) + ":" + account, [&](const std::stop_token& stop) {
        ++service.attempts;
        curl_easy_setopt(service.easy, CURLOPT_URL, url.c_str());
        curl_easy_setopt(service.easy, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
        return fusebox::curl::Perform(service.easy, stop, reply);
      });
}

void Print(const std::string& account, const fusebox::Status& s,
           const fusebox::curl::Reply& reply) {
  if (s.ok()) {
    std::printf("%-10s ok     HTTP %d, %zu bytes\n", account.c_str(), reply.status,
                reply.body.size());
  } else {
    std::printf("%-10s %-6s %s\n", account.c_str(),
                std::string(fusebox::StatusCodeName(s.code())).c_str(),
                std::string(s.message()).c_str());
  }
}

// The value of the sample line that starts with `sample` in Prometheus text,
// or -1.
double Sample(const std::string& text, const std::string& sample) {
  const std::size_t at = text.find("\n" + sample + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + sample.size() + 2, nullptr);
}

int SelfCheck(const std::string& config_path) {
  auto service = Start(config_path, 0);
  if (!service) {
    std::fprintf(stderr, "curl_service: %s\n", std::string(service.error().message()).c_str());
    return 2;
  }
  Service& s = **service;
  // A dead dependency: a port that was just free and is closed again.
  std::string dead_url;
  {
    auto probe =
        fusebox::prometheus_http::MetricsServer::Start([] { return std::string(); }, {.port = 0});
    if (!probe) return 2;
    dead_url = "http://127.0.0.1:" + std::to_string((*probe)->port()) + "/";
  }
  const std::string healthy_url = s.metrics_server->url();

  int failures = 0;
  auto expect = [&failures](bool ok, const char* what) {
    std::printf("%s %s\n", ok ? "  PASS" : "  FAIL", what);
    if (!ok) ++failures;
  };
  fusebox::curl::Reply reply;
  for (int round = 0; round < 3; ++round) {
    for (const std::string account : {"alice", "bob"}) {
      const fusebox::Status st = Call(s, healthy_url, account, reply);
      Print(account, st, reply);
      if (!st.ok()) ++failures;
    }
  }
  // minimumNumberOfCalls 5 at 100 % failures: open after the 5th recorded
  // attempt (each call is tried twice), then answered without a transfer.
  int attempts_before = s.attempts;
  fusebox::Status last;
  for (int i = 0; i < 6; ++i) {
    last = Call(s, dead_url, "carol", reply);
    Print("carol", last, reply);
  }
  const int dead_attempts = s.attempts - attempts_before;
  expect(last.code() == fusebox::StatusCode::kCircuitOpen && last.retry_at().has_value(),
         "carol's circuit is open and says when to retry");
  expect(dead_attempts == 5, "carol's dependency saw 5 attempts, none after the circuit opened");
  attempts_before = s.attempts;
  expect(Call(s, healthy_url, "alice", reply).ok() && s.attempts == attempts_before + 1,
         "alice is still served (one breaker per account)");

  fusebox::curl::Reply scrape;
  curl_easy_setopt(s.easy, CURLOPT_URL, healthy_url.c_str());
  const fusebox::Status scraped = fusebox::curl::Perform(s.easy, std::stop_token(), scrape);
  expect(scraped.ok(), "/metrics answers");
  const std::string& text = scrape.body;
  expect(Sample(text,
                R"(resilience4j_circuitbreaker_state{name="inventory:carol",state="open"})") == 1,
         "/metrics: carol open");
  expect(Sample(text,
                R"(resilience4j_circuitbreaker_state{name="inventory:alice",state="closed"})") == 1,
         "/metrics: alice closed");
  expect(
      Sample(text,
             R"(resilience4j_retry_calls_total{kind="failed_with_retry",name="inventory"})") >= 2,
      "/metrics: the retries of carol's calls are counted");
  std::printf("%s\n", failures == 0 ? "self-check passed" : "self-check FAILED");
  return failures == 0 ? 0 : 1;
}

int Serve(const std::string& config_path, const std::string& url,
          const std::vector<std::string>& accounts, int rounds) {
  auto service = Start(config_path, 9464);
  if (!service) {
    std::fprintf(stderr, "curl_service: %s\n", std::string(service.error().message()).c_str());
    return 2;
  }
  std::printf("metrics on %s\n", (*service)->metrics_server->url().c_str());
  fusebox::curl::Reply reply;
  for (int round = 0; round < rounds; ++round) {
    for (const std::string& account : accounts) {
      Print(account, Call(**service, url + "/" + account, account, reply), reply);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  std::vector<std::string> args(argv + 1, argv + argc);
  int rc = 2;
  if (args.size() == 2 && args[0] == "--self-check") {
    rc = SelfCheck(args[1]);
  } else if (args.size() >= 3) {
    int rounds = 1;
    std::vector<std::string> accounts;
    for (std::size_t i = 2; i < args.size(); ++i) {
      if (args[i] == "--rounds" && i + 1 < args.size()) {
        rounds = std::atoi(args[++i].c_str());
      } else {
        accounts.push_back(args[i]);
      }
    }
    if (rounds >= 1 && rounds <= 1000 && !accounts.empty()) {
      rc = Serve(args[0], args[1], accounts, rounds);
    }
  }
  if (rc == 2 && args.size() < 2) {
    std::fprintf(stderr,
                 "usage: curl_service --self-check application.yml\n"
                 "       curl_service application.yml URL ACCOUNT... [--rounds N]\n");
  }
  curl_global_cleanup();
  return rc;
}
