#include "comm/communicator.h"

#include <cstring>
#include <vector>

#include "base/clock.h"
#include "comm/reduce_kernels.h"

namespace specd {

const char* AllreduceAlgoName(AllreduceAlgo a) {
  switch (a) {
    case AllreduceAlgo::kAuto: return "auto";
    case AllreduceAlgo::kOneShot: return "one-shot";
    case AllreduceAlgo::kTwoShot: return "two-shot";
    case AllreduceAlgo::kMpi: return "mpi";
  }
  return "?";
}

StatusOr<AllreduceAlgo> ParseAllreduceAlgo(const std::string& s) {
  if (s == "auto") return AllreduceAlgo::kAuto;
  if (s == "one-shot") return AllreduceAlgo::kOneShot;
  if (s == "two-shot") return AllreduceAlgo::kTwoShot;
  if (s == "mpi") return AllreduceAlgo::kMpi;
  return InvalidArgumentError("allreduce algorithm '" + s +
                              "': expected one of one-shot, two-shot, mpi, auto");
}

const char* CommDTypeName(CommDType t) { return t == CommDType::kF32 ? "f32" : "bf16"; }

size_t CommDTypeBytes(CommDType t) { return t == CommDType::kF32 ? 4 : 2; }

namespace {

// World size 1: every collective is an identity (plus the copy when out != in).
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  std::string backend_name() const override { return "local"; }

  Status AllReduce(const void* in, void* out, size_t count, CommDType dtype) override {
    ++calls_;
    if (in != out && count > 0) std::memmove(out, in, count * CommDTypeBytes(dtype));
    return Status::Ok();
  }

  Status AllReduceResidualRmsNorm(const float* x, float* residual, const float* weight, float eps,
                                  int n_rows, int dim, float* out) override {
    ++calls_;
    if (n_rows < 0 || dim <= 0) {
      return InvalidArgumentError("fused allreduce+rmsnorm: n_rows " + std::to_string(n_rows) +
                                  ", dim " + std::to_string(dim) + ": expected n_rows >= 0, dim > 0");
    }
    for (int r = 0; r < n_rows; ++r) {
      const size_t off = static_cast<size_t>(r) * static_cast<size_t>(dim);
      comm_internal::ResidualRmsNormRow(x + off, residual + off, weight, eps, dim, out + off);
    }
    return Status::Ok();
  }

  Status AllGather(const void* in, void* out, size_t count, CommDType dtype) override {
    ++calls_;
    if (in != out && count > 0) std::memmove(out, in, count * CommDTypeBytes(dtype));
    return Status::Ok();
  }

  Status Broadcast(void* buf, size_t bytes, int root) override {
    ++calls_;
    if (root != 0) {
      return InvalidArgumentError("broadcast: root " + std::to_string(root) +
                                  " is not a rank of a world of size 1");
    }
    return Status::Ok();
  }

  Status Barrier() override {
    ++calls_;
    return Status::Ok();
  }

  void SetAllreduceAlgo(AllreduceAlgo) override {}
  double comm_seconds() const override { return 0.0; }
  uint64_t comm_calls() const override { return calls_; }

 private:
  uint64_t calls_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> NewLocalCommunicator() {
  return std::make_unique<LocalCommunicator>();
}

}  // namespace specd
