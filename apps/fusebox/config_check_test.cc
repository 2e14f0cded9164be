// `fusebox config check`, in process: through RunFusebox() for the flags, and
// RunConfigCheck() with an injected environment for the overrides.
#include "apps/fusebox/config_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/fusebox/cli.h"
#include "apps/fusebox/test_util.h"

namespace fusebox::app {
namespace {

using ::testing::HasSubstr;

const std::string kSeed004 =
    std::string(FUSEBOX_APP_TESTDATA) + "/../../../modules/yaml/testdata/seed004_application.yml";

struct Ran {
  int status;
  std::string out;
  std::string err;
};

Ran Check(const std::string& path, const yaml::Environment& env = {}) {
  std::ostringstream out, err;
  const int status = RunConfigCheck(path, env, out, err);
  return {status, out.str(), err.str()};
}

TEST(ConfigCheck, Seed004PrintsTheResolvedInstance) {
  const Ran r = Check(kSeed004);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "fusebox config check: " + kSeed004 + ": OK\n");
  EXPECT_EQ(r.out, testing::ReadFile(testing::TestData("config_check_seed004.yml")));
}

// The printed configuration is a configuration file: it loads to itself.
TEST(ConfigCheck, OutputLoadsBack) {
  const Ran r = Check(kSeed004);
  ASSERT_EQ(r.status, 0);
  Result<yaml::Configuration> again = yaml::LoadConfig(r.out, "out.yml");
  ASSERT_TRUE(again.has_value()) << again.error().message();
  EXPECT_EQ(r.out.substr(r.out.find("resilience4j:")), yaml::FormatConfig(*again));
}

TEST(ConfigCheck, EnvironmentOverridesShowInTheOutput) {
  const Ran r = Check(
      kSeed004, {{"FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_WAITDURATIONINOPENSTATE", "10s"}});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("        waitDurationInOpenState: 10s\n"));
  EXPECT_THAT(r.out, HasSubstr("and FUSEBOX_* overrides filled in."));
}

TEST(ConfigCheck, ErrorsGoToStderrWithACount) {
  const Ran r =
      Check(kSeed004, {{"FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_SLIDINGWINDOWSIZE", "0"},
                       {"FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_JITTERSEED", "-1"}});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "env FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_JITTERSEED: "
            "resilience4j.circuitbreaker.instances.payment.jitterSeed: expected an unsigned "
            "integer (0: from the name), got \"-1\"\n"
            "env FUSEBOX_CIRCUITBREAKER_INSTANCES_PAYMENT_SLIDINGWINDOWSIZE: "
            "resilience4j.circuitbreaker.instances.payment.slidingWindowSize: must be >= 1, got 0\n"
            "fusebox config check: " +
                kSeed004 + ": 2 errors, nothing applied\n");
}

TEST(ConfigCheck, WarningsGoToStderrAndPass) {
  const std::string path = ::testing::TempDir() + "/fusebox_config_check_warning.yml";
  {
    std::ofstream f(path);
    f << "resilience4j.circuitbreaker.instances.payment:\n  registerHealthIndicator: true\n";
  }
  const Ran r = Check(path);
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.err, "fusebox config check: warning: " + path +
                       ":2:3: resilience4j.circuitbreaker.instances.payment."
                       "registerHealthIndicator: ignored: a Spring Boot actuator setting; fusebox "
                       "has no health endpoint\n"
                       "fusebox config check: " +
                       path + ": OK\n");
  std::remove(path.c_str());
}

TEST(ConfigCheck, WiredIntoTheCommandLine) {
  std::istringstream in;
  std::ostringstream out, err;
  const int status = RunFusebox({"fusebox", "config", "check", kSeed004, "--no-env"}, in, out, err);
  EXPECT_EQ(status, 0) << err.str();
  EXPECT_EQ(out.str(), testing::ReadFile(testing::TestData("config_check_seed004.yml")));
}

const std::string kSpring =
    std::string(FUSEBOX_APP_TESTDATA) + "/../../../modules/yaml/testdata/spring/";

// Every Java name is listed with what it resolved to, against Java's names
// of fusebox's own failures; the rest are warnings naming the instance.
TEST(ConfigCheck, ListsWhatEachNameResolvedTo) {
  const Ran r = Check(kSpring + "snake_case.yml");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err,
              HasSubstr("fusebox config check: name: "
                        "resilience4j.circuitbreaker.instances.user_service.recordExceptions: "
                        "java.net.ConnectException -> StatusCode Unavailable\n"));
  EXPECT_THAT(r.err, HasSubstr("fusebox config check: name: "
                               "resilience4j.retry.instances.user_service.retryExceptions: "
                               "java.net.SocketTimeoutException -> StatusCode Timeout\n"));
  // Printed under Resilience4j's name, whatever the file's spelling.
  EXPECT_THAT(r.out, HasSubstr("        recordExceptions: [java.net.ConnectException]\n"));
  EXPECT_THAT(r.out, HasSubstr("  thread-pool-bulkhead:\n"));
}

TEST(ConfigCheck, UnregisteredNamesAreWarningsNotErrors) {
  const Ran r = Check(kSpring + "camel_case_exceptions.yml");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err,
              HasSubstr("fusebox config check: warning: "
                        "resilience4j.circuitbreaker.instances.backendB.recordFailurePredicate: "
                        "\"io.github.robwin.exception.RecordFailurePredicate\" is not "
                        "registered (NameRegistry); left out\n"));
  EXPECT_THAT(r.err, HasSubstr("-> not registered\n"));
}

TEST(ConfigCheck, ProfileFlagSelectsDocumentsAndNotesSay) {
  std::istringstream in;
  std::ostringstream out, err;
  const int status = RunFusebox(
      {"fusebox", "config", "check", kSpring + "profiles.yml", "--no-env", "--profile", "prod"}, in,
      out, err);
  EXPECT_EQ(status, 0) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("# Active profiles: prod\n"));
  EXPECT_THAT(out.str(), HasSubstr("      ledger:\n"));
  EXPECT_THAT(out.str(), HasSubstr("        waitDurationInOpenState: 30s\n"));
  EXPECT_THAT(err.str(), HasSubstr("fusebox config check: note: " + kSpring +
                                   "profiles.yml:14:19: spring.config.activate.on-profile: "
                                   "document 2 applied (active profiles: prod)\n"));
  EXPECT_THAT(err.str(), HasSubstr("document 5 skipped (active profiles: prod)\n"));
}

TEST(ConfigCheck, ProfilesFromTheEnvironment) {
  const Ran r = Check(kSpring + "profiles.yml", {{"SPRING_PROFILES_ACTIVE", "dev"}});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("# Active profiles: dev\n"));
  EXPECT_THAT(r.out, HasSubstr("        failureRateThreshold: 90\n"));
}

}  // namespace
}  // namespace fusebox::app
