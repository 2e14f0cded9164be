// apps/fusebox/test_util.h: helpers shared by the fusebox_app tests.
#ifndef FUSEBOX_APPS_FUSEBOX_TEST_UTIL_H_
#define FUSEBOX_APPS_FUSEBOX_TEST_UTIL_H_

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fusebox::app::testing {

// apps/fusebox/testdata/<name>.
inline std::string TestData(const std::string& name) {
  return std::string(FUSEBOX_APP_TESTDATA) + "/" + name;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace fusebox::app::testing

#endif  // FUSEBOX_APPS_FUSEBOX_TEST_UTIL_H_
