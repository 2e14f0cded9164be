#include "apps/fusebox/html.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fusebox::app {
namespace {

std::string Escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

const char* StateColor(State s) {
  switch (s) {
    case State::kClosed:
      return "#cfe8cf";
    case State::kOpen:
      return "#f4c2c2";
    case State::kHalfOpen:
      return "#fbe3a6";
    case State::kForcedOpen:
      return "#e89a9a";
    default:
      return "#dddddd";
  }
}

const char* ResultColor(CallResult r) {
  switch (r) {
    case CallResult::kSuccess:
      return "#2e7d32";
    case CallResult::kFailure:
      return "#c62828";
    case CallResult::kRejected:
      return "#757575";
  }
  return "#000000";
}

// Geometry of the timeline.
struct Layout {
  int calls;
  Duration interval;
  double left = 90;
  double step;
  double width;
  static constexpr double kBandTop = 40, kBandHeight = 34;
  static constexpr double kMarkY = 110;
  static constexpr double kChartTop = 150, kChartHeight = 160;
  static constexpr double kHeight = 360;

  Layout(int n, Duration i) : calls(n), interval(i) {
    step = std::clamp(1000.0 / n, 3.0, 24.0);
    width = left + step * n + 30;
  }
  // Centre of call k's slot.
  double X(int k) const { return left + (k - 0.5) * step; }
  // A nominal time on the same axis (call k is at k * interval).
  double XAt(Duration t) const {
    return left +
           (static_cast<double>(t.count()) / static_cast<double>(interval.count()) - 0.5) * step;
  }
  double Y(float rate) const { return kChartTop + kChartHeight * (1.0 - rate / 100.0); }
};

void StateBand(const SimRun& run, const Layout& g, std::ostream& svg) {
  svg << "<g class=\"band\">\n";
  svg << "<text x=\"4\" y=\"" << Num(Layout::kBandTop + 22) << "\" class=\"axis\">state</text>\n";
  std::size_t i = 0;
  while (i < run.calls.size()) {
    const State s = run.calls[i].metrics.state;
    std::size_t j = i;
    while (j < run.calls.size() && run.calls[j].metrics.state == s) ++j;
    const double x0 = g.left + static_cast<double>(i) * g.step;
    const double w = static_cast<double>(j - i) * g.step;
    svg << "<rect x=\"" << Num(x0) << "\" y=\"" << Num(Layout::kBandTop) << "\" width=\"" << Num(w)
        << "\" height=\"" << Num(Layout::kBandHeight) << "\" fill=\"" << StateColor(s)
        << "\" data-state=\"" << StateName(s) << "\"><title>" << StateName(s) << ": calls " << i + 1
        << "-" << j << "</title></rect>\n";
    // A label where it fits; the legend names every state anyway.
    const std::string_view name = StateName(s);
    if (w >= 7.0 * static_cast<double>(name.size())) {
      svg << "<text x=\"" << Num(x0 + 3) << "\" y=\"" << Num(Layout::kBandTop + 21)
          << "\" class=\"state\">" << name << "</text>\n";
    }
    i = j;
  }
  svg << "</g>\n";
}

void Outages(const SimRun& run, const Layout& g, std::ostream& svg) {
  for (const TimeWindow& w : run.scenario.outages) {
    const double x0 = std::max(g.left, g.XAt(w.start));
    const double x1 = std::min(g.width - 30, g.XAt(w.start + w.duration));
    if (x1 <= x0) continue;
    svg << "<rect class=\"outage\" x=\"" << Num(x0) << "\" y=\"" << Num(Layout::kMarkY - 16)
        << "\" width=\"" << Num(x1 - x0)
        << "\" height=\"32\"><title>dependency down</title></rect>\n";
  }
}

void Marks(const SimRun& run, const std::vector<std::string>& lines, const Layout& g,
           std::ostream& svg) {
  svg << "<text x=\"4\" y=\"" << Num(Layout::kMarkY + 4) << "\" class=\"axis\">calls</text>\n";
  const double r = std::clamp(g.step / 2.0 - 1.0, 1.5, 7.0);
  for (std::size_t i = 0; i < run.calls.size(); ++i) {
    const CallRecord& rec = run.calls[i];
    svg << "<circle class=\"mark " << CallResultName(rec.result) << "\" data-call=\"" << rec.call
        << "\" cx=\"" << Num(g.X(rec.call)) << "\" cy=\"" << Num(Layout::kMarkY) << "\" r=\""
        << Num(r) << "\" fill=\"" << ResultColor(rec.result) << "\"><title>" << Escape(lines[i])
        << "</title></circle>\n";
  }
}

void RateChart(const SimRun& run, const Layout& g, std::ostream& svg) {
  const double top = Layout::kChartTop, bottom = Layout::kChartTop + Layout::kChartHeight;
  svg << "<g class=\"chart\">\n";
  svg << "<rect x=\"" << Num(g.left) << "\" y=\"" << Num(top) << "\" width=\""
      << Num(g.step * g.calls) << "\" height=\"" << Num(Layout::kChartHeight)
      << "\" fill=\"#fafafa\" stroke=\"#cccccc\"/>\n";
  for (int pct : {0, 50, 100}) {
    svg << "<text x=\"" << Num(g.left - 6) << "\" y=\"" << Num(g.Y(static_cast<float>(pct)) + 4)
        << "\" class=\"axis\" text-anchor=\"end\">" << pct << "%</text>\n";
  }
  svg << "<text x=\"4\" y=\"" << Num(top - 6) << "\" class=\"axis\">failure rate</text>\n";
  if (run.scenario.breaker_enabled) {
    const float threshold = run.scenario.breaker.failure_rate_threshold;
    svg << "<line class=\"threshold\" x1=\"" << Num(g.left) << "\" x2=\""
        << Num(g.left + g.step * g.calls) << "\" y1=\"" << Num(g.Y(threshold)) << "\" y2=\""
        << Num(g.Y(threshold)) << "\"/>\n";
    svg << "<text x=\"" << Num(g.left + 4) << "\" y=\"" << Num(g.Y(threshold) - 4)
        << "\" class=\"threshold-label\">threshold " << PercentText(threshold) << "%</text>\n";
  }
  // One polyline per stretch where a rate is defined (not -1).
  std::string points;
  auto flush = [&] {
    if (!points.empty()) svg << "<polyline class=\"rate\" points=\"" << points << "\"/>\n";
    points.clear();
  };
  for (const CallRecord& rec : run.calls) {
    if (rec.metrics.failure_rate < 0) {
      flush();
      continue;
    }
    points += Num(g.X(rec.call)) + "," + Num(g.Y(rec.metrics.failure_rate)) + " ";
  }
  flush();
  // Time axis: a tick every few calls, labelled with the nominal time.
  const int every = std::max(1, static_cast<int>(std::ceil(40.0 / g.step)));
  for (int k = every; k <= g.calls; k += every) {
    svg << "<text x=\"" << Num(g.X(k)) << "\" y=\"" << Num(bottom + 16)
        << "\" class=\"axis\" text-anchor=\"middle\">" << SecondsText(run.scenario.NominalTime(k))
        << "s</text>\n";
  }
  svg << "</g>\n";
}

void Legend(const SimRun& run, std::ostream& html) {
  std::set<State> states(run.summary.states.begin(), run.summary.states.end());
  for (const CallRecord& rec : run.calls) states.insert(rec.metrics.state);
  html << "<p class=\"legend\">";
  for (CallResult r : {CallResult::kSuccess, CallResult::kFailure, CallResult::kRejected}) {
    html << "<span><i style=\"background:" << ResultColor(r) << "\"></i>" << CallResultName(r)
         << "</span>";
  }
  for (State s : states) {
    html << "<span class=\"state-key\"><i style=\"background:" << StateColor(s) << "\"></i>"
         << StateName(s) << "</span>";
  }
  html << "<span><i class=\"outage-key\"></i>dependency down</span></p>\n";
}

}  // namespace

std::string RenderHtml(const SimRun& run, Language lang) {
  const std::vector<std::string> header = NarrateHeader(run, lang);
  const std::vector<std::string> lines = NarrateCalls(run, lang);
  const std::vector<std::string> summary = NarrateSummary(run, lang);
  const Layout g(static_cast<int>(run.calls.size()), run.scenario.interval);

  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html lang=\"" << (lang == Language::kKorean ? "ko" : "en")
       << "\">\n<head>\n<meta charset=\"utf-8\">\n<title>" << Escape(header[0]) << "</title>\n"
       << "<style>\n"
          "body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}\n"
          "svg{display:block;margin:1em 0}\n"
          ".axis{font-size:11px;fill:#555}\n"
          ".state{font-size:11px;font-weight:600;fill:#333}\n"
          ".outage{fill:#c62828;fill-opacity:.08}\n"
          ".rate{fill:none;stroke:#c62828;stroke-width:2}\n"
          ".threshold{stroke:#333;stroke-dasharray:5 4}\n"
          ".threshold-label{font-size:11px;fill:#333}\n"
          ".mark{cursor:pointer}\n.mark.hot{stroke:#000;stroke-width:2}\n"
          ".legend span{margin-right:1.2em;font-size:13px}\n"
          ".legend i{display:inline-block;width:12px;height:12px;margin-right:4px;"
          "vertical-align:-1px;border-radius:2px}\n"
          ".legend i.outage-key{background:#c62828;opacity:.15}\n"
          "ol li{margin:2px 0;font-size:14px}\nol li.hot{background:#fff3c4}\n"
          "</style>\n</head>\n<body>\n";
  html << "<h1>" << Escape(header[0]) << "</h1>\n";
  for (std::size_t i = 1; i < header.size(); ++i) html << "<p>" << Escape(header[i]) << "</p>\n";
  Legend(run, html);

  html << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << Num(g.width) << "\" height=\""
       << Num(Layout::kHeight) << "\" viewBox=\"0 0 " << Num(g.width) << " " << Num(Layout::kHeight)
       << "\" role=\"img\" aria-label=\"timeline\">\n";
  StateBand(run, g, html);
  Outages(run, g, html);
  Marks(run, lines, g, html);
  RateChart(run, g, html);
  html << "</svg>\n";

  html << "<ol id=\"timeline\">\n";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    // The narration's own "k. " prefix is the list's numbering.
    const std::string& line = lines[i];
    const std::size_t dot = line.find(". ");
    html << "<li id=\"call-" << run.calls[i].call << "\">"
         << Escape(dot == std::string::npos ? line : line.substr(dot + 2)) << "</li>\n";
  }
  html << "</ol>\n<h2>" << Escape(summary[0]) << "</h2>\n<ul>\n";
  for (std::size_t i = 1; i < summary.size(); ++i) {
    std::string item = summary[i];
    // Drop the list bullet the text form carries.
    for (std::string_view bullet : {"- ", "• "}) {
      if (item.rfind(bullet, 0) == 0) item = item.substr(bullet.size());
    }
    html << "<li>" << Escape(item) << "</li>\n";
  }
  html << "</ul>\n";
  html << "<script>\n"
          "(function () {\n"
          "  'use strict';\n"
          "  var marks = document.querySelectorAll('circle.mark');\n"
          "  marks.forEach(function (mark) {\n"
          "    var item = document.getElementById('call-' + mark.getAttribute('data-call'));\n"
          "    if (!item) { throw new Error('no line for call ' + mark.getAttribute('data-call')); "
          "}\n"
          "    var on = function () { mark.classList.add('hot'); item.classList.add('hot'); };\n"
          "    var off = function () { mark.classList.remove('hot'); item.classList.remove('hot'); "
          "};\n"
          "    mark.addEventListener('mouseenter', on);\n"
          "    mark.addEventListener('mouseleave', off);\n"
          "    item.addEventListener('mouseenter', on);\n"
          "    item.addEventListener('mouseleave', off);\n"
          "  });\n"
          "  document.body.setAttribute('data-ready', String(marks.length));\n"
          "})();\n"
          "</script>\n</body>\n</html>\n";
  return html.str();
}

}  // namespace fusebox::app
