// `specd doctor` reports every environment variable of base/env.h's table,
// as text and in --json's "environment" (the "cuda" key unchanged), and the
// GPU capability registry's view of a simulated device (SPECD_GPU_CC).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <nlohmann/json.hpp>
#include <set>

#include "base/env.h"
#include "test_util.h"

namespace specd {
namespace {

using testing::RunCommand;
using testing::SpecdBinary;

TEST(DoctorEnvTest, JsonListsEveryEntry) {
  int st = 0;
  const std::string out = RunCommand(
      "SPECD_COMM_SPIN_US=7 SPECD_MODEL= " + SpecdBinary() + " doctor --json 2>/dev/null", &st);
  ASSERT_EQ(st, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_TRUE(j.contains("cuda"));
  ASSERT_TRUE(j.contains("environment") && j["environment"].is_array()) << out;
  std::set<std::string> names;
  for (const auto& e : j["environment"]) {
    names.insert(e["name"].get<std::string>());
    EXPECT_TRUE(e.contains("value") && e.contains("default") && e.contains("source")) << e.dump();
    if (e["name"] == "SPECD_COMM_SPIN_US") {
      EXPECT_EQ(e["value"], "7");
      EXPECT_EQ(e["source"], "env");
    }
    if (e["name"] == "SPECD_MODEL") {
      EXPECT_EQ(e["source"], "default");  // empty = unset
    }
  }
  for (const EnvSpec& s : EnvTable()) EXPECT_TRUE(names.count(s.name)) << s.name;
  EXPECT_EQ(names.size(), EnvTable().size());
}

TEST(DoctorEnvTest, TextListsEveryEntry) {
  int st = 0;
  const std::string out = RunCommand(SpecdBinary() + " doctor 2>/dev/null", &st);
  ASSERT_EQ(st, 0) << out;
  EXPECT_NE(out.find("Environment"), std::string::npos);
  for (const EnvSpec& s : EnvTable()) EXPECT_NE(out.find(s.name), std::string::npos) << s.name;
}

// A GPU generation the registry has never seen gets the generic path, one
// warning naming what was disabled, and exit 0: never a failed lookup.
TEST(DoctorEnvTest, UnknownGpuGenerationGetsTheGenericPath) {
  int st = 0;
  const std::string json =
      RunCommand("SPECD_GPU_CC=13.0 " + SpecdBinary() + " doctor --json 2>/dev/null", &st);
  ASSERT_EQ(st, 0) << json;
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json;
  ASSERT_TRUE(j.contains("gpu_capabilities") && j["gpu_capabilities"].is_array()) << json;
  const nlohmann::json& last = j["gpu_capabilities"].back();
  EXPECT_EQ(last["arch"], "sm_130");
  EXPECT_EQ(last["match"], "generic");
  for (const auto& c : last["collectives"]) {
    EXPECT_EQ(c["enabled"].get<bool>(), c["name"] == "NCCL") << c.dump();
  }

  const std::string text =
      RunCommand("SPECD_GPU_CC=13.0 " + SpecdBinary() + " doctor 2>&1", &st);
  ASSERT_EQ(st, 0) << text;
  EXPECT_NE(text.find("sm_130 (13.0): generic"), std::string::npos) << text;
  size_t warnings = 0;
  for (size_t at = text.find("has no registry entry"); at != std::string::npos;
       at = text.find("has no registry entry", at + 1)) {
    ++warnings;
  }
  EXPECT_EQ(warnings, 2u) << text;  // the log line once, and the report's note

  const std::string bad = RunCommand("SPECD_GPU_CC=thirteen " + SpecdBinary() + " doctor 2>&1", &st);
  EXPECT_EQ(st, 0) << bad;
  EXPECT_NE(bad.find("SPECD_GPU_CC=thirteen: expected a compute capability"), std::string::npos)
      << bad;
}

}  // namespace
}  // namespace specd
