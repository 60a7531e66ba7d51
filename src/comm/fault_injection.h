// Fault injection for tests of rank failures (never set in production).
//
//   SPECD_FAULT_KILL_RANK=R:N   rank R raises SIGKILL on itself when it
//                               enters its N-th collective (1-based, counting
//                               every collective the rank issues: start-up
//                               barrier, step descriptors, allreduces, ...)
//
// so a test can kill a rank in the middle of a generation deterministically,
// without racing the process from outside.
#pragma once

#include <memory>

#include "comm/communicator.h"

namespace specd {

// Wraps `inner` (not owned) when SPECD_FAULT_KILL_RANK names inner->rank();
// returns null otherwise (and logs a warning once for a malformed value).
std::unique_ptr<Communicator> NewFaultInjectingCommunicator(Communicator* inner);

}  // namespace specd
