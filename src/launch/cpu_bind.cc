#include "launch/cpu_bind.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace specd::launch {
namespace {

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

bool ParseInt(const std::string& s, int* v) {
  if (s.empty() || s.size() > 6) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  *v = std::stoi(s);
  return true;
}

}  // namespace

StatusOr<std::vector<int>> ParseCpuList(const std::string& text) {
  std::vector<int> cpus;
  for (const std::string& item : Split(text, ',')) {
    const size_t dash = item.find('-');
    int lo = 0, hi = 0;
    bool ok = dash == std::string::npos
                  ? ParseInt(item, &lo) && (hi = lo, true)
                  : ParseInt(item.substr(0, dash), &lo) && ParseInt(item.substr(dash + 1), &hi);
    if (!ok || hi < lo || hi >= CPU_SETSIZE)
      return InvalidArgumentError("CPU list '" + text + "': '" + item +
                                  "' is not a CPU number or range (expected e.g. 0-3,6)");
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string FormatCpuList(const std::vector<int>& in) {
  std::vector<int> cpus = in;
  std::sort(cpus.begin(), cpus.end());
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(cpus[i]);
    if (j > i) s += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s;
}

StatusOr<std::vector<std::vector<int>>> PlanCpuBinding(const std::string& spec, int world,
                                                       int threads,
                                                       const std::vector<int>& allowed) {
  std::vector<std::vector<int>> plan(world);
  if (spec.empty() || spec == "none") return plan;
  const int n = static_cast<int>(allowed.size());
  if (spec == "cores") {
    for (int r = 0; r < world; ++r) {
      for (int i = 0; i < std::min(threads, n); ++i) plan[r].push_back(allowed[(r * threads + i) % n]);
      std::sort(plan[r].begin(), plan[r].end());
      plan[r].erase(std::unique(plan[r].begin(), plan[r].end()), plan[r].end());
    }
    return plan;
  }
  if (spec.find_first_not_of("0123456789,-:") != std::string::npos)
    return InvalidArgumentError("--cpu-bind: expected none, cores or CPU lists per rank "
                                "separated by ':' (e.g. 0:1 or 0-3:4-7), got '" + spec + "'");
  std::vector<std::string> groups = Split(spec, ':');
  if (static_cast<int>(groups.size()) != world)
    return InvalidArgumentError("--cpu-bind '" + spec + "': " + std::to_string(groups.size()) +
                                " CPU list(s) for " + std::to_string(world) +
                                " rank(s); expected one list per rank, separated by ':'");
  for (int r = 0; r < world; ++r) {
    auto cpus = ParseCpuList(groups[r]);
    if (!cpus.ok()) return std::move(cpus).TakeStatus().Prepend("--cpu-bind");
    for (int c : *cpus) {
      if (!std::binary_search(allowed.begin(), allowed.end(), c))
        return InvalidArgumentError("--cpu-bind: rank " + std::to_string(r) + " asks for CPU " +
                                    std::to_string(c) + ", which this process may not use "
                                    "(allowed: " + FormatCpuList(allowed) + ")");
    }
    plan[r] = std::move(cpus).value();
  }
  return plan;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

Status BindThisProcess(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    return IoError("cannot pin to CPUs " + FormatCpuList(cpus) + ": sched_setaffinity: " +
                   std::strerror(errno));
  return Status::Ok();
}

}  // namespace specd::launch
