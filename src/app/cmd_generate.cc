#include <cstdio>

#include "app/commands.h"

namespace specd::app {

// Placeholder until the subcommand lands.
void AddGenerateCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand("generate", "Generate text from a prompt");
  sub->callback([exit_code] {
    std::fprintf(stderr, "specd generate: not available in this build\n");
    *exit_code = 2;
  });
}

}  // namespace specd::app
