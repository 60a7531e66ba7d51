// CPU probe: which instruction sets this machine has, how many cores and how
// much cache, and which path each kernel family uses on it (with the reason).
//
// The binary is built for baseline x86-64 (never -march=native); the kernels
// pick their code path at run time from KernelPaths. Every choice can be forced
// with SPECD_KERNEL_ISA=scalar|avx2|avxvnni|avx512vnni; forcing a path the CPU
// lacks logs a warning and is ignored.
//
// Thread-safe: the probe runs once (first call) and its result is immutable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace specd {

struct CpuFeatures {
  std::string vendor;      // "GenuineIntel", "AuthenticAMD", "" when not x86
  std::string model_name;  // cpuid brand string, e.g. "AMD EPYC 9B45"
  // x86 flags, each true only when both the CPU and the OS (XCR0 state) allow it.
  bool sse42 = false;
  bool avx = false;
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512_vnni = false;
  bool avx512_bf16 = false;
  bool avx_vnni = false;
  // AMX: CPU flags and the OS's XCR0 tile state (XTILECFG, XTILEDATA). Using
  // the tiles also needs the per-process permission (RequestAmxTileData).
  bool amx_tile = false;
  bool amx_int8 = false;
  bool amx_bf16 = false;
  // Highway's runtime-supported targets (bitmask of HWY_* values) and the best
  // one's name ("AVX3", "AVX2", "EMU128", ...).
  int64_t hwy_targets = 0;
  std::string hwy_best_target;
  int logical_cpus = 1;  // online CPUs this process may run on (affinity mask)
  // Data cache sizes in bytes; 0 when the OS does not report them.
  int64_t l1d_bytes = 0;
  int64_t l2_bytes = 0;
  int64_t l3_bytes = 0;

  // "avx2 fma f16c avx512f ..." (only the flags that are present).
  std::string FlagString() const;
};

// Probes once and caches. Never fails: unknown CPUs report no SIMD flags.
const CpuFeatures& GetCpuFeatures();
// Probes without caching (tests).
CpuFeatures ProbeCpuFeatures();

// Integer dot product path used by the Q8_0 / Q4_0 matmuls, best first.
enum class QuantDotIsa : uint8_t { kScalar, kAvx2, kAvxVnni, kAvx512Vnni };
const char* QuantDotIsaName(QuantDotIsa isa);  // "scalar", "avx2", "avxvnni", "avx512vnni"
std::optional<QuantDotIsa> ParseQuantDotIsa(std::string_view name);
// True when `cpu` can run `isa`.
bool CpuSupports(const CpuFeatures& cpu, QuantDotIsa isa);
// The best path `cpu` supports.
QuantDotIsa BestQuantDotIsa(const CpuFeatures& cpu);

// Path used by the BF16 matmul: vdpbf16ps (activations rounded to bf16) or
// Highway shift-convert + FMA (activations stay f32).
enum class Bf16DotPath : uint8_t { kHighway, kAvx512Bf16 };

// Asks the OS for permission to use AMX tile data in this process (Linux
// arch_prctl ARCH_REQ_XCOMP_PERM; inherited by forked ranks). Once per
// process; false with the OS's answer in `error` when refused or unsupported.
bool RequestAmxTileData(std::string* error);

// The choice for every kernel family, with a reason a person can act on.
struct KernelPaths {
  QuantDotIsa quant_dot = QuantDotIsa::kScalar;
  std::string quant_dot_reason;
  Bf16DotPath bf16 = Bf16DotPath::kHighway;
  std::string bf16_reason;
  // AMX-INT8 tiles for Q8_0/Q4_0 matmuls of many tokens (prefill, verify);
  // the one-token path stays quant_dot. Off with SPECD_AMX=0 or when
  // SPECD_KERNEL_ISA caps the path below avx512vnni.
  bool amx_int8 = false;
  std::string amx_reason;
  // Highway target used by the float ops (f32/f16 matmul, norms, rope,
  // softmax, attention) and the bitmask the kernels restrict Highway to
  // (0 = no restriction).
  std::string float_target;
  int64_t hwy_target_mask = 0;
  std::string float_reason;
};

// Chooses paths for `cpu`, honouring `forced` (the value of SPECD_KERNEL_ISA,
// empty for none) and `amx_env` (the value of SPECD_AMX: "0" turns AMX off;
// other values than "0" / "1" are ignored with a warning).
// A forced path the CPU lacks, or an unknown value, is ignored with a warning
// appended to `warning` (when non-null). Pure: the AMX permission is asked
// for by GetKernelPaths.
KernelPaths ChooseKernelPaths(const CpuFeatures& cpu, std::string_view forced,
                              std::string* warning, std::string_view amx_env = "");
// The process-wide choice from GetCpuFeatures() and SPECD_KERNEL_ISA; computed
// once, and logged once (INFO for a fallback, WARN for an ignored override).
const KernelPaths& GetKernelPaths();

// Multi-line CPU section for `specd doctor`: model, flags, cores, caches, and
// the path of each kernel family with its reason.
std::string DescribeCpu();
std::string DescribeKernelPaths();

}  // namespace specd
