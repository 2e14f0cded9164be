// libFuzzer target: fusebox::yaml::LoadConfig on any text (several "---"
// documents included), with leading lines of the form NAME=value read as
// environment variables when NAME starts with FUSEBOX_ or RESILIENCE4J_ or is
// SPRING_PROFILES_ACTIVE, and a leading "PROFILES=a,b" line as
// LoadOptions::profiles. Properties checked: no crash, no sanitizer report,
// no exception out of the module; a failure is kInvalidArgument whose every
// line names the source or the variable; a success formats to text that
// loads back to the same text; ResolveNames() on it never fails.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/yaml/config.h"

namespace {

// Splits "a,b" into names.
std::vector<std::string> Names(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    out.emplace_back(text.substr(0, comma));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  fusebox::yaml::LoadOptions options;
  while (text.starts_with("FUSEBOX_") || text.starts_with("RESILIENCE4J_") ||
         text.starts_with("SPRING_PROFILES_ACTIVE=") || text.starts_with("PROFILES=")) {
    const std::size_t eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    const std::size_t eq = line.find('=');
    if (eq != std::string_view::npos) {
      if (line.starts_with("PROFILES=")) {
        options.profiles = Names(line.substr(eq + 1));
      } else {
        options.environment.insert_or_assign(std::string(line.substr(0, eq)),
                                             std::string(line.substr(eq + 1)));
      }
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
      if (!line.starts_with("fuzz.yml") && !line.starts_with("env FUSEBOX_") &&
          !line.starts_with("env RESILIENCE4J_")) {
        std::abort();
      }
      message = eol == std::string_view::npos ? std::string_view() : message.substr(eol + 1);
    }
    return 0;
  }
  fusebox::yaml::Configuration resolved = *c;
  fusebox::yaml::NameRegistry names;
  names.AddJavaDefaults();
  (void)fusebox::yaml::ResolveNames(resolved, names);
  const std::string formatted = fusebox::yaml::FormatConfig(*c);
  const fusebox::Result<fusebox::yaml::Configuration> again =
      fusebox::yaml::LoadConfig(formatted, "formatted.yml");
  if (!again.has_value() || fusebox::yaml::FormatConfig(*again) != formatted) std::abort();
  return 0;
}
