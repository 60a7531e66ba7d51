// Subcommand registration. Each cmd_*.cc defines one Add*Command that adds a
// CLI11 subcommand to `root` and, when that subcommand is chosen, runs it and
// stores the process exit code in *exit_code.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/op_profile.h"

namespace specd::app {

void AddGlobalOptions(CLI::App& root);
void AddGenerateCommand(CLI::App& root, int* exit_code);
void AddServeCommand(CLI::App& root, int* exit_code);
void AddTokenizeCommand(CLI::App& root, int* exit_code);
void AddMakeModelCommand(CLI::App& root, int* exit_code);
void AddQuantizeCommand(CLI::App& root, int* exit_code);
void AddBenchCommand(CLI::App& root, int* exit_code);
void AddCommBenchCommand(CLI::App& root, int* exit_code);
void AddDoctorCommand(CLI::App& root, int* exit_code);
void AddDiagnoseCommand(CLI::App& root, int* exit_code);

// {"prefill"|"decode": {"steps", "step_ms_total", "ops": {name: {"ms", "calls"}}}}
// for the phases with recorded steps (specd generate --profile --json).
nlohmann::json ProfileJson(const OpProfile& p);

}  // namespace specd::app
