// The shm backend: collectives over one shared mapping (a "symmetric heap")
// for ranks on one host. Protocol and layout: docs/shm-protocol.md.
//
// Creating a group and handing it to the ranks:
//
//   Forked ranks (tests, comm-bench):
//     auto group = CreateShmGroup(world, options);      // supervisor, before fork()
//     fork(); ... in child r:
//       auto comm = JoinShmGroup(**group, r, options);  // uses the inherited mapping
//
//   Re-exec'd ranks (the launcher): the group lives in a memfd. The supervisor
//   calls group->PrepareForExec() (clears FD_CLOEXEC on the memfd), then
//   fork()s and exec()s `specd ... --rank R --comm-fd F` with F = group->fd()
//   (group->HandoffSpec() returns "fd:F"). The rank calls
//       JoinShmGroupFromSpec("fd:F", R, options)
//   which maps the memfd, validates its header (magic, version, world, sizes)
//   and closes F. No name exists in /dev/shm, so nothing can leak: the memory
//   is freed when the last rank and the supervisor have closed/unmapped it.
//
//   Unrelated processes (the MPI bootstrap): one process calls
//   CreateNamedShmGroup(world, "/specd-comm-<unique>"), the others
//   JoinShmGroupFromSpec("name:/specd-comm-<unique>", ...); once every rank has
//   mapped it, the creator calls group->Unlink() so the name disappears.
//
// A rank joins once; its slot's robust liveness lock is held by the joining
// thread until the Communicator is destroyed, so the Communicator must be
// destroyed by the thread that joined (or by that process exiting).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "comm/communicator.h"

namespace specd {

struct ShmOptions {
  // Bytes of each staging buffer per rank; larger messages are chunked.
  // The creator's value is stored in the mapping; joiners ignore theirs.
  size_t buffer_bytes = 4u << 20;
  // Deadline of every wait inside a collective. Env SPECD_COMM_TIMEOUT_S
  // (seconds, > 0) overrides the default in ShmOptionsFromEnv().
  double timeout_s = 60.0;
  // kAuto: the capability registry picks per call. Env SPECD_ALLREDUCE_ALGO
  // (one-shot|two-shot|auto) overrides in ShmOptionsFromEnv().
  AllreduceAlgo algo = AllreduceAlgo::kAuto;
  // Key for registry lookups; empty: DetectPlatformKey().
  std::string platform_key;
  // Period of the liveness check of missing peers while waiting.
  double liveness_check_s = 0.002;
  // How long a wait spins before it yields the CPU, when the ranks fit the
  // CPUs (with more ranks than CPUs it never spins). Spinning answers a peer
  // that arrives within microseconds at once; spinning longer takes the core
  // from a peer that another process has preempted, which on a busy host costs
  // whole scheduler time slices. Env SPECD_COMM_SPIN_US overrides.
  double spin_us = 50.0;
};

// Defaults with the environment overrides applied (invalid values are logged
// once and ignored).
ShmOptions ShmOptionsFromEnv();

class ShmRegion;

// Owns the shared mapping (and the memfd or the shm name) on the creator side.
class ShmGroup {
 public:
  ~ShmGroup();
  ShmGroup(const ShmGroup&) = delete;
  ShmGroup& operator=(const ShmGroup&) = delete;

  int world_size() const;
  size_t mapping_bytes() const;
  // The memfd (-1 for a named group).
  int fd() const;
  // "fd:F" or "name:/specd-..."; what JoinShmGroupFromSpec accepts.
  std::string HandoffSpec() const;
  // Clears FD_CLOEXEC on the memfd so an exec'd child inherits it.
  Status PrepareForExec();
  // Removes the shm name (named groups; no-op otherwise). Idempotent; the
  // destructor also does it.
  Status Unlink();

  const std::shared_ptr<ShmRegion>& region() const { return region_; }

 private:
  friend StatusOr<std::unique_ptr<ShmGroup>> CreateShmGroup(int, const ShmOptions&);
  friend StatusOr<std::unique_ptr<ShmGroup>> CreateNamedShmGroup(int, const std::string&,
                                                                  const ShmOptions&);
  explicit ShmGroup(std::shared_ptr<ShmRegion> region) : region_(std::move(region)) {}
  std::shared_ptr<ShmRegion> region_;
};

// An anonymous (memfd) group for `world` ranks. REQUIRES nothing: bad values
// (world < 1 or > 64, buffer_bytes too small) return InvalidArgument.
StatusOr<std::unique_ptr<ShmGroup>> CreateShmGroup(int world, const ShmOptions& options);
// A group under a POSIX shm name (shm_open O_EXCL; AlreadyExists -> IoError).
StatusOr<std::unique_ptr<ShmGroup>> CreateNamedShmGroup(int world, const std::string& name,
                                                        const ShmOptions& options);

// Joins as `rank` through a group object (in the creator's process or a
// forked child). The communicator keeps the mapping alive on its own.
StatusOr<std::unique_ptr<Communicator>> JoinShmGroup(const ShmGroup& group, int rank,
                                                     const ShmOptions& options);
// Joins through "fd:F" (takes ownership of F and closes it) or "name:/n".
StatusOr<std::unique_ptr<Communicator>> JoinShmGroupFromSpec(const std::string& spec, int rank,
                                                             const ShmOptions& options);

}  // namespace specd
