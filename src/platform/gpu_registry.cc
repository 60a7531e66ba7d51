#include "platform/gpu_registry.h"

#include <charconv>

#include "base/logging.h"

namespace specd {
namespace {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * 1024;

// Thresholds are starting values, not yet measured by specd on a GPU: the
// crossovers public custom-allreduce implementations use for NVLink at
// 2-4 ranks (one-shot below 512 KiB, custom up to 8 MiB), halved for PCIe
// boards where P2P reads are slower. `specd comm-bench` on the device
// replaces them.
constexpr const char* kNvlinkSource =
    "starting values for NVLink at 2-4 ranks, not yet measured by specd on this architecture";
constexpr const char* kPcieSource =
    "starting values for PCIe P2P, not yet measured by specd on this architecture";

constexpr GpuArchEntry kTable[] = {
    {8, 0, "sm_80", "A100, A30", false, false, false, true, 512 * KiB, 8 * MiB, kNvlinkSource},
    {8, 6, "sm_86", "A10, A40, RTX 30xx, RTX A6000", false, false, false, false, 256 * KiB,
     2 * MiB, kPcieSource},
    {8, 9, "sm_89", "L4, L40S, RTX 40xx, RTX 6000 Ada", true, false, false, false, 256 * KiB,
     2 * MiB, kPcieSource},
    {9, 0, "sm_90", "H100, H200, GH200", true, true, true, true, 512 * KiB, 8 * MiB,
     kNvlinkSource},
    {10, 0, "sm_100", "B200, GB200", true, true, true, true, 512 * KiB, 8 * MiB, kNvlinkSource},
    {12, 0, "sm_120", "RTX 50xx, RTX PRO 6000 Blackwell", true, true, false, false, 256 * KiB,
     2 * MiB, kPcieSource},
};

constexpr std::string_view kDefaultBuiltArchs = "80,86,89,90,100,120";

std::string ArchName(int major, int minor) {
  return "sm_" + std::to_string(major * 10 + minor);
}

// The architectures the binary holds code for, as major*10+minor numbers.
std::vector<int> ParseArchList(std::string_view list) {
  std::vector<int> out;
  size_t i = 0;
  while (i < list.size()) {
    size_t j = list.find_first_of(",;", i);
    if (j == std::string_view::npos) j = list.size();
    std::string_view item = list.substr(i, j - i);
    // CMake forms: "90", "90-real", "90-virtual", "90a".
    int v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec == std::errc() && v > 0 && item.substr(p - item.data()) != "-real") out.push_back(v);
    i = j + 1;
  }
  return out;
}

void AddCommonKernels(GpuCapability& c, const std::string& how) {
  c.kernels.push_back({"RMSNorm", true, how});
  c.kernels.push_back({"BF16 GEMV (decode)", true, how});
}

// The collectives for a device that has a table entry.
void AddCollectives(GpuCapability& c, const GpuArchEntry& e) {
  c.collectives.push_back(
      {"NCCL", true, "always available: the fallback above the IPC thresholds and for every "
                     "collective the IPC path does not cover"});
  const std::string link =
      e.nvlink_typical ? "NVLink peer access on these boards"
                       : "PCIe peer access where the driver allows it (many consumer boards do "
                         "not; checked when the rank group starts, NCCL otherwise)";
  c.collectives.push_back({"one-shot IPC allreduce", true, link});
  c.collectives.push_back({"two-shot IPC allreduce", true, link});
  c.collectives.push_back({"fused allreduce + residual + RMSNorm", true,
                           "one-shot IPC allreduce with the norm in the same kernel"});
  c.collectives.push_back(
      {"NVLS multimem allreduce", false,
       e.nvls_multimem ? "the hardware has it (with NVSwitch); specd leaves it to NCCL's NVLS "
                         "algorithm"
                       : "no multimem instructions on " + std::string(e.arch)});
  c.one_shot_max_bytes = e.one_shot_max_bytes;
  c.two_shot_max_bytes = e.two_shot_max_bytes;
}

}  // namespace

const char* GpuMatchName(GpuMatch m) {
  switch (m) {
    case GpuMatch::kExact: return "exact";
    case GpuMatch::kNearestFamily: return "nearest family";
    case GpuMatch::kGeneric: return "generic";
    case GpuMatch::kUnsupported: return "unsupported";
  }
  return "?";
}

std::span<const GpuArchEntry> GpuArchTable() { return kTable; }

bool ParseComputeCapability(std::string_view text, int* major, int* minor) {
  int ma = 0, mi = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  auto [p, ec] = std::from_chars(b, e, ma);
  if (ec != std::errc() || p == b || ma < 1 || ma > 99) return false;
  if (p != e) {
    if (*p != '.') return false;
    auto [q, ec2] = std::from_chars(p + 1, e, mi);
    if (ec2 != std::errc() || q == p + 1 || q != e || mi < 0 || mi > 9) return false;
  }
  *major = ma;
  *minor = mi;
  return true;
}

GpuCapability LookupGpuCapability(int major, int minor, std::string_view built_archs) {
  GpuCapability c;
  c.major = major;
  c.minor = minor;
  c.arch = ArchName(major, minor);
  const std::vector<int> built =
      ParseArchList(built_archs.empty() ? kDefaultBuiltArchs : built_archs);
  const std::string cc = std::to_string(major) + "." + std::to_string(minor);

  if (major < 8) {
    c.match = GpuMatch::kUnsupported;
    c.entry = "none";
    c.code = "none";
    c.note = "compute capability " + cc + " is below 8.0: specd builds GPU kernels for sm_80 "
             "and newer (BF16 tensor cores), so this device is not used and the CPU runs";
    LogOnce(LogLevel::kWarn, "gpu-registry-" + c.arch, "cuda probe", c.note);
    return c;
  }

  // Same major: the entry with the highest minor not above the device's.
  const GpuArchEntry* best = nullptr;
  for (const GpuArchEntry& e : kTable) {
    if (e.major == major && e.minor <= minor && (best == nullptr || e.minor > best->minor)) {
      best = &e;
    }
  }
  if (best != nullptr) {
    c.match = best->minor == minor ? GpuMatch::kExact : GpuMatch::kNearestFamily;
    c.entry = best->arch;
    // SASS for sm_XY runs on sm_XZ (Z >= Y); pick the newest such SASS built.
    int sass = 0;
    for (int v : built) {
      if (v / 10 == major && v % 10 <= minor && v > sass) sass = v;
    }
    c.code = sass > 0 ? "sm_" + std::to_string(sass) + " SASS"
                      : "PTX JIT (the binary has no " + std::to_string(major) + ".x SASS)";
    AddCommonKernels(c, "built for every architecture from sm_80");
    AddCollectives(c, *best);
    if (c.match == GpuMatch::kExact) {
      c.note = std::string(best->arch) + " (" + best->examples + "): " + best->source;
    } else {
      c.note = "no entry for compute capability " + cc + ": using " + best->arch + " (" +
               best->examples + "), the same major";
      LogOnce(LogLevel::kInfo, "gpu-registry-" + c.arch, "cuda probe", c.note);
    }
    return c;
  }

  // A major with no entry: the portable path only.
  c.match = GpuMatch::kGeneric;
  c.entry = "generic";
  int ptx = 0;
  for (int v : built) {
    if (v <= major * 10 + minor && v > ptx) ptx = v;
  }
  c.code = ptx > 0 ? "PTX JIT from compute_" + std::to_string(ptx)
                   : "none (the binary holds no PTX this device can run)";
  const std::string how = ptx > 0 ? "JIT-compiled by the driver from compute_" +
                                        std::to_string(ptx) + " PTX"
                                  : "no code for this device";
  AddCommonKernels(c, how);
  if (ptx == 0) {
    for (GpuFeature& f : c.kernels) f.enabled = false;
  }
  c.collectives.push_back({"NCCL", true, "every collective on an architecture without an entry"});
  const std::string off = "off on an architecture without an entry: its flag protocol relies on "
                          "memory-ordering behaviour verified per architecture";
  c.collectives.push_back({"one-shot IPC allreduce", false, off});
  c.collectives.push_back({"two-shot IPC allreduce", false, off});
  c.collectives.push_back({"fused allreduce + residual + RMSNorm", false,
                           "off with the one-shot IPC allreduce it is built on"});
  c.collectives.push_back({"NVLS multimem allreduce", false, "left to NCCL"});
  c.note = "GPU " + c.arch + " (compute capability " + cc + ") has no registry entry: generic " +
           "path (kernels: " + c.code + "; disabled: one-shot and two-shot IPC allreduce, fused " +
           "allreduce + RMSNorm; collectives via NCCL)";
  LogOnce(LogLevel::kWarn, "gpu-registry-" + c.arch, "cuda probe", c.note);
  return c;
}

std::string DescribeGpuCapability(const GpuCapability& c) {
  std::string s = "  " + c.arch + " (" + std::to_string(c.major) + "." +
                  std::to_string(c.minor) + "): " + GpuMatchName(c.match) + " [entry " + c.entry +
                  "; runs " + c.code + "]\n    " + c.note + "\n";
  for (const GpuFeature& f : c.kernels) {
    s += "    kernel " + f.name + ": " + (f.enabled ? "on" : "off") + " (" + f.why + ")\n";
  }
  for (const GpuFeature& f : c.collectives) {
    s += "    collective " + f.name + ": " + (f.enabled ? "on" : "off") + " (" + f.why + ")\n";
  }
  if (c.one_shot_max_bytes > 0) {
    s += "    IPC allreduce sizes: one-shot <= " + std::to_string(c.one_shot_max_bytes / KiB) +
         " KiB, two-shot <= " + std::to_string(c.two_shot_max_bytes / MiB) + " MiB, NCCL above\n";
  }
  return s;
}

std::string DescribeGpuArchTable() {
  std::string s;
  for (const GpuArchEntry& e : kTable) {
    s += "  " + std::string(e.arch) + " (" + std::to_string(e.major) + "." +
         std::to_string(e.minor) + ", " + e.examples + "): " +
         (e.fp8_tensor_cores ? "FP8 MMA" : "BF16 MMA") + (e.tma ? ", TMA" : "") +
         (e.nvls_multimem ? ", NVLS multimem" : "") +
         (e.nvlink_typical ? ", NVLink" : ", PCIe") + "; IPC allreduce one-shot <= " +
         std::to_string(e.one_shot_max_bytes / KiB) + " KiB, two-shot <= " +
         std::to_string(e.two_shot_max_bytes / MiB) + " MiB\n";
  }
  s += "  other majors (e.g. 13.0): generic path (PTX JIT, NCCL collectives); below 8.0: unused\n";
  return s;
}

}  // namespace specd
