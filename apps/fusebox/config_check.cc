#include "apps/fusebox/config_check.h"

#include <string>
#include <vector>

namespace fusebox::app {

int RunConfigCheck(const std::string& path, const yaml::Environment& environment, std::ostream& out,
                   std::ostream& err, const std::vector<std::string>& profiles) {
  Result<yaml::Configuration> config =
      yaml::LoadConfigFile(path, {.environment = environment, .profiles = profiles});
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
  // The command has no service to ask what recordExceptions and the like
  // mean: it resolves them against Java's names for fusebox's own failures,
  // so that the rest show up as unregistered.
  yaml::NameRegistry names;
  names.AddJavaDefaults();
  const yaml::ResolvedNames resolved = yaml::ResolveNames(*config, names);
  for (const std::string& n : config->notes) err << "fusebox config check: note: " << n << '\n';
  for (const yaml::NameResolution& r : resolved.resolutions) {
    err << "fusebox config check: name: " << r.path << ": " << r.name << " -> "
        << (r.meaning.empty() ? "not registered" : r.meaning) << '\n';
  }
  for (const std::string& w : config->warnings)
    err << "fusebox config check: warning: " << w << '\n';
  for (const std::string& w : resolved.warnings)
    err << "fusebox config check: warning: " << w << '\n';
  // A comment, so that the output is itself a configuration file; the
  // verdict goes to stderr, as nginx -t's does, keeping stdout the config.
  out << "# Resolved by fusebox config check: defaults, baseConfig chains"
      << (environment.empty() ? "" : " and FUSEBOX_* overrides") << " filled in.\n";
  if (config->profiles != std::vector<std::string>{"default"}) {
    out << "# Active profiles:";
    for (const std::string& p : config->profiles) out << ' ' << p;
    out << "\n";
  }
  out << yaml::FormatConfig(*config);
  err << "fusebox config check: " << path << ": OK\n";
  return 0;
}

}  // namespace fusebox::app
