// Prints this process's registry hash of one key, for
// RegistryKeyHash.TheSecretIsDrawnAnewByEachProcess (a secret fixed at build
// time would print the same number in every process).
#include <cstdio>

#include "fusebox/registry.h"

int main() {
  std::printf("%llu\n", static_cast<unsigned long long>(
                            fusebox::RegistryKey::Hash("meta:read:17841400000000001:quota")));
  return 0;
}
