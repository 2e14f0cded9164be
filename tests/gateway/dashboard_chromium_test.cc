// The gateway's /dashboard in a real headless Chromium: the page renders the
// circuits, then a rate limit opens one and the page shows it OPEN through the
// server-sent events stream, without a reload.
//
// Chromium is driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: JSON messages ended by NUL, commands on fd 3,
// answers on fd 4), which lets the test watch a live page. The waiting happens
// inside the page: one Runtime.evaluate returns a Promise that a
// MutationObserver resolves when the expected element appears (with a
// page-side time limit), so the test never sleeps or polls.
//
// Registered with FUSEBOX_BROWSER_TESTS; fails, never skips, when Chromium is
// missing (`make deps` installs Debian's chromium). Chromium runs as root in
// CI, hence --no-sandbox.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "apps/gateway/config.h"
#include "apps/gateway/dashboard_stats.h"
#include "apps/gateway/fake_upstream.h"
#include "apps/gateway/gateway.h"
#include "apps/gateway/http_client.h"
#include "fusebox/testing/manual_clock.h"
#include "tests/redis/redis_server.h"

extern char** environ;

namespace fusebox::gateway {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

// A headless Chromium on a DevTools pipe. Not thread-safe.
class Chromium {
 public:
  static std::unique_ptr<Chromium> Launch(const std::string& binary, const std::string& profile) {
    int to_chrome[2], from_chrome[2];
    if (pipe(to_chrome) != 0 || pipe(from_chrome) != 0) return nullptr;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    // fd 3: commands in; fd 4: answers out. Everything else stays closed
    // (pipe ends are close-on-exec below).
    posix_spawn_file_actions_adddup2(&actions, to_chrome[0], 3);
    posix_spawn_file_actions_adddup2(&actions, from_chrome[1], 4);
    // Chromium's own chatter (D-Bus and the like) goes to a file beside the
    // profile, not into the test's output.
    const std::string log = profile + ".log";
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (int fd : {to_chrome[1], from_chrome[0]}) fcntl(fd, F_SETFD, FD_CLOEXEC);
    std::vector<std::string> args = {binary,
                                     "--headless",
                                     "--no-sandbox",
                                     "--disable-gpu",
                                     "--no-first-run",
                                     "--disable-background-networking",
                                     "--disable-component-update",
                                     "--disable-sync",
                                     "--disable-extensions",
                                     "--remote-debugging-pipe",
                                     "--user-data-dir=" + profile,
                                     "about:blank"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    close(to_chrome[0]);
    close(from_chrome[1]);
    if (rc != 0) {
      close(to_chrome[1]);
      close(from_chrome[0]);
      return nullptr;
    }
    return std::unique_ptr<Chromium>(new Chromium(pid, to_chrome[1], from_chrome[0]));
  }

  ~Chromium() {
    if (pid_ > 0) {
      // Browser.close lets it exit cleanly; SIGKILL if the pipe is gone.
      Json ignored;
      if (!Send("Browser.close", Json::object(), "", ignored)) kill(pid_, SIGKILL);
      close(in_);
      close(out_);
      int status = 0;
      waitpid(pid_, &status, 0);
    }
  }

  // Sends one command (to a page session when `session` is set) and waits
  // for its answer; events met on the way are kept in events_.
  bool Send(const std::string& method, const Json& params, const std::string& session,
            Json& result) {
    Json message = {{"id", ++next_id_}, {"method", method}, {"params", params}};
    if (!session.empty()) message["sessionId"] = session;
    const std::string text = message.dump() + '\0';
    for (std::size_t at = 0; at < text.size();) {
      const ssize_t n = write(in_, text.data() + at, text.size() - at);
      if (n <= 0) return false;
      at += static_cast<std::size_t>(n);
    }
    while (true) {
      std::optional<Json> reply = Next();
      if (!reply) return false;
      if (reply->contains("id") && (*reply)["id"] == next_id_) {
        if (reply->contains("error")) {
          result = (*reply)["error"];
          return false;
        }
        result = (*reply)["result"];
        return true;
      }
      events_.push_back(std::move(*reply));
    }
  }

  // Reads messages until an event `method` (for `session`) has arrived.
  bool WaitEvent(const std::string& method, const std::string& session) {
    auto seen = [&] {
      for (const Json& e : events_) {
        if (e.value("method", "") == method && e.value("sessionId", "") == session) return true;
      }
      return false;
    };
    while (!seen()) {
      std::optional<Json> message = Next();
      if (!message) return false;
      events_.push_back(std::move(*message));
    }
    return true;
  }

  // Events whose method is `method`.
  std::vector<Json> Events(const std::string& method) const {
    std::vector<Json> out;
    for (const Json& e : events_) {
      if (e.value("method", "") == method) out.push_back(e);
    }
    return out;
  }

 private:
  Chromium(pid_t pid, int in, int out) : pid_(pid), in_(in), out_(out) {}

  std::optional<Json> Next() {
    while (true) {
      const std::size_t nul = buffer_.find('\0');
      if (nul != std::string::npos) {
        Json message = Json::parse(buffer_.substr(0, nul), nullptr, false);
        buffer_.erase(0, nul + 1);
        if (message.is_discarded()) continue;
        return message;
      }
      char chunk[65536];
      const ssize_t n = read(out_, chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  pid_t pid_;
  int in_;
  int out_;
  int next_id_ = 0;
  std::string buffer_;
  std::vector<Json> events_;
};

// A page-side wait: resolves with the first truthy value of the JavaScript
// expression `probe` (re-evaluated on every DOM change), or with
// "timeout: <#circuits html>" after `limit_ms`.
std::string WaitUntil(const std::string& probe, int limit_ms = 20000) {
  return "new Promise((resolve) => {"
         "  const check = () => { const v = (" +
         probe +
         ");"
         "    if (v) { resolve(String(v)); return true; } return false; };"
         "  if (check()) return;"
         "  new MutationObserver(check).observe(document.documentElement,"
         "      {subtree: true, childList: true, attributes: true, characterData: true});"
         "  setTimeout(() => { const c = document.querySelector('#circuits');"
         "    resolve('timeout: ' + (c ? c.outerHTML : document.body.outerHTML)); }, " +
         std::to_string(limit_ms) +
         ");"
         "})";
}

// Waits for an element matching `selector`; resolves with its outerHTML.
std::string WaitFor(const std::string& selector, int limit_ms = 20000) {
  return WaitUntil("(document.querySelector(" + Json(selector).dump() + ") || {}).outerHTML",
                   limit_ms);
}

// One page of a headless Chromium at `url`, loaded, with a Runtime to
// evaluate in. Not thread-safe.
class Page {
 public:
  // Fails the test (and leaves chromium() null) when Chromium cannot start.
  explicit Page(const std::string& url)
      : profile_((std::filesystem::temp_directory_path() /
                  ("fusebox-dash-" + std::to_string(getpid()) + "-" + std::to_string(++count_)))
                     .string()) {
    chromium_ = Chromium::Launch(FUSEBOX_CHROMIUM, profile_);
    if (chromium_ == nullptr) {
      ADD_FAILURE() << "cannot start " << FUSEBOX_CHROMIUM;
      return;
    }
    Json r;
    bool ok = chromium_->Send("Target.createTarget", {{"url", "about:blank"}}, "", r);
    EXPECT_TRUE(ok) << r.dump();
    const std::string target = ok ? r["targetId"].get<std::string>() : "";
    ok = ok &&
         chromium_->Send("Target.attachToTarget", {{"targetId", target}, {"flatten", true}}, "", r);
    EXPECT_TRUE(ok) << r.dump();
    session_ = ok ? r["sessionId"].get<std::string>() : "";
    EXPECT_TRUE(chromium_->Send("Runtime.enable", Json::object(), session_, r));
    EXPECT_TRUE(chromium_->Send("Page.enable", Json::object(), session_, r));
    // Navigate, then wait for the load event: evaluating earlier would run
    // in about:blank, or in a context the navigation destroys.
    EXPECT_TRUE(chromium_->Send("Page.navigate", {{"url", url}}, session_, r)) << r.dump();
    EXPECT_FALSE(r.contains("errorText")) << r.dump();
    EXPECT_TRUE(chromium_->WaitEvent("Page.loadEventFired", session_));
  }

  ~Page() {
    chromium_.reset();
    std::error_code ignored;
    std::filesystem::remove_all(profile_, ignored);
    std::filesystem::remove(profile_ + ".log", ignored);
  }

  Chromium* chromium() { return chromium_.get(); }

  // The value of `expression` (awaited when a Promise) as a string.
  std::string Evaluate(const std::string& expression) {
    Json r;
    EXPECT_TRUE(chromium_->Send(
        "Runtime.evaluate",
        {{"expression", expression}, {"awaitPromise", true}, {"returnByValue", true}}, session_, r))
        << r.dump();
    if (r.contains("exceptionDetails")) return "exception: " + r["exceptionDetails"].dump();
    return r["result"].value("value", Json()).is_string() ? r["result"]["value"].get<std::string>()
                                                          : r.dump();
  }

  // A PNG of the page as it is, 1200 px wide, into `path` (a test artifact).
  void Screenshot(const std::string& path) {
    Json r;
    EXPECT_TRUE(chromium_->Send(
        "Emulation.setDeviceMetricsOverride",
        {{"width", 1200}, {"height", 800}, {"deviceScaleFactor", 1}, {"mobile", false}}, session_,
        r))
        << r.dump();
    ASSERT_TRUE(chromium_->Send("Page.captureScreenshot",
                                {{"format", "png"}, {"captureBeyondViewport", true}}, session_, r))
        << r.dump();
    std::ofstream(path, std::ios::binary) << Base64Decode(r["data"].get<std::string>());
  }

  // Light or dark (prefers-color-scheme) from now on.
  void ColorScheme(const std::string& scheme) {
    Json r;
    EXPECT_TRUE(chromium_->Send(
        "Emulation.setEmulatedMedia",
        {{"features", Json::array({{{"name", "prefers-color-scheme"}, {"value", scheme}}})}},
        session_, r))
        << r.dump();
  }

  // No script error and no console message so far.
  void ExpectQuietConsole() {
    EXPECT_TRUE(chromium_->Events("Runtime.exceptionThrown").empty())
        << chromium_->Events("Runtime.exceptionThrown")[0].dump();
    for (const Json& e : chromium_->Events("Runtime.consoleAPICalled")) {
      ADD_FAILURE() << "console message: " << e.dump();
    }
  }

 private:
  static std::string Base64Decode(const std::string& in) {
    std::string out;
    int bits = 0;
    unsigned value = 0;
    for (char c : in) {
      const char* at =
          std::strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", c);
      if (c == '=' || c == '\0' || at == nullptr) continue;
      value = (value << 6) |
              static_cast<unsigned>(
                  at - "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        out += static_cast<char>((value >> bits) & 0xff);
      }
    }
    return out;
  }

  static inline int count_ = 0;
  const std::string profile_;
  std::unique_ptr<Chromium> chromium_;
  std::string session_;
};

// The gateway of these tests: the fake Graph API behind two routes
// (comments and media of an account), admin API on with token "s3cret".
// `extra` is prepended (redis:).
std::unique_ptr<Gateway> StartGateway(FakeUpstream& upstream, testing::ManualClock& clock,
                                      std::ostringstream& log, const std::string& audit_path,
                                      const std::string& extra = "") {
  const std::string yaml =
      extra +
      "listen: 127.0.0.1:0\ninstance: gw-dash\n"
      "admin:\n  token_env: GW_DASH_TOKEN\n  audit_log: " +
      audit_path +
      "\nupstreams:\n"
      "  - name: graph\n    base_url: " +
      upstream.url() +
      "/v19.0\n"
      "routes:\n"
      "  - name: comments\n    method: GET\n"
      "    path: /v1/{provider}/accounts/{account}/comments\n"
      "    upstream: graph\n    upstream_path: /{account}/comments\n"
      "    workload: read\n    provider: \"{provider}\"\n    subject: \"{account}\"\n"
      "    classifier: meta\n"
      "  - name: stats\n    method: GET\n"
      "    path: /v1/{provider}/accounts/{account}\n"
      "    upstream: graph\n    upstream_path: /{account}\n"
      "    workload: read\n    provider: \"{provider}\"\n    subject: \"{account}\"\n"
      "    classifier: meta\n";
  Result<GatewayConfig> config =
      ParseGatewayConfig(yaml, "dashboard.yaml", [](std::string_view name) {
        return name == "GW_DASH_TOKEN" ? std::optional<std::string>("s3cret") : std::nullopt;
      });
  EXPECT_TRUE(config.has_value()) << config.error().message();
  if (!config) return nullptr;
  auto gw = Gateway::Create({.config = std::move(*config), .clock = &clock, .log = &log});
  EXPECT_TRUE(gw.has_value()) << gw.error().message();
  return gw ? std::move(*gw) : nullptr;
}

// The build directory's artifacts folder (screenshots).
std::string Artifact(const std::string& name) {
  std::filesystem::create_directories(FUSEBOX_ARTIFACT_DIR);
  return std::string(FUSEBOX_ARTIFACT_DIR) + "/" + name;
}

class DashboardChromiumTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(FUSEBOX_CHROMIUM))
        << "Chromium not found at \"" << FUSEBOX_CHROMIUM
        << "\": run `make deps`, which installs Debian's chromium";
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove(audit_path_, ignored);
  }
  testing::ManualClock clock_;
  std::ostringstream log_;
  const std::string audit_path_ =
      (std::filesystem::temp_directory_path() / ("fusebox-dash-audit-" + std::to_string(getpid())))
          .string();
};

TEST_F(DashboardChromiumTest, RendersTheKeysAndShowsOneOpeningLive) {
  auto upstream = FakeUpstream::Start(
      {.routes = {{"GET", "/v19.0/*/comments", {{.body = R"({"data":[]})"}}},
                  {"GET",
                   "/v19.0/*",
                   {{.status = 429,
                     .headers = {{"Retry-After", "600"}},
                     .body = R"({"error":{"message":"(#4) Application request limit reached",)"
                             R"("type":"OAuthException","code":4}})"}}}}});
  ASSERT_TRUE(upstream.has_value()) << upstream.error().message();
  std::unique_ptr<Gateway> gw = StartGateway(**upstream, clock_, log_, audit_path_);
  ASSERT_NE(gw, nullptr);

  // A healthy call creates account 178's circuits, both closed.
  ASSERT_EQ(HttpFetch(gw->address(), "GET", "/v1/instagram/accounts/178/comments")->status, 200);

  Page page("http://" + gw->address() + "/dashboard");
  ASSERT_NE(page.chromium(), nullptr);
  const std::string key = "provider:instagram:read:178";
  // Rendered: the instance, a live stream, the key closed in its group.
  EXPECT_THAT(page.Evaluate(WaitFor("#connection[data-state=\"live\"]")), HasSubstr("live"));
  EXPECT_EQ(page.Evaluate(WaitUntil("(document.querySelector('#instance') || {}).textContent")),
            "gw-dash");
  // Key rows come only for expanded groups: none until the drill-down opens
  // (the page then reopens its stream with open=instagram:read).
  EXPECT_THAT(page.Evaluate(WaitFor(".group[data-group=\"instagram:read\"] details.drill")),
              HasSubstr("keys (1) and timeline"));
  EXPECT_EQ(page.Evaluate("String(document.querySelectorAll('tr.key').length)"), "0");
  page.Evaluate(
      "document.querySelector('.group[data-group=\"instagram:read\"] details').open = true");
  const std::string row =
      page.Evaluate(WaitFor(".group[data-group=\"instagram:read\"] tr.key[data-name=\"" + key +
                            "\"][data-state=\"closed\"]"));
  EXPECT_THAT(row, HasSubstr("quota=closed transient=closed")) << row;

  // Meta says stop: the quota circuit opens, and the open page shows the
  // key and its group OPEN, with the transition in the group's timeline.
  HttpReply limited = *HttpFetch(gw->address(), "GET", "/v1/instagram/accounts/178");
  ASSERT_EQ(limited.status, 429) << limited.body;
  const std::string open_row =
      page.Evaluate(WaitFor("tr.key[data-name=\"" + key + "\"][data-state=\"open\"]"));
  EXPECT_THAT(open_row, HasSubstr("quota=open")) << open_row;
  EXPECT_THAT(open_row, HasSubstr("transient=closed")) << "another breaker: still closed";
  EXPECT_THAT(page.Evaluate(WaitFor(".group[data-group=\"instagram:read\"][data-health=\"open\"] "
                                    "li.transition-entry[data-to=\"open\"]")),
              HasSubstr("retry_after_hint"));
  EXPECT_THAT(page.Evaluate(WaitFor("#transitions li.transition[data-to=\"open\"]")),
              HasSubstr(key + ":quota"));
  page.ExpectQuietConsole();
  gw->Shutdown();
}

// Real traffic through the gateway (healthy, failing, and an account id
// made to look like HTML), then what an operator does during an incident:
// find the failing group, filter, and force a circuit open from the page.
TEST_F(DashboardChromiumTest, GroupsRatesFilterEscapingAndAnOperatorAction) {
  // The comments take 30 ms (real time): their p99 is at least that.
  auto upstream = FakeUpstream::Start(
      {.routes = {{"GET",
                   "/v19.0/*/comments",
                   {{.body = R"({"data":[]})", .latency = std::chrono::milliseconds(30)}}},
                  {"GET", "/v19.0/*", {{.status = 503}}}}});
  ASSERT_TRUE(upstream.has_value()) << upstream.error().message();
  std::unique_ptr<Gateway> gw = StartGateway(**upstream, clock_, log_, audit_path_);
  ASSERT_NE(gw, nullptr);
  Page page("http://" + gw->address() + "/dashboard");
  ASSERT_NE(page.chromium(), nullptr);
  EXPECT_THAT(page.Evaluate(WaitFor("#connection[data-state=\"live\"]")), HasSubstr("live"));

  // instagram: healthy reads. facebook: the upstream fails (503) until the
  // transient circuit opens, then refuses. And an account id that would run
  // script if the page ever parsed it as HTML.
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(HttpFetch(gw->address(), "GET", "/v1/instagram/accounts/178/comments")->status, 200);
  }
  for (int i = 0; i < 5; ++i) (void)HttpFetch(gw->address(), "GET", "/v1/facebook/accounts/9");
  const std::string hostile = "<img src=x onerror=\"document.title='pwned'\">'";
  const std::string hostile_path =
      "/v1/instagram/accounts/%3Cimg%20src%3Dx%20onerror%3D%22document.title%3D'pwned'%22%3E'"
      "/comments";
  ASSERT_EQ(HttpFetch(gw->address(), "GET", hostile_path)->status, 200);

  // The failing group comes first, OPEN, with its failures and refusals
  // counted; the healthy one after it, with its calls.
  const std::string fb = ".group[data-group=\"facebook:read\"]";
  EXPECT_THAT(page.Evaluate(WaitFor(fb + "[data-health=\"open\"]")), HasSubstr("facebook:read"));
  EXPECT_EQ(page.Evaluate("document.querySelector('#groups .group').dataset.group"),
            "facebook:read");
  EXPECT_EQ(page.Evaluate(WaitUntil("(() => { const g = document.querySelector('" + fb +
                                    "'); return g && Number(g.dataset.failures) >= 3 && "
                                    "Number(g.querySelector('.rejections').dataset.count) >= 1 "
                                    "&& 'counted'; })()")),
            "counted");
  EXPECT_EQ(page.Evaluate(WaitUntil("(() => { const g = document.querySelector("
                                    "'.group[data-group=\"instagram:read\"]'); return g && "
                                    "Number(g.dataset.calls) >= 6 && g.dataset.health; })()")),
            "ok");
  // Its p99 is a number of milliseconds, at least the upstream's 30 ms (an
  // upper bound at most 25 % above the slowest call's), with a sparkline.
  const std::string ig = ".group[data-group=\"instagram:read\"]";
  const std::string p99 = page.Evaluate(
      WaitUntil("(() => { const c = document.querySelector('" + ig +
                " .rates .p99'); return c && c.dataset.ms !== '' && c.dataset.ms + '|' + "
                "c.textContent + '|' + document.querySelectorAll('" +
                ig + " svg.spark-p99 polyline').length; })()"));
  const double p99_ms = std::strtod(p99.c_str(), nullptr);
  EXPECT_GE(p99_ms, 30.0) << p99;
  EXPECT_LT(p99_ms, 1000.0) << p99;
  EXPECT_THAT(p99, ::testing::MatchesRegex(R"([0-9.]+\|p99 .* [0-9.]+ ms\|1)")) << p99;
  EXPECT_EQ(page.Evaluate("document.querySelectorAll('" + fb +
                          " svg.spark-failures polyline')"
                          ".length + ':' + document.querySelector('" +
                          fb + " svg.badge circle').getAttribute('r')")
                .substr(0, 2),
            "1:");

  // The hostile key is text: its row holds it verbatim, no element was
  // made of it, and its script never ran.
  const std::string hostile_key = "provider:instagram:read:" + hostile;
  page.Evaluate("document.querySelectorAll('#groups details').forEach((d) => d.open = true)");
  EXPECT_EQ(page.Evaluate(WaitUntil("(() => { const r = [...document.querySelectorAll('tr.key')]"
                                    ".find((tr) => tr.dataset.name === " +
                                    Json(hostile_key).dump() +
                                    "); return r && r.querySelector('.name').textContent; })()")),
            hostile_key);
  EXPECT_EQ(page.Evaluate("String(document.querySelectorAll('#groups img').length)"), "0");
  EXPECT_EQ(page.Evaluate("document.title"), "fusebox gateway");

  // Light and dark, each kept as an artifact (docs/gateway.md shows one).
  page.Evaluate("document.querySelectorAll('#groups details').forEach((d) => d.open = true)");
  page.Screenshot(Artifact("dashboard-light.png"));
  page.ColorScheme("dark");
  EXPECT_EQ(page.Evaluate("getComputedStyle(document.body).backgroundColor"), "rgb(18, 19, 22)");
  page.Screenshot(Artifact("dashboard-dark.png"));
  page.ColorScheme("light");

  // The filter narrows the rows (the stream is reopened with ?provider=).
  page.Evaluate(
      "document.getElementById('provider').value = 'facebook';"
      "document.getElementById('filters').dispatchEvent(new Event('submit'))");
  EXPECT_EQ(page.Evaluate(
                WaitUntil("(() => { const g = [...document.querySelectorAll('#groups .group')]; "
                          "return g.length === 1 && g[0].dataset.group; })()")),
            "facebook:read");
  page.Evaluate(
      "document.getElementById('provider').value = '';"
      "document.getElementById('filters').dispatchEvent(new Event('submit'))");
  EXPECT_THAT(page.Evaluate(WaitFor(".group[data-group=\"instagram:read\"]")),
              HasSubstr("instagram:read"));

  // Without the token, nothing happens; with it, force-open is POSTed and
  // the stream shows the key FORCED_OPEN.
  const std::string key = "provider:instagram:read:178";
  const std::string button =
      "[...document.querySelectorAll('tr.key')].find((tr) => "
      "tr.dataset.name === '" +
      key + "').querySelector('.act-force-open')";
  page.Evaluate(button + ".click()");
  EXPECT_THAT(page.Evaluate(WaitFor("#action-result[data-ok=\"no\"]")), HasSubstr("token"));
  page.Evaluate(
      "const t = document.getElementById('token'); t.value = 's3cret';"
      "t.dispatchEvent(new Event('change'));"
      "document.getElementById('reason').value = 'incident 42';" +
      button + ".click()");
  EXPECT_THAT(page.Evaluate(WaitFor("#action-result[data-ok=\"yes\"]")), HasSubstr("done"));
  EXPECT_EQ(page.Evaluate("document.getElementById('token').value"), "") << "kept in memory only";
  EXPECT_THAT(
      page.Evaluate(WaitFor("tr.key[data-name=\"" + key + "\"][data-state=\"forced_open\"]")),
      HasSubstr("forced_open"));
  std::shared_ptr<CircuitBreaker> quota = gw->registry().Find(key + ":quota");
  ASSERT_NE(quota, nullptr);
  EXPECT_EQ(quota->state(), State::kForcedOpen);
  std::ifstream audit(audit_path_);
  std::stringstream audit_text;
  audit_text << audit.rdbuf();
  EXPECT_THAT(audit_text.str(), HasSubstr("incident 42"));
  page.Screenshot(Artifact("dashboard-after-action.png"));
  page.ExpectQuietConsole();
  gw->Shutdown();
}

// Issue 20: the fleet's instances from their heartbeats in Redis, this one
// and another whose id looks like HTML: a table of text, and the instance
// filter narrows it.
TEST_F(DashboardChromiumTest, InstancesTableShowsEachHeartbeatAsTextAndFilters) {
  auto redis = redis::testing::RedisServer::Start();
  ASSERT_TRUE(redis.has_value()) << redis.error().message();
  auto upstream =
      FakeUpstream::Start({.routes = {{"GET", "/v19.0/*", {{.body = R"({"data":[]})"}}}}});
  ASSERT_TRUE(upstream.has_value()) << upstream.error().message();
  std::unique_ptr<Gateway> gw =
      StartGateway(**upstream, clock_, log_, audit_path_,
                   "redis: \"redis://127.0.0.1:" + std::to_string((*redis)->port()) + "/0\"\n");
  ASSERT_NE(gw, nullptr);
  Page page("http://" + gw->address() + "/dashboard");
  ASSERT_NE(page.chromium(), nullptr);
  EXPECT_THAT(page.Evaluate(WaitFor("#instances tr.instance.self")), HasSubstr("gw-dash"));

  // Another instance's heartbeat, stamped with the server's time as
  // PublishInstance does.
  const std::string hostile = "<img src=x onerror=\"document.title='pwned'\">";
  ASSERT_TRUE((*redis)
                  ->Admin({"EVAL",
                           "local t = redis.call('TIME') "
                           "redis.call('HSET', KEYS[1], ARGV[1], '{\"at_ms\":' .. "
                           "string.format('%d', t[1] * 1000) .. ',\"figures\":' .. ARGV[2] .. '}')",
                           "1", "fusebox:v1:{instances}", hostile,
                           R"({"calls_per_s":2.5,"open_circuits":1})"})
                  .has_value());
  const std::string rows =
      "[...document.querySelectorAll('#instances tr.instance')].map((tr) => "
      "tr.querySelector('.name').textContent + '|' + tr.querySelector('.calls_per_s').textContent)"
      ".join(',')";
  EXPECT_EQ(page.Evaluate(WaitUntil("(() => { const r = " + rows +
                                    "; return r.includes('|2.50') && r; })()")),
            hostile + "|2.50,gw-dash (this one)|0.00");
  EXPECT_EQ(page.Evaluate("String(document.querySelectorAll('#instances img').length)"), "0");
  EXPECT_EQ(page.Evaluate("document.title"), "fusebox gateway");

  page.Evaluate(
      "document.getElementById('fleet-instance').value = 'gw-';"
      "document.getElementById('fleet-instance').dispatchEvent(new Event('input'))");
  EXPECT_EQ(page.Evaluate(rows), "gw-dash (this one)|0.00");
  page.Evaluate(
      "document.getElementById('fleet-instance').value = 'onerror';"
      "document.getElementById('fleet-instance').dispatchEvent(new Event('input'))");
  EXPECT_EQ(page.Evaluate(rows), hostile + "|2.50");
  page.Screenshot(Artifact("dashboard-instances.png"));
  page.ExpectQuietConsole();
  gw->Shutdown();
}

}  // namespace
}  // namespace fusebox::gateway
