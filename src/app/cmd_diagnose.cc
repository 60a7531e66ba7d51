#include <cstdio>

#include "app/commands.h"

namespace specd::app {

// Placeholder until the subcommand lands.
void AddDiagnoseCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand("diagnose", "Find the root cause in crash logs");
  sub->callback([exit_code] {
    std::fprintf(stderr, "specd diagnose: not available in this build\n");
    *exit_code = 2;
  });
}

}  // namespace specd::app
