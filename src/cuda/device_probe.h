// CUDA device probe: what this binary was built with and what the machine
// offers (driver, devices), or why there is nothing to use.
//
// The same header serves both builds. With SPECD_CUDA off (or no nvcc at
// configure time) ProbeDevices() reports built == false and a reason; it never
// touches CUDA. No CUDA header is included here, so callers compile without
// the toolkit.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace specd::cuda {

struct DeviceInfo {
  int index = 0;     // CUDA device ordinal (after CUDA_VISIBLE_DEVICES)
  std::string name;  // "NVIDIA H100 80GB HBM3"
  int cc_major = 0;  // compute capability, e.g. 9.0 -> (9, 0)
  int cc_minor = 0;
  size_t total_memory_bytes = 0;
  int sm_count = 0;  // streaming multiprocessors
  int memory_clock_khz = 0;       // peak memory clock; 0 if the driver does not say
  int memory_bus_width_bits = 0;  // global memory bus width; 0 if unknown
  // Empty when this build has kernels for the device; otherwise why not
  // ("built for sm_80 and newer, device is sm_75").
  std::string unsupported_reason;

  // Capability-registry key: "sm_90", "sm_120".
  std::string Arch() const;
  // Theoretical DRAM bandwidth in bytes/s, 2 (double data rate) * clock *
  // bus width / 8: the roofline of memory-bound kernels (H100 SXM: 3.35e12).
  // 0 when the clock or bus width is unknown.
  double PeakMemoryBandwidth() const;
};

struct ProbeResult {
  bool built = false;         // compiled with the CUDA toolkit
  std::string toolkit;        // toolkit version compiled against, "13.0"; "" if !built
  std::string architectures;  // CMAKE_CUDA_ARCHITECTURES, comma-separated: "80,86,89,90,100,120"
  int runtime_version = 0;    // cudaRuntimeGetVersion, 13000 for 13.0; 0 if unknown
  int driver_version = 0;     // cudaDriverGetVersion; 0 when no driver is loadable
  std::vector<DeviceInfo> devices;
  // Why no device can be used: empty iff !devices.empty(). Names the cause:
  // built without CUDA, driver missing (libcuda.so.1 not loadable), no
  // device, or the cudart error.
  std::string reason;

  int device_count() const { return static_cast<int>(devices.size()); }
};

// True when this binary was compiled with CUDA kernels (SPECD_CUDA on).
bool BuiltWithCuda();

// Queries the runtime and driver. Never throws or aborts; every failure ends
// up in `reason`. Thread-safe; each call queries again (cheap after the first,
// which loads the driver when there is one).
ProbeResult ProbeDevices();

// 13000 -> "13.0", 12080 -> "12.8" (CUDA's 1000 * major + 10 * minor); 0 -> "none".
std::string CudaVersionString(int version);

// Multi-line text for `specd doctor`, each line indented by two spaces.
std::string DescribeProbe(const ProbeResult& probe);

}  // namespace specd::cuda
