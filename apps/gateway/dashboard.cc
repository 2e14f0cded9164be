#include "apps/gateway/dashboard.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <utility>

#include "fusebox/metrics.h"

namespace fusebox::gateway {

class DashboardFeed::Listener final : public CircuitBreakerListener {
 public:
  explicit Listener(std::weak_ptr<Core> core) : core_(std::move(core)) {}
  unsigned interests() const override { return kTransitionEvents; }
  void OnTransition(const TransitionEvent& event) override {
    if (std::shared_ptr<Core> core = core_.lock()) core->Add(event);
  }

 private:
  std::weak_ptr<Core> core_;
};

DashboardFeed::DashboardFeed(Clock& clock,
                             std::function<void(const std::string& json)> on_transition)
    : core_(std::make_shared<Core>()) {
  core_->clock = &clock;
  core_->on_transition = std::move(on_transition);
}

DashboardFeed::~DashboardFeed() = default;

void DashboardFeed::Attach(CircuitBreaker& breaker) {
  breaker.AddListener(std::make_shared<Listener>(core_));
}

void DashboardFeed::Core::Add(const TransitionEvent& event) {
  nlohmann::json j = {{"name", std::string(event.breaker)},
                      {"from", std::string(StateLabel(event.from))},
                      {"to", std::string(StateLabel(event.to))},
                      {"reason", std::string(TransitionReasonName(event.reason))}};
  if (event.retry_at) {
    j["retry_in_ms"] = std::max<long long>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(*event.retry_at - clock->Now())
               .count());
  } else {
    j["retry_in_ms"] = nullptr;
  }
  std::string text;
  {
    internal::MutexLock lock(&mu);
    j["seq"] = ++seq;
    text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    recent.push_back(text);
    while (recent.size() > kKept) recent.pop_front();
  }
  // Outside the lock: the callback posts to the server's threads.
  if (on_transition) on_transition(text);
}

std::string DashboardFeed::RecentJson() const {
  internal::MutexLock lock(&core_->mu);
  std::string out = "[";
  for (const std::string& t : core_->recent) {
    if (out.size() > 1) out += ',';
    out += t;
  }
  out += ']';
  return out;
}

// Over 80 lines on purpose: the page itself (HTML, CSS and script), one
// string literal so that the gateway serves it without a file.
std::string_view DashboardHtml() {
  // One page, no external asset. textContent only (never innerHTML): circuit
  // names come from request paths.
  static constexpr std::string_view kPage = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>fusebox gateway</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #222; }
h1 { font-size: 1.3rem; margin: 0 0 .5rem; }
#connection { display: inline-block; padding: .1rem .5rem; border-radius: .5rem; font-size: .8rem; }
#connection[data-state="live"] { background: #d4f7d4; }
#connection[data-state="down"] { background: #f7d4d4; }
table { border-collapse: collapse; width: 100%; margin: 1rem 0; }
th, td { text-align: left; padding: .3rem .6rem; border-bottom: 1px solid #ddd; font-size: .9rem; }
td.name { font-family: monospace; }
tr.state-closed td.state { color: #176317; }
tr.state-open td.state, tr.state-forced_open td.state { color: #b00020; font-weight: bold; }
tr.state-half_open td.state { color: #a06000; font-weight: bold; }
tr.state-disabled td.state, tr.state-forced_closed td.state { color: #555; font-style: italic; }
#transitions { font-family: monospace; font-size: .85rem; padding-left: 1.2rem; }
.muted { color: #777; font-size: .8rem; }
#insecure { background: #b00020; color: #fff; padding: .5rem .8rem; border-radius: .3rem; margin: .5rem 0; }
</style>
</head>
<body>
<h1>fusebox gateway <span id="instance"></span> <span id="connection" data-state="down">connecting</span></h1>
<div class="muted">last update: <span id="updated">never</span></div>
<div id="insecure" hidden></div>
<table>
<thead><tr><th>circuit</th><th>state</th><th>failure rate</th><th>retry at</th></tr></thead>
<tbody id="circuits"></tbody>
</table>
<h2>Fleet <span class="muted">(every OPEN circuit and override in Redis; <span id="fleet-note"></span>)</span></h2>
<table>
<thead><tr><th>circuit</th><th>state</th><th>time left</th><th>override</th><th>here</th></tr></thead>
<tbody id="fleet"></tbody>
</table>
<h2>Recent transitions</h2>
<ol id="transitions" reversed></ol>
<script>
"use strict";
const circuitsEl = document.getElementById("circuits");
const transitionsEl = document.getElementById("transitions");
const connectionEl = document.getElementById("connection");
function cell(row, cls, text) {
  const td = document.createElement("td");
  td.className = cls;
  td.textContent = text;
  row.appendChild(td);
}
function retryText(ms) {
  if (ms === null || ms === undefined) return "";
  return new Date(Date.now() + ms).toLocaleTimeString() + " (in " + Math.ceil(ms / 1000) + " s)";
}
function renderCircuits(circuits) {
  const rows = [];
  for (const c of circuits) {
    const tr = document.createElement("tr");
    tr.className = "circuit state-" + c.state;
    tr.dataset.name = c.name;
    tr.dataset.state = c.state;
    cell(tr, "name", c.name);
    cell(tr, "state", c.state + (c.override ? " (" + c.override.actor + ": " + c.override.reason + ")" : ""));
    cell(tr, "failure-rate", c.failure_rate < 0 ? "-" : c.failure_rate.toFixed(1) + " %");
    cell(tr, "retry-at", retryText(c.retry_in_ms));
    rows.push(tr);
  }
  circuitsEl.replaceChildren(...rows);
}
function renderFleet(fleet) {
  const note = document.getElementById("fleet-note");
  if (fleet === null || fleet === undefined) { note.textContent = "not shared or not read yet"; return; }
  if (fleet.error) { note.textContent = "unavailable: " + fleet.error; return; }
  note.textContent = fleet.truncated ? "first " + fleet.max_entries + " only" : "complete";
  const rows = [];
  for (const c of fleet.circuits) {
    const tr = document.createElement("tr");
    const state = c.override ? c.override.state.toLowerCase() : c.state;
    tr.className = "fleet-circuit state-" + state;
    tr.dataset.name = c.name;
    tr.dataset.state = state;
    tr.dataset.here = c.here ? "yes" : "no";
    cell(tr, "name", c.name);
    cell(tr, "state", state);
    const left = c.override ? c.override.expires_in_ms : c.remaining_ms;
    cell(tr, "time-left", left === null ? "until lifted" : Math.ceil(left / 1000) + " s");
    cell(tr, "override", c.override ? c.override.actor + ": " + c.override.reason : "");
    cell(tr, "here", c.here ? "yes" : "no");
    rows.push(tr);
  }
  document.getElementById("fleet").replaceChildren(...rows);
}
function addTransition(t) {
  if (transitionsEl.querySelector('li[data-seq="' + t.seq + '"]')) return;
  const li = document.createElement("li");
  li.className = "transition";
  li.dataset.to = t.to;
  li.dataset.seq = t.seq;
  li.textContent = new Date().toLocaleTimeString() + "  " + t.name + ": " + t.from + " -> " + t.to + " (" + t.reason + ")";
  transitionsEl.insertBefore(li, transitionsEl.firstChild);
  while (transitionsEl.children.length > 50) transitionsEl.removeChild(transitionsEl.lastChild);
}
function touched() { document.getElementById("updated").textContent = new Date().toLocaleTimeString(); }
const source = new EventSource("/dashboard/events");
source.onopen = () => { connectionEl.dataset.state = "live"; connectionEl.textContent = "live"; };
source.onerror = () => { connectionEl.dataset.state = "down"; connectionEl.textContent = "disconnected"; };
source.addEventListener("snapshot", (e) => {
  const s = JSON.parse(e.data);
  document.getElementById("instance").textContent = s.instance;
  renderCircuits(s.circuits);
  const insecureEl = document.getElementById("insecure");
  const insecure = s.insecure_upstreams || [];
  insecureEl.hidden = insecure.length === 0;
  insecureEl.textContent = insecure.length === 0 ? "" : "WARNING: TLS certificates are NOT verified " +
      "for upstream " + insecure.join(", ") + " (insecure_skip_verify): anyone on the path can " +
      "impersonate it.";
  renderFleet(s.fleet);
  for (const t of s.transitions) addTransition(t);
  connectionEl.dataset.state = "live";
  connectionEl.textContent = "live";
  touched();
});
source.addEventListener("transition", (e) => {
  const t = JSON.parse(e.data);
  addTransition(t);
  const row = circuitsEl.querySelector('tr[data-name="' + CSS.escape(t.name) + '"]');
  if (row) {
    row.className = "circuit state-" + t.to;
    row.dataset.state = t.to;
    row.querySelector(".state").textContent = t.to;
    row.querySelector(".retry-at").textContent = retryText(t.retry_in_ms);
  }
  touched();
});
</script>
</body>
</html>
)html";
  return kPage;
}

}  // namespace fusebox::gateway
