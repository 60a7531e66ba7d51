#include "base/env.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <set>
#include <string>

namespace specd {
namespace {

// Sets (or with nullptr unsets) a variable for one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = ::getenv(name)) old_ = old, had_ = true;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) ::setenv(name_.c_str(), old_.c_str(), 1);
    else ::unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(EnvTest, TableIsInEnumOrderWithUniqueNames) {
  const auto& t = EnvTable();
  std::set<std::string> names;
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(t[i].var), i) << t[i].name;
    EXPECT_TRUE(names.insert(t[i].name).second) << t[i].name;
    EXPECT_EQ(std::string(t[i].name).rfind("SPECD_", 0) == 0, !t[i].external) << t[i].name;
    EXPECT_STRNE(t[i].type, "");
    EXPECT_STRNE(t[i].default_value, "");
    EXPECT_STRNE(t[i].meaning, "");
    EXPECT_STRNE(t[i].module, "");
  }
  EXPECT_EQ(t.size(), static_cast<size_t>(EnvVar::kCudaVisibleDevices) + 1);
  EXPECT_STREQ(EnvName(EnvVar::kModel), "SPECD_MODEL");
  EXPECT_STREQ(EnvName(EnvVar::kCommTimeoutS), "SPECD_COMM_TIMEOUT_S");
}

TEST(EnvTest, EmptyMeansUnset) {
  {
    ScopedEnv e("SPECD_MODEL", nullptr);
    EXPECT_FALSE(GetEnv(EnvVar::kModel).has_value());
  }
  {
    ScopedEnv e("SPECD_MODEL", "");
    EXPECT_FALSE(GetEnv(EnvVar::kModel).has_value());
  }
  {
    ScopedEnv e("SPECD_MODEL", "/models/x.gguf");
    ASSERT_TRUE(GetEnv(EnvVar::kModel).has_value());
    EXPECT_EQ(*GetEnv(EnvVar::kModel), "/models/x.gguf");
  }
}

TEST(EnvTest, ReportListsEveryEntryWithItsSource) {
  ScopedEnv a("SPECD_COMM_SPIN_US", "7");
  ScopedEnv b("SPECD_COMM_TIMEOUT_S", "");
  ScopedEnv k("SPECD_API_KEY", "sk-secret");
  const auto report = EnvReport();
  ASSERT_EQ(report.size(), EnvTable().size());
  for (size_t i = 0; i < report.size(); ++i) {
    EXPECT_EQ(report[i].name, EnvTable()[i].name);
    EXPECT_EQ(report[i].default_value, EnvTable()[i].default_value);
  }
  const auto& spin = report[static_cast<size_t>(EnvVar::kCommSpinUs)];
  EXPECT_EQ(spin.value, "7");
  EXPECT_EQ(spin.source, "env");
  const auto& timeout = report[static_cast<size_t>(EnvVar::kCommTimeoutS)];
  EXPECT_EQ(timeout.value, "");
  EXPECT_EQ(timeout.source, "default");
  EXPECT_EQ(timeout.default_value, "60");
  // A secret is reported as set, never shown.
  const auto& key = report[static_cast<size_t>(EnvVar::kApiKey)];
  EXPECT_EQ(key.source, "env");
  EXPECT_EQ(key.value, "(set)");
  const std::string text = DescribeEnvironment();
  EXPECT_EQ(text.find("sk-secret"), std::string::npos);
  for (const EnvSpec& s : EnvTable()) EXPECT_NE(text.find(s.name), std::string::npos) << s.name;
}

}  // namespace
}  // namespace specd
