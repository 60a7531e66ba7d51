// Runs a model-serving job on one rank, on --tp N forked rank processes over
// shared memory (supervised, root cause first on failure), or on ranks
// started by mpirun (--comm mpi). Rank 0 runs the job; the other ranks
// follow rank 0's step descriptors until it shuts them down.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "app/engine_flags.h"
#include "launch/serve_proxy.h"
#include "launch/supervisor.h"
#include "runtime/engine.h"

namespace specd::app {

struct LaunchFlags {
  std::string comm = "shm";  // shm | mpi
  std::string report_file;
  std::string allreduce_algo = "auto";
  std::string cpu_bind = "none";  // none | cores | per-rank CPU lists (launch/cpu_bind.h)
  double comm_spin_us = -1;       // < 0: ShmOptions' default (or SPECD_COMM_SPIN_US)
};

void AddLaunchFlags(CLI::App* sub, EngineFlags* engine, LaunchFlags* f);

// What rank 0 runs. The other ranks only load their shard and follow.
struct RankJob {
  // Optional: runs on rank 0 before the model loads (serve starts listening,
  // so /health answers 503 while every rank loads). `reporter` is rank 0's
  // line to the supervisor (null when unsupervised: --tp 1 without restarts,
  // --comm mpi).
  std::function<Status(RankReporter* reporter)> rank0_prepare;
  // Runs on rank 0 once every rank has loaded (a barrier); the engine is
  // shut down (the other ranks leave their loops) when it returns.
  std::function<Status(ModelRunner& runner, Engine& engine)> rank0_main;
  // > 0: rank 0 handles SIGINT/SIGTERM itself within this many seconds
  // (SupervisorOptions::rank0_stop_s); 0: every rank is simply stopped.
  double rank0_stop_s = 0;
  // Fresh rank groups after failures (SupervisorOptions::max_restarts); > 0
  // runs even --tp 1 as a supervised group of one. Needs --comm shm.
  int max_restarts = 0;
  // Set: the supervisor owns the public socket and proxies to rank 0
  // (launch/serve_proxy.h), which reports its port with RankReporter::Serving.
  std::optional<launch::ServeProxyOptions> proxy;
};

// Returns the process exit code: 0 on success; 1 on a failure (report on
// stderr); 2 on bad launch flags; with --tp N after SIGINT/SIGTERM, 0 when
// every rank shut down cleanly, else 128 + the signal number.
// `engine` is resolved once by the caller (ResolveEngineOptions) and shared by
// every rank.
int RunOnRanks(const ResolvedEngineOptions& engine, const LaunchFlags& launch, const RankJob& job);
int RunOnRanks(const ResolvedEngineOptions& engine, const LaunchFlags& launch,
               const std::function<Status(ModelRunner& runner, Engine& engine)>& rank0_main);

}  // namespace specd::app
