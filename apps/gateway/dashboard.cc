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
                             std::function<void(const std::string& json)> on_transition,
                             std::function<void(const TransitionEvent&)> on_event)
    : core_(std::make_shared<Core>()) {
  core_->clock = &clock;
  core_->on_transition = std::move(on_transition);
  core_->on_event = std::move(on_event);
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
  if (on_event) on_event(event);
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
  // One page, no external asset. Text only ever goes in through textContent
  // and setAttribute (never innerHTML): circuit keys come from request paths.
  // The admin token lives in a variable of this page only (never stored).
  static constexpr std::string_view kPage = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
<title>fusebox gateway</title>
<style>
:root { --bg: #fff; --fg: #1d1d1f; --muted: #6b6b70; --line: #ddd; --card: #f6f6f8;
  --ok: #1f9d55; --degraded: #d4a106; --failing: #e0641b; --half: #c77c02; --open: #c8102e;
  --calls: #3a6fd8; --fail: #c8102e; --rej: #7b3fbf; --stale: #8a8a8a; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #121316; --fg: #e8e8ea; --muted: #9a9aa2; --line: #33343a; --card: #1c1d22;
    --ok: #3ecf7a; --degraded: #e8c13a; --failing: #ff8a3d; --half: #f0a830; --open: #ff4d5e;
    --calls: #7aa2ff; --fail: #ff4d5e; --rej: #b68cff; --stale: #aaa; }
}
body { font-family: system-ui, sans-serif; margin: 1.2rem; background: var(--bg); color: var(--fg); }
h1 { font-size: 1.3rem; margin: 0 0 .4rem; }
h2 { font-size: 1.05rem; margin: 1.2rem 0 .4rem; }
#connection { display: inline-block; padding: .1rem .5rem; border-radius: .5rem; font-size: .8rem; }
#connection[data-state="live"] { background: var(--ok); color: #fff; }
#connection[data-state="down"] { background: var(--open); color: #fff; }
.muted { color: var(--muted); font-size: .8rem; }
#insecure { background: var(--open); color: #fff; padding: .5rem .8rem; border-radius: .3rem; margin: .5rem 0; }
form, #admin { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; margin: .5rem 0; font-size: .85rem; }
input, select, button { font: inherit; background: var(--card); color: var(--fg); border: 1px solid var(--line); border-radius: .3rem; padding: .15rem .4rem; }
button { cursor: pointer; }
#groups { display: flex; flex-direction: column; gap: .4rem; }
.group { background: var(--card); border: 1px solid var(--line); border-left: 6px solid var(--ok); border-radius: .4rem; padding: .4rem .6rem; }
.group.health-degraded { border-left-color: var(--degraded); }
.group.health-failing { border-left-color: var(--failing); }
.group.health-half_open { border-left-color: var(--half); }
.group.health-open { border-left-color: var(--open); }
.head { display: flex; flex-wrap: wrap; gap: .8rem; align-items: center; }
.badge circle { fill: var(--ok); fill-opacity: .8; }
.health-degraded .badge circle { fill: var(--degraded); }
.health-failing .badge circle { fill: var(--failing); }
.health-half_open .badge circle { fill: var(--half); }
.health-open .badge circle { fill: var(--open); }
.gname { font-family: monospace; font-weight: bold; min-width: 12rem; }
.rates span { margin-right: .6rem; font-size: .85rem; white-space: nowrap; }
.spark { vertical-align: middle; }
.spark polyline { fill: none; stroke-width: 1.5; }
.spark-calls polyline { stroke: var(--calls); }
.spark-failures polyline { stroke: var(--fail); }
.spark-rejections polyline { stroke: var(--rej); }
.spark-stale polyline { stroke: var(--stale); }
.spark-p99 polyline { stroke: var(--rej); stroke-dasharray: 3 2; }
table { border-collapse: collapse; width: 100%; margin: .4rem 0; }
th, td { text-align: left; padding: .2rem .5rem; border-bottom: 1px solid var(--line); font-size: .82rem; }
td.name { font-family: monospace; word-break: break-all; }
.state-open .state, .state-forced_open .state { color: var(--open); font-weight: bold; }
.state-half_open .state { color: var(--half); font-weight: bold; }
.state-closed .state { color: var(--ok); }
.timeline { font-family: monospace; font-size: .8rem; margin: .3rem 0; padding-left: 1.2rem; }
#transitions { font-family: monospace; font-size: .8rem; padding-left: 1.2rem; }
#action-result[data-ok="no"] { color: var(--open); }
</style>
</head>
<body>
<h1>fusebox gateway <span id="instance"></span> <span id="connection" data-state="down">connecting</span></h1>
<div class="muted">last update: <span id="updated">never</span> &middot; <span id="summary"></span></div>
<div id="insecure" hidden></div>
<form id="filters" autocomplete="off">
<input id="q" type="search" placeholder="search key">
<input id="provider" placeholder="provider" size="10">
<input id="workload" placeholder="workload" size="8">
<select id="state"><option value="">any state</option><option>open</option><option>half_open</option>
<option>forced_open</option><option>forced_closed</option><option>closed</option></select>
<label>top <input id="top" type="number" min="1" max="200" value="25" size="4"></label>
</form>
<div id="admin">
<label>admin token <input id="token" type="password" autocomplete="off" size="16"></label>
<label>reason <input id="reason" size="18" placeholder="why"></label>
<label>expires in <input id="expires" size="5" value="10m"></label>
<span id="action-result"></span>
</div>
<div id="groups"></div>
<h2>Fleet <span class="muted">(every OPEN circuit and override in Redis; <span id="fleet-note"></span>)</span></h2>
<form id="fleet-filters" autocomplete="off"><input id="fleet-q" type="search" placeholder="filter fleet by key or instance"></form>
<table>
<thead><tr><th>circuit</th><th>state</th><th>time left</th><th>override</th><th>here</th></tr></thead>
<tbody id="fleet"></tbody>
</table>
<h3>Instances <span class="muted">(each instance's heartbeat in Redis, rates over its last 10 s; <span id="instances-note"></span>)</span></h3>
<form id="instance-filters" autocomplete="off"><input id="fleet-instance" type="search" placeholder="filter by instance"></form>
<table>
<thead><tr><th>instance</th><th>calls/s</th><th>failures/s</th><th>rejected/s</th><th>stale/s</th><th>open circuits</th><th>circuits</th><th>heard</th><th>its clock</th></tr></thead>
<tbody id="instances"></tbody>
</table>
<h2>Recent transitions</h2>
<ol id="transitions" reversed></ol>
<svg id="svg-ns" width="0" height="0" hidden></svg>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
// The SVG namespace, from an <svg> the parser made (the page names no URL).
const SVG = $("svg-ns").namespaceURI;
const groupsEl = $("groups");
const connectionEl = $("connection");
const openGroups = new Set();
let token = "";  // in memory only
let source = null;
let frame = {now_s: 0, window_s: 60};
let lastFleet = null;
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function cell(row, cls, text) { row.appendChild(el("td", cls, text)); }
function rate(n) { const r = n / (frame.window_s || 60); return r >= 10 ? r.toFixed(0) : r.toFixed(2); }
function sparkline(cls, values, max) {
  const w = 120, h = 22, svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "spark " + cls);
  svg.setAttribute("width", w); svg.setAttribute("height", h);
  svg.setAttribute("viewBox", "0 0 " + w + " " + h);
  const line = document.createElementNS(SVG, "polyline");
  const step = values.length > 1 ? w / (values.length - 1) : w;
  line.setAttribute("points", values.map((v, i) =>
      (i * step).toFixed(1) + "," + (h - 1 - (max > 0 ? v / max : 0) * (h - 2)).toFixed(1)).join(" "));
  const title = document.createElementNS(SVG, "title");
  title.textContent = cls.replace("spark-", "") + " per " + frame.bucket_s + " s: " + values.join(" ");
  svg.appendChild(title); svg.appendChild(line);
  return svg;
}
function badge(callsPerSec) {
  const r = Math.min(18, 4 + 4 * Math.log10(1 + callsPerSec * 10));
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("class", "badge"); svg.setAttribute("width", 40); svg.setAttribute("height", 40);
  const c = document.createElementNS(SVG, "circle");
  c.setAttribute("cx", 20); c.setAttribute("cy", 20); c.setAttribute("r", r.toFixed(1));
  svg.appendChild(c);
  svg.dataset.r = r.toFixed(1);
  return svg;
}
function millis(ms) { return ms >= 100 ? ms.toFixed(0) : ms >= 1 ? ms.toFixed(1) : ms.toFixed(3); }
function counts(row, w, latency) {
  const rates = el("span", "rates");
  for (const [cls, label] of [["calls", "calls"], ["failures", "fail"], ["rejections", "rejected"], ["stale", "stale"]]) {
    const s = el("span", cls, label + " " + rate(w[cls]) + "/s");
    s.dataset.count = w[cls];
    rates.appendChild(s);
  }
  const lat = el("span", "latency", "mean " + w.mean_ms.toFixed(1) + " ms");
  rates.appendChild(lat);
  if (latency) {
    // Upper bounds of ~20 % wide buckets (docs/gateway.md): shown as such.
    for (const q of ["p50", "p99"]) {
      const v = latency[q + "_ms"];
      const s = el("span", q, q + " " + (typeof v === "number" ? "\u2264 " + millis(v) + " ms" : "-"));
      s.dataset.ms = typeof v === "number" ? String(v) : "";
      rates.appendChild(s);
    }
  }
  row.appendChild(rates);
}
function actionButtons(td, key) {
  for (const [verb, label] of [["force-open", "force open"], ["force-closed", "force closed"], ["reset", "clear"]]) {
    const b = el("button", "act act-" + verb, label);
    b.type = "button";
    b.addEventListener("click", () => act(key, verb));
    td.appendChild(b);
  }
}
function renderGroup(g) {
  const div = el("div", "group health-" + g.health + " state-" + g.state);
  div.dataset.group = g.group; div.dataset.state = g.state; div.dataset.health = g.health;
  div.dataset.calls = g.window.calls; div.dataset.failures = g.window.failures;
  const head = el("div", "head");
  head.appendChild(badge(g.window.calls / (frame.window_s || 60)));
  head.appendChild(el("span", "gname", g.group));
  head.appendChild(el("span", "state", g.state + (g.open_keys ? " (" + g.open_keys + " of " + g.key_count + " open)" : " (" + g.key_count + " keys)")));
  counts(head, g.window, g.latency);
  const max = Math.max(1, ...g.spark.calls, ...g.spark.rejections);
  for (const k of ["calls", "failures", "rejections", "stale"]) head.appendChild(sparkline("spark-" + k, g.spark[k], max));
  // p99 on its own scale (ms); a bucket without a timed call draws as 0.
  const p99 = (g.spark.p99_ms || []).map((v) => (typeof v === "number" ? v : 0));
  head.appendChild(sparkline("spark-p99", p99, Math.max(0.001, ...p99)));
  div.appendChild(head);
  const details = el("details", "drill");
  details.open = openGroups.has(g.group);
  details.addEventListener("toggle", () => {
    const had = openGroups.has(g.group);
    if (details.open) openGroups.add(g.group); else openGroups.delete(g.group);
    // The server sends key rows for the open groups only: ask again.
    if (had !== details.open) reconnectSoon(50);
  });
  const sent = g.keys_sent !== false;
  details.appendChild(el("summary", "", "keys" + (!sent ? " (" + g.keys_matched + ")" : g.keys_matched > g.keys.length ? " (worst " + g.keys.length + " of " + g.keys_matched + ")" : "") + " and timeline"));
  const table = el("table", "keys");
  const thead = el("thead");
  const hr = el("tr");
  for (const h of ["key", "state", "failure rate", "calls", "failures", "rejected", "stale", "actions"]) hr.appendChild(el("th", "", h));
  thead.appendChild(hr); table.appendChild(thead);
  const tbody = el("tbody");
  for (const k of g.keys) {
    const tr = el("tr", "key state-" + k.state);
    tr.dataset.name = k.key; tr.dataset.state = k.state;
    cell(tr, "name", k.key);
    cell(tr, "state", k.state + " (" + k.breakers + ")");
    cell(tr, "failure-rate", k.failure_rate < 0 ? "-" : k.failure_rate.toFixed(1) + " %");
    for (const c of ["calls", "failures", "rejections", "stale"]) cell(tr, c, String(k.window[c]));
    const td = el("td", "actions"); actionButtons(td, k.key); tr.appendChild(td);
    tbody.appendChild(tr);
  }
  table.appendChild(tbody); details.appendChild(table);
  const ol = el("ol", "timeline");
  for (const t of g.timeline.slice().reverse()) {
    const li = el("li", "transition-entry", Math.max(0, frame.now_s - t.at_s).toFixed(0) + " s ago  " + t.name + ": " + t.from + " -> " + t.to + " (" + t.reason + (t.detail ? ": " + t.detail : "") + ")");
    li.dataset.to = t.to;
    ol.appendChild(li);
  }
  details.appendChild(ol);
  div.appendChild(details);
  return div;
}
function applyGroups(e) {
  const m = JSON.parse(e.data);
  frame = m;
  const byName = new Map();
  for (const child of groupsEl.children) byName.set(child.dataset.group, child);
  if (m.full) byName.clear();
  for (const name of m.removed) byName.delete(name);
  for (const g of m.rows) byName.set(g.group, renderGroup(g));
  const ordered = [];
  for (const name of m.order) if (byName.has(name)) ordered.push(byName.get(name));
  groupsEl.replaceChildren(...ordered);
  $("summary").textContent = m.circuits + " circuits in " + m.total_groups + " groups; " + m.matching + " match, worst " + ordered.length + " shown; rates over " + m.window_s + " s";
  touched();
}
async function act(key, verb) {
  const result = $("action-result");
  if (!token) token = $("token").value;
  if (!token) { result.dataset.ok = "no"; result.textContent = "enter the admin token first"; return; }
  const body = {reason: $("reason").value || "from the dashboard", actor: "dashboard"};
  if (verb !== "reset" && $("expires").value) body.expires_in = $("expires").value;
  try {
    const r = await fetch("/admin/circuits/" + encodeURIComponent(key) + "/" + verb,
        {method: "POST", headers: {"Authorization": "Bearer " + token, "Content-Type": "application/json"},
         body: JSON.stringify(body), cache: "no-store", credentials: "omit"});
    const text = await r.text();
    if (r.status === 401) token = "";
    result.dataset.ok = r.ok ? "yes" : "no";
    result.dataset.verb = verb;
    result.textContent = r.ok ? verb + " " + key + ": done" : verb + " " + key + ": " + r.status + " " + text.slice(0, 200);
  } catch (err) {
    result.dataset.ok = "no";
    result.textContent = verb + " " + key + ": " + err;
  }
}
$("token").addEventListener("change", () => { token = $("token").value; $("token").value = ""; $("token").placeholder = token ? "(held in memory)" : ""; });
function renderFleet(fleet) {
  lastFleet = fleet;
  const note = $("fleet-note");
  renderInstances(fleet && !fleet.error ? fleet.instances : null);
  if (fleet === null || fleet === undefined) { note.textContent = "not shared or not read yet"; return; }
  if (fleet.error) { note.textContent = "unavailable: " + fleet.error; return; }
  note.textContent = fleet.truncated ? "first " + fleet.max_entries + " only" : "complete";
  const q = $("fleet-q").value;
  const rows = [];
  for (const c of fleet.circuits) {
    const who = c.override ? c.override.actor : "";
    if (q && !c.name.includes(q) && !who.includes(q)) continue;
    const tr = el("tr");
    const state = c.override ? c.override.state.toLowerCase() : c.state;
    tr.className = "fleet-circuit state-" + state;
    tr.dataset.name = c.name; tr.dataset.state = state; tr.dataset.here = c.here ? "yes" : "no";
    cell(tr, "name", c.name);
    cell(tr, "state", state);
    const left = c.override ? c.override.expires_in_ms : c.remaining_ms;
    cell(tr, "time-left", left === null ? "until lifted" : Math.ceil(left / 1000) + " s");
    cell(tr, "override", c.override ? c.override.actor + ": " + c.override.reason : "");
    cell(tr, "here", c.here ? "yes" : "no");
    rows.push(tr);
  }
  $("fleet").replaceChildren(...rows);
}
$("fleet-q").addEventListener("input", () => renderFleet(lastFleet));
// Figures another instance wrote: the server passes numbers or null only,
// and ids are only ever text.
function figure(v, digits) { return typeof v === "number" ? v.toFixed(digits) : "-"; }
function renderInstances(list) {
  const note = $("instances-note");
  if (list === null || list === undefined) { note.textContent = "not read yet"; $("instances").replaceChildren(); return; }
  if (list.error) { note.textContent = "unavailable: " + list.error; return; }
  note.textContent = list.instances.length + " live" + (list.truncated ? ", first " + list.max_instances + " only" : "") +
      "; heartbeat every " + list.heartbeat_ms / 1000 + " s, gone after " + list.stale_after_ms / 1000 + " s";
  const q = $("fleet-instance").value;
  const rows = [];
  for (const i of list.instances) {
    if (q && !String(i.id).includes(q)) continue;
    const tr = el("tr", "instance" + (i.self ? " self" : ""));
    tr.dataset.id = i.id; tr.dataset.calls = figure(i.calls_per_s, 2);
    cell(tr, "name", i.id + (i.self ? " (this one)" : ""));
    for (const k of ["calls_per_s", "failures_per_s", "rejections_per_s", "stale_per_s"]) cell(tr, k, figure(i[k], 2));
    cell(tr, "open-circuits", figure(i.open_circuits, 0));
    cell(tr, "circuits", figure(i.circuits, 0));
    cell(tr, "heard", figure(i.age_ms / 1000, 1) + " s ago");
    cell(tr, "clock", typeof i.time_ms === "number" ? new Date(i.time_ms).toISOString() : "-");
    rows.push(tr);
  }
  $("instances").replaceChildren(...rows);
}
$("fleet-instance").addEventListener("input", () => renderInstances(lastFleet ? lastFleet.instances : null));
$("instance-filters").addEventListener("submit", (e) => e.preventDefault());
function addTransition(t) {
  const list = $("transitions");
  if (list.querySelector('li[data-seq="' + t.seq + '"]')) return;
  const li = el("li", "transition");
  li.dataset.to = t.to; li.dataset.seq = t.seq;
  li.textContent = new Date().toLocaleTimeString() + "  " + t.name + ": " + t.from + " -> " + t.to + " (" + t.reason + ")";
  list.insertBefore(li, list.firstChild);
  while (list.children.length > 50) list.removeChild(list.lastChild);
}
function touched() { $("updated").textContent = new Date().toLocaleTimeString(); }
function query() {
  const p = new URLSearchParams();
  for (const id of ["q", "provider", "workload", "state", "top"]) if ($(id).value) p.set(id, $(id).value);
  // Key rows only for the expanded groups (docs/gateway.md, "The stream").
  p.set("keys", "expanded");
  if (openGroups.size) p.set("open", [...openGroups].sort().join(","));
  return p.toString();
}
function connect() {
  if (source) source.close();
  const q = query();
  source = new EventSource("/dashboard/events" + (q ? "?" + q : ""));
  source.onopen = () => { connectionEl.dataset.state = "live"; connectionEl.textContent = "live"; };
  source.onerror = () => { connectionEl.dataset.state = "down"; connectionEl.textContent = "disconnected"; };
  source.addEventListener("groups", applyGroups);
  source.addEventListener("snapshot", (e) => {
    const s = JSON.parse(e.data);
    $("instance").textContent = s.instance;
    const insecure = s.insecure_upstreams || [];
    $("insecure").hidden = insecure.length === 0;
    $("insecure").textContent = insecure.length === 0 ? "" : "WARNING: TLS certificates are NOT verified " +
        "for upstream " + insecure.join(", ") + " (insecure_skip_verify): anyone on the path can " +
        "impersonate it.";
    renderFleet(s.fleet);
    for (const t of s.transitions) addTransition(t);
    connectionEl.dataset.state = "live"; connectionEl.textContent = "live";
    touched();
  });
  source.addEventListener("transition", (e) => { addTransition(JSON.parse(e.data)); touched(); });
}
let pending = null;
function reconnectSoon(ms) { clearTimeout(pending); pending = setTimeout(connect, ms); }
$("filters").addEventListener("input", () => reconnectSoon(300));
$("filters").addEventListener("submit", (e) => { e.preventDefault(); connect(); });
connect();
</script>
</body>
</html>
)html";
  return kPage;
}

}  // namespace fusebox::gateway
