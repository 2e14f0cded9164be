// libFuzzer target: the replay trace line parsers on any bytes. Properties
// checked: no crash, no uncaught exception, no sanitizer report; every error
// names its line; a parsed config builds a breaker; a parsed event is well
// formed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "apps/fusebox/trace.h"
#include "fusebox/circuit_breaker.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  fusebox::Result<fusebox::CircuitBreakerConfig> config =
      fusebox::app::ParseTraceConfigLine(line, 1);
  if (!config.has_value() && std::string(config.error().message()).rfind("line 1: ", 0) != 0) {
    std::abort();
  }
  // A config that parses is valid, and a breaker on it must be built within
  // the fuzzer's memory limit: window sizes are bounded by validation
  // (2147483647 TIME_BASED seconds once reached bad_alloc here).
  if (config.has_value() && !fusebox::CircuitBreaker::Create("fuzz", *config).has_value()) {
    std::abort();
  }
  fusebox::Result<fusebox::app::TraceEvent> event = fusebox::app::ParseTraceEventLine(line, 7);
  if (!event.has_value()) {
    if (std::string(event.error().message()).rfind("line 7: ", 0) != 0) std::abort();
    return 0;
  }
  if (event->t_ms < 0 || event->duration_ms < 0 || event->line != 7) std::abort();
  const bool has_call = event->kind != fusebox::app::TraceEventKind::kTick &&
                        event->kind != fusebox::app::TraceEventKind::kOperator;
  if (has_call && event->call.empty()) std::abort();
  return 0;
}
