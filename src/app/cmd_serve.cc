#include <cstdio>

#include "app/commands.h"

namespace specd::app {

// Placeholder until the subcommand lands.
void AddServeCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand("serve", "OpenAI-compatible HTTP server");
  sub->callback([exit_code] {
    std::fprintf(stderr, "specd serve: not available in this build\n");
    *exit_code = 2;
  });
}

}  // namespace specd::app
