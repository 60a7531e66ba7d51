#include <cstdio>

#include "app/commands.h"

namespace specd::app {

// Placeholder until the subcommand lands.
void AddMakeModelCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand("make-model", "Write a random-weight model fixture");
  sub->callback([exit_code] {
    std::fprintf(stderr, "specd make-model: not available in this build\n");
    *exit_code = 2;
  });
}

}  // namespace specd::app
