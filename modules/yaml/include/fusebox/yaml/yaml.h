// fusebox/yaml/yaml.h: includes the whole API of fusebox::yaml (Resilience4j-style YAML
// configuration, yaml-cpp).
//
//   #include <fusebox/yaml/yaml.h>
//
// Prefer including the headers you use; this one is for quick starts. Checked,
// with every other public header, by cmake/HeaderCheck.cmake.
#ifndef FUSEBOX_YAML_YAML_H_
#define FUSEBOX_YAML_YAML_H_

#include "fusebox/yaml/config.h"  // IWYU pragma: export

#endif  // FUSEBOX_YAML_YAML_H_
