#include "platform/cpu_features.h"

#include <hwy/highway.h>
#include <hwy/targets.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "base/env.h"
#include "base/logging.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define SPECD_X86 1
#else
#define SPECD_X86 0
#endif

namespace specd {
namespace {

constexpr const char* kStage = "cpu probe";

#if SPECD_X86
struct Regs {
  uint32_t a = 0, b = 0, c = 0, d = 0;
};

Regs Cpuid(uint32_t leaf, uint32_t subleaf) {
  Regs r;
  if (!__get_cpuid_count(leaf, subleaf, &r.a, &r.b, &r.c, &r.d)) r = Regs{};
  return r;
}

// XCR0: which register state the OS saves on context switch. A CPU flag is
// usable only when the OS also saves the registers it needs.
uint64_t Xgetbv0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

bool Bit(uint32_t v, int bit) { return (v >> bit) & 1u; }

void ProbeX86(CpuFeatures& f) {
  Regs r0 = Cpuid(0, 0);
  char vendor[13] = {};
  std::memcpy(vendor + 0, &r0.b, 4);
  std::memcpy(vendor + 4, &r0.d, 4);
  std::memcpy(vendor + 8, &r0.c, 4);
  f.vendor = vendor;
  uint32_t max_leaf = r0.a;

  Regs ext = Cpuid(0x80000000u, 0);
  if (ext.a >= 0x80000004u) {
    char brand[49] = {};
    for (uint32_t i = 0; i < 3; ++i) {
      Regs r = Cpuid(0x80000002u + i, 0);
      std::memcpy(brand + 16 * i + 0, &r.a, 4);
      std::memcpy(brand + 16 * i + 4, &r.b, 4);
      std::memcpy(brand + 16 * i + 8, &r.c, 4);
      std::memcpy(brand + 16 * i + 12, &r.d, 4);
    }
    std::string s = brand;
    size_t b = s.find_first_not_of(' ');
    size_t e = s.find_last_not_of(' ');
    f.model_name = b == std::string::npos ? "" : s.substr(b, e - b + 1);
  }

  Regs r1 = Cpuid(1, 0);
  bool osxsave = Bit(r1.c, 27);
  uint64_t xcr0 = osxsave ? Xgetbv0() : 0;
  bool os_avx = (xcr0 & 0x6) == 0x6;             // XMM and YMM state
  bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  // opmask, ZMM_Hi256, Hi16_ZMM
  f.sse42 = Bit(r1.c, 20);
  f.avx = os_avx && Bit(r1.c, 28);
  f.fma = f.avx && Bit(r1.c, 12);
  f.f16c = f.avx && Bit(r1.c, 29);
  // XTILECFG (bit 17) and XTILEDATA (bit 18) state enabled by the OS.
  bool os_amx = (xcr0 & 0x60000) == 0x60000;
  if (max_leaf >= 7) {
    Regs r7 = Cpuid(7, 0);
    f.amx_tile = os_amx && Bit(r7.d, 24);
    f.amx_int8 = f.amx_tile && Bit(r7.d, 25);
    f.amx_bf16 = f.amx_tile && Bit(r7.d, 22);
    f.avx2 = f.avx && Bit(r7.b, 5);
    f.avx512f = os_avx512 && Bit(r7.b, 16);
    f.avx512bw = f.avx512f && Bit(r7.b, 30);
    f.avx512vl = f.avx512f && Bit(r7.b, 31);
    f.avx512_vnni = f.avx512f && Bit(r7.c, 11);
    if (r7.a >= 1) {
      Regs r71 = Cpuid(7, 1);
      f.avx_vnni = f.avx2 && Bit(r71.a, 4);
      f.avx512_bf16 = f.avx512f && Bit(r71.a, 5);
    }
  }
}
#endif

int CountCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

// Size of cpu0's level-`level` data/unified cache from sysfs ("32768K"), 0 when
// absent. Preferred over sysconf: glibc's AMD path reports L3 times the core count
// of the package (320 MiB for a 32 MiB L3 seen on a 2-vCPU EPYC guest).
int64_t SysfsCacheBytes(int level) {
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream lv(dir + "level"), ty(dir + "type"), sz(dir + "size");
    int l = 0;
    std::string type, size;
    if (!(lv >> l) || !(ty >> type) || !(sz >> size)) continue;
    if (l != level || type == "Instruction" || size.empty()) continue;
    int64_t v = std::strtoll(size.c_str(), nullptr, 10);
    const char unit = size.back();
    if (unit == 'K') v <<= 10;
    if (unit == 'M') v <<= 20;
    if (v > 0) return v;
  }
  return 0;
}

int64_t CacheBytes(int level, int sysconf_name) {
  if (int64_t v = SysfsCacheBytes(level); v > 0) return v;
  if (sysconf_name == 0) return 0;
  long v = sysconf(sysconf_name);
  return v > 0 ? v : 0;
}

// Falls back to /proc/cpuinfo on non-x86 (or when cpuid has no brand string).
std::string ModelNameFromProcCpuinfo() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        size_t b = line.find_first_not_of(" \t", colon + 1);
        if (b != std::string::npos) return line.substr(b);
      }
    }
  }
  return "unknown";
}

int64_t BestTarget(int64_t targets) {
  // Highway numbers better targets with lower bits.
  return targets & -targets;
}

}  // namespace

std::string CpuFeatures::FlagString() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(sse42, "sse4.2");
  add(avx, "avx");
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx_vnni, "avx_vnni");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512_vnni, "avx512_vnni");
  add(avx512_bf16, "avx512_bf16");
  add(amx_tile, "amx_tile");
  add(amx_int8, "amx_int8");
  add(amx_bf16, "amx_bf16");
  return s.empty() ? "(none)" : s;
}

CpuFeatures ProbeCpuFeatures() {
  CpuFeatures f;
#if SPECD_X86
  ProbeX86(f);
#endif
  if (f.model_name.empty()) f.model_name = ModelNameFromProcCpuinfo();
  f.hwy_targets = hwy::SupportedTargets();
  f.hwy_best_target = hwy::TargetName(BestTarget(f.hwy_targets & HWY_TARGETS));
  f.logical_cpus = CountCpus();
#ifndef _SC_LEVEL1_DCACHE_SIZE
#define _SC_LEVEL1_DCACHE_SIZE 0
#define _SC_LEVEL2_CACHE_SIZE 0
#define _SC_LEVEL3_CACHE_SIZE 0
#endif
  f.l1d_bytes = CacheBytes(1, _SC_LEVEL1_DCACHE_SIZE);
  f.l2_bytes = CacheBytes(2, _SC_LEVEL2_CACHE_SIZE);
  f.l3_bytes = CacheBytes(3, _SC_LEVEL3_CACHE_SIZE);
  return f;
}

const CpuFeatures& GetCpuFeatures() {
  static const CpuFeatures features = ProbeCpuFeatures();
  return features;
}

const char* QuantDotIsaName(QuantDotIsa isa) {
  switch (isa) {
    case QuantDotIsa::kScalar: return "scalar";
    case QuantDotIsa::kAvx2: return "avx2";
    case QuantDotIsa::kAvxVnni: return "avxvnni";
    case QuantDotIsa::kAvx512Vnni: return "avx512vnni";
  }
  return "?";
}

std::optional<QuantDotIsa> ParseQuantDotIsa(std::string_view name) {
  for (QuantDotIsa isa : {QuantDotIsa::kScalar, QuantDotIsa::kAvx2, QuantDotIsa::kAvxVnni,
                          QuantDotIsa::kAvx512Vnni}) {
    if (name == QuantDotIsaName(isa)) return isa;
  }
  return std::nullopt;
}

bool CpuSupports(const CpuFeatures& cpu, QuantDotIsa isa) {
  // Every SIMD path also converts the fp16 block scales with F16C and uses FMA.
  bool base = cpu.avx2 && cpu.fma && cpu.f16c;
  switch (isa) {
    case QuantDotIsa::kScalar: return true;
    case QuantDotIsa::kAvx2: return base;
    case QuantDotIsa::kAvxVnni: return base && cpu.avx_vnni;
    case QuantDotIsa::kAvx512Vnni:
      return base && cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512_vnni;
  }
  return false;
}

QuantDotIsa BestQuantDotIsa(const CpuFeatures& cpu) {
  for (QuantDotIsa isa : {QuantDotIsa::kAvx512Vnni, QuantDotIsa::kAvxVnni, QuantDotIsa::kAvx2}) {
    if (CpuSupports(cpu, isa)) return isa;
  }
  return QuantDotIsa::kScalar;
}

bool RequestAmxTileData(std::string* error) {
#if SPECD_X86 && defined(__linux__)
  static const std::string result = [] {
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0) return std::string();
    return std::string("arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) failed: ") +
           std::strerror(errno);
  }();
#else
  static const std::string result = "AMX tile permission is only requested on x86-64 Linux";
#endif
  if (!result.empty() && error != nullptr) *error = result;
  return result.empty();
}

KernelPaths ChooseKernelPaths(const CpuFeatures& cpu, std::string_view forced,
                              std::string* warning, std::string_view amx_env) {
  KernelPaths p;
  std::optional<QuantDotIsa> want;
  if (!forced.empty()) {
    want = ParseQuantDotIsa(forced);
    if (!want) {
      if (warning) {
        *warning += "SPECD_KERNEL_ISA='" + std::string(forced) +
                    "' is not one of scalar, avx2, avxvnni, avx512vnni: ignored";
      }
    } else if (!CpuSupports(cpu, *want)) {
      if (warning) {
        *warning += "SPECD_KERNEL_ISA=" + std::string(forced) +
                    " but this CPU lacks it (flags: " + cpu.FlagString() + "): ignored";
      }
      want.reset();
    }
  }

  // Quantized integer dot product.
  QuantDotIsa best = BestQuantDotIsa(cpu);
  if (want) {
    p.quant_dot = *want;
    p.quant_dot_reason = "forced by SPECD_KERNEL_ISA";
  } else {
    p.quant_dot = best;
    switch (best) {
      case QuantDotIsa::kAvx512Vnni:
        p.quant_dot_reason = "AVX512-VNNI present: 512-bit vpdpbusd int8 dot";
        break;
      case QuantDotIsa::kAvxVnni:
        p.quant_dot_reason = "AVX512-VNNI unavailable: using AVX-VNNI 256-bit int8 dot";
        break;
      case QuantDotIsa::kAvx2:
        p.quant_dot_reason = "AVX512-VNNI and AVX-VNNI unavailable: using AVX2 int8 dot";
        break;
      case QuantDotIsa::kScalar:
        p.quant_dot_reason = "AVX2/FMA/F16C unavailable: using scalar int8 dot";
        break;
    }
  }

  // Float ops via Highway; a forced ISA also caps Highway's target.
  int64_t targets = cpu.hwy_targets & HWY_TARGETS;
  if (want) {
    int64_t allowed = 0;
    switch (*want) {
      case QuantDotIsa::kScalar: allowed = HWY_EMU128 | HWY_SCALAR; break;
      case QuantDotIsa::kAvx2:
      case QuantDotIsa::kAvxVnni:
        allowed = HWY_AVX2 | HWY_SSE4 | HWY_SSSE3 | HWY_EMU128 | HWY_SCALAR;
        break;
      case QuantDotIsa::kAvx512Vnni: allowed = 0; break;
    }
    if (allowed != 0 && (targets & allowed) != 0) {
      targets &= allowed;
      p.hwy_target_mask = targets;
    }
  }
  p.float_target = hwy::TargetName(BestTarget(targets));
  if (p.hwy_target_mask != 0) {
    p.float_reason = "capped by SPECD_KERNEL_ISA";
  } else if (targets & (HWY_AVX3 | HWY_AVX3_DL)) {
    p.float_reason = "AVX-512 present: Highway 512-bit vectors (F16C convert + FMA)";
  } else if (targets & HWY_AVX2) {
    p.float_reason = "AVX-512 unavailable: using Highway AVX2 (256-bit) float ops";
  } else {
    p.float_reason = "AVX2 unavailable: using Highway " + p.float_target + " float ops";
  }

  // BF16 matmul: vdpbf16ps needs the AVX512-BF16 extension and the 512-bit path.
  const bool capped = want.has_value() && want.value() != QuantDotIsa::kAvx512Vnni;
  bool bf16_ok = cpu.avx512_bf16 && cpu.avx512bw && cpu.avx512vl && cpu.fma && !capped;
  if (bf16_ok) {
    p.bf16 = Bf16DotPath::kAvx512Bf16;
    p.bf16_reason = "AVX512-BF16 present: vdpbf16ps (activations rounded to bf16)";
  } else {
    p.bf16 = Bf16DotPath::kHighway;
    p.bf16_reason = capped
                        ? "capped by SPECD_KERNEL_ISA: bf16 shift-convert + FMA"
                        : "AVX512-BF16 unavailable: using bf16 shift-convert + FMA";
  }

  // AMX-INT8: the tile kernels scale with AVX-512, so they ride on the
  // avx512vnni path.
  if (!amx_env.empty() && amx_env != "0" && amx_env != "1" && warning != nullptr) {
    if (!warning->empty()) *warning += "; ";
    *warning += "SPECD_AMX='" + std::string(amx_env) + "' is not 0 or 1: ignored";
  }
  if (amx_env == "0") {
    p.amx_reason = "disabled by SPECD_AMX=0";
  } else if (!cpu.amx_tile || !cpu.amx_int8) {
    p.amx_reason = "AMX-INT8 unavailable (CPU or OS lacks tile state)";
  } else if (p.quant_dot != QuantDotIsa::kAvx512Vnni) {
    p.amx_reason = std::string("q8_0/q4_0 path is ") + QuantDotIsaName(p.quant_dot) +
                   ", the AMX kernels need avx512vnni";
  } else {
    p.amx_int8 = true;
    p.amx_reason = "AMX-INT8 present: 16x16-token tiles (tdpbssd) for multi-token matmuls";
  }
  return p;
}

const KernelPaths& GetKernelPaths() {
  static const KernelPaths paths = [] {
    const std::string env = GetEnv(EnvVar::kKernelIsa).value_or("");
    std::string warning;
    const std::string amx_env = GetEnv(EnvVar::kAmx).value_or("");
    KernelPaths p = ChooseKernelPaths(GetCpuFeatures(), env, &warning, amx_env);
    if (!warning.empty()) LOG_WARN(kStage, "{}", warning);
    std::string amx_error;
    if (p.amx_int8 && !RequestAmxTileData(&amx_error)) {
      p.amx_int8 = false;
      p.amx_reason = "AMX-INT8 present but unusable: " + amx_error;
    }
    if (!p.amx_int8 && GetCpuFeatures().amx_int8) {
      LogOnce(LogLevel::kInfo, "kernel-path-amx", kStage, "amx matmul: off (" + p.amx_reason + ")");
    }
    if (p.quant_dot != QuantDotIsa::kAvx512Vnni) {
      LogOnce(LogLevel::kInfo, "kernel-path-quant", kStage,
              std::string("q8_0/q4_0 matmul: ") + QuantDotIsaName(p.quant_dot) + " (" +
                  p.quant_dot_reason + ")");
    }
    if (p.bf16 != Bf16DotPath::kAvx512Bf16) {
      LogOnce(LogLevel::kInfo, "kernel-path-bf16", kStage, "bf16 matmul: " + p.bf16_reason);
    }
    if (p.float_target != "AVX3" && p.float_target != "AVX3_DL") {
      LogOnce(LogLevel::kInfo, "kernel-path-float", kStage,
              "float ops: Highway " + p.float_target + " (" + p.float_reason + ")");
    }
    return p;
  }();
  return paths;
}

std::string DescribeCpu() {
  const CpuFeatures& f = GetCpuFeatures();
  auto kib = [](int64_t b) { return b > 0 ? std::to_string(b / 1024) + " KiB" : "unknown"; };
  std::string s;
  s += "  model:        " + f.model_name + (f.vendor.empty() ? "" : " (" + f.vendor + ")") + "\n";
  s += "  logical cpus: " + std::to_string(f.logical_cpus) + "\n";
  s += "  caches:       L1d " + kib(f.l1d_bytes) + ", L2 " + kib(f.l2_bytes) + ", L3 " +
       kib(f.l3_bytes) + "\n";
  s += "  isa flags:    " + f.FlagString() + "\n";
  s += "  highway:      best target " + f.hwy_best_target + "\n";
  return s;
}

std::string DescribeKernelPaths() {
  const KernelPaths& p = GetKernelPaths();
  std::string s;
  s += "  q8_0/q4_0 matmul: " + std::string(QuantDotIsaName(p.quant_dot)) + " (" +
       p.quant_dot_reason + ")\n";
  s += "  bf16 matmul:      " +
       std::string(p.bf16 == Bf16DotPath::kAvx512Bf16 ? "avx512bf16" : "highway-" + p.float_target) +
       " (" + p.bf16_reason + ")\n";
  s += "  q8_0/q4_0 multi-token matmul: " +
       std::string(p.amx_int8 ? "amx-int8" : QuantDotIsaName(p.quant_dot)) + " (" +
       p.amx_reason + ")\n";
  const bool amx_bf16 = p.amx_int8 && GetCpuFeatures().amx_bf16 && p.bf16 == Bf16DotPath::kAvx512Bf16;
  s += "  bf16 multi-token matmul: " +
       std::string(amx_bf16 ? "amx-bf16 (AMX-BF16 present: tdpbf16ps, same bf16 activations)"
                            : (p.bf16 == Bf16DotPath::kAvx512Bf16 ? "avx512bf16" : "highway") +
                                  std::string(" (") +
                                  (p.amx_int8 ? "no AMX-BF16" : p.amx_reason) + ")") +
       "\n";
  s += "  f32/f16 matmul, norms, rope, softmax, attention: highway-" + p.float_target + " (" +
       p.float_reason + ")\n";
  return s;
}

}  // namespace specd
