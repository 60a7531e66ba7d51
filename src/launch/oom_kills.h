// How many processes the kernel's OOM killer has ended in this process's
// memory cgroup: the "oom_kill" counter of memory.events (cgroup v2) or of
// memory.oom_control (cgroup v1). A rank that dies by SIGKILL while this
// count rises was OOM-killed; otherwise SIGKILL had another sender (an
// operator's kill -9, a job scheduler, a health check).
#pragma once

#include <cstdint>
#include <string>

namespace specd::launch {

// The counter, or -1 when no cgroup memory controller file can be read.
int64_t OomKillCount();

// The same from explicit files (tests): /proc/self/cgroup's contents and the
// cgroup filesystem root (normally /sys/fs/cgroup).
int64_t OomKillCount(const std::string& proc_self_cgroup, const std::string& cgroup_root);

}  // namespace specd::launch
