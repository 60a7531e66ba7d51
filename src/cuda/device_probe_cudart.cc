// The probe in a CUDA build: asks the CUDA runtime (linked statically, so the
// binary needs no toolkit at run time) about the driver and devices. Without
// libcuda.so.1 the runtime reports cudaErrorInsufficientDriver; this file
// turns that and every other failure into a reason, never an abort.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cctype>
#include <cstdlib>
#include <exception>

#include "cuda/device_probe.h"

#ifndef SPECD_CUDA_ARCHITECTURES
#error "SPECD_CUDA_ARCHITECTURES must name the architectures the kernels are built for"
#endif

namespace specd::cuda {
namespace {

std::string CudaErrorText(cudaError_t err) {
  return std::string(cudaGetErrorName(err)) + ": " + cudaGetErrorString(err);
}

// Why the driver could not be used, when the runtime says it is insufficient.
std::string DriverReason(cudaError_t err, int driver_version, int runtime_version) {
  if (driver_version > 0) {
    return "CUDA driver " + CudaVersionString(driver_version) + " is older than runtime " +
           CudaVersionString(runtime_version) + " (" + CudaErrorText(err) + ")";
  }
  // dlopen is how the runtime itself finds the driver; doing it here lets the
  // reason say which library is missing and why the loader refused it.
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) {
    const char* why = dlerror();
    return std::string("CUDA driver not found: libcuda.so.1 not loadable (") +
           (why != nullptr ? why : "unknown loader error") + ")";
  }
  dlclose(h);
  return "CUDA driver libcuda.so.1 loads but the runtime cannot use it (" + CudaErrorText(err) +
         ")";
}

// One entry of CMAKE_CUDA_ARCHITECTURES: "86", "90a", "80-real", "120-virtual".
struct ArchEntry {
  int number = 0;
  bool has_ptx = true;  // plain and -virtual entries embed PTX the driver can JIT
};

std::vector<ArchEntry> ParseArchitectures(const std::string& list) {
  std::vector<ArchEntry> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string item = list.substr(start, end - start);
    size_t digits = 0;
    while (digits < item.size() && std::isdigit(static_cast<unsigned char>(item[digits]))) {
      ++digits;
    }
    if (digits > 0) {
      ArchEntry e;
      e.number = std::atoi(item.substr(0, digits).c_str());
      const std::string suffix = item.substr(digits);
      // "90a"/"100f" code is arch-specific; "-real" has SASS only.
      e.has_ptx = suffix.empty() || suffix == "-virtual";
      out.push_back(e);
    }
    start = end + 1;
  }
  return out;
}

// Empty when some built architecture runs on compute capability `cc`
// (major * 10 + minor): SASS of the same major and not newer, or PTX not newer.
std::string UnsupportedReason(int cc, const std::string& architectures) {
  const std::vector<ArchEntry> archs = ParseArchitectures(architectures);
  if (archs.empty()) return "";  // "native", "all": nvcc chose; trust it
  for (const ArchEntry& e : archs) {
    if (e.number <= cc && (e.has_ptx || e.number / 10 == cc / 10)) return "";
  }
  return "no kernel image for sm_" + std::to_string(cc) + " (built for " + architectures +
         "; rebuild with -DCMAKE_CUDA_ARCHITECTURES=" + std::to_string(cc) + ")";
}

ProbeResult ProbeWithRuntime() {
  ProbeResult p;
  p.built = true;
  p.toolkit = CudaVersionString(CUDART_VERSION);
  p.architectures = SPECD_CUDA_ARCHITECTURES;
  if (cudaRuntimeGetVersion(&p.runtime_version) != cudaSuccess) p.runtime_version = 0;
  if (cudaDriverGetVersion(&p.driver_version) != cudaSuccess) p.driver_version = 0;

  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  cudaGetLastError();  // the failures below are not sticky; clear them for later calls
  if (err == cudaErrorInsufficientDriver) {
    p.reason = DriverReason(err, p.driver_version, p.runtime_version);
    return p;
  }
  if (err == cudaErrorNoDevice || (err == cudaSuccess && count == 0)) {
    p.reason = "no CUDA device";
    if (err != cudaSuccess) p.reason += " (" + CudaErrorText(err) + ")";
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v != nullptr) {
      p.reason += std::string(" with CUDA_VISIBLE_DEVICES=\"") + v + "\"";
    }
    return p;
  }
  if (err != cudaSuccess) {
    p.reason = "cudaGetDeviceCount failed: " + CudaErrorText(err);
    return p;
  }
  for (int i = 0; i < count; ++i) {
    DeviceInfo d;
    d.index = i;
    cudaDeviceProp prop;
    const cudaError_t perr = cudaGetDeviceProperties(&prop, i);
    if (perr != cudaSuccess) {
      cudaGetLastError();
      d.name = "(properties unavailable)";
      d.unsupported_reason = "cudaGetDeviceProperties failed: " + CudaErrorText(perr);
    } else {
      d.name = prop.name;
      d.cc_major = prop.major;
      d.cc_minor = prop.minor;
      d.total_memory_bytes = prop.totalGlobalMem;
      d.sm_count = prop.multiProcessorCount;
      // Attributes, not cudaDeviceProp fields: CUDA 13 dropped memoryClockRate.
      if (cudaDeviceGetAttribute(&d.memory_clock_khz, cudaDevAttrMemoryClockRate, i) !=
          cudaSuccess) {
        cudaGetLastError();
        d.memory_clock_khz = 0;
      }
      if (cudaDeviceGetAttribute(&d.memory_bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, i) !=
          cudaSuccess) {
        cudaGetLastError();
        d.memory_bus_width_bits = 0;
      }
      d.unsupported_reason = UnsupportedReason(d.cc_major * 10 + d.cc_minor, p.architectures);
    }
    p.devices.push_back(std::move(d));
  }
  return p;
}

}  // namespace

bool BuiltWithCuda() { return true; }

ProbeResult ProbeDevices() {
  try {
    return ProbeWithRuntime();
  } catch (const std::exception& e) {  // only allocation can throw here
    ProbeResult p;
    p.built = true;
    p.devices.clear();
    p.reason = std::string("CUDA probe failed: ") + e.what();
    return p;
  }
}

}  // namespace specd::cuda
