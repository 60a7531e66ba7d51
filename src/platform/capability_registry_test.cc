#include "platform/capability_registry.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace specd {
namespace {

// The first table entry, whatever it holds, must be found exactly.
TEST(CapabilityRegistry, ExactEntryIsFoundWithItsProvenance) {
  ASSERT_FALSE(AllreduceTuningTable().empty());
  const AllreduceTuningEntry& e = AllreduceTuningTable().front();
  AllreduceTuningLookup l = LookupAllreduceTuning(e.platform_key, e.world_size);
  EXPECT_EQ(l.provenance, Provenance::kExact);
  EXPECT_EQ(l.entry_key, e.platform_key);
  EXPECT_EQ(l.entry_world, e.world_size);
  EXPECT_EQ(l.tuning.one_shot_max_bytes, e.tuning.one_shot_max_bytes);
}

TEST(CapabilityRegistry, LongerKeyFallsBackToItsFamily) {
  const AllreduceTuningEntry& e = AllreduceTuningTable().front();
  const std::string key = std::string(e.platform_key) + "-future-extension";
  AllreduceTuningLookup l = LookupAllreduceTuning(key, e.world_size);
  EXPECT_EQ(l.provenance, Provenance::kNearestFamily);
  EXPECT_EQ(l.entry_key, e.platform_key);
  EXPECT_NE(l.note.find(key), std::string::npos) << l.note;
}

TEST(CapabilityRegistry, UntunedWorldSizeUsesTheNearestMeasuredOne) {
  const AllreduceTuningEntry& e = AllreduceTuningTable().front();
  AllreduceTuningLookup l = LookupAllreduceTuning(e.platform_key, 1000);
  EXPECT_EQ(l.provenance, Provenance::kNearestFamily);
  int largest = 0;
  for (const auto& t : AllreduceTuningTable()) {
    if (std::string(t.platform_key) == e.platform_key) largest = std::max(largest, t.world_size);
  }
  EXPECT_EQ(l.entry_world, largest);
}

TEST(CapabilityRegistry, UnknownKeyGetsGenericDefaultsNeverAnError) {
  AllreduceTuningLookup l = LookupAllreduceTuning("riscv-rvv", 4);
  EXPECT_EQ(l.provenance, Provenance::kGenericDefaults);
  EXPECT_EQ(l.note, "no tuned entry for riscv-rvv: using generic defaults");
  EXPECT_EQ(l.tuning.one_shot_max_bytes, GenericAllreduceTuning().one_shot_max_bytes);
  EXPECT_EQ(LookupAllreduceTuning("", 0).provenance, Provenance::kGenericDefaults);
}

// Plans follow the thresholds: one-shot up to X, two-shot up to Y, then
// two-shot in chunks.
TEST(CapabilityRegistry, PlanFollowsThresholds) {
  const AllreduceTuning t = GenericAllreduceTuning();
  EXPECT_EQ(PlanAllreduce("unknown", 2, t.one_shot_max_bytes).kind, AllreduceKind::kOneShot);
  AllreducePlan mid = PlanAllreduce("unknown", 2, t.one_shot_max_bytes + 1);
  EXPECT_EQ(mid.kind, AllreduceKind::kTwoShot);
  EXPECT_EQ(mid.chunk_bytes, 0u);
  AllreducePlan big = PlanAllreduce("unknown", 2, t.two_shot_max_bytes + 1);
  EXPECT_EQ(big.kind, AllreduceKind::kTwoShot);
  EXPECT_EQ(big.chunk_bytes, t.chunk_bytes);
}

TEST(CapabilityRegistry, TableIsConsistent) {
  for (const auto& e : AllreduceTuningTable()) {
    EXPECT_LE(e.tuning.one_shot_max_bytes, e.tuning.two_shot_max_bytes) << e.platform_key;
    EXPECT_GE(e.tuning.chunk_bytes, 4096u) << e.platform_key;
    EXPECT_GE(e.world_size, 2) << e.platform_key;
  }
}

TEST(CapabilityRegistry, PlatformKeyOverride) {
  setenv("SPECD_PLATFORM_KEY", "test-key", 1);
  EXPECT_EQ(DetectPlatformKey(), "test-key");
  unsetenv("SPECD_PLATFORM_KEY");
  const std::string k = DetectPlatformKey();
  EXPECT_TRUE(k == "generic" || k.rfind("x86-", 0) == 0) << k;
}

}  // namespace
}  // namespace specd
