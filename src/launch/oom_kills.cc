#include "launch/oom_kills.h"

#include <fstream>
#include <sstream>
#include <vector>

namespace specd::launch {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The value after "oom_kill " in a key-value file, or -1.
int64_t OomKillField(const std::string& text) {
  std::istringstream in(text);
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return -1;
}

}  // namespace

int64_t OomKillCount(const std::string& proc_self_cgroup, const std::string& cgroup_root) {
  // Lines are "ID:CONTROLLERS:PATH": "0::/p" (v2), "4:memory:/p" (v1).
  std::istringstream lines(proc_self_cgroup);
  std::vector<std::string> candidates;
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers == "memory") {
      candidates.push_back(cgroup_root + "/memory" + path + "/memory.oom_control");
    } else if (controllers.empty()) {
      candidates.push_back(cgroup_root + path + "/memory.events");
      candidates.push_back(cgroup_root + "/unified" + path + "/memory.events");
    }
  }
  for (const std::string& c : candidates) {
    const int64_t n = OomKillField(Slurp(c));
    if (n >= 0) return n;
  }
  return -1;
}

int64_t OomKillCount() { return OomKillCount(Slurp("/proc/self/cgroup"), "/sys/fs/cgroup"); }

}  // namespace specd::launch
