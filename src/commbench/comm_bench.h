// `specd comm-bench`: latency and bus bandwidth of collectives, in the spirit
// of nccl-tests' all_reduce_perf.
//
// Each backend runs in its own set of processes: shm forks `ranks` children
// around one ShmGroup; mpi re-runs this binary as
// `mpirun -np N [--mca k v]... <self> comm-bench --backend mpi --json ...`
// (or, when already started by mpirun, measures in-process). Every iteration
// is timed on every rank; the latency of an iteration is the maximum over
// ranks, and median/p99 are taken over iterations. busbw follows nccl-tests:
// allreduce and fused: algbw * 2(n-1)/n; allgather (bytes = total output):
// algbw * (n-1)/n.
//
// The memcpy floor (backend "floor", algo "memcpy") is one write of S plus N
// reads of S on one core, measured by rank 0 of the shm run, the lower bound
// of what a one-shot allreduce can cost.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "base/status.h"
#include "comm/communicator.h"

namespace specd {

struct CommBenchOptions {
  std::vector<std::string> backends = {"shm"};  // "shm", "mpi"
  int ranks = 2;
  std::string op = "allreduce";  // allreduce | fused-rmsnorm | allgather
  CommDType dtype = CommDType::kF32;
  std::vector<size_t> sizes;  // message bytes
  AllreduceAlgo algo = AllreduceAlgo::kAuto;
  int iters = 100;
  int warmup = 10;
  std::vector<std::string> mca;  // "key=value", passed to mpirun as --mca key value
  bool json = false;
  std::string workload;  // "" or "verify": 123 allreduces of T x hidden bf16 per step
  int hidden = 7168;
  size_t buffer_bytes = 4u << 20;  // shm staging buffer
  std::string self_exe;            // binary mpirun starts; empty: /proc/self/exe
};

struct CommBenchRow {
  std::string backend, op, dtype;
  size_t bytes = 0;
  std::string algo;
  double median_us = 0, p99_us = 0, busbw_gbs = 0;
};

// "64K" -> 65536 (suffixes K, M, G are powers of 1024; B or none: bytes).
StatusOr<size_t> ParseByteSize(const std::string& s);
// "1K:64M" (every power of 2 from..to) or "8K,64K,1M".
StatusOr<std::vector<size_t>> ParseSizeList(const std::string& s);

// Runs every backend and returns all rows (floor rows included).
StatusOr<std::vector<CommBenchRow>> RunCommBench(const CommBenchOptions& o);
// Measures in this process as one rank of an mpirun job; rows on rank 0 only.
StatusOr<std::vector<CommBenchRow>> RunCommBenchUnderMpirun(const CommBenchOptions& o);

std::string CommBenchRowsToJson(const std::vector<CommBenchRow>& rows);
StatusOr<std::vector<CommBenchRow>> CommBenchRowsFromJson(const std::string& text);
// The human-readable table (and, for --workload verify, totals and ratios).
std::string FormatCommBench(const CommBenchOptions& o, const std::vector<CommBenchRow>& rows);

}  // namespace specd
