// The kernel configurations this CPU can run, for tests of bitwise and layout
// contracts: each is what `SPECD_KERNEL_ISA=<level>` with `SPECD_AMX=0|1`
// selects in a fresh process (ChooseKernelPaths), applied in-process, so one
// test run on an AMX machine exercises every lower level too, and a machine
// without AMX every level it has.
#pragma once

#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "platform/cpu_features.h"

namespace specd::kernels {

struct KernelPathCase {
  std::string name;  // "scalar", "avx2", "avxvnni", "avx512vnni", "avx512vnni+amx"
  KernelPaths paths;
};

// Every level the CPU supports with AMX off, then the best level with AMX on
// where the CPU, the OS and the build allow the tiles. Never empty.
inline std::vector<KernelPathCase> KernelPathCasesOfThisCpu() {
  EnsureKernelPathsInitialized();
  const CpuFeatures& cpu = GetCpuFeatures();
  std::vector<KernelPathCase> cases;
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

}  // namespace specd::kernels
