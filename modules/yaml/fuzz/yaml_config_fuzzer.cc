// libFuzzer target: fusebox::yaml::LoadConfig on any text, with the first
// line (when it starts with "FUSEBOX_") read as one environment override.
// Properties checked: no crash, no sanitizer report, no exception out of the
// module; a failure is kInvalidArgument whose every line names the source or
// the variable; a success formats to text that loads back to the same text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fusebox/yaml/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  fusebox::yaml::LoadOptions options;
  if (text.starts_with("FUSEBOX_")) {
    const std::size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    const std::size_t eq = line.find('=');
    if (eq != std::string_view::npos) {
      options.environment.emplace(std::string(line.substr(0, eq)),
                                  std::string(line.substr(eq + 1)));
    }
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
  }
  const fusebox::Result<fusebox::yaml::Configuration> c =
      fusebox::yaml::LoadConfig(text, "fuzz.yml", options);
  if (!c.has_value()) {
    if (c.error().code() != fusebox::StatusCode::kInvalidArgument) std::abort();
    std::string_view message = c.error().message();
    if (message.empty()) std::abort();
    while (!message.empty()) {
      const std::size_t eol = message.find('\n');
      const std::string_view line = message.substr(0, eol);
      if (!line.starts_with("fuzz.yml") && !line.starts_with("env FUSEBOX_")) std::abort();
      message = eol == std::string_view::npos ? std::string_view() : message.substr(eol + 1);
    }
    return 0;
  }
  const std::string formatted = fusebox::yaml::FormatConfig(*c);
  const fusebox::Result<fusebox::yaml::Configuration> again =
      fusebox::yaml::LoadConfig(formatted, "formatted.yml");
  if (!again.has_value() || fusebox::yaml::FormatConfig(*again) != formatted) std::abort();
  return 0;
}
