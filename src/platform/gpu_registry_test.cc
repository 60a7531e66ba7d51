#include "platform/gpu_registry.h"

#include <gtest/gtest.h>

#include <set>

namespace specd {
namespace {

bool FeatureOn(const std::vector<GpuFeature>& list, const std::string& name) {
  for (const GpuFeature& f : list) {
    if (f.name == name) return f.enabled;
  }
  ADD_FAILURE() << "no feature named " << name;
  return false;
}

// Every architecture the build targets has an exact entry that turns specd's
// IPC collectives on with thresholds, and runs its own SASS.
TEST(GpuRegistryTest, EveryBuiltArchitectureHasAnExactEntry) {
  const std::pair<int, int> ccs[] = {{8, 0}, {8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}};
  for (auto [ma, mi] : ccs) {
    GpuCapability c = LookupGpuCapability(ma, mi, "80,86,89,90,100,120");
    SCOPED_TRACE(c.arch);
    EXPECT_EQ(c.match, GpuMatch::kExact);
    EXPECT_EQ(c.entry, c.arch);
    EXPECT_EQ(c.code, c.arch + " SASS");
    EXPECT_TRUE(FeatureOn(c.collectives, "one-shot IPC allreduce"));
    EXPECT_TRUE(FeatureOn(c.collectives, "fused allreduce + residual + RMSNorm"));
    EXPECT_TRUE(FeatureOn(c.collectives, "NCCL"));
    EXPECT_GT(c.one_shot_max_bytes, 0u);
    EXPECT_GT(c.two_shot_max_bytes, c.one_shot_max_bytes);
    EXPECT_TRUE(FeatureOn(c.kernels, "RMSNorm"));
  }
  EXPECT_EQ(GpuArchTable().size(), 6u);
}

// The seed deployment's failure: a capability table without the new
// generation's major. Here a future major gets the generic path, never an
// error: kernels from the newest PTX, IPC collectives off, NCCL on.
TEST(GpuRegistryTest, UnknownMajorGetsTheGenericPath) {
  GpuCapability c = LookupGpuCapability(13, 0, "80,86,89,90,100,120");
  EXPECT_EQ(c.match, GpuMatch::kGeneric);
  EXPECT_EQ(c.arch, "sm_130");
  EXPECT_EQ(c.code, "PTX JIT from compute_120");
  EXPECT_TRUE(FeatureOn(c.kernels, "RMSNorm"));
  EXPECT_TRUE(FeatureOn(c.collectives, "NCCL"));
  EXPECT_FALSE(FeatureOn(c.collectives, "one-shot IPC allreduce"));
  EXPECT_FALSE(FeatureOn(c.collectives, "two-shot IPC allreduce"));
  EXPECT_FALSE(FeatureOn(c.collectives, "fused allreduce + residual + RMSNorm"));
  EXPECT_EQ(c.one_shot_max_bytes, 0u);
  EXPECT_NE(c.note.find("disabled: one-shot and two-shot IPC allreduce"), std::string::npos)
      << c.note;
  // Without PTX at or below the device, there is nothing it can run.
  GpuCapability none = LookupGpuCapability(13, 0, "90-real");
  EXPECT_EQ(none.match, GpuMatch::kGeneric);
  EXPECT_FALSE(FeatureOn(none.kernels, "RMSNorm"));
}

// A minor without an entry runs the same major's older SASS.
TEST(GpuRegistryTest, UnknownMinorUsesTheSameMajor) {
  struct Case { int ma, mi; const char* entry; const char* code; };
  const Case cases[] = {{8, 7, "sm_86", "sm_86 SASS"},
                        {10, 3, "sm_100", "sm_100 SASS"},
                        {12, 1, "sm_120", "sm_120 SASS"},
                        {9, 1, "sm_90", "sm_90 SASS"}};
  for (const Case& k : cases) {
    GpuCapability c = LookupGpuCapability(k.ma, k.mi);
    SCOPED_TRACE(c.arch);
    EXPECT_EQ(c.match, GpuMatch::kNearestFamily);
    EXPECT_EQ(c.entry, k.entry);
    EXPECT_EQ(c.code, k.code);
    EXPECT_TRUE(FeatureOn(c.collectives, "one-shot IPC allreduce"));
  }
  // A build without the major's SASS falls back to PTX.
  EXPECT_EQ(LookupGpuCapability(9, 0, "80").code, "PTX JIT (the binary has no 9.x SASS)");
}

TEST(GpuRegistryTest, OlderThanAmpereIsUnsupported) {
  GpuCapability c = LookupGpuCapability(7, 5);
  EXPECT_EQ(c.match, GpuMatch::kUnsupported);
  EXPECT_TRUE(c.kernels.empty());
  EXPECT_NE(c.note.find("below 8.0"), std::string::npos);
}

// Hardware facts that decide features: multimem only on NVSwitch-era
// data-centre parts, FP8 from Ada on.
TEST(GpuRegistryTest, TableFacts) {
  std::set<std::string> multimem, fp8;
  for (const GpuArchEntry& e : GpuArchTable()) {
    if (e.nvls_multimem) multimem.insert(e.arch);
    if (e.fp8_tensor_cores) fp8.insert(e.arch);
  }
  EXPECT_EQ(multimem, (std::set<std::string>{"sm_90", "sm_100"}));
  EXPECT_EQ(fp8, (std::set<std::string>{"sm_89", "sm_90", "sm_100", "sm_120"}));
}

TEST(GpuRegistryTest, ParsesComputeCapabilities) {
  int ma = 0, mi = 0;
  EXPECT_TRUE(ParseComputeCapability("13.0", &ma, &mi));
  EXPECT_EQ(ma, 13);
  EXPECT_EQ(mi, 0);
  EXPECT_TRUE(ParseComputeCapability("9", &ma, &mi));
  EXPECT_EQ(ma, 9);
  EXPECT_EQ(mi, 0);
  for (const char* bad : {"", "x", "9.", ".5", "9.10", "9.0a", "-1", "100.0", "12.0 "}) {
    EXPECT_FALSE(ParseComputeCapability(bad, &ma, &mi)) << bad;
  }
}

TEST(GpuRegistryTest, DescriptionsNameEveryFeature) {
  GpuCapability c = LookupGpuCapability(12, 0);
  std::string d = DescribeGpuCapability(c);
  EXPECT_NE(d.find("sm_120 (12.0): exact"), std::string::npos) << d;
  EXPECT_NE(d.find("collective one-shot IPC allreduce: on"), std::string::npos) << d;
  EXPECT_NE(d.find("collective NVLS multimem allreduce: off"), std::string::npos) << d;
  std::string t = DescribeGpuArchTable();
  for (const GpuArchEntry& e : GpuArchTable()) EXPECT_NE(t.find(e.arch), std::string::npos);
}

}  // namespace
}  // namespace specd
