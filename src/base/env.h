// Every environment variable specd reads, declared in one table (env.cc):
// name, type, default, one-line meaning, the module that reads it. Code
// reads a variable only through GetEnv(EnvVar::k...), so a variable cannot
// be read without being declared, and an empty value means unset everywhere.
//
// Values are parsed where they are used (the reading module knows the
// form): a bad value is ignored there with one warning naming the variable
// and the expected form, the default applying. `specd doctor` prints
// EnvReport() (name, value, default, source = env | default).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace specd {

enum class EnvVar {
  kModel,             // SPECD_MODEL
  kApiKey,            // SPECD_API_KEY
  kLogLevel,          // SPECD_LOG_LEVEL
  kLogFormat,         // SPECD_LOG_FORMAT
  kKernelIsa,         // SPECD_KERNEL_ISA
  kAmx,               // SPECD_AMX
  kDeterministic,     // SPECD_DETERMINISTIC
  kPoolSpinUs,        // SPECD_POOL_SPIN_US
  kPlatformKey,       // SPECD_PLATFORM_KEY
  kAllreduceAlgo,     // SPECD_ALLREDUCE_ALGO
  kCommTimeoutS,      // SPECD_COMM_TIMEOUT_S
  kCommSpinUs,        // SPECD_COMM_SPIN_US
  kMpiFakeHostSize,   // SPECD_MPI_FAKE_HOST_SIZE
  kFaultKillRank,     // SPECD_FAULT_KILL_RANK
  kPython,            // SPECD_PYTHON
  kGpuCc,             // SPECD_GPU_CC
  kCudaVisibleDevices,  // CUDA_VISIBLE_DEVICES (not ours: listed for information)
};

struct EnvSpec {
  EnvVar var;
  const char* name;
  const char* type;           // the accepted form, e.g. "0|1", "seconds > 0"
  const char* default_value;  // what applies when unset, in words
  const char* meaning;        // one line
  const char* module;         // who reads it
  bool external = false;      // set by others (CUDA); specd only reports it
  bool secret = false;        // the report shows "(set)", never the value
};

// The table, in EnvVar order.
const std::vector<EnvSpec>& EnvTable();
const EnvSpec& GetEnvSpec(EnvVar var);
inline const char* EnvName(EnvVar var) { return GetEnvSpec(var).name; }

// The variable's value; nullopt when unset or set to "".
std::optional<std::string> GetEnv(EnvVar var);

struct EnvReportEntry {
  std::string name;
  std::string value;          // "" when unset
  std::string default_value;
  std::string source;         // "env" or "default"
};
// One entry per table row, in table order.
std::vector<EnvReportEntry> EnvReport();
// The report as an aligned text table (doctor), with each meaning.
std::string DescribeEnvironment();

}  // namespace specd
