#include "app/commands.h"

#include <cstdio>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/env.h"
#include "base/logging.h"
#include "cuda/device_probe.h"
#include "kernels/dispatch.h"
#include "kernels/read_calibration.h"
#include "platform/cpu_features.h"
#include "platform/gpu_registry.h"
#include "platform/registry_report.h"

namespace specd::app {
namespace {

// CPU section: the probe's view of this machine and the path each kernel
// family takes on it, with the reason (SPECD_KERNEL_ISA forces a path).
void PrintCpuSection() {
  std::printf("CPU\n%s", specd::DescribeCpu().c_str());
  std::printf("Kernel paths (force with SPECD_KERNEL_ISA=scalar|avx2|avxvnni|avx512vnni; SPECD_AMX=0 turns AMX off)\n%s",
              specd::DescribeKernelPaths().c_str());
  std::printf("  float ops dispatch now to Highway target %s\n",
              specd::kernels::ActiveFloatTarget());
  std::printf("  decode reads one weight row at a time (--no-stream-decode: 4 side by side); %s\n",
              specd::kernels::CalibrateStreamPrefetch().Summary().c_str());
  std::printf("  q4_1, q5_0, q5_1, q2_k..q6_k, iq4_nl, iq4_xs: each weight row dequantized "
              "exactly (%s code), then the f32 kernel\n",
              specd::kernels::ActiveDequantPath());
  std::printf("  batch invariance: q8_0/q4_0/q4_bf16/f32/f16 and the ggml block types above "
              "always (one summation order for every token count); bf16: %s\n",
              specd::kernels::BatchInvariantEnabled()
                  ? "on (SPECD_DETERMINISTIC=1 / --deterministic: no AMX-BF16 tiles)"
                  : "off where AMX-BF16 tiles run multi-token matmuls (--deterministic or "
                    "SPECD_DETERMINISTIC=1 keeps them off)");
}

// CUDA section: what the binary was built with, the runtime and driver, each
// device, or why none can be used (no driver, no device, built without CUDA).
void PrintCudaSection(const specd::cuda::ProbeResult& p) {
  std::printf("CUDA\n%s", specd::cuda::DescribeProbe(p).c_str());
}

// The capabilities doctor describes: each probed device's, then the one
// SPECD_GPU_CC names (to see what an absent or future GPU would get). A
// malformed SPECD_GPU_CC is ignored with one warning naming the form.
std::vector<specd::GpuCapability> GpuCapabilities(const specd::cuda::ProbeResult& p) {
  std::vector<specd::GpuCapability> out;
  for (const specd::cuda::DeviceInfo& d : p.devices) {
    out.push_back(specd::LookupGpuCapability(d.cc_major, d.cc_minor, p.architectures));
  }
  if (const auto cc = specd::GetEnv(specd::EnvVar::kGpuCc)) {
    int major = 0, minor = 0;
    if (specd::ParseComputeCapability(*cc, &major, &minor)) {
      out.push_back(specd::LookupGpuCapability(major, minor, p.architectures));
    } else {
      LOG_WARN("doctor", "SPECD_GPU_CC={}: expected a compute capability major.minor such as "
               "13.0; ignored", *cc);
    }
  }
  return out;
}

// GPU capability registry: the table, then each device's lookup.
void PrintGpuRegistrySection(const std::vector<specd::GpuCapability>& caps) {
  std::printf("GPU capability registry (SPECD_GPU_CC=major.minor adds a simulated device)\n%s",
              specd::DescribeGpuArchTable().c_str());
  for (const specd::GpuCapability& c : caps) {
    std::fputs(specd::DescribeGpuCapability(c).c_str(), stdout);
  }
}

// {"arch", "compute_capability", "match", "entry", "code", "note",
//  "kernels": [{"name", "enabled", "why"}], "collectives": [...],
//  "one_shot_max_bytes", "two_shot_max_bytes"}
nlohmann::json GpuCapabilityJson(const specd::GpuCapability& c) {
  auto features = [](const std::vector<specd::GpuFeature>& list) {
    nlohmann::json a = nlohmann::json::array();
    for (const specd::GpuFeature& f : list) {
      a.push_back({{"name", f.name}, {"enabled", f.enabled}, {"why", f.why}});
    }
    return a;
  };
  return {{"arch", c.arch},
          {"compute_capability", std::to_string(c.major) + "." + std::to_string(c.minor)},
          {"match", specd::GpuMatchName(c.match)},
          {"entry", c.entry},
          {"code", c.code},
          {"note", c.note},
          {"kernels", features(c.kernels)},
          {"collectives", features(c.collectives)},
          {"one_shot_max_bytes", c.one_shot_max_bytes},
          {"two_shot_max_bytes", c.two_shot_max_bytes}};
}

// {"built", "toolkit", "architectures", "runtime", "driver", "device_count",
//  "devices": [...], "reason"}; versions are "13.0" strings, null when absent.
nlohmann::json CudaJson(const specd::cuda::ProbeResult& p) {
  auto version = [](int v) {
    return v > 0 ? nlohmann::json(specd::cuda::CudaVersionString(v)) : nlohmann::json(nullptr);
  };
  nlohmann::json devices = nlohmann::json::array();
  for (const specd::cuda::DeviceInfo& d : p.devices) {
    devices.push_back({{"index", d.index},
                       {"name", d.name},
                       {"arch", d.Arch()},
                       {"compute_capability",
                        std::to_string(d.cc_major) + "." + std::to_string(d.cc_minor)},
                       {"memory_bytes", d.total_memory_bytes},
                       {"sm_count", d.sm_count},
                       {"peak_memory_bandwidth_gbps", d.PeakMemoryBandwidth() / 1e9},
                       {"usable", d.unsupported_reason.empty()},
                       {"unusable_reason", d.unsupported_reason}});
  }
  return {{"built", p.built},
          {"toolkit", p.built ? nlohmann::json(p.toolkit) : nlohmann::json(nullptr)},
          {"architectures", p.architectures},
          {"runtime", version(p.runtime_version)},
          {"driver", version(p.driver_version)},
          {"device_count", p.device_count()},
          {"devices", devices},
          {"reason", p.reason}};
}

// [{"name", "value", "default", "source": "env" | "default"}], one per
// entry of base/env.h's table; value is null when unset.
nlohmann::json EnvironmentJson() {
  nlohmann::json out = nlohmann::json::array();
  for (const specd::EnvReportEntry& e : specd::EnvReport()) {
    out.push_back({{"name", e.name},
                   {"value", e.source == "env" ? nlohmann::json(e.value) : nlohmann::json(nullptr)},
                   {"default", e.default_value},
                   {"source", e.source}});
  }
  return out;
}

}  // namespace

void AddDoctorCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand("doctor", "Print the detected hardware and the path each "
                                            "kernel family and collective will use, with why");
  auto json = std::make_shared<bool>(false);
  sub->add_flag("--json", *json,
                "Print the CUDA state and the environment table as one JSON object: "
                "{\"cuda\": {...}, \"gpu_capabilities\": [{\"arch\", \"match\", \"kernels\", "
                "\"collectives\", ...}], \"environment\": [{\"name\", \"value\", \"default\", "
                "\"source\"}]}");
  sub->callback([exit_code, json] {
    const specd::cuda::ProbeResult cuda = specd::cuda::ProbeDevices();
    if (*json) {
      nlohmann::json gpus = nlohmann::json::array();
      for (const specd::GpuCapability& c : GpuCapabilities(cuda)) {
        gpus.push_back(GpuCapabilityJson(c));
      }
      const nlohmann::json j = {{"cuda", CudaJson(cuda)},
                                {"gpu_capabilities", gpus},
                                {"environment", EnvironmentJson()}};
      std::printf("%s\n", j.dump(2).c_str());
      *exit_code = 0;
      return;
    }
    PrintCpuSection();
    std::fputs(specd::DescribeCollectiveChoices().c_str(), stdout);
    PrintCudaSection(cuda);
    PrintGpuRegistrySection(GpuCapabilities(cuda));
    std::fputs(specd::DescribeEnvironment().c_str(), stdout);
    *exit_code = 0;
  });
}

}  // namespace specd::app
