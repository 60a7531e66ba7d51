// --cpu-bind: which CPUs each rank process may run on.
//
//   none      no pinning (default): the kernel schedules every thread
//   cores     rank r gets `threads` consecutive CPUs of the allowed set,
//             starting at r * threads (wrapping around when ranks x threads
//             exceed the CPUs)
//   LIST      one CPU list per rank, ranks separated by ':', each in the
//             kernel's cpulist syntax: "0:1" (rank 0 on CPU 0, rank 1 on
//             CPU 1), "0-3:4-7", "0,2:1,3"
//
// "The allowed set" is the process's affinity mask when it starts (taskset,
// cgroups), in ascending order. Pinning is per process: the rank's thread
// pool inherits it. Pure functions except BindThisProcess / AllowedCpus.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace specd::launch {

// "0-3,6" -> {0,1,2,3,6}. InvalidArgument naming the bad item.
StatusOr<std::vector<int>> ParseCpuList(const std::string& text);
// "0,1,2,5" -> "0-2,5".
std::string FormatCpuList(const std::vector<int>& cpus);

// The CPUs of every rank for `spec` (empty vectors: no pinning).
// InvalidArgument names what was wrong and what was expected: an unknown
// mode, a list with the wrong number of ranks, a CPU outside `allowed`.
// REQUIRES: world >= 1, threads >= 1, allowed non-empty and ascending.
StatusOr<std::vector<std::vector<int>>> PlanCpuBinding(const std::string& spec, int world,
                                                       int threads,
                                                       const std::vector<int>& allowed);

// This process's affinity mask, ascending.
std::vector<int> AllowedCpus();
// Restricts this process (and threads it starts later) to `cpus`.
Status BindThisProcess(const std::vector<int>& cpus);

}  // namespace specd::launch
