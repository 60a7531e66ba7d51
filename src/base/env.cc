#include "base/env.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

namespace specd {

const std::vector<EnvSpec>& EnvTable() {
  static const std::vector<EnvSpec> table = {
      {EnvVar::kModel, "SPECD_MODEL", "path", "the embedded demo model",
       "model folder or .gguf when --model is not given", "app"},
      {EnvVar::kApiKey, "SPECD_API_KEY", "string", "none (no authentication)",
       "bearer key serve requires when --api-key is not given", "app (serve)", false,
       true},
      {EnvVar::kLogLevel, "SPECD_LOG_LEVEL", "debug|info|warn|error", "info",
       "log level when --log-level is not given", "app (global options)"},
      {EnvVar::kLogFormat, "SPECD_LOG_FORMAT", "text|json", "text",
       "log line format when --log-format is not given", "app (global options)"},
      {EnvVar::kKernelIsa, "SPECD_KERNEL_ISA", "scalar|avx2|avxvnni|avx512vnni",
       "the best path the CPU has", "forces the matmul kernel path", "platform"},
      {EnvVar::kAmx, "SPECD_AMX", "0|1", "1 (AMX where present)",
       "0 turns AMX tiles off for multi-token matmuls (as --no-amx)", "platform"},
      {EnvVar::kDeterministic, "SPECD_DETERMINISTIC", "0|1", "0",
       "1 turns batch-invariant mode on: BF16 off the AMX tiles; Q8_0/Q4_0 are batch-invariant "
       "either way (as --deterministic)", "kernels"},
      {EnvVar::kPoolSpinUs, "SPECD_POOL_SPIN_US", "integer microseconds 0..100000", "50",
       "how long an idle compute thread spins before sleeping (--pool-spin-us wins)", "kernels"},
      {EnvVar::kPlatformKey, "SPECD_PLATFORM_KEY", "string", "detected from the CPU",
       "key of the tuned-parameter tables (testing the fallback)", "platform"},
      {EnvVar::kAllreduceAlgo, "SPECD_ALLREDUCE_ALGO", "auto|one-shot|two-shot|mpi", "auto",
       "forces the shm allreduce algorithm", "comm"},
      {EnvVar::kCommTimeoutS, "SPECD_COMM_TIMEOUT_S", "seconds > 0", "60",
       "how long a rank waits for a peer in a collective before failing", "comm"},
      {EnvVar::kCommSpinUs, "SPECD_COMM_SPIN_US", "microseconds >= 0", "50",
       "how long a rank spins on a collective flag before yielding (--comm-spin-us wins)",
       "comm"},
      {EnvVar::kMpiFakeHostSize, "SPECD_MPI_FAKE_HOST_SIZE", "integer > 0",
       "the real ranks per host", "test hook: pretend hosts hold this many MPI ranks", "comm"},
      {EnvVar::kFaultKillRank, "SPECD_FAULT_KILL_RANK", "RANK:N (N >= 1)", "off",
       "test hook: rank RANK raises SIGKILL at its N-th collective", "comm"},
      {EnvVar::kPython, "SPECD_PYTHON", "path", "the checkout's .venv/bin/python",
       "interpreter of the reference tests", "tests (base/test_reference.h)"},
      {EnvVar::kGpuCc, "SPECD_GPU_CC", "major.minor, e.g. 13.0", "the devices' own",
       "test hook: doctor also describes a GPU of this compute capability", "app (doctor)"},
      {EnvVar::kCudaVisibleDevices, "CUDA_VISIBLE_DEVICES", "device list", "all devices",
       "which CUDA devices the probe sees (set by others; reported only)", "cuda", true},
  };
  return table;
}

const EnvSpec& GetEnvSpec(EnvVar var) {
  const auto& t = EnvTable();
  const size_t i = static_cast<size_t>(var);
  // The table is written in EnvVar order (env_test checks it).
  if (i < t.size() && t[i].var == var) return t[i];
  return *std::find_if(t.begin(), t.end(), [var](const EnvSpec& s) { return s.var == var; });
}

std::optional<std::string> GetEnv(EnvVar var) {
  const char* v = std::getenv(EnvName(var));
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

std::vector<EnvReportEntry> EnvReport() {
  std::vector<EnvReportEntry> out;
  for (const EnvSpec& s : EnvTable()) {
    const std::optional<std::string> v = GetEnv(s.var);
    std::string value = v.value_or("");
    if (v && s.secret) value = "(set)";
    out.push_back({s.name, value, s.default_value, v ? "env" : "default"});
  }
  return out;
}

std::string DescribeEnvironment() {
  size_t w_name = 0, w_value = 0;
  const std::vector<EnvReportEntry> report = EnvReport();
  for (const EnvReportEntry& e : report) {
    w_name = std::max(w_name, e.name.size());
    w_value = std::max(w_value, e.source == "env" ? e.value.size() : e.default_value.size() + 11);
  }
  std::string s = "Environment (empty = unset; flags win over the environment)\n";
  for (size_t i = 0; i < report.size(); ++i) {
    const EnvReportEntry& e = report[i];
    const EnvSpec& spec = EnvTable()[i];
    const std::string value =
        e.source == "env" ? e.value : fmt::format("(default: {})", e.default_value);
    s += fmt::format("  {:<{}}  {:<{}}  [{}] {}: {}; read by {}\n", e.name, w_name, value,
                     w_value, e.source, spec.type, spec.meaning, spec.module);
  }
  return s;
}

}  // namespace specd
