#include "app/commands.h"

#include <cstdio>

#include "kernels/dispatch.h"
#include "kernels/read_calibration.h"
#include "platform/cpu_features.h"
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
}

}  // namespace

void AddDoctorCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand("doctor", "Print the detected hardware and the path each "
                                            "kernel family and collective will use, with why");
  sub->callback([exit_code] {
    PrintCpuSection();
    std::fputs(specd::DescribeCollectiveChoices().c_str(), stdout);
    *exit_code = 0;
  });
}

}  // namespace specd::app
