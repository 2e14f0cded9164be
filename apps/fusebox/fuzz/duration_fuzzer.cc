// libFuzzer target: fusebox::ParseDuration and SetConfigProperty on any text.
// Properties checked: no crash, no sanitizer report, and FormatDuration /
// ParseDuration round-trip every duration that parses.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fusebox/config_names.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fusebox::Result<fusebox::Duration> d = fusebox::ParseDuration(text);
  if (d.has_value()) {
    if (*d < fusebox::Duration::zero()) std::abort();
    fusebox::Result<fusebox::Duration> again = fusebox::ParseDuration(fusebox::FormatDuration(*d));
    if (!again.has_value() || *again != *d) std::abort();
  }
  // The same text as the value of every property.
  for (const fusebox::ConfigProperty& p : fusebox::ConfigProperties()) {
    fusebox::CircuitBreakerConfig config;
    if (fusebox::SetConfigProperty(config, p.name, text).ok()) {
      (void)fusebox::ValidateConfigProperties(config);
      (void)fusebox::GetConfigProperty(config, p.name);
    }
  }
  return 0;
}
