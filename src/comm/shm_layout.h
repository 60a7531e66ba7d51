// Internal: the layout of the shm backend's mapping (docs/shm-protocol.md).
//
//   [Header, 4 KiB]
//   [slot 0][slot 1]...[slot N-1]           slot r at slots_offset + r * slot_bytes
//   slot = [SlotCtrl, 4 KiB][in 0: B][in 1: B][out: B]    B = buffer_bytes
//
// in[p] receives the rank's input for epochs with parity p (double-buffered);
// out receives its reduced share in two-shot collectives (single-buffered; see
// the invariants in shm_communicator.cc).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace specd::shm {

constexpr uint64_t kMagic = 0x316d687364636570ull;  // "pecdshm1" little-endian
constexpr uint32_t kVersion = 1;
constexpr int kMaxWorld = 64;
constexpr size_t kPage = 4096;
constexpr size_t kMinBufferBytes = 64 * 1024;

enum SlotState : int32_t {
  kEmpty = 0,   // no rank has joined this slot yet
  kJoined = 1,  // a live rank owns it (holds `liveness`)
  kLeft = 2,    // the rank destroyed its communicator
  kDead = 3,    // a peer found `liveness` EOWNERDEAD: the owner died
  kFailed = 4,  // the rank returned an error from a collective and stopped
};

enum Op : uint32_t { kOpAllReduce = 1, kOpFused = 2, kOpAllGather = 3, kOpBroadcast = 4, kOpBarrier = 5 };

// What a rank is doing in one epoch; compared across ranks to detect
// mismatched collectives. Written before the epoch's release store.
struct CallDesc {
  uint32_t op;
  uint32_t dtype;  // CommDType
  uint64_t count;  // elements (fused: n_rows * dim; broadcast: bytes)
  uint64_t call_seq;
  int32_t root;     // broadcast root; fused: dim; else 0
  uint32_t algo;    // AllreduceAlgo actually used (allreduce/fused), else 0
};

struct Header {
  uint64_t magic;
  uint32_t version;
  uint32_t world;
  uint64_t buffer_bytes;
  uint64_t slot_bytes;
  uint64_t slots_offset;
  uint64_t total_bytes;
  int32_t creator_pid;
};
static_assert(sizeof(Header) <= kPage);

struct SlotCtrl {
  // Epoch of the latest phase-1 publication (input written to in[e & 1]).
  alignas(64) std::atomic<uint64_t> arrive;
  // Epoch of the latest two-shot share publication (out holds it).
  alignas(64) std::atomic<uint64_t> reduced;
  alignas(64) CallDesc desc[2];  // indexed by epoch parity
  alignas(64) std::atomic<int32_t> state;  // SlotState
  std::atomic<int32_t> pid;
  std::atomic<uint64_t> failed_call;  // call_seq of the collective that failed (kFailed)
  // Robust, process-shared; locked by the owning thread from join to
  // destruction. A peer's trylock returning EOWNERDEAD proves the owner died.
  pthread_mutex_t liveness;
};
static_assert(sizeof(SlotCtrl) <= kPage);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

inline size_t RoundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

}  // namespace specd::shm

namespace specd {

// One mapping of a group. Unmaps (and closes/unlinks what it owns) on destruction.
class ShmRegion {
 public:
  ShmRegion(void* base, size_t bytes, int fd, std::string name)
      : base_(static_cast<char*>(base)), bytes_(bytes), fd_(fd), name_(std::move(name)) {}
  ~ShmRegion();
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  shm::Header* header() const { return reinterpret_cast<shm::Header*>(base_); }
  int world() const { return static_cast<int>(header()->world); }
  size_t buffer_bytes() const { return header()->buffer_bytes; }
  char* slot(int r) const {
    return base_ + header()->slots_offset + static_cast<size_t>(r) * header()->slot_bytes;
  }
  shm::SlotCtrl* ctrl(int r) const { return reinterpret_cast<shm::SlotCtrl*>(slot(r)); }
  char* in_buf(int r, uint64_t epoch) const {
    return slot(r) + shm::kPage + (epoch & 1) * header()->buffer_bytes;
  }
  char* out_buf(int r) const { return slot(r) + shm::kPage + 2 * header()->buffer_bytes; }

  size_t bytes() const { return bytes_; }
  int fd() const { return fd_; }
  const std::string& name() const { return name_; }
  Status Unlink();

 private:
  char* base_;
  size_t bytes_;
  int fd_;            // memfd kept by the creator; -1 otherwise
  std::string name_;  // shm name until unlinked; empty otherwise
};

}  // namespace specd
