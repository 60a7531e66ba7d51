#include <cstdio>

#include "app/commands.h"

namespace specd::app {

// Placeholder until the subcommand lands.
void AddBenchCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand("bench", "A/B benchmark of engine configurations");
  sub->callback([exit_code] {
    std::fprintf(stderr, "specd bench: not available in this build\n");
    *exit_code = 2;
  });
}

}  // namespace specd::app
