#include "comm/fault_injection.h"

#include <signal.h>

#include <cstdlib>
#include <string>

#include "base/env.h"
#include "base/logging.h"

namespace specd {
namespace {

class FaultInjectingCommunicator final : public Communicator {
 public:
  FaultInjectingCommunicator(Communicator* inner, uint64_t kill_at)
      : inner_(inner), kill_at_(kill_at) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  std::string backend_name() const override { return inner_->backend_name(); }
  Status AllReduce(const void* in, void* out, size_t count, CommDType dtype) override {
    Tick();
    return inner_->AllReduce(in, out, count, dtype);
  }
  Status AllReduceResidualRmsNorm(const float* x, float* residual, const float* weight, float eps,
                                  int n_rows, int dim, float* out) override {
    Tick();
    return inner_->AllReduceResidualRmsNorm(x, residual, weight, eps, n_rows, dim, out);
  }
  Status AllGather(const void* in, void* out, size_t count, CommDType dtype) override {
    Tick();
    return inner_->AllGather(in, out, count, dtype);
  }
  Status Broadcast(void* buf, size_t bytes, int root) override {
    Tick();
    return inner_->Broadcast(buf, bytes, root);
  }
  Status Barrier() override {
    Tick();
    return inner_->Barrier();
  }
  void SetAllreduceAlgo(AllreduceAlgo algo) override { inner_->SetAllreduceAlgo(algo); }
  double comm_seconds() const override { return inner_->comm_seconds(); }
  uint64_t comm_calls() const override { return inner_->comm_calls(); }

 private:
  void Tick() {
    if (++calls_ == kill_at_) {
      LOG_WARN("fault", "SPECD_FAULT_KILL_RANK: rank {} raises SIGKILL at collective #{}", rank(),
               calls_);
      std::fflush(stderr);
      ::raise(SIGKILL);
    }
  }
  Communicator* inner_;
  uint64_t kill_at_;
  uint64_t calls_ = 0;
};

}  // namespace

std::unique_ptr<Communicator> NewFaultInjectingCommunicator(Communicator* inner) {
  const std::optional<std::string> v = GetEnv(EnvVar::kFaultKillRank);
  if (!v) return nullptr;
  const std::string s = *v;
  const size_t colon = s.find(':');
  int rank = -1;
  long long at = 0;
  try {
    if (colon == std::string::npos) throw std::invalid_argument(s);
    size_t used = 0;
    rank = std::stoi(s.substr(0, colon), &used);
    if (used != colon) throw std::invalid_argument(s);
    at = std::stoll(s.substr(colon + 1), &used);
    if (used != s.size() - colon - 1 || at < 1 || rank < 0) throw std::invalid_argument(s);
  } catch (...) {
    LOG_WARN("fault", "SPECD_FAULT_KILL_RANK='{}' ignored: expected RANK:N with N >= 1", s);
    return nullptr;
  }
  if (rank != inner->rank()) return nullptr;
  return std::make_unique<FaultInjectingCommunicator>(inner, static_cast<uint64_t>(at));
}

}  // namespace specd
