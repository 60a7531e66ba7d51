#include "comm/shm_communicator.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/clock.h"
#include "base/logging.h"
#include "comm/reduce_kernels.h"
#include "comm/shm_layout.h"
#include "platform/capability_registry.h"

namespace specd {
namespace {

using shm::CallDesc;
using shm::SlotCtrl;

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

const char* OpName(uint32_t op) {
  switch (op) {
    case shm::kOpAllReduce: return "allreduce";
    case shm::kOpFused: return "fused allreduce+rmsnorm";
    case shm::kOpAllGather: return "allgather";
    case shm::kOpBroadcast: return "broadcast";
    case shm::kOpBarrier: return "barrier";
  }
  return "unknown collective";
}

std::string DescribeCall(const CallDesc& d) {
  std::string s = OpName(d.op);
  switch (d.op) {
    case shm::kOpAllReduce:
      return s + "(count=" + std::to_string(d.count) + ", " +
             CommDTypeName(static_cast<CommDType>(d.dtype)) + ", " +
             AllreduceAlgoName(static_cast<AllreduceAlgo>(d.algo)) + ")";
    case shm::kOpFused:
      return s + "(rows=" + std::to_string(d.root > 0 ? d.count / d.root : 0) +
             ", dim=" + std::to_string(d.root) + ", " +
             AllreduceAlgoName(static_cast<AllreduceAlgo>(d.algo)) + ")";
    case shm::kOpAllGather:
      return s + "(count=" + std::to_string(d.count) + ", " +
             CommDTypeName(static_cast<CommDType>(d.dtype)) + ")";
    case shm::kOpBroadcast:
      return s + "(bytes=" + std::to_string(d.count) + ", root=" + std::to_string(d.root) + ")";
    default:
      return s + "()";
  }
}

std::string RankList(uint64_t mask) {
  std::string s;
  int n = 0;
  for (int q = 0; q < 64; ++q) {
    if ((mask >> q) & 1) {
      s += (n++ ? ", " : "") + std::to_string(q);
    }
  }
  return (n == 1 ? "rank " : "ranks ") + s;
}

int OnlineCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

// Rank r's share [*begin, *end) of n elements (or rows) split over `world`
// ranks in units of `align`, so shares start on cache-line boundaries.
void ShareRange(size_t n, int world, int r, size_t align, size_t* begin, size_t* end) {
  size_t per = (n + world - 1) / world;
  per = (per + align - 1) / align * align;
  *begin = std::min(n, per * static_cast<size_t>(r));
  *end = std::min(n, *begin + per);
}

// The shm backend. Protocol and layout: docs/shm-protocol.md; layout structs
// in shm_layout.h.
//
// Invariants:
//  I1 Steps and epochs. Every collective is one or more steps (one per chunk;
//     Barrier is one step). All ranks run the same sequence of steps, so the
//     k-th step has epoch k on every rank. Flag words (arrive, reduced) only
//     grow: they are never reset, so a stale value can never be mistaken for
//     a new one.
//  I2 Every step starts the same way: the rank writes its input to its own
//     in[e & 1] and its CallDesc to desc[e & 1], publishes arrive = e with a
//     release store, and waits (acquire loads) until every peer's arrive >= e.
//     No step skips this wait, whatever the op.
//  I3 Reuse of in[p] and desc[p]. A rank writes in[e & 1] in step e only after
//     finishing step e-1, whose arrive wait proved that every peer had
//     published arrive >= e-1 and so had finished step e-2: the last step that
//     read buffers of parity e & 1. Hence double buffering is enough, and a
//     peer can run at most one step ahead of the slowest rank.
//  I4 Reuse of out (two-shot share). A rank writes out in step e after the
//     step-e arrive wait, which proved every peer finished step e-1, including
//     its gather from out. Hence one out buffer is enough.
//  I5 A rank reads a peer's buffer only after an acquire load of the flag that
//     published it; the peer wrote the data before its release store.
//  I6 Results are reduced in rank order 0..N-1 by every rank (one-shot) or by
//     the share's owner (two-shot), so all ranks hold bitwise-identical results,
//     and one-shot and two-shot agree bitwise as well.
//  I7 After any error the communicator is unusable (every later call returns
//     the first error) and its slot says kFailed, so peers waiting on it stop
//     waiting with Unavailable instead of running into the deadline.
class ShmCommunicator final : public Communicator {
 public:
  ShmCommunicator(std::shared_ptr<ShmRegion> region, int rank, const ShmOptions& o)
      : region_(std::move(region)),
        rank_(rank),
        world_(region_->world()),
        buf_bytes_(region_->buffer_bytes()),
        algo_(o.algo),
        timeout_s_(o.timeout_s),
        liveness_ns_(static_cast<int64_t>(o.liveness_check_s * 1e9)),
        platform_key_(o.platform_key.empty() ? DetectPlatformKey() : o.platform_key) {
    for (int r = 0; r < world_; ++r) {
      ctrl_[r] = region_->ctrl(r);
      in_[r][0] = region_->in_buf(r, 0);
      in_[r][1] = region_->in_buf(r, 1);
      out_[r] = region_->out_buf(r);
      if (r != rank_) peers_mask_ |= uint64_t{1} << r;
    }
    // When ranks outnumber cores a spinning waiter steals the CPU from the
    // rank it waits for, so it yields at once (see ShmOptions::spin_us).
    spin_ns_ = world_ <= OnlineCpus() ? static_cast<int64_t>(o.spin_us * 1000.0) : 0;
    tuning_ = LookupAllreduceTuning(platform_key_, world_).tuning;
    SetAllreduceAlgo(algo_);
  }

  ~ShmCommunicator() override {
    if (!joined_) return;
    SlotCtrl* c = ctrl_[rank_];
    if (c->state.load(std::memory_order_relaxed) != shm::kFailed) {
      c->state.store(shm::kLeft, std::memory_order_release);
    }
    pthread_mutex_unlock(&c->liveness);
  }

  Status Join() {
    SlotCtrl* c = ctrl_[rank_];
    int rc = EBUSY;
    // A peer may hold the lock for a moment while probing liveness.
    for (int i = 0; i < 1000 && rc == EBUSY; ++i) {
      rc = pthread_mutex_trylock(&c->liveness);
      if (rc == EBUSY) usleep(100);
    }
    const int pid = c->pid.load(std::memory_order_relaxed);
    if (rc == EOWNERDEAD) {
      pthread_mutex_consistent(&c->liveness);
      pthread_mutex_unlock(&c->liveness);
      return UnavailableError("shm group: rank " + std::to_string(rank_) + "'s slot belonged to pid " +
                              std::to_string(pid) +
                              ", which died; a group cannot be reused after a rank dies");
    }
    if (rc != 0) {
      return InvalidArgumentError("shm group: rank " + std::to_string(rank_) +
                                  " already joined (pid " + std::to_string(pid) + ")");
    }
    const int32_t state = c->state.load(std::memory_order_acquire);
    if (state != shm::kEmpty) {
      pthread_mutex_unlock(&c->liveness);
      return InvalidArgumentError("shm group: rank " + std::to_string(rank_) +
                                  " was already used (slot state " + std::to_string(state) +
                                  ", pid " + std::to_string(pid) + "); join each rank once");
    }
    c->pid.store(static_cast<int32_t>(getpid()), std::memory_order_relaxed);
    c->state.store(shm::kJoined, std::memory_order_release);
    joined_ = true;
    return Status::Ok();
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_; }
  std::string backend_name() const override { return "shm"; }

  void SetAllreduceAlgo(AllreduceAlgo algo) override {
    if (algo == AllreduceAlgo::kMpi) {
      LogOnce(LogLevel::kWarn, "shm-algo-mpi", "comm init",
              "allreduce algorithm 'mpi' is not available on the shm backend: using auto");
      algo = AllreduceAlgo::kAuto;
    }
    algo_ = algo;
  }
  double comm_seconds() const override { return seconds_; }
  uint64_t comm_calls() const override { return calls_; }

  Status AllReduce(const void* in, void* out, size_t count, CommDType dtype) override {
    RETURN_IF_ERROR(Begin(shm::kOpAllReduce));
    return Finish(DoAllReduce(static_cast<const char*>(in), static_cast<char*>(out), count, dtype));
  }

  Status AllReduceResidualRmsNorm(const float* x, float* residual, const float* weight, float eps,
                                  int n_rows, int dim, float* out) override {
    RETURN_IF_ERROR(Begin(shm::kOpFused));
    return Finish(DoFused(x, residual, weight, eps, n_rows, dim, out));
  }

  Status AllGather(const void* in, void* out, size_t count, CommDType dtype) override {
    RETURN_IF_ERROR(Begin(shm::kOpAllGather));
    return Finish(DoAllGather(static_cast<const char*>(in), static_cast<char*>(out), count, dtype));
  }

  Status Broadcast(void* buf, size_t bytes, int root) override {
    RETURN_IF_ERROR(Begin(shm::kOpBroadcast));
    return Finish(DoBroadcast(static_cast<char*>(buf), bytes, root));
  }

  Status Barrier() override {
    RETURN_IF_ERROR(Begin(shm::kOpBarrier));
    const uint64_t e = epoch_ + 1;
    return Finish(Step(e, CallDesc{shm::kOpBarrier, 0, 0, cur_seq_, 0, 0}));
  }

 private:
  // ---- call bookkeeping -------------------------------------------------

  Status Begin(uint32_t op) {
    if (!broken_.ok()) {
      Status st = broken_;
      return st.Prepend("communicator unusable after an earlier error");
    }
    cur_op_ = op;
    cur_seq_ = ++calls_;
    start_ns_ = NowNanos();
    deadline_ns_ = start_ns_ + static_cast<int64_t>(timeout_s_ * 1e9);
    return Status::Ok();
  }

  Status Finish(Status st) {
    seconds_ += static_cast<double>(NowNanos() - start_ns_) * 1e-9;
    if (st.ok()) return st;
    st.WithStage(std::string(OpName(cur_op_)) + " #" + std::to_string(cur_seq_)).WithRank(rank_);
    broken_ = st;
    SlotCtrl* c = ctrl_[rank_];
    c->failed_call.store(cur_seq_, std::memory_order_relaxed);
    c->state.store(shm::kFailed, std::memory_order_release);
    return st;
  }

  // "allreduce #812 (epoch 812)"
  std::string CallName(uint64_t e) const {
    return std::string(OpName(cur_op_)) + " #" + std::to_string(cur_seq_) + " (epoch " +
           std::to_string(e) + ")";
  }

  // ---- the step protocol (I2) --------------------------------------------

  // Publishes this rank's epoch-e descriptor (the input is already in
  // in[e & 1]), waits for every peer's arrival, checks that all ranks run the
  // same collective, and commits the epoch.
  Status Step(uint64_t e, const CallDesc& d) {
    SlotCtrl* c = ctrl_[rank_];
    c->desc[e & 1] = d;
    c->arrive.store(e, std::memory_order_release);
    epoch_ = e;
    RETURN_IF_ERROR(WaitAll(/*reduced=*/false, e));
    for (int q = 0; q < world_; ++q) {
      if (q == rank_) continue;
      const CallDesc& p = ctrl_[q]->desc[e & 1];
      if (p.op != d.op || p.dtype != d.dtype || p.count != d.count || p.root != d.root ||
          p.algo != d.algo) {
        return InvalidArgumentError(CallName(e) + ": mismatched collectives: rank " +
                                    std::to_string(rank_) + " called " + DescribeCall(d) +
                                    " but rank " + std::to_string(q) + " called " +
                                    DescribeCall(p));
      }
    }
    return Status::Ok();
  }

  Status PublishReduced(uint64_t e) {
    ctrl_[rank_]->reduced.store(e, std::memory_order_release);
    return WaitAll(/*reduced=*/true, e);
  }

  // Waits until every peer's flag reaches e: spin, then yield, then short
  // sleeps; checks the peers' liveness every liveness_ns_ and the deadline.
  Status WaitAll(bool reduced, uint64_t e) {
    uint64_t pending = peers_mask_;
    int spins = 0;
    int64_t spin_since = 0;
    int64_t slow_since = 0;
    int64_t next_check = 0;
    for (;;) {
      for (uint64_t m = pending; m != 0; m &= m - 1) {
        const int q = __builtin_ctzll(m);
        const std::atomic<uint64_t>& f = reduced ? ctrl_[q]->reduced : ctrl_[q]->arrive;
        if (f.load(std::memory_order_acquire) >= e) pending &= ~(uint64_t{1} << q);
      }
      if (pending == 0) return Status::Ok();
      // Spin: at least 16 rounds, then while within spin_ns_ (the clock is
      // read every 256 rounds).
      if (++spins < 16 || (spins & 255) != 0) {
        CpuRelax();
        continue;
      }
      const int64_t now = NowNanos();
      if (spin_since == 0) spin_since = now;
      if (now - spin_since < spin_ns_ && now < deadline_ns_) {
        CpuRelax();
        continue;
      }
      if (slow_since == 0) {
        slow_since = now;
        next_check = now + liveness_ns_;
      }
      if (now >= next_check) {
        for (uint64_t m = pending; m != 0; m &= m - 1) {
          RETURN_IF_ERROR(CheckPeer(__builtin_ctzll(m), e));
        }
        next_check = now + liveness_ns_;
      }
      if (now >= deadline_ns_) {
        char secs[32];
        std::snprintf(secs, sizeof(secs), "%g", timeout_s_);
        return DeadlineExceededError(
            CallName(e) + ": " + RankList(pending) +
            (reduced ? " never published the reduced share" : " never arrived") + " within " +
            secs + " s");
      }
      if (now - slow_since < 1000000) {
        sched_yield();
      } else {
        timespec ts{0, 20000};
        nanosleep(&ts, nullptr);
      }
    }
  }

  // Unavailable if peer q died, failed or left; OK if it is alive (or has not
  // joined yet: then only the deadline ends the wait).
  Status CheckPeer(int q, uint64_t e) {
    SlotCtrl* c = ctrl_[q];
    const int32_t state = c->state.load(std::memory_order_acquire);
    const std::string who =
        "rank " + std::to_string(q) + " (pid " + std::to_string(c->pid.load(std::memory_order_relaxed)) + ")";
    switch (state) {
      case shm::kDead:
        return UnavailableError(who + " died during " + CallName(e));
      case shm::kFailed:
        return UnavailableError(who + " stopped after an error in its collective #" +
                                std::to_string(c->failed_call.load(std::memory_order_relaxed)) +
                                " (see its log); this rank was in " + CallName(e));
      case shm::kLeft:
        return UnavailableError(who + " left the group (destroyed its communicator) before " +
                                CallName(e));
      default:
        break;
    }
    const int rc = pthread_mutex_trylock(&c->liveness);
    if (rc == EOWNERDEAD || rc == ENOTRECOVERABLE) {
      c->state.store(shm::kDead, std::memory_order_release);
      if (rc == EOWNERDEAD) {
        pthread_mutex_consistent(&c->liveness);
        pthread_mutex_unlock(&c->liveness);
      }
      return UnavailableError(who + " died during " + CallName(e));
    }
    if (rc == 0) pthread_mutex_unlock(&c->liveness);
    return Status::Ok();
  }

  // ---- algorithms ---------------------------------------------------------

  // One-shot or two-shot for `bytes`, and the largest step in bytes.
  AllreduceAlgo Choose(size_t bytes, size_t* step_bytes) const {
    *step_bytes = buf_bytes_;
    if (algo_ != AllreduceAlgo::kAuto) return algo_;
    if (bytes <= tuning_.one_shot_max_bytes) return AllreduceAlgo::kOneShot;
    if (bytes > tuning_.two_shot_max_bytes && tuning_.chunk_bytes >= 4096) {
      *step_bytes = std::min(buf_bytes_, tuning_.chunk_bytes);
    }
    return AllreduceAlgo::kTwoShot;
  }

  void Sum(const char* const* srcs, CommDType dtype, char* dst, size_t n) {
    if (dtype == CommDType::kF32) {
      comm_internal::SumRanksF32(reinterpret_cast<const float* const*>(srcs), world_,
                                 reinterpret_cast<float*>(dst), n);
    } else {
      comm_internal::SumRanksBF16(reinterpret_cast<const uint16_t* const*>(srcs), world_,
                                  reinterpret_cast<uint16_t*>(dst), n);
    }
  }

  Status DoAllReduce(const char* in, char* out, size_t count, CommDType dtype) {
    if (count == 0) return Status::Ok();
    const size_t es = CommDTypeBytes(dtype);
    size_t step_bytes = 0;
    const AllreduceAlgo algo = Choose(count * es, &step_bytes);
    const size_t align = 64 / es;  // elements per cache line
    const size_t max_n = step_bytes / es / align * align;
    const char* srcs[shm::kMaxWorld];
    for (size_t off = 0; off < count; off += max_n) {
      const size_t n = std::min(max_n, count - off);
      const uint64_t e = epoch_ + 1;
      std::memcpy(in_[rank_][e & 1], in + off * es, n * es);
      RETURN_IF_ERROR(Step(e, CallDesc{shm::kOpAllReduce, static_cast<uint32_t>(dtype), count,
                                       cur_seq_, 0, static_cast<uint32_t>(algo)}));
      if (algo == AllreduceAlgo::kOneShot) {
        for (int r = 0; r < world_; ++r) srcs[r] = in_[r][e & 1];
        Sum(srcs, dtype, out + off * es, n);
        continue;
      }
      size_t b = 0, en = 0;
      ShareRange(n, world_, rank_, align, &b, &en);
      for (int r = 0; r < world_; ++r) srcs[r] = in_[r][e & 1] + b * es;
      Sum(srcs, dtype, out_[rank_], en - b);
      RETURN_IF_ERROR(PublishReduced(e));
      for (int r = 0; r < world_; ++r) {
        ShareRange(n, world_, r, align, &b, &en);
        std::memcpy(out + (off + b) * es, out_[r], (en - b) * es);
      }
    }
    return Status::Ok();
  }

  Status DoFused(const float* x, float* residual, const float* weight, float eps, int n_rows,
                 int dim, float* out) {
    if (n_rows < 0 || dim <= 0) {
      return InvalidArgumentError("fused allreduce+rmsnorm: n_rows " + std::to_string(n_rows) +
                                  ", dim " + std::to_string(dim) +
                                  ": expected n_rows >= 0 and dim > 0");
    }
    if (n_rows == 0) return Status::Ok();
    const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
    const size_t rows = static_cast<size_t>(n_rows);
    size_t step_bytes = 0;
    AllreduceAlgo algo = Choose(rows * row_bytes, &step_bytes);
    size_t max_rows = step_bytes / row_bytes;
    if (algo == AllreduceAlgo::kTwoShot) {
      // The owner publishes residual and out rows of its share: 2 rows each.
      max_rows = std::min(max_rows, buf_bytes_ / (2 * row_bytes) * world_);
      if (max_rows == 0) {
        algo = AllreduceAlgo::kOneShot;
        max_rows = buf_bytes_ / row_bytes;
      }
    }
    if (max_rows == 0) {
      return InvalidArgumentError("fused allreduce+rmsnorm: dim " + std::to_string(dim) + " (" +
                                  std::to_string(row_bytes) +
                                  " bytes per row) exceeds the shm staging buffer (" +
                                  std::to_string(buf_bytes_) + " bytes)");
    }
    const char* srcs[shm::kMaxWorld];
    const CallDesc d{shm::kOpFused, static_cast<uint32_t>(CommDType::kF32),
                     rows * static_cast<size_t>(dim), cur_seq_, dim, static_cast<uint32_t>(algo)};
    for (size_t row0 = 0; row0 < rows; row0 += max_rows) {
      const size_t nr = std::min(max_rows, rows - row0);
      const size_t base = row0 * static_cast<size_t>(dim);
      const uint64_t e = epoch_ + 1;
      std::memcpy(in_[rank_][e & 1], x + base, nr * row_bytes);
      RETURN_IF_ERROR(Step(e, d));
      if (algo == AllreduceAlgo::kOneShot) {
        for (size_t i = 0; i < nr; ++i) {
          const size_t off = base + i * dim;
          for (int r = 0; r < world_; ++r) srcs[r] = in_[r][e & 1] + i * row_bytes;
          // out may alias x: x's rows are already staged in in[], so the sum
          // can go straight into out and be normalized in place.
          comm_internal::SumRanksF32(reinterpret_cast<const float* const*>(srcs), world_,
                                     out + off, dim);
          comm_internal::ResidualRmsNormRow(out + off, residual + off, weight, eps, dim, out + off);
        }
        continue;
      }
      // Two-shot: my share of rows; out buffer = [residual rows][out rows].
      size_t rb = 0, re = 0;
      ShareRange(nr, world_, rank_, 1, &rb, &re);
      float* res_part = reinterpret_cast<float*>(out_[rank_]);
      float* out_part = res_part + (re - rb) * dim;
      for (size_t i = rb; i < re; ++i) {
        float* rrow = res_part + (i - rb) * dim;
        float* orow = out_part + (i - rb) * dim;
        std::memcpy(rrow, residual + base + i * dim, row_bytes);
        for (int r = 0; r < world_; ++r) srcs[r] = in_[r][e & 1] + i * row_bytes;
        comm_internal::SumRanksF32(reinterpret_cast<const float* const*>(srcs), world_, orow, dim);
        comm_internal::ResidualRmsNormRow(orow, rrow, weight, eps, dim, orow);
      }
      RETURN_IF_ERROR(PublishReduced(e));
      for (int r = 0; r < world_; ++r) {
        ShareRange(nr, world_, r, 1, &rb, &re);
        const size_t cnt = (re - rb) * dim;
        const float* src = reinterpret_cast<const float*>(out_[r]);
        std::memcpy(residual + base + rb * dim, src, cnt * sizeof(float));
        std::memcpy(out + base + rb * dim, src + cnt, cnt * sizeof(float));
      }
    }
    return Status::Ok();
  }

  Status DoAllGather(const char* in, char* out, size_t count, CommDType dtype) {
    if (count == 0) return Status::Ok();
    const size_t es = CommDTypeBytes(dtype);
    const size_t max_n = buf_bytes_ / es;
    for (size_t off = 0; off < count; off += max_n) {
      const size_t n = std::min(max_n, count - off);
      const uint64_t e = epoch_ + 1;
      std::memcpy(in_[rank_][e & 1], in + off * es, n * es);
      RETURN_IF_ERROR(Step(e, CallDesc{shm::kOpAllGather, static_cast<uint32_t>(dtype), count,
                                       cur_seq_, 0, 0}));
      for (int r = 0; r < world_; ++r) {
        std::memcpy(out + (r * count + off) * es, in_[r][e & 1], n * es);
      }
    }
    return Status::Ok();
  }

  Status DoBroadcast(char* buf, size_t bytes, int root) {
    if (root < 0 || root >= world_) {
      return InvalidArgumentError("broadcast: root " + std::to_string(root) +
                                  " is not a rank of a world of size " + std::to_string(world_));
    }
    if (bytes == 0) return Status::Ok();
    for (size_t off = 0; off < bytes; off += buf_bytes_) {
      const size_t n = std::min(buf_bytes_, bytes - off);
      const uint64_t e = epoch_ + 1;
      if (rank_ == root) std::memcpy(in_[rank_][e & 1], buf + off, n);
      RETURN_IF_ERROR(Step(e, CallDesc{shm::kOpBroadcast, 0, bytes, cur_seq_, root, 0}));
      if (rank_ != root) std::memcpy(buf + off, in_[root][e & 1], n);
    }
    return Status::Ok();
  }

  std::shared_ptr<ShmRegion> region_;
  const int rank_;
  const int world_;
  const size_t buf_bytes_;
  SlotCtrl* ctrl_[shm::kMaxWorld] = {};
  char* in_[shm::kMaxWorld][2] = {};
  char* out_[shm::kMaxWorld] = {};
  uint64_t peers_mask_ = 0;
  AllreduceAlgo algo_;
  AllreduceTuning tuning_{};
  double timeout_s_;
  int64_t liveness_ns_;
  int64_t spin_ns_ = 0;  // how long a wait spins before yielding
  std::string platform_key_;
  bool joined_ = false;

  uint64_t epoch_ = 0;  // epoch of the last step this rank published
  uint64_t calls_ = 0;
  double seconds_ = 0.0;
  Status broken_;  // first error; non-OK makes every later call fail (I7)
  // The collective in progress (for messages and the deadline).
  uint32_t cur_op_ = 0;
  uint64_t cur_seq_ = 0;
  int64_t start_ns_ = 0;
  int64_t deadline_ns_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<Communicator>> NewShmCommunicator(std::shared_ptr<ShmRegion> region,
                                                           int rank, const ShmOptions& options) {
  if (region == nullptr) return InvalidArgumentError("shm group: no mapping");
  if (rank < 0 || rank >= region->world()) {
    return InvalidArgumentError("shm group: rank " + std::to_string(rank) +
                                " out of range for world size " + std::to_string(region->world()))
        .WithStage("comm init");
  }
  if (!(options.timeout_s > 0)) {
    return InvalidArgumentError("shm group: timeout_s must be > 0");
  }
  auto comm = std::make_unique<ShmCommunicator>(std::move(region), rank, options);
  Status st = comm->Join();
  if (!st.ok()) return st.WithStage("comm init").WithRank(rank);
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace specd
