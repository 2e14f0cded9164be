// Tests for the command line, run in process through RunFusebox().
#include "apps/fusebox/cli.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "apps/fusebox/test_util.h"

namespace fusebox::app {
namespace {

struct Ran {
  int status;
  std::string out;
  std::string err;
};

Ran Fusebox(std::vector<std::string> args, const std::string& stdin_text = "") {
  args.insert(args.begin(), "fusebox");
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  const int status = RunFusebox(args, in, out, err);
  return {status, out.str(), err.str()};
}

TEST(Cli, SimDefaultKoreanMatchesGolden) {
  const Ran r = Fusebox({"sim", "default", "--lang", "ko"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, testing::ReadFile(testing::TestData("default.ko.txt")));
}

TEST(Cli, SimWithoutPresetIsDefault) {
  EXPECT_EQ(Fusebox({"sim"}).out, Fusebox({"sim", "default"}).out);
}

TEST(Cli, SimFlagsMakeACustomScenario) {
  const Ran r = Fusebox({"sim", "--calls", "20", "--outage", "3s:5s", "-b", "slidingWindowSize=4",
                         "-b", "minimumNumberOfCalls=4", "--format", "json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<std::string> lines = testing::Lines(r.out);
  ASSERT_EQ(lines.size(), 21u);
  EXPECT_NE(lines.back().find("\"scenario\":\"default (modified)\""), std::string::npos)
      << lines.back();
  EXPECT_NE(r.out.find("CLOSED>OPEN"), std::string::npos);
}

TEST(Cli, SimHtmlWritesAPage) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "fusebox_cli_test_page.html").string();
  std::remove(path.c_str());
  const Ran r = Fusebox({"sim", "wait-10s", "--html", path});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string page = testing::ReadFile(path);
  EXPECT_NE(page.find("<svg"), std::string::npos);
  std::remove(path.c_str());
}

TEST(Cli, SimErrors) {
  Ran r = Fusebox({"sim", "nope"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.rfind("fusebox sim: unknown preset \"nope\"", 0), 0u) << r.err;
  r = Fusebox({"sim", "--outage", "5s"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "fusebox sim: --outage \"5s\": expected START:DURATION, e.g. 11s:15s\n");
  r = Fusebox({"sim", "-b", "failureRateThreshold=200"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("failureRateThreshold (failure_rate_threshold) must be in (0, 100]"),
            std::string::npos)
      << r.err;
  r = Fusebox({"sim", "--interval", "1s", "--rate", "2"});
  EXPECT_EQ(r.err, "fusebox sim: give --interval or --rate, not both\n");
  r = Fusebox({"sim", "--lang", "fr"});
  EXPECT_NE(r.status, 0);
  r = Fusebox({"sim", "default", "--scenario", testing::TestData("slow_dependency.yaml")});
  EXPECT_EQ(r.err, "fusebox sim: give a preset or --scenario FILE, not both\n");
}

TEST(Cli, ReplayFromStdin) {
  const Ran r = Fusebox({"replay"}, testing::ReadFile(testing::TestData("all_events.jsonl")));
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, testing::ReadFile(testing::TestData("all_events.out.jsonl")));
}

TEST(Cli, ReplayErrorsNameTheSource) {
  Ran r = Fusebox({"replay", "-"}, "{\"config\": {}}\n{\"t\": 1, \"acquire\": \"a\", \"x\": 1}\n");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "fusebox replay: <stdin>: line 2: unknown field \"x\"\n");
  r = Fusebox({"replay", testing::TestData("unknown_call.jsonl")});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "fusebox replay: " + testing::TestData("unknown_call.jsonl") +
                       ": line 4: complete of unknown call \"c9\": no acquire for it holds a "
                       "permit\n");
  r = Fusebox({"replay", "/nonexistent.jsonl"});
  EXPECT_EQ(r.err, "fusebox replay: cannot read \"/nonexistent.jsonl\"\n");
}

TEST(Cli, Compare) {
  Ran r = Fusebox({"compare"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, testing::ReadFile(testing::TestData("compare_presets.txt")));
  r = Fusebox(
      {"compare", "--format", "json", "-c", "default", "-c", "strict:failureRateThreshold=20"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(testing::Lines(r.out).size(), 2u);
  r = Fusebox({"compare", "--trace", "-", "-c", "input", "-c", "no-breaker"},
              testing::ReadFile(testing::TestData("incident.jsonl")));
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("fusebox compare: trace - (160 events)"), std::string::npos) << r.out;
  r = Fusebox({"compare", "--trace", "x", "--scenario", "default"});
  EXPECT_EQ(r.err, "fusebox compare: give --trace or --scenario, not both\n");
  r = Fusebox({"compare", "-c", "huh"});
  EXPECT_EQ(r.status, 1);
}

TEST(Cli, UsageErrors) {
  EXPECT_NE(Fusebox({}).status, 0);
  EXPECT_NE(Fusebox({"frobnicate"}).status, 0);
  const Ran help = Fusebox({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("replay"), std::string::npos);
  const Ran version = Fusebox({"--version"});
  EXPECT_EQ(version.status, 0);
}

}  // namespace
}  // namespace fusebox::app
