// Internal: the shm Communicator, created through comm/shm_group.h.
#pragma once

#include <memory>

#include "comm/communicator.h"
#include "comm/shm_group.h"

namespace specd {

// Joins `region` as `rank`: takes the slot's liveness lock and marks it
// joined. Errors: rank out of range, slot already owned by a live rank, or
// owned by a rank that died (a group is not reusable after a death).
StatusOr<std::unique_ptr<Communicator>> NewShmCommunicator(std::shared_ptr<ShmRegion> region,
                                                           int rank, const ShmOptions& options);

}  // namespace specd
