#include <cstdio>

#include "app/commands.h"

namespace specd::app {

// Placeholder until the subcommand lands.
void AddCommBenchCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand("comm-bench", "Benchmark collectives (allreduce, fused RMSNorm, allgather)");
  sub->callback([exit_code] {
    std::fprintf(stderr, "specd comm-bench: not available in this build\n");
    *exit_code = 2;
  });
}

}  // namespace specd::app
