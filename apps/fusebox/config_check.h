// apps/fusebox/config_check.h: `fusebox config check FILE`, like `nginx -t`.
//
// Loads a Resilience4j-style YAML file with fusebox::yaml (environment
// overrides included unless --no-env) and either prints the resolved
// configuration of every template and instance, every property filled in, as
// YAML that loads back unchanged (exit 0; warnings on stderr), or prints every
// error, one a line, to stderr (exit 1). docs/cli.md and
// docs/configuration.md show both.
#ifndef FUSEBOX_APPS_FUSEBOX_CONFIG_CHECK_H_
#define FUSEBOX_APPS_FUSEBOX_CONFIG_CHECK_H_

#include <ostream>
#include <string>
#include <vector>

#include "fusebox/yaml/config.h"

namespace fusebox::app {

// Checks the file at `path` with the overrides in `environment` and the
// active Spring `profiles` (empty: SPRING_PROFILES_ACTIVE, else the file's,
// else "default"); returns the exit status. On stderr, besides the verdict:
// every note, what each name in recordExceptions and the like resolved to
// (against NameRegistry::AddJavaDefaults()), and every warning.
int RunConfigCheck(const std::string& path, const yaml::Environment& environment, std::ostream& out,
                   std::ostream& err, const std::vector<std::string>& profiles = {});

}  // namespace fusebox::app

#endif  // FUSEBOX_APPS_FUSEBOX_CONFIG_CHECK_H_
