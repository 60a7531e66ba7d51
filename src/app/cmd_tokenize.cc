#include <cstdio>

#include "app/commands.h"

namespace specd::app {

// Placeholder until the subcommand lands.
void AddTokenizeCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand("tokenize", "Print the token ids of a text");
  sub->callback([exit_code] {
    std::fprintf(stderr, "specd tokenize: not available in this build\n");
    *exit_code = 2;
  });
}

}  // namespace specd::app
