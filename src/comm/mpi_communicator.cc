#include "comm/mpi_communicator.h"

// The C API only (Open MPI would otherwise pull in its deprecated C++ bindings).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "base/clock.h"
#include "base/env.h"
#include "base/logging.h"
#include "comm/reduce_kernels.h"

namespace specd {
namespace {

constexpr const char* kStage = "comm init";
// Largest element count passed to one MPI call (MPI counts are int).
constexpr size_t kMaxMpiCount = size_t{1} << 30;

std::atomic<int> g_live_comms{0};
bool g_we_initialized = false;

Status MpiError(const std::string& what, int rc) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  return UnavailableError(what + ": " + std::string(msg, len));
}

#define RETURN_IF_MPI_ERROR(what, call)        \
  do {                                         \
    int _rc = (call);                          \
    if (_rc != MPI_SUCCESS) return MpiError(what, _rc); \
  } while (0)

class MpiCommunicator final : public Communicator {
 public:
  ~MpiCommunicator() override {
    shm_.reset();
    group_.reset();
    if (leaders_ != MPI_COMM_NULL) MPI_Comm_free(&leaders_);
    if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
    if (world_comm_ != MPI_COMM_NULL) MPI_Comm_free(&world_comm_);
    if (--g_live_comms == 0 && g_we_initialized) {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    }
  }

  Status Init(const MpiOptions& o) {
    ++g_live_comms;
    algo_ = o.algo;
    RETURN_IF_MPI_ERROR("MPI_Comm_dup", MPI_Comm_dup(MPI_COMM_WORLD, &world_comm_));
    MPI_Comm_set_errhandler(world_comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(world_comm_, &rank_);
    MPI_Comm_size(world_comm_, &world_);
    if (o.fake_host_size > 0) {
      RETURN_IF_MPI_ERROR("MPI_Comm_split (fake hosts)",
                          MPI_Comm_split(world_comm_, rank_ / o.fake_host_size, rank_, &node_));
    } else {
      RETURN_IF_MPI_ERROR("MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)",
                          MPI_Comm_split_type(world_comm_, MPI_COMM_TYPE_SHARED, rank_,
                                              MPI_INFO_NULL, &node_));
    }
    MPI_Comm_set_errhandler(node_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(node_, &node_rank_);
    MPI_Comm_size(node_, &node_size_);
    RETURN_IF_MPI_ERROR("MPI_Comm_split (host leaders)",
                        MPI_Comm_split(world_comm_, node_rank_ == 0 ? 0 : MPI_UNDEFINED, rank_,
                                       &leaders_));
    if (leaders_ != MPI_COMM_NULL) MPI_Comm_set_errhandler(leaders_, MPI_ERRORS_RETURN);
    int n_hosts = node_rank_ == 0 ? 1 : 0;
    RETURN_IF_MPI_ERROR("MPI_Allreduce (host count)",
                        MPI_Allreduce(MPI_IN_PLACE, &n_hosts, 1, MPI_INT, MPI_SUM, world_comm_));
    n_hosts_ = n_hosts;
    if (o.use_host_shm && node_size_ > 1) RETURN_IF_ERROR(SetUpHostShm(o));
    if (shm_) shm_->SetAllreduceAlgo(algo_ == AllreduceAlgo::kMpi ? AllreduceAlgo::kAuto : algo_);
    LOG_INFO(kStage, "mpi communicator: rank {} of {}, {} host(s), {} rank(s) on this host, {}",
             rank_, world_, n_hosts_, node_size_,
             shm_ ? "shm inside the host" : "MPI only");
    return Status::Ok();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend_name() const override {
    if (algo_ == AllreduceAlgo::kMpi || !shm_) return "mpi";
    return n_hosts_ == 1 ? "shm" : "hier";
  }
  void SetAllreduceAlgo(AllreduceAlgo algo) override {
    algo_ = algo;
    if (shm_) shm_->SetAllreduceAlgo(algo == AllreduceAlgo::kMpi ? AllreduceAlgo::kAuto : algo);
  }
  double comm_seconds() const override { return seconds_; }
  uint64_t comm_calls() const override { return calls_; }

  Status AllReduce(const void* in, void* out, size_t count, CommDType dtype) override {
    Timer t(this);
    if (UseShmOnly()) return shm_->AllReduce(in, out, count, dtype);
    if (UseHier()) {
      RETURN_IF_ERROR(shm_->AllReduce(in, out, count, dtype));
      if (leaders_ != MPI_COMM_NULL) RETURN_IF_ERROR(MpiAllReduce(out, out, count, dtype, leaders_));
      return shm_->Broadcast(out, count * CommDTypeBytes(dtype), 0);
    }
    return MpiAllReduce(in, out, count, dtype, world_comm_);
  }

  Status AllReduceResidualRmsNorm(const float* x, float* residual, const float* weight, float eps,
                                  int n_rows, int dim, float* out) override {
    if (UseShmOnly()) {
      Timer t(this);
      return shm_->AllReduceResidualRmsNorm(x, residual, weight, eps, n_rows, dim, out);
    }
    if (n_rows < 0 || dim <= 0) {
      return InvalidArgumentError("fused allreduce+rmsnorm: n_rows " + std::to_string(n_rows) +
                                  ", dim " + std::to_string(dim) +
                                  ": expected n_rows >= 0 and dim > 0");
    }
    const size_t n = static_cast<size_t>(n_rows) * dim;
    scratch_.resize(n);
    RETURN_IF_ERROR(AllReduce(x, scratch_.data(), n, CommDType::kF32));
    for (int r = 0; r < n_rows; ++r) {
      const size_t off = static_cast<size_t>(r) * dim;
      comm_internal::ResidualRmsNormRow(scratch_.data() + off, residual + off, weight, eps, dim,
                                        out + off);
    }
    return Status::Ok();
  }

  Status AllGather(const void* in, void* out, size_t count, CommDType dtype) override {
    Timer t(this);
    if (UseShmOnly()) return shm_->AllGather(in, out, count, dtype);
    const size_t bytes = count * CommDTypeBytes(dtype);
    if (bytes > INT_MAX) {
      return UnsupportedError("allgather over MPI: " + std::to_string(bytes) +
                              " bytes per rank exceeds INT_MAX");
    }
    const int n = static_cast<int>(bytes);
    const void* send = in;
    if (static_cast<const char*>(out) + static_cast<size_t>(rank_) * bytes == in) send = MPI_IN_PLACE;
    RETURN_IF_MPI_ERROR("MPI_Allgather", MPI_Allgather(send, n, MPI_BYTE, out, n, MPI_BYTE, world_comm_));
    return Status::Ok();
  }

  Status Broadcast(void* buf, size_t bytes, int root) override {
    Timer t(this);
    if (root < 0 || root >= world_) {
      return InvalidArgumentError("broadcast: root " + std::to_string(root) +
                                  " is not a rank of a world of size " + std::to_string(world_));
    }
    if (UseShmOnly()) return shm_->Broadcast(buf, bytes, root);
    for (size_t off = 0; off < bytes; off += kMaxMpiCount) {
      const int n = static_cast<int>(std::min(kMaxMpiCount, bytes - off));
      RETURN_IF_MPI_ERROR("MPI_Bcast",
                          MPI_Bcast(static_cast<char*>(buf) + off, n, MPI_BYTE, root, world_comm_));
    }
    return Status::Ok();
  }

  Status Barrier() override {
    Timer t(this);
    if (UseShmOnly()) return shm_->Barrier();
    RETURN_IF_MPI_ERROR("MPI_Barrier", MPI_Barrier(world_comm_));
    return Status::Ok();
  }

 private:
  struct Timer {
    explicit Timer(MpiCommunicator* c) : c_(c), start_(NowNanos()) {}
    ~Timer() {
      c_->seconds_ += static_cast<double>(NowNanos() - start_) * 1e-9;
      ++c_->calls_;
    }
    MpiCommunicator* c_;
    int64_t start_;
  };

  bool UseShmOnly() const { return shm_ && n_hosts_ == 1 && algo_ != AllreduceAlgo::kMpi; }
  bool UseHier() const { return shm_ && n_hosts_ > 1 && algo_ != AllreduceAlgo::kMpi; }

  Status MpiAllReduce(const void* in, void* out, size_t count, CommDType dtype, MPI_Comm comm) {
    if (dtype == CommDType::kF32) {
      for (size_t off = 0; off < count; off += kMaxMpiCount) {
        const int n = static_cast<int>(std::min(kMaxMpiCount, count - off));
        float* o = static_cast<float*>(out) + off;
        const void* send = in == out ? MPI_IN_PLACE : static_cast<const float*>(in) + off;
        RETURN_IF_MPI_ERROR("MPI_Allreduce", MPI_Allreduce(send, o, n, MPI_FLOAT, MPI_SUM, comm));
      }
      return Status::Ok();
    }
    // bf16: widen to f32, reduce, round once.
    scratch_.resize(count);
    const auto* src = static_cast<const uint16_t*>(in);
    for (size_t i = 0; i < count; ++i) scratch_[i] = comm_internal::BF16ToF32(src[i]);
    RETURN_IF_ERROR(MpiAllReduce(scratch_.data(), scratch_.data(), count, CommDType::kF32, comm));
    auto* dst = static_cast<uint16_t*>(out);
    for (size_t i = 0; i < count; ++i) dst[i] = comm_internal::F32ToBF16(scratch_[i]);
    return Status::Ok();
  }

  // Node rank 0 creates a named shm group; every node rank joins; the name is
  // unlinked once all have mapped it. Any failure anywhere on the host makes
  // the whole host fall back to MPI (agreed by an allreduce), with one log line.
  Status SetUpHostShm(const MpiOptions& o) {
    char name[96] = {};
    Status local;
    if (node_rank_ == 0) {
      std::random_device rd;
      std::snprintf(name, sizeof(name), "/specd-comm-%d-%08x", static_cast<int>(getpid()),
                    static_cast<unsigned>(rd()));
      auto g = CreateNamedShmGroup(node_size_, name, o.shm);
      if (g.ok()) {
        group_ = std::move(g).value();
      } else {
        local = g.status();
        name[0] = '\0';
      }
    }
    RETURN_IF_MPI_ERROR("MPI_Bcast (shm name)", MPI_Bcast(name, sizeof(name), MPI_CHAR, 0, node_));
    if (name[0] != '\0') {
      auto c = group_ ? JoinShmGroup(*group_, node_rank_, o.shm)
                      : JoinShmGroupFromSpec(std::string("name:") + name, node_rank_, o.shm);
      if (c.ok()) {
        shm_ = std::move(c).value();
      } else {
        local = c.status();
      }
    }
    int ok = shm_ ? 1 : 0;
    RETURN_IF_MPI_ERROR("MPI_Allreduce (shm ok)",
                        MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, node_));
    if (group_) {
      Status st = group_->Unlink();
      if (!st.ok()) LogStatus(st);
    }
    if (!ok) {
      shm_.reset();
      group_.reset();
      LOG_WARN(kStage, "shm inside the host unavailable ({}): using MPI for every collective",
               local.ok() ? "a peer on this host failed to set it up" : local.ToString());
    }
    return Status::Ok();
  }

  MPI_Comm world_comm_ = MPI_COMM_NULL;
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Comm leaders_ = MPI_COMM_NULL;
  int rank_ = 0, world_ = 1, node_rank_ = 0, node_size_ = 1, n_hosts_ = 1;
  AllreduceAlgo algo_ = AllreduceAlgo::kAuto;
  std::unique_ptr<ShmGroup> group_;  // node rank 0 only
  std::unique_ptr<Communicator> shm_;
  std::vector<float> scratch_;
  double seconds_ = 0.0;
  uint64_t calls_ = 0;
};

}  // namespace

MpiOptions MpiOptionsFromEnv() {
  MpiOptions o;
  o.shm = ShmOptionsFromEnv();
  o.algo = o.shm.algo;
  if (const auto env = GetEnv(EnvVar::kMpiFakeHostSize)) {
    const char* v = env->c_str();
    int n = std::atoi(v);
    if (n > 0) {
      o.fake_host_size = n;
    } else {
      LogOnce(LogLevel::kWarn, "SPECD_MPI_FAKE_HOST_SIZE", kStage,
              std::string("SPECD_MPI_FAKE_HOST_SIZE='") + v + "' is not a positive integer: ignored");
    }
  }
  return o;
}

bool RunningUnderMpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
}

StatusOr<std::unique_ptr<Communicator>> NewMpiCommunicator(const MpiOptions& options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) return MpiError("MPI_Init_thread", rc).WithStage(kStage);
    g_we_initialized = true;
  }
  auto comm = std::make_unique<MpiCommunicator>();
  Status st = comm->Init(options);
  if (!st.ok()) return st.WithStage(kStage);
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace specd
