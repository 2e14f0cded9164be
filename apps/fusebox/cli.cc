#include "apps/fusebox/cli.h"

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "apps/fusebox/compare.h"
#ifdef FUSEBOX_APP_WITH_YAML
#include "apps/fusebox/config_check.h"
#endif
#ifdef FUSEBOX_APP_WITH_META
#include "apps/fusebox/classify.h"
#endif
#ifdef FUSEBOX_APP_WITH_GATEWAY
#include "apps/gateway/demo_client.h"
#include "apps/gateway/fake_upstream.h"
#include "apps/gateway/gateway.h"
#endif
#include "apps/fusebox/html.h"
#include "apps/fusebox/narration.h"
#include "apps/fusebox/replay.h"
#include "apps/fusebox/scenario.h"
#include "apps/fusebox/sim.h"
#include "fusebox/config_names.h"

#ifndef FUSEBOX_VERSION
#define FUSEBOX_VERSION "unknown"
#endif

namespace fusebox::app {
namespace {

// Flags that describe a scenario, applied over a preset or a file.
struct ScenarioFlags {
  std::string preset;
  std::string file;
  std::optional<int> calls;
  std::optional<std::string> interval, rate, timeout, latency;
  std::optional<double> failure_probability;
  std::optional<std::uint64_t> seed;
  std::vector<std::string> outages, slowdowns, error_bursts, breaker;
  bool no_breaker = false;

  void Register(CLI::App& cmd) {
    cmd.add_option("--calls", calls, "Number of calls (default 40)");
    cmd.add_option("--interval", interval, "Time between calls, e.g. 1s, 250ms (default 1s)");
    cmd.add_option("--rate", rate, "Calls per second, instead of --interval");
    cmd.add_option("--timeout", timeout, "How long a call waits for an answer (default 3s)");
    cmd.add_option("--latency", latency, "A healthy answer's latency (default 0)");
    cmd.add_option("--failure-probability", failure_probability,
                   "Probability that an answer is an error (default 0)");
    cmd.add_option("--seed", seed, "Seed of the error draws (default 1)");
    cmd.add_option("--outage", outages,
                   "START:DURATION the dependency does not answer, e.g. 11s:15s; replaces the "
                   "scenario's outages; repeatable");
    cmd.add_option("--slowdown", slowdowns,
                   "START:DURATION:LATENCY of added latency, e.g. 30s:5s:2s; repeatable");
    cmd.add_option("--error-burst", error_bursts,
                   "START:DURATION:PROBABILITY of errors, e.g. 5s:10s:0.5; repeatable");
    cmd.add_flag("--no-breaker", no_breaker, "No circuit breaker at all");
    cmd.add_option("-b,--breaker", breaker,
                   "NAME=VALUE, a Resilience4j property (failureRateThreshold=30, "
                   "waitDurationInOpenState=10s, ...); repeatable");
  }

  // The scenario the flags change: --scenario FILE, else the preset
  // ("default" when none is named).
  Result<Scenario> Base() const {
    if (file.empty()) return FindPreset(preset.empty() ? "default" : preset);
    if (!preset.empty()) {
      return Status::InvalidArgument("give a preset or --scenario FILE, not both");
    }
    return LoadScenarioFile(file);
  }

  // --calls, --interval or --rate, --timeout, --latency,
  // --failure-probability and --seed; `custom` set when any is given.
  Status ApplyTraffic(Scenario& s, bool& custom) const {
    auto duration = [](const std::string& flag, const std::string& text) -> Result<Duration> {
      Result<Duration> d = ParseDuration(text);
      if (!d) return Status::InvalidArgument(flag + ": " + std::string(d.error().message()));
      return d;
    };
    if (calls) s.calls = *calls, custom = true;
    if (interval && rate) return Status::InvalidArgument("give --interval or --rate, not both");
    if (interval) {
      Result<Duration> d = duration("--interval", *interval);
      if (!d) return d.error();
      s.interval = *d;
      custom = true;
    }
    if (rate) {
      double r = 0;
      try {
        std::size_t used = 0;
        r = std::stod(*rate, &used);
        if (used != rate->size()) r = 0;
      } catch (const std::exception&) {
        r = 0;
      }
      if (!(r > 0 && r <= 1e9)) {
        return Status::InvalidArgument("--rate: calls per second must be > 0, got \"" + *rate +
                                       "\"");
      }
      s.interval = Duration(static_cast<Duration::rep>(1e9 / r));
      custom = true;
    }
    for (auto [flag, value, field] : {std::tuple{"--timeout", &timeout, &s.timeout},
                                      std::tuple{"--latency", &latency, &s.latency}}) {
      if (*value) {
        Result<Duration> d = duration(flag, **value);
        if (!d) return d.error();
        *field = *d;
        custom = true;
      }
    }
    if (failure_probability) s.failure_probability = *failure_probability, custom = true;
    if (seed) s.seed = *seed, custom = true;
    return Status();
  }

  // --outage, --slowdown, --error-burst, --no-breaker and --breaker;
  // `custom` set when any is given.
  Status ApplyFaultsAndBreaker(Scenario& s, bool& custom) const {
    if (!outages.empty()) {
      s.outages.clear();
      for (const std::string& o : outages) {
        Result<TimeWindow> w = ParseWindowFlag(o);
        if (!w) return Status::InvalidArgument("--outage " + std::string(w.error().message()));
        s.outages.push_back(*w);
      }
      custom = true;
    }
    for (const std::string& o : slowdowns) {
      Result<Slowdown> w = ParseSlowdownFlag(o);
      if (!w) return Status::InvalidArgument("--slowdown " + std::string(w.error().message()));
      s.slowdowns.push_back(*w);
      custom = true;
    }
    for (const std::string& o : error_bursts) {
      Result<ErrorBurst> w = ParseErrorBurstFlag(o);
      if (!w) return Status::InvalidArgument("--error-burst " + std::string(w.error().message()));
      s.error_bursts.push_back(*w);
      custom = true;
    }
    if (no_breaker) s.breaker_enabled = false, custom = true;
    for (const std::string& b : breaker) {
      if (Status st = ApplyBreakerAssignment(s.breaker, b); !st.ok()) {
        return Status::InvalidArgument("--breaker " + std::string(st.message()));
      }
      custom = true;
    }
    return Status();
  }

  Result<Scenario> Build() const {
    Result<Scenario> base = Base();
    if (!base) return base.error();
    Scenario s = std::move(*base);
    bool custom = false;
    if (Status st = ApplyTraffic(s, custom); !st.ok()) return st;
    if (Status st = ApplyFaultsAndBreaker(s, custom); !st.ok()) return st;
    if (custom) {
      // No longer the preset the description talks about.
      s.name += " (modified)";
      s.description_en.clear();
      s.description_ko.clear();
    }
    if (Status st = s.Validate(); !st.ok()) return st;
    return s;
  }
};

int Fail(std::ostream& err, std::string_view command, const Status& s) {
  err << "fusebox " << command << ": " << s.message() << '\n';
  return 1;
}

int RunSim(const ScenarioFlags& flags, const std::string& lang_code, const std::string& format,
           const std::string& html_path, std::ostream& out, std::ostream& err) {
  Result<Language> lang = ParseLanguage(lang_code);
  if (!lang) return Fail(err, "sim", lang.error());
  Result<Scenario> scenario = flags.Build();
  if (!scenario) return Fail(err, "sim", scenario.error());
  Result<SimRun> run = Simulate(*scenario);
  if (!run) return Fail(err, "sim", run.error());
  if (format == "json") {
    WriteSimJson(*run, out);
  } else {
    WriteNarration(*run, *lang, out);
  }
  if (!html_path.empty()) {
    std::ofstream file(html_path, std::ios::binary | std::ios::trunc);
    file << RenderHtml(*run, *lang);
    if (!file.flush()) {
      return Fail(err, "sim", Status::Unavailable("cannot write \"" + html_path + "\""));
    }
  }
  return 0;
}

// Runs `run` over the file `path`, or over `in` when `path` is empty or "-";
// an error is reported as "fusebox <command>: <file>: <message>".
int RunOnInput(std::string_view command, const std::string& path, std::istream& in,
               std::ostream& err, const std::function<Status(std::istream&)>& run) {
  std::ifstream file;
  std::istream* source = &in;
  if (!path.empty() && path != "-") {
    file.open(path, std::ios::binary);
    if (!file) return Fail(err, command, Status::InvalidArgument("cannot read \"" + path + "\""));
    source = &file;
  }
  const std::string name = source == &in ? "<stdin>" : path;
  if (Status s = run(*source); !s.ok()) {
    return Fail(err, command, Status::InvalidArgument(name + ": " + std::string(s.message())));
  }
  return 0;
}

// With `expect`: the output is also compared with that recording
// (CompareWithRecorded); differences go to `err` and exit with 1.
int RunReplay(const std::string& path, const std::string& expect, std::istream& in,
              std::ostream& out, std::ostream& err) {
  if (expect.empty()) {
    return RunOnInput("replay", path, in, err,
                      [&](std::istream& source) { return ReplayTrace(source, out, err); });
  }
  std::ifstream recorded(expect, std::ios::binary);
  if (!recorded) {
    return Fail(err, "replay", Status::InvalidArgument("cannot read \"" + expect + "\""));
  }
  std::stringstream replayed;
  const int code = RunOnInput("replay", path, in, err, [&](std::istream& source) {
    return ReplayTrace(source, replayed, err);
  });
  out << replayed.str();
  if (code != 0) return code;
  Result<int> differences = CompareWithRecorded(replayed, recorded, err);
  if (!differences) {
    return Fail(
        err, "replay",
        Status::InvalidArgument(expect + ": " + std::string(differences.error().message())));
  }
  if (*differences > 0) {
    err << "fusebox replay: " << *differences << " difference(s) from " << expect << '\n';
    return 1;
  }
  return 0;
}

#ifdef FUSEBOX_APP_WITH_META
int RunClassify(const std::string& path, std::istream& in, std::ostream& out, std::ostream& err) {
  return RunOnInput("classify", path, in, err,
                    [&](std::istream& source) { return ClassifyMetaResponses(source, out); });
}
#endif

int RunCompare(const std::string& trace_path, const std::string& scenario_spec,
               const std::vector<std::string>& configs, const std::string& format, std::istream& in,
               std::ostream& out, std::ostream& err) {
  if (!trace_path.empty() && !scenario_spec.empty()) {
    return Fail(err, "compare", Status::InvalidArgument("give --trace or --scenario, not both"));
  }
  std::optional<Trace> trace;
  std::optional<Scenario> scenario;
  Candidate base;
  std::string title;
  if (!trace_path.empty()) {
    std::ifstream file;
    std::istream* source = &in;
    if (trace_path != "-") {
      file.open(trace_path, std::ios::binary);
      if (!file) {
        return Fail(err, "compare", Status::InvalidArgument("cannot read \"" + trace_path + "\""));
      }
      source = &file;
    }
    Result<Trace> read = ReadTrace(*source);
    if (!read) {
      return Fail(err, "compare",
                  Status::InvalidArgument(trace_path + ": " + std::string(read.error().message())));
    }
    trace = std::move(*read);
    base = Candidate{"trace", true, trace->config};
    title = "fusebox compare: trace " + trace_path + " (" + std::to_string(trace->events.size()) +
            " events)";
  } else {
    ScenarioFlags flags;
    const std::string spec = scenario_spec.empty() ? "default" : scenario_spec;
    (spec.ends_with(".yaml") || spec.ends_with(".yml") ? flags.file : flags.preset) = spec;
    Result<Scenario> s = flags.Build();
    if (!s) return Fail(err, "compare", s.error());
    scenario = std::move(*s);
    base = Candidate{scenario->name, scenario->breaker_enabled, scenario->breaker};
    std::string outages;
    for (const TimeWindow& w : scenario->outages) {
      outages += (outages.empty() ? "" : ", ") + SecondsText(w.start) + " s + " +
                 SecondsText(w.duration) + " s";
    }
    title = "fusebox compare: scenario " + scenario->name + " (" + std::to_string(scenario->calls) +
            " calls, one every " + SecondsText(scenario->interval) + " s; dependency down " +
            (outages.empty() ? "never" : outages) + ")";
  }
  std::vector<Candidate> candidates;
  if (configs.empty()) {
    candidates = PresetCandidates();
  } else {
    for (const std::string& spec : configs) {
      Result<Candidate> c = ParseCandidate(spec, base);
      if (!c) return Fail(err, "compare", c.error());
      candidates.push_back(std::move(*c));
    }
  }
  Result<std::vector<CompareRow>> rows =
      trace ? CompareOnTrace(*trace, candidates) : CompareOnScenario(*scenario, candidates);
  if (!rows) return Fail(err, "compare", rows.error());
  if (format == "json") {
    WriteCompareJson(*rows, out);
  } else {
    WriteCompareTable(title, *rows, out);
  }
  return 0;
}

// One subcommand of `fusebox`: the CLI11 subcommand that holds its options,
// and what runs once they are parsed (the options live in the closure).
struct Command {
  CLI::App* cli = nullptr;
  std::function<int(std::istream& in, std::ostream& out, std::ostream& err)> run;
};

Command AddSim(CLI::App& app) {
  struct Flags {
    ScenarioFlags scenario;
    std::string lang = "en", format = "text", html_path;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* sim = app.add_subcommand(
      "sim",
      "Simulate seed 004's order -> payment story (a preset or a custom scenario), narrated");
  std::string preset_help = "Preset:";
  for (std::string_view name : PresetNames()) preset_help += " " + std::string(name);
  sim->add_option("preset", f->scenario.preset, preset_help + " (default: default)");
  sim->add_option("-s,--scenario", f->scenario.file, "A YAML scenario file");
  f->scenario.Register(*sim);
  sim->add_option("--lang", f->lang, "Narration language: en or ko")
      ->check(CLI::IsMember({"en", "ko"}));
  sim->add_option("--format", f->format, "text (narration) or json (one line per call)")
      ->check(CLI::IsMember({"text", "json"}));
  sim->add_option("--html", f->html_path,
                  "Also write a self-contained HTML page with the timeline");
  return {sim, [f](std::istream&, std::ostream& out, std::ostream& err) {
            return RunSim(f->scenario, f->lang, f->format, f->html_path, out, err);
          }};
}

Command AddReplay(CLI::App& app) {
  struct Flags {
    std::string trace, expect;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* replay = app.add_subcommand(
      "replay", "Replay a JSON-lines trace of calls through a breaker, one decision per event");
  replay->add_option("trace", f->trace, "The trace file; stdin when absent or -");
  replay->add_option("--expect", f->expect,
                     "Compare the output with this recording of the same trace through "
                     "Resilience4j (same format); differences on stderr, exit 1");
  return {replay, [f](std::istream& in, std::ostream& out, std::ostream& err) {
            return RunReplay(f->trace, f->expect, in, out, err);
          }};
}

Command AddCompare(CLI::App& app) {
  struct Flags {
    std::string trace, scenario, format = "text";
    std::vector<std::string> configs;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* compare = app.add_subcommand(
      "compare", "Run one trace or scenario through several configurations, side by side");
  compare->add_option("-t,--trace", f->trace, "A JSON-lines trace (- for stdin)");
  compare->add_option("-s,--scenario", f->scenario,
                      "A preset name or a YAML scenario file (default: default)");
  compare->add_option("-c,--config", f->configs,
                      "A configuration: a preset name, a .yaml file, or [label:]name=value[,...] "
                      "over the input's own; repeatable (default: the five presets)");
  compare->add_option("--format", f->format, "text (a table) or json (one line per config)")
      ->check(CLI::IsMember({"text", "json"}));
  return {compare, [f](std::istream& in, std::ostream& out, std::ostream& err) {
            return RunCompare(f->trace, f->scenario, f->configs, f->format, in, out, err);
          }};
}

#ifdef FUSEBOX_APP_WITH_META
Command AddClassify(CLI::App& app) {
  struct Flags {
    std::string provider, path;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* classify = app.add_subcommand(
      "classify",
      "Classify provider responses (one JSON object per line: status, headers, body) as "
      "rate-limit, transient, authorization or invalid, with the deciding rule");
  classify->add_option("--provider", f->provider, "The provider's rules: meta")
      ->required()
      ->check(CLI::IsMember({"meta"}));
  classify->add_option("responses", f->path, "The JSON-lines file; stdin when absent or -");
  return {classify, [f](std::istream& in, std::ostream& out, std::ostream& err) {
            return RunClassify(f->path, in, out, err);
          }};
}
#endif

#ifdef FUSEBOX_APP_WITH_YAML
// `fusebox config check`: the command is `config`'s only subcommand.
Command AddConfigCheck(CLI::App& app) {
  struct Flags {
    std::string path;
    bool no_env = false;
    std::vector<std::string> profiles;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* config_cmd =
      app.add_subcommand("config", "Configuration files (Resilience4j's YAML layout)");
  config_cmd->require_subcommand(1);
  CLI::App* check = config_cmd->add_subcommand(
      "check",
      "Validate a YAML configuration file and print every template and instance resolved, or "
      "every error (exit 1), like nginx -t");
  check->add_option("file", f->path, "The YAML file (application.yml)")->required();
  check->add_flag("--no-env", f->no_env,
                  "Ignore FUSEBOX_*, RESILIENCE4J_* and SPRING_PROFILES_ACTIVE (default: "
                  "apply them)");
  check
      ->add_option("--profile,--profiles", f->profiles,
                   "Active Spring profiles (comma-separated or repeated) selecting the documents "
                   "that spring.config.activate.on-profile conditions (default: "
                   "SPRING_PROFILES_ACTIVE, else the file's spring.profiles.active, else default)")
      ->delimiter(',');
  return {check, [f](std::istream&, std::ostream& out, std::ostream& err) {
            return RunConfigCheck(f->path,
                                  f->no_env ? yaml::Environment{} : yaml::FuseboxEnvironment(), out,
                                  err, f->profiles);
          }};
}
#endif

#ifdef FUSEBOX_APP_WITH_GATEWAY
Command AddFakeUpstream(CLI::App& app) {
  struct Flags {
    std::string listen = "127.0.0.1:0", script, tls_cert, tls_key;
    int threads = 1;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* fake_upstream = app.add_subcommand(
      "fake-upstream",
      "A scriptable stand-in for an upstream API (Meta's Graph API): routes answering a "
      "programmed sequence of responses, for the gateway's demo and tests (docs/gateway.md)");
  fake_upstream->add_option("--listen", f->listen, "HOST:PORT (port 0: any free port)");
  fake_upstream->add_option("--script", f->script,
                            "A YAML route script (apps/gateway/testdata/*.yaml)");
  fake_upstream->add_option("--threads", f->threads, "Event-loop threads (default 1)")
      ->check(CLI::Range(1, 64));
  fake_upstream->add_option("--tls-cert", f->tls_cert,
                            "Serve HTTPS with this PEM certificate chain (needs --tls-key)");
  fake_upstream->add_option("--tls-key", f->tls_key, "The PEM private key of --tls-cert");
  return {fake_upstream, [f](std::istream&, std::ostream& out, std::ostream& err) {
            return gateway::RunFakeUpstream(f->listen, f->script, f->threads, out, err, f->tls_cert,
                                            f->tls_key);
          }};
}

Command AddGateway(CLI::App& app) {
  struct Flags {
    std::string config, redis, listen;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* gateway_cmd = app.add_subcommand(
      "gateway",
      "Serve seed 000's flow (snapshot cache -> quota and transient circuits -> upstream) in "
      "front of an upstream HTTP API, until SIGTERM (docs/gateway.md)");
  gateway_cmd->add_option("--config", f->config, "The gateway.yaml file")->required();
  gateway_cmd->add_option("--redis", f->redis,
                          "redis://[[user]:password@]host[:port][/db]: share circuits and "
                          "snapshots across instances (overrides the file's redis:)");
  gateway_cmd->add_option("--listen", f->listen, "HOST:PORT (overrides the file's listen:)");
  return {gateway_cmd, [f](std::istream&, std::ostream& out, std::ostream& err) {
            return gateway::RunGateway(f->config, f->redis, f->listen, out, err);
          }};
}

Command AddGatewayDemo(CLI::App& app) {
  struct Flags {
    gateway::GatewayDemoOptions options;
    std::vector<std::string> gateways;
    std::string token_env;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* gateway_demo = app.add_subcommand(
      "gateway-demo",
      "The client of `make demo`: walks seed 000's sequence diagram against two running "
      "gateways and a fake upstream (apps/gateway/demo.sh starts them)");
  gateway_demo->add_option("--upstream", f->options.upstream, "The fake upstream's HOST:PORT")
      ->required();
  gateway_demo->add_option("--gateway", f->gateways, "A gateway's HOST:PORT; give two")
      ->required()
      ->expected(2);
  gateway_demo->add_option("--upstream-ca", f->options.upstream_ca,
                           "The upstream serves HTTPS with a certificate from this CA (PEM)");
  gateway_demo->add_option("--admin-token-env", f->token_env,
                           "Name of the variable holding the admin token (to show circuit states)");
  return {gateway_demo, [f](std::istream&, std::ostream& out, std::ostream& err) {
            f->options.gateway_a = f->gateways[0];
            f->options.gateway_b = f->gateways[1];
            const char* token = f->token_env.empty() ? nullptr : std::getenv(f->token_env.c_str());
            if (token != nullptr) f->options.admin_token = token;
            return gateway::RunGatewayDemo(f->options, out, err);
          }};
}
#endif

}  // namespace

int RunFusebox(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
               std::ostream& err) {
  CLI::App app{
      "fusebox: circuit breaker simulator, trace replay and what-if comparison, on the "
      "real fusebox breaker and a manual clock"};
  app.name("fusebox");
  app.set_version_flag("--version", FUSEBOX_VERSION);
  app.require_subcommand(1);
  // In the order `fusebox --help` lists them.
  std::vector<Command> commands;
  commands.push_back(AddSim(app));
  commands.push_back(AddReplay(app));
  commands.push_back(AddCompare(app));
#ifdef FUSEBOX_APP_WITH_META
  commands.push_back(AddClassify(app));
#endif
#ifdef FUSEBOX_APP_WITH_YAML
  commands.push_back(AddConfigCheck(app));
#endif
#ifdef FUSEBOX_APP_WITH_GATEWAY
  commands.push_back(AddFakeUpstream(app));
  commands.push_back(AddGateway(app));
  commands.push_back(AddGatewayDemo(app));
#endif

  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e, out, err);
  }
  for (const Command& c : commands) {
    if (c.cli->parsed()) return c.run(in, out, err);
  }
  return 1;
}

}  // namespace fusebox::app
