// Build-independent half of the probe: formatting and the architecture check.
#include "cuda/device_probe.h"

#include <cstdio>

namespace specd::cuda {

std::string DeviceInfo::Arch() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }

double DeviceInfo::PeakMemoryBandwidth() const {
  return 2.0 * memory_clock_khz * 1000.0 * memory_bus_width_bits / 8.0;
}

std::string CudaVersionString(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string DescribeProbe(const ProbeResult& p) {
  std::string s;
  if (!p.built) {
    s += "  " + p.reason + "\n";
    return s;
  }
  s += "  built with toolkit " + p.toolkit + " for architectures " + p.architectures + "\n";
  s += "  runtime " + CudaVersionString(p.runtime_version) + ", driver " +
       (p.driver_version > 0 ? CudaVersionString(p.driver_version) : "none") + "\n";
  s += "  devices: " + std::to_string(p.device_count()) + "\n";
  for (const DeviceInfo& d : p.devices) {
    char line[512];
    std::snprintf(line, sizeof(line),
                  "    [%d] %s, %s (compute %d.%d), %.1f GiB at %.0f GB/s peak, %d SMs%s%s\n",
                  d.index, d.name.c_str(), d.Arch().c_str(), d.cc_major, d.cc_minor,
                  static_cast<double>(d.total_memory_bytes) / (1024.0 * 1024.0 * 1024.0),
                  d.PeakMemoryBandwidth() / 1e9, d.sm_count,
                  d.unsupported_reason.empty() ? "" : ": unusable, ", d.unsupported_reason.c_str());
    s += line;
  }
  if (p.devices.empty()) s += "  no CUDA device used: " + p.reason + "\n";
  return s;
}

}  // namespace specd::cuda
