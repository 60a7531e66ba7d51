#include "launch/cpu_bind.h"

#include <gtest/gtest.h>

namespace specd::launch {
namespace {

using Plan = std::vector<std::vector<int>>;

TEST(CpuBindTest, ParsesAndFormatsCpuLists) {
  auto c = ParseCpuList("4,0-2,2");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (std::vector<int>{0, 1, 2, 4}));
  EXPECT_EQ(FormatCpuList(*c), "0-2,4");
  EXPECT_FALSE(ParseCpuList("3-1").ok());
  EXPECT_FALSE(ParseCpuList("").ok());
  EXPECT_FALSE(ParseCpuList("a").ok());
}

TEST(CpuBindTest, NoneMeansNoPinning) {
  auto p = PlanCpuBinding("none", 2, 1, {0, 1});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (Plan{{}, {}}));
}

TEST(CpuBindTest, CoresGivesEachRankItsThreadsWorthOfCpus) {
  auto p = PlanCpuBinding("cores", 2, 1, {0, 1});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (Plan{{0}, {1}}));
  p = PlanCpuBinding("cores", 2, 2, {2, 3, 4, 5});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (Plan{{2, 3}, {4, 5}}));
  // More ranks x threads than CPUs: wraps around.
  p = PlanCpuBinding("cores", 3, 1, {0, 1});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (Plan{{0}, {1}, {0}}));
}

TEST(CpuBindTest, ExplicitListsPerRank) {
  auto p = PlanCpuBinding("1:0", 2, 1, {0, 1});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (Plan{{1}, {0}}));
  p = PlanCpuBinding("0-1:2,3", 2, 2, {0, 1, 2, 3});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (Plan{{0, 1}, {2, 3}}));
}

TEST(CpuBindTest, ErrorsNameWhatWasExpected) {
  auto p = PlanCpuBinding("0", 2, 1, {0, 1});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("1 CPU list(s) for 2 rank(s)"), std::string::npos)
      << p.status().message();
  p = PlanCpuBinding("0:7", 2, 1, {0, 1});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("CPU 7"), std::string::npos) << p.status().message();
  p = PlanCpuBinding("socket", 2, 1, {0, 1});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("expected none, cores"), std::string::npos);
}

TEST(CpuBindTest, BindsThisProcess) {
  std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  ASSERT_TRUE(BindThisProcess({allowed[0]}).ok());
  EXPECT_EQ(AllowedCpus(), std::vector<int>{allowed[0]});
  ASSERT_TRUE(BindThisProcess(allowed).ok());  // restore
  EXPECT_EQ(AllowedCpus(), allowed);
}

}  // namespace
}  // namespace specd::launch
