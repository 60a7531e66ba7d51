#include "platform/cpu_features.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <fstream>
#include <string>

namespace specd {
namespace {

CpuFeatures Avx2Only() {
  CpuFeatures f;
  f.vendor = "GenuineIntel";
  f.avx = f.avx2 = f.fma = f.f16c = f.sse42 = true;
  f.hwy_targets = HWY_AVX2 | HWY_SSE4 | HWY_SSSE3 | HWY_STATIC_TARGET;
  return f;
}

CpuFeatures Avx512VnniBf16() {
  CpuFeatures f = Avx2Only();
  f.avx512f = f.avx512bw = f.avx512vl = f.avx512_vnni = f.avx512_bf16 = true;
  f.avx_vnni = true;
  f.hwy_targets |= HWY_AVX3;
  return f;
}

TEST(CpuFeaturesTest, ProbeAgreesWithCompilerBuiltins) {
  // __builtin_cpu_supports reads the same cpuid bits (and checks OS support)
  // through libgcc: an independent route to the same answer.
  const CpuFeatures& f = GetCpuFeatures();
#if defined(__x86_64__)
  __builtin_cpu_init();
  EXPECT_EQ(f.avx2, static_cast<bool>(__builtin_cpu_supports("avx2")));
  EXPECT_EQ(f.fma, static_cast<bool>(__builtin_cpu_supports("fma")));
  EXPECT_EQ(f.avx512f, static_cast<bool>(__builtin_cpu_supports("avx512f")));
  EXPECT_EQ(f.avx512bw, static_cast<bool>(__builtin_cpu_supports("avx512bw")));
  EXPECT_EQ(f.avx512_vnni, static_cast<bool>(__builtin_cpu_supports("avx512vnni")));
  EXPECT_EQ(f.avx512_bf16, static_cast<bool>(__builtin_cpu_supports("avx512bf16")));
  EXPECT_EQ(f.avx_vnni, static_cast<bool>(__builtin_cpu_supports("avxvnni")));
#endif
  EXPECT_GE(f.logical_cpus, 1);
  EXPECT_FALSE(f.model_name.empty());
  EXPECT_EQ(f.hwy_targets, hwy::SupportedTargets());
}

TEST(CpuFeaturesTest, FlagsMatchProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      flags = line + " ";
      break;
    }
  }
  if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo has no flags line (not x86 Linux)";
  auto has = [&](const char* name) { return flags.find(std::string(" ") + name + " ") != std::string::npos; };
  const CpuFeatures& f = GetCpuFeatures();
  EXPECT_EQ(f.avx2, has("avx2"));
  EXPECT_EQ(f.f16c, has("f16c"));
  EXPECT_EQ(f.avx512_vnni, has("avx512_vnni"));
  EXPECT_EQ(f.avx512_bf16, has("avx512_bf16"));
  EXPECT_EQ(f.avx_vnni, has("avx_vnni"));
  // /proc/cpuinfo lists what the kernel enabled, so the XCR0 tile state agrees.
  EXPECT_EQ(f.amx_tile, has("amx_tile"));
  EXPECT_EQ(f.amx_int8, has("amx_int8"));
  EXPECT_EQ(f.amx_bf16, has("amx_bf16"));
}

CpuFeatures WithAmx(CpuFeatures f) {
  f.amx_tile = f.amx_int8 = f.amx_bf16 = true;
  return f;
}

TEST(KernelPathsTest, AmxNeedsTilesAndTheAvx512VnniPath) {
  std::string warning;
  KernelPaths p = ChooseKernelPaths(WithAmx(Avx512VnniBf16()), "", &warning);
  EXPECT_TRUE(p.amx_int8);
  EXPECT_NE(p.amx_reason.find("AMX-INT8 present"), std::string::npos) << p.amx_reason;

  p = ChooseKernelPaths(Avx512VnniBf16(), "", &warning);
  EXPECT_FALSE(p.amx_int8);
  EXPECT_NE(p.amx_reason.find("unavailable"), std::string::npos) << p.amx_reason;

  // Tiles without the tile-data state (an OS that does not enable it) or
  // without AMX-INT8: off.
  CpuFeatures tiles_only = Avx512VnniBf16();
  tiles_only.amx_tile = true;
  EXPECT_FALSE(ChooseKernelPaths(tiles_only, "", &warning).amx_int8);

  p = ChooseKernelPaths(WithAmx(Avx512VnniBf16()), "avx2", &warning);
  EXPECT_FALSE(p.amx_int8);
  EXPECT_NE(p.amx_reason.find("avx2"), std::string::npos) << p.amx_reason;

  p = ChooseKernelPaths(WithAmx(Avx512VnniBf16()), "", &warning, "0");
  EXPECT_FALSE(p.amx_int8);
  EXPECT_EQ(p.amx_reason, "disabled by SPECD_AMX=0");
  EXPECT_TRUE(warning.empty()) << warning;

  // A value that is neither 0 nor 1 is named in the warning and changes nothing.
  p = ChooseKernelPaths(WithAmx(Avx512VnniBf16()), "", &warning, "off");
  EXPECT_TRUE(p.amx_int8);
  EXPECT_NE(warning.find("SPECD_AMX='off' is not 0 or 1"), std::string::npos) << warning;
}

TEST(KernelPathsTest, ProcessChoiceHoldsTheTilePermission) {
  // Where the probe chose AMX it also obtained the OS permission for tile
  // data (else it would have fallen back with the OS's answer as reason).
  const KernelPaths& p = GetKernelPaths();
  if (!p.amx_int8) GTEST_SKIP() << "AMX off here: " << p.amx_reason;
  std::string error;
  EXPECT_TRUE(RequestAmxTileData(&error)) << error;
  EXPECT_NE(DescribeKernelPaths().find("amx-int8"), std::string::npos);
}

TEST(KernelPathsTest, BestPathPerCpu) {
  EXPECT_EQ(BestQuantDotIsa(CpuFeatures{}), QuantDotIsa::kScalar);
  EXPECT_EQ(BestQuantDotIsa(Avx2Only()), QuantDotIsa::kAvx2);
  CpuFeatures alder = Avx2Only();
  alder.avx_vnni = true;
  EXPECT_EQ(BestQuantDotIsa(alder), QuantDotIsa::kAvxVnni);
  EXPECT_EQ(BestQuantDotIsa(Avx512VnniBf16()), QuantDotIsa::kAvx512Vnni);
}

TEST(KernelPathsTest, FallbackIsExplained) {
  std::string warning;
  KernelPaths p = ChooseKernelPaths(Avx2Only(), "", &warning);
  EXPECT_TRUE(warning.empty());
  EXPECT_EQ(p.quant_dot, QuantDotIsa::kAvx2);
  EXPECT_NE(p.quant_dot_reason.find("AVX512-VNNI"), std::string::npos) << p.quant_dot_reason;
  EXPECT_EQ(p.bf16, Bf16DotPath::kHighway);
  EXPECT_NE(p.bf16_reason.find("unavailable"), std::string::npos);
  EXPECT_EQ(p.float_target, "AVX2");
  EXPECT_EQ(p.hwy_target_mask, 0);
}

TEST(KernelPathsTest, ForcedPathIsHonouredWhenSupported) {
  std::string warning;
  KernelPaths p = ChooseKernelPaths(Avx512VnniBf16(), "avx2", &warning);
  EXPECT_TRUE(warning.empty()) << warning;
  EXPECT_EQ(p.quant_dot, QuantDotIsa::kAvx2);
  EXPECT_EQ(p.bf16, Bf16DotPath::kHighway);  // capped with the rest
  EXPECT_EQ(p.float_target, "AVX2");
  EXPECT_EQ(p.hwy_target_mask & HWY_AVX3, 0);

  p = ChooseKernelPaths(Avx512VnniBf16(), "scalar", &warning);
  EXPECT_EQ(p.quant_dot, QuantDotIsa::kScalar);
  EXPECT_EQ(p.float_target, hwy::TargetName(HWY_STATIC_TARGET));  // the portable baseline
}

TEST(KernelPathsTest, ForcingAMissingPathWarnsAndIsIgnored) {
  std::string warning;
  KernelPaths p = ChooseKernelPaths(Avx2Only(), "avx512vnni", &warning);
  EXPECT_EQ(p.quant_dot, QuantDotIsa::kAvx2);
  EXPECT_NE(warning.find("lacks"), std::string::npos) << warning;

  warning.clear();
  p = ChooseKernelPaths(Avx2Only(), "sse9", &warning);
  EXPECT_EQ(p.quant_dot, QuantDotIsa::kAvx2);
  EXPECT_NE(warning.find("sse9"), std::string::npos) << warning;
}

TEST(KernelPathsTest, NamesRoundTrip) {
  for (QuantDotIsa isa : {QuantDotIsa::kScalar, QuantDotIsa::kAvx2, QuantDotIsa::kAvxVnni,
                          QuantDotIsa::kAvx512Vnni}) {
    auto parsed = ParseQuantDotIsa(QuantDotIsaName(isa));
    ASSERT_TRUE(parsed.has_value());
    EXPECT_EQ(*parsed, isa);
  }
  EXPECT_FALSE(ParseQuantDotIsa("AVX2").has_value());
}

TEST(KernelPathsTest, DescriptionNamesEveryFamily) {
  std::string d = DescribeKernelPaths();
  EXPECT_NE(d.find("q8_0/q4_0"), std::string::npos);
  EXPECT_NE(d.find("bf16"), std::string::npos);
  EXPECT_NE(d.find("f32/f16"), std::string::npos);
  EXPECT_NE(DescribeCpu().find("isa flags"), std::string::npos);
}

}  // namespace
}  // namespace specd
