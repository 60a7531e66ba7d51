#include "platform/registry_report.h"

#include <cstdio>
#include <cstdlib>

#include "base/env.h"
#include "platform/capability_registry.h"

namespace specd {
namespace {

std::string Bytes(size_t b) {
  char buf[32];
  if (b >= (1u << 20) && b % (1u << 20) == 0) {
    std::snprintf(buf, sizeof(buf), "%zu MiB", b >> 20);
  } else if (b >= 1024 && b % 1024 == 0) {
    std::snprintf(buf, sizeof(buf), "%zu KiB", b >> 10);
  } else {
    std::snprintf(buf, sizeof(buf), "%zu B", b);
  }
  return buf;
}

}  // namespace

std::string DescribeCollectiveChoices() {
  const std::string key = DetectPlatformKey();
  std::string s = "collectives (shm allreduce, platform key " + key + "):\n";
  if (const auto forced = GetEnv(EnvVar::kAllreduceAlgo)) {
    s += "  forced by SPECD_ALLREDUCE_ALGO=" + *forced +
         " (table below applies only to 'auto')\n";
  }
  for (int world : {2, 4, 8}) {
    AllreduceTuningLookup l = LookupAllreduceTuning(key, world);
    const AllreduceTuning& t = l.tuning;
    s += "  world " + std::to_string(world) + ": one-shot <= " + Bytes(t.one_shot_max_bytes) +
         ", two-shot <= " + Bytes(t.two_shot_max_bytes) + ", then two-shot in " +
         Bytes(t.chunk_bytes) + " chunks  [" + ProvenanceName(l.provenance) + ": " + l.note +
         "]\n";
  }
  s += "  override: --allreduce-algo one-shot|two-shot|mpi|auto or SPECD_ALLREDUCE_ALGO\n";
  return s;
}

}  // namespace specd
