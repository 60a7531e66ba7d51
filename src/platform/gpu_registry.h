// GPU capability registry: what specd does on an NVIDIA GPU of a given
// compute capability, and why.
//
// One entry per architecture specd builds for (sm_80, sm_86, sm_89, sm_90,
// sm_100, sm_120). A lookup never fails and never throws; it says which entry
// it used:
//   - exact: the device's capability has an entry;
//   - nearest family: same major, a minor without an entry (8.7 -> sm_86,
//     10.3 -> sm_100, 12.1 -> sm_120): the entry with the highest minor not
//     above the device's, whose SASS the device runs (binary compatibility
//     within a major);
//   - generic: a major with no entry (say 13.0): kernels are JIT-compiled
//     from the newest PTX in the binary, specd's own IPC collectives are
//     off (their flag protocol is verified per architecture) and NCCL does
//     every collective. One log line per capability names what was disabled;
//   - unsupported: below 8.0 (no BF16 tensor cores; nothing is built for
//     it): the device is not used and the CPU path runs.
//
// The table is immutable; lookups are thread-safe (logging is LogOnce).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specd {

// One architecture's facts and specd's choices for it.
struct GpuArchEntry {
  int major;
  int minor;
  const char* arch;        // "sm_90"
  const char* examples;    // "H100, H200, GH200"
  bool fp8_tensor_cores;   // e4m3/e5m2 MMA
  bool tma;                // Tensor Memory Accelerator (bulk async copies)
  bool nvls_multimem;      // NVLink SHARP multimem instructions (with NVSwitch)
  bool nvlink_typical;     // data-centre boards with NVLink; else PCIe P2P at best
  // specd's own allreduce over CUDA IPC buffers: one-shot up to this size,
  // two-shot up to two_shot_max_bytes, NCCL above.
  size_t one_shot_max_bytes;
  size_t two_shot_max_bytes;
  const char* source;      // where the thresholds come from
};

enum class GpuMatch { kExact, kNearestFamily, kGeneric, kUnsupported };
const char* GpuMatchName(GpuMatch m);  // "exact", "nearest family", "generic", "unsupported"

// A feature (kernel family or collective) and whether it is on, with why.
struct GpuFeature {
  std::string name;
  bool enabled = false;
  std::string why;
};

struct GpuCapability {
  int major = 0;
  int minor = 0;
  std::string arch;    // the device's own: "sm_130"
  GpuMatch match = GpuMatch::kGeneric;
  std::string entry;   // table entry used: "sm_120"; "generic" or "none"
  std::string code;    // what the device executes: "sm_90 SASS", "PTX JIT from compute_120"
  std::vector<GpuFeature> kernels;
  std::vector<GpuFeature> collectives;
  size_t one_shot_max_bytes = 0;  // 0: specd's IPC allreduce is off
  size_t two_shot_max_bytes = 0;
  std::string note;    // one sentence: why this entry (the log line for generic)
};

std::span<const GpuArchEntry> GpuArchTable();

// `built_archs`: the binary's CUDA architectures, comma-separated ("80,86,
// 89,90,100,120"); it decides SASS vs PTX JIT. Empty: the table's own list.
GpuCapability LookupGpuCapability(int major, int minor, std::string_view built_archs = {});

// "13.0" or "13" -> (13, 0); false for anything else.
bool ParseComputeCapability(std::string_view text, int* major, int* minor);

// Multi-line text for `specd doctor`, lines indented by two spaces.
std::string DescribeGpuCapability(const GpuCapability& cap);
// The whole table, one line per entry, indented by two spaces.
std::string DescribeGpuArchTable();

}  // namespace specd
