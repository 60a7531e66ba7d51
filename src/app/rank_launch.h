// Runs a model-serving job on one rank, on --tp N forked rank processes over
// shared memory (supervised, root cause first on failure), or on ranks
// started by mpirun (--comm mpi). Rank 0 runs `rank0_main`; the other ranks
// follow rank 0's step descriptors until it shuts them down.
#pragma once

#include <functional>
#include <string>

#include "app/engine_flags.h"
#include "runtime/engine.h"

namespace specd::app {

struct LaunchFlags {
  std::string comm = "shm";  // shm | mpi
  std::string report_file;
  std::string allreduce_algo = "auto";
};

void AddLaunchFlags(CLI::App* sub, EngineFlags* engine, LaunchFlags* f);

// Returns the process exit code.
int RunOnRanks(const EngineFlags& engine_flags, const LaunchFlags& launch,
               const std::function<Status(ModelRunner& runner, Engine& engine)>& rank0_main);

}  // namespace specd::app
