#include <cstdio>

#include "app/commands.h"

namespace specd::app {

// Placeholder until the subcommand lands.
void AddQuantizeCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand("quantize", "Convert a checkpoint to a quantized GGUF");
  sub->callback([exit_code] {
    std::fprintf(stderr, "specd quantize: not available in this build\n");
    *exit_code = 2;
  });
}

}  // namespace specd::app
