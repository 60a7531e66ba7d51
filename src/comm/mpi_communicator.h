// The mpi backend: collectives through Open MPI, for ranks started by mpirun
// on one or more hosts.
//
// Topology is found with MPI_Comm_split_type(MPI_COMM_TYPE_SHARED). Ranks on
// the same host share an shm group (node rank 0 creates a named segment,
// broadcasts its name, every node rank maps it, barrier, then it is unlinked),
// so with algo kAuto:
//   - all ranks on one host: every collective runs on shm (backend "shm");
//   - several hosts: allreduce is hierarchical (shm reduce inside each host,
//     MPI_Allreduce between host leaders, shm broadcast back; backend "hier"),
//     the other collectives use MPI directly;
//   - algo kMpi, or the shm group could not be set up: plain MPI collectives
//     (backend "mpi").
// bf16 travels to MPI as f32 (MPI has no bf16 sum), so it is accumulated in
// f32 and rounded once per MPI reduction.
//
// Deadlines: shm waits have the usual deadline; blocking MPI calls have none
// of their own. A rank that dies under mpirun makes mpirun abort the job.
//
// MPI is initialized on first use (MPI_Init_thread, FUNNELED) and finalized
// when the last MPI communicator is destroyed, so a binary that never selects
// this backend runs without mpirun.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "comm/shm_group.h"

namespace specd {

struct MpiOptions {
  AllreduceAlgo algo = AllreduceAlgo::kAuto;
  ShmOptions shm;              // for the per-host shm group
  bool use_host_shm = true;    // false: never build the per-host shm group
  // Tests: treat each run of `fake_host_size` consecutive ranks as one host
  // (env SPECD_MPI_FAKE_HOST_SIZE), to exercise the hierarchical path on
  // one machine. 0: real topology.
  int fake_host_size = 0;
};

// Defaults with env overrides (ShmOptionsFromEnv, SPECD_MPI_FAKE_HOST_SIZE).
MpiOptions MpiOptionsFromEnv();

// True when this process was started by mpirun (OMPI_COMM_WORLD_SIZE or
// PMI_SIZE is set).
bool RunningUnderMpirun();

// Initializes MPI if needed and builds the communicator over MPI_COMM_WORLD.
// Collective: every rank must call it.
StatusOr<std::unique_ptr<Communicator>> NewMpiCommunicator(const MpiOptions& options);

}  // namespace specd
