// The kernel configurations this CPU can run, for tests of bitwise and layout
// contracts: each is what `SPECD_KERNEL_ISA=<level>` with `SPECD_AMX=0|1`
// selects in a fresh process (ChooseKernelPaths), applied in-process, so one
// test run on an AMX machine exercises every lower level too, and a machine
// without AMX every level it has.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "platform/cpu_features.h"

namespace specd::kernels {

struct KernelPathCase {
  std::string name;  // "scalar", "avx2", "avxvnni", "avx512vnni", "avx512vnni+amx"
  KernelPaths paths;
};

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPECD_KERNEL_PATHS_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SPECD_KERNEL_PATHS_SANITIZED 1
#endif
#endif

// Every level the CPU supports with AMX off, then the best level with AMX on
// where the CPU, the OS and the build allow the tiles. Never empty.
// Sanitizer builds look for memory errors and races, not summation orders,
// and run several times slower: there, only the process's own choice (what
// the probe and SPECD_KERNEL_ISA / SPECD_AMX select); the release suite runs
// every path.
inline std::vector<KernelPathCase> KernelPathCasesOfThisCpu() {
  EnsureKernelPathsInitialized();
  const CpuFeatures& cpu = GetCpuFeatures();
  std::vector<KernelPathCase> cases;
#ifdef SPECD_KERNEL_PATHS_SANITIZED
  const KernelPaths& probe = GetKernelPaths();
  cases.push_back({std::string(QuantDotIsaName(probe.quant_dot)) + (probe.amx_int8 ? "+amx" : ""),
                   probe});
  (void)cpu;
  return cases;
#endif
  for (QuantDotIsa isa : {QuantDotIsa::kScalar, QuantDotIsa::kAvx2, QuantDotIsa::kAvxVnni,
                          QuantDotIsa::kAvx512Vnni}) {
    if (!CpuSupports(cpu, isa)) continue;
    cases.push_back({QuantDotIsaName(isa), ChooseKernelPaths(cpu, QuantDotIsaName(isa), nullptr,
                                                             /*amx_env=*/"0")});
  }
  KernelPaths amx = ChooseKernelPaths(cpu, "", nullptr, /*amx_env=*/"1");
  if (amx.amx_int8 && SetAmx(true)) {
    SetAmx(GetKernelPaths().amx_int8);
    cases.push_back({std::string(QuantDotIsaName(amx.quant_dot)) + "+amx", amx});
  }
  return cases;
}

// Applies one case for the scope (every kernel family: quantized dot, AMX,
// BF16, Highway float target) and restores the process's probe choice after.
// Like the setters it uses, only while no kernel runs.
class ScopedKernelPaths {
 public:
  explicit ScopedKernelPaths(const KernelPaths& p) {
    ok_ = SetQuantDotIsa(p.quant_dot) && SetAmx(p.amx_int8) && SetBf16Path(p.bf16);
    SetFloatTargets(p.hwy_target_mask);
  }
  ~ScopedKernelPaths() {
    const KernelPaths& probe = GetKernelPaths();
    SetQuantDotIsa(probe.quant_dot);
    SetAmx(probe.amx_int8);
    SetBf16Path(probe.bf16);
    SetFloatTargets(0);
  }
  ScopedKernelPaths(const ScopedKernelPaths&) = delete;
  ScopedKernelPaths& operator=(const ScopedKernelPaths&) = delete;
  // False when a setter refused (the case came from another CPU).
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

// Runs `body` once under every case of KernelPathCasesOfThisCpu() with a
// gtest trace naming the path and the float target; stops after the first
// fatal failure.
template <typename Body>
void ForEachKernelPath(Body body) {
  for (const KernelPathCase& c : KernelPathCasesOfThisCpu()) {
    ScopedKernelPaths paths(c.paths);
    SCOPED_TRACE("path " + c.name + ", float ops " + ActiveFloatTarget());
    body();
    if (::testing::Test::HasFatalFailure()) return;
  }
}

}  // namespace specd::kernels
