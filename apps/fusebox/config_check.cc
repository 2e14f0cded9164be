#include "apps/fusebox/config_check.h"

#include <string>

namespace fusebox::app {

int RunConfigCheck(const std::string& path, const yaml::Environment& environment, std::ostream& out,
                   std::ostream& err) {
  const Result<yaml::Configuration> config =
      yaml::LoadConfigFile(path, {.environment = environment});
  if (!config) {
    // Every error, as the loader found them: one a line, file:line:column.
    const std::string_view message = config.error().message();
    std::size_t errors = 0;
    for (std::size_t at = 0; at < message.size();) {
      const std::size_t eol = message.find('\n', at);
      const std::string_view line =
          message.substr(at, eol == std::string_view::npos ? eol : eol - at);
      if (!line.ends_with(" more errors not shown")) ++errors;
      err << line << '\n';
      at = eol == std::string_view::npos ? message.size() : eol + 1;
    }
    err << "fusebox config check: " << path << ": " << errors
        << (errors == 1 ? " error" : " errors") << ", nothing applied\n";
    return 1;
  }
  for (const std::string& w : config->warnings)
    err << "fusebox config check: warning: " << w << '\n';
  // A comment, so that the output is itself a configuration file; the
  // verdict goes to stderr, as nginx -t's does, keeping stdout the config.
  out << "# Resolved by fusebox config check: defaults, baseConfig chains"
      << (environment.empty() ? "" : " and FUSEBOX_* overrides") << " filled in.\n"
      << yaml::FormatConfig(*config);
  err << "fusebox config check: " << path << ": OK\n";
  return 0;
}

}  // namespace fusebox::app
