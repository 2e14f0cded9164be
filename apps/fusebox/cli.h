// apps/fusebox/cli.h: the `fusebox` command line (CLI11), as a function that
// tests call without spawning a process.
//
//   fusebox sim [PRESET] [--scenario FILE] [scenario and breaker flags]
//               [--lang en|ko] [--format text|json] [--html FILE]
//   fusebox replay [TRACE]            (JSON lines; stdin when absent or "-")
//   fusebox config check FILE [--no-env]   (with fusebox::yaml)
//   fusebox compare [--trace FILE | --scenario NAME|FILE] [-c CONFIG]...
//                   [--format text|json]
//
// docs/cli.md documents every flag with examples.
//
// Thread-compatible: one call at a time per set of streams.
#ifndef FUSEBOX_APPS_FUSEBOX_CLI_H_
#define FUSEBOX_APPS_FUSEBOX_CLI_H_

#include <istream>
#include <ostream>
#include <string>
#include <vector>

namespace fusebox::app {

// Runs `fusebox` with `args` (args[0] is the program name) on the given
// streams; returns the process exit status: 0, 1 for bad input or a failed
// run (the message on `err`), or CLI11's status for a usage error.
int RunFusebox(const std::vector<std::string>& args, std::istream& in, std::ostream& out,
               std::ostream& err);

}  // namespace fusebox::app

#endif  // FUSEBOX_APPS_FUSEBOX_CLI_H_
