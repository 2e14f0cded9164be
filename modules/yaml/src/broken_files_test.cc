// Error messages for broken files, asserted exactly: testdata/broken/NAME.yml
// must fail to load with the text of NAME.err (one error a line), the file
// named by its base name. Each case breaks one rule the loader promises to
// name with file, line, column, key path and rule (docs/configuration.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "fusebox/yaml/config.h"

namespace fusebox::yaml {
namespace {

const std::string kBroken = std::string(FUSEBOX_YAML_TESTDATA) + "/broken";

// Listed by hand: a new case is added on purpose, and a file left behind
// without its entry fails EveryFileIsListed.
constexpr const char* kCases[] = {
    "01_threshold_zero",
    "02_typo_property",
    "03_bad_duration",
    "04_unknown_base_config",
    "05_base_config_cycle",
    "06_duplicate_key",
    "07_two_spellings",
    "08_record_exceptions_map",
    "09_thread_pool_core_above_max",
    "10_unknown_section",
    "11_yaml_syntax",
    "12_instance_not_a_map",
    "13_list_value",
    "14_empty_value",
    "15_retry_rules",
    "16_fair_bulkhead",
    "17_rate_limiter_period",
    "18_cancel_running_future_not_bool",
    "19_many_errors",
    "20_backoff_cap_below_wait",
    "21_section_beside_resilience4j",
    "22_empty_file",
    "23_typo_in_profile_document",
    "24_stray_comma",
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot read " << path;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class BrokenFile : public ::testing::TestWithParam<const char*> {};

TEST_P(BrokenFile, FailsWithItsExpectedMessage) {
  const std::string name = GetParam();
  std::string expected = ReadFile(kBroken + "/" + name + ".err");
  while (!expected.empty() && expected.back() == '\n') expected.pop_back();
  const Result<Configuration> c =
      LoadConfig(ReadFile(kBroken + "/" + name + ".yml"), name + ".yml");
  ASSERT_FALSE(c.has_value()) << name << " loaded";
  EXPECT_EQ(c.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c.error().message(), expected);
}

INSTANTIATE_TEST_SUITE_P(YamlConfig, BrokenFile, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

TEST(YamlConfigBrokenFiles, EveryFileIsListed) {
  std::set<std::string> expected;
  for (const char* name : kCases) {
    expected.insert(std::string(name) + ".yml");
    expected.insert(std::string(name) + ".err");
  }
  std::set<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(kBroken)) {
    found.insert(entry.path().filename().string());
  }
  EXPECT_EQ(found, expected);
  EXPECT_GE(std::size(kCases), 20u);
}

}  // namespace
}  // namespace fusebox::yaml
