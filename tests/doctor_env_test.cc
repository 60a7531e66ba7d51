// `specd doctor` reports every environment variable of base/env.h's table,
// as text and in --json's "environment" (the "cuda" key unchanged).
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

}  // namespace
}  // namespace specd
