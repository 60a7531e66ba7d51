// `specd comm-bench`: thin CLI over commbench/comm_bench.h.
#include <cstdio>
#include <string>

#include "app/commands.h"
#include "base/logging.h"
#include "comm/mpi_communicator.h"
#include "commbench/comm_bench.h"

namespace specd::app {
namespace {

struct Flags {
  std::string backend = "shm";
  std::string dtype = "f32";
  std::string sizes = "1K:64M";
  std::string algo = "auto";
  CommBenchOptions o;
};

int Run(Flags& f) {
  CommBenchOptions& o = f.o;
  o.backends.clear();
  for (size_t pos = 0; pos <= f.backend.size();) {
    size_t comma = f.backend.find(',', pos);
    if (comma == std::string::npos) comma = f.backend.size();
    o.backends.push_back(f.backend.substr(pos, comma - pos));
    pos = comma + 1;
  }
  if (f.dtype == "f32") {
    o.dtype = CommDType::kF32;
  } else if (f.dtype == "bf16") {
    o.dtype = CommDType::kBF16;
  } else {
    std::fprintf(stderr, "specd comm-bench: --dtype '%s': expected f32 or bf16\n", f.dtype.c_str());
    return 2;
  }
  auto algo = ParseAllreduceAlgo(f.algo);
  auto sizes = ParseSizeList(f.sizes);
  if (!algo.ok() || !sizes.ok()) {
    LogStatus(!algo.ok() ? algo.status() : sizes.status());
    return 2;
  }
  o.algo = *algo;
  o.sizes = *sizes;
  StatusOr<std::vector<CommBenchRow>> rows = Status(InternalError("unset"));
  const bool under_mpirun = RunningUnderMpirun();
  if (under_mpirun) {
    rows = RunCommBenchUnderMpirun(o);  // rows only on rank 0
  } else {
    rows = RunCommBench(o);
  }
  if (!rows.ok()) {
    LogStatus(Status(rows.status()).WithStage("comm-bench"));
    return 1;
  }
  if (rows->empty()) return 0;  // a non-zero mpirun rank
  const std::string text = o.json ? CommBenchRowsToJson(*rows) + "\n" : FormatCommBench(o, *rows);
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

}  // namespace

void AddCommBenchCommand(CLI::App& root, int* exit_code) {
  auto* sub = root.add_subcommand(
      "comm-bench", "Benchmark collectives (allreduce, fused RMSNorm, allgather) on shm and MPI");
  auto f = std::make_shared<Flags>();
  sub->add_option("--backend", f->backend, "shm, mpi or shm,mpi (both, with their ratio)");
  sub->add_option("--ranks", f->o.ranks, "Number of ranks (forked for shm, mpirun -np for mpi)");
  sub->add_option("--op", f->o.op, "allreduce | fused-rmsnorm | allgather");
  sub->add_option("--dtype", f->dtype, "f32 | bf16");
  sub->add_option("--sizes", f->sizes, "Bytes: 1K:64M (powers of 2) or a list 8K,64K,1M");
  sub->add_option("--algo", f->algo, "one-shot | two-shot | mpi | auto")
      ->envname("SPECD_ALLREDUCE_ALGO");
  sub->add_option("--iters", f->o.iters, "Timed iterations per size");
  sub->add_option("--warmup", f->o.warmup, "Untimed iterations per size");
  sub->add_option("--mca", f->o.mca, "key=value, passed to mpirun as --mca key value (repeatable)");
  sub->add_flag("--json", f->o.json, "Print one JSON array of rows");
  sub->add_option("--workload", f->o.workload,
                  "verify: 123 bf16 allreduces of T x hidden per step (T = 4, 8)");
  sub->add_option("--hidden", f->o.hidden, "Hidden size for fused-rmsnorm and verify (7168)");
  sub->add_option("--buffer-bytes", f->o.buffer_bytes, "shm staging buffer per rank (bytes)");
  sub->callback([f, exit_code] { *exit_code = Run(*f); });
}

}  // namespace specd::app
