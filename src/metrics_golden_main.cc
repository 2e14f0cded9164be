// Prints the exposition text of the metrics test fixture, for
// `promtool check metrics` (ctest metrics.promtool.fixture).
#include <cstdio>
#include <string>

#include "metrics_test_fixture.h"

int main() {
  const std::string text = fusebox::testing::RenderMetricsFixture();
  return std::fwrite(text.data(), 1, text.size(), stdout) == text.size() ? 0 : 1;
}
