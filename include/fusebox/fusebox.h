// fusebox/fusebox.h: includes the whole core API (fusebox::core).
//
//   #include <fusebox/fusebox.h>
//
// Prefer including the headers you use; this one is for quick starts.
#ifndef FUSEBOX_FUSEBOX_H_
#define FUSEBOX_FUSEBOX_H_

#include "fusebox/audit_log.h"        // IWYU pragma: export
#include "fusebox/backoff.h"          // IWYU pragma: export
#include "fusebox/bulkhead.h"         // IWYU pragma: export
#include "fusebox/call_kind.h"        // IWYU pragma: export
#include "fusebox/call_timer.h"       // IWYU pragma: export
#include "fusebox/circuit_breaker.h"  // IWYU pragma: export
#include "fusebox/clock.h"            // IWYU pragma: export
#include "fusebox/config_names.h"     // IWYU pragma: export
#include "fusebox/event_log.h"        // IWYU pragma: export
#include "fusebox/fallback.h"         // IWYU pragma: export
#include "fusebox/metrics.h"          // IWYU pragma: export
#include "fusebox/observer.h"         // IWYU pragma: export
#include "fusebox/pipeline.h"         // IWYU pragma: export
#include "fusebox/prometheus.h"       // IWYU pragma: export
#include "fusebox/rate_limiter.h"     // IWYU pragma: export
#include "fusebox/registry.h"         // IWYU pragma: export
#include "fusebox/result.h"           // IWYU pragma: export
#include "fusebox/retry.h"            // IWYU pragma: export
#include "fusebox/shared_state.h"     // IWYU pragma: export
#include "fusebox/snapshot_store.h"   // IWYU pragma: export
#include "fusebox/stale_cache.h"      // IWYU pragma: export
#include "fusebox/status.h"           // IWYU pragma: export
#include "fusebox/timeout.h"          // IWYU pragma: export

#endif  // FUSEBOX_FUSEBOX_H_
