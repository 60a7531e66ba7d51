// specd: speculative decoding and tensor-parallel LLM inference on CPU.
#include <CLI/CLI.hpp>

#include "app/commands.h"
#include "base/logging.h"

int main(int argc, char** argv) {
  CLI::App root{
      "specd: an LLM inference engine built around speculative decoding (EAGLE-3, n-gram)\n"
      "and tensor parallelism over shared memory or MPI.\n\n"
      "Start with:  specd generate --prompt \"Once upon a time\"   (embedded demo model)\n"
      "             specd doctor                                  (what this machine supports)\n"
      "Each subcommand has its own --help."};
  root.require_subcommand(1);
  int exit_code = 0;
  specd::app::AddGlobalOptions(root);
  specd::app::AddGenerateCommand(root, &exit_code);
  specd::app::AddServeCommand(root, &exit_code);
  specd::app::AddTokenizeCommand(root, &exit_code);
  specd::app::AddMakeModelCommand(root, &exit_code);
  specd::app::AddQuantizeCommand(root, &exit_code);
  specd::app::AddBenchCommand(root, &exit_code);
  specd::app::AddCommBenchCommand(root, &exit_code);
  specd::app::AddDoctorCommand(root, &exit_code);
  specd::app::AddDiagnoseCommand(root, &exit_code);
  try {
    root.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return root.exit(e);
  }
  return exit_code;
}
