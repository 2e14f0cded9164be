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

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "apps/gateway/config.h"
#include "apps/gateway/fake_upstream.h"
#include "apps/gateway/gateway.h"
#include "apps/gateway/http_client.h"
#include "fusebox/testing/manual_clock.h"

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

TEST(DashboardChromiumTest, RendersTheCircuitsAndShowsOneOpeningLive) {
  ASSERT_TRUE(std::filesystem::exists(FUSEBOX_CHROMIUM))
      << "Chromium not found at \"" << FUSEBOX_CHROMIUM
      << "\": run `make deps`, which installs Debian's chromium";

  auto upstream = FakeUpstream::Start(
      {.routes = {{"GET", "/v19.0/*/comments", {{.body = R"({"data":[]})"}}},
                  {"GET",
                   "/v19.0/*",
                   {{.status = 429,
                     .headers = {{"Retry-After", "600"}},
                     .body = R"({"error":{"message":"(#4) Application request limit reached",)"
                             R"("type":"OAuthException","code":4}})"}}}}});
  ASSERT_TRUE(upstream.has_value()) << upstream.error().message();
  const std::string yaml =
      "listen: 127.0.0.1:0\ninstance: gw-dash\nupstreams:\n"
      "  - name: graph\n    base_url: " +
      (*upstream)->url() +
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
      ParseGatewayConfig(yaml, "dashboard.yaml", [](std::string_view) { return std::nullopt; });
  ASSERT_TRUE(config.has_value()) << config.error().message();
  testing::ManualClock clock;
  std::ostringstream log;
  auto gw = Gateway::Create({.config = std::move(*config), .clock = &clock, .log = &log});
  ASSERT_TRUE(gw.has_value()) << gw.error().message();

  // A healthy call creates account 178's circuits, both closed.
  ASSERT_EQ(HttpFetch((*gw)->address(), "GET", "/v1/instagram/accounts/178/comments")->status, 200);

  const std::string profile =
      (std::filesystem::temp_directory_path() / ("fusebox-dash-" + std::to_string(getpid())))
          .string();
  auto chromium = Chromium::Launch(FUSEBOX_CHROMIUM, profile);
  ASSERT_NE(chromium, nullptr) << "cannot start " << FUSEBOX_CHROMIUM;
  Json result;
  ASSERT_TRUE(chromium->Send("Target.createTarget", {{"url", "about:blank"}}, "", result))
      << result.dump();
  const std::string target = result["targetId"];
  ASSERT_TRUE(chromium->Send("Target.attachToTarget", {{"targetId", target}, {"flatten", true}}, "",
                             result))
      << result.dump();
  const std::string session = result["sessionId"];
  ASSERT_TRUE(chromium->Send("Runtime.enable", Json::object(), session, result));
  ASSERT_TRUE(chromium->Send("Page.enable", Json::object(), session, result));
  // Navigate, then wait for the load event: evaluating earlier would run in
  // about:blank, or in a context the navigation destroys.
  ASSERT_TRUE(chromium->Send(
      "Page.navigate", {{"url", "http://" + (*gw)->address() + "/dashboard"}}, session, result))
      << result.dump();
  ASSERT_FALSE(result.contains("errorText")) << result.dump();
  ASSERT_TRUE(chromium->WaitEvent("Page.loadEventFired", session));

  auto evaluate = [&](const std::string& expression) -> std::string {
    Json r;
    EXPECT_TRUE(chromium->Send(
        "Runtime.evaluate",
        {{"expression", expression}, {"awaitPromise", true}, {"returnByValue", true}}, session, r))
        << r.dump();
    if (r.contains("exceptionDetails")) return "exception: " + r["exceptionDetails"].dump();
    return r["result"].value("value", Json()).is_string() ? r["result"]["value"].get<std::string>()
                                                          : r.dump();
  };

  const std::string quota = "provider:instagram:read:178:quota";
  const std::string transient = "provider:instagram:read:178:transient";
  // Rendered: the instance, a live stream, both breakers closed.
  EXPECT_THAT(evaluate(WaitFor("#connection[data-state=\"live\"]")), HasSubstr("live"));
  EXPECT_EQ(evaluate(WaitUntil("(document.querySelector('#instance') || {}).textContent")),
            "gw-dash");
  for (const std::string& name : {quota, transient}) {
    const std::string row =
        evaluate(WaitFor("tr.circuit[data-name=\"" + name + "\"][data-state=\"closed\"]"));
    EXPECT_THAT(row, HasSubstr("state-closed")) << row;
  }

  // Meta says stop: the quota circuit opens, and the open page shows it.
  HttpReply limited = *HttpFetch((*gw)->address(), "GET", "/v1/instagram/accounts/178");
  ASSERT_EQ(limited.status, 429) << limited.body;
  const std::string open_row =
      evaluate(WaitFor("tr.circuit[data-name=\"" + quota + "\"][data-state=\"open\"]"));
  EXPECT_THAT(open_row, HasSubstr("state-open")) << open_row;
  EXPECT_THAT(evaluate(WaitFor("#transitions li.transition[data-to=\"open\"]")), HasSubstr(quota));
  // The transient circuit is another breaker: still closed.
  EXPECT_EQ(evaluate("document.querySelector('tr.circuit[data-name=\"" + transient +
                     "\"]').dataset.state"),
            "closed");

  EXPECT_TRUE(chromium->Events("Runtime.exceptionThrown").empty())
      << chromium->Events("Runtime.exceptionThrown")[0].dump();
  for (const Json& e : chromium->Events("Runtime.consoleAPICalled")) {
    ADD_FAILURE() << "console message: " << e.dump();
  }
  chromium.reset();
  (*gw)->Shutdown();
  std::error_code ignored;
  std::filesystem::remove_all(profile, ignored);
  std::filesystem::remove(profile + ".log", ignored);
}

}  // namespace
}  // namespace fusebox::gateway
