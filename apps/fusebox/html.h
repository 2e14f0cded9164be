// apps/fusebox/html.h: `fusebox sim --html FILE`, a simulation as one
// self-contained web page.
//
// The page needs nothing from the network: inline CSS, an inline SVG timeline
// and a few lines of inline script. The timeline shows each call as a mark
// coloured by its result (success, failure, rejected), the breaker's state as a
// band (CLOSED, OPEN, HALF_OPEN, ...), the dependency's outages, and the
// failure rate against its threshold; below it, the narrated timeline and the
// summary. Hovering a mark highlights its line.
//
// Thread-safe: a pure function.
#ifndef FUSEBOX_APPS_FUSEBOX_HTML_H_
#define FUSEBOX_APPS_FUSEBOX_HTML_H_

#include <string>

#include "apps/fusebox/narration.h"
#include "apps/fusebox/sim.h"

namespace fusebox::app {

std::string RenderHtml(const SimRun& run, Language lang);

}  // namespace fusebox::app

#endif  // FUSEBOX_APPS_FUSEBOX_HTML_H_
