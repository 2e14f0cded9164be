// The `fusebox` command: see apps/fusebox/cli.h and docs/cli.md.
#include <iostream>
#include <string>
#include <vector>

#include "apps/fusebox/cli.h"

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  return fusebox::app::RunFusebox(args, std::cin, std::cout, std::cerr);
}
