// Collectives across the ranks of one tensor-parallel group.
//
// Every rank calls the same collectives in the same order with the same
// sizes and dtypes (mismatches are detected and reported as errors, not a
// wrong sum). Every wait has a deadline: a peer that never arrives or dies
// makes each surviving rank return DeadlineExceeded/Unavailable naming the
// collective, its epoch and the missing ranks; nothing hangs.
//
// World size 1 is a no-op backend, so the model calls these unconditionally.
// Not thread-safe: one thread per rank issues collectives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"

namespace specd {

enum class CommDType { kF32, kBF16 };
enum class AllreduceAlgo { kAuto, kOneShot, kTwoShot, kMpi };

const char* AllreduceAlgoName(AllreduceAlgo a);
StatusOr<AllreduceAlgo> ParseAllreduceAlgo(const std::string& s);  // one-shot|two-shot|mpi|auto
const char* CommDTypeName(CommDType t);  // "f32", "bf16"
size_t CommDTypeBytes(CommDType t);      // 4, 2

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual std::string backend_name() const = 0;  // "local", "shm", "mpi", "hier"

  // Sum over ranks of `count` elements. in == out gives the in-place form.
  // bf16 is accumulated in f32. Every rank receives bitwise-identical results.
  virtual Status AllReduce(const void* in, void* out, size_t count, CommDType dtype) = 0;

  // Fused allreduce + residual add + RMSNorm over `n_rows` rows of `dim` f32:
  //   residual <- residual + allreduce(x);  out <- rmsnorm(residual) * weight
  // x, residual, out: (n_rows, dim); weight: (dim). out may alias x.
  virtual Status AllReduceResidualRmsNorm(const float* x, float* residual, const float* weight,
                                          float eps, int n_rows, int dim, float* out) = 0;

  // out (world_size * count elements) receives rank r's `count` elements at r*count.
  virtual Status AllGather(const void* in, void* out, size_t count, CommDType dtype) = 0;
  // Copies `bytes` bytes from `root`'s buf into every rank's buf.
  virtual Status Broadcast(void* buf, size_t bytes, int root) = 0;
  virtual Status Barrier() = 0;

  // Forces an allreduce algorithm (A/B runs); kAuto uses the capability registry.
  virtual void SetAllreduceAlgo(AllreduceAlgo algo) = 0;
  // Cumulative seconds spent inside collectives and their count (for the
  // "share of step time in communication" metric).
  virtual double comm_seconds() const = 0;
  virtual uint64_t comm_calls() const = 0;
};

// World size 1.
std::unique_ptr<Communicator> NewLocalCommunicator();

// The other backends are created through comm/shm_group.h (one host, forked
// or re-exec'd ranks) and comm/mpi_communicator.h (mpirun, any hosts).

}  // namespace specd
