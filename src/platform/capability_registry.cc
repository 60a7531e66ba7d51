#include "platform/capability_registry.h"

#include <cstdlib>
#include <iterator>

#include "base/env.h"
#include "base/logging.h"

namespace specd {
namespace {

constexpr size_t KiB = 1024;
constexpr size_t MiB = 1024 * 1024;

// Measured with `specd comm-bench --backend shm --ranks N --sizes 1K,8K,64K,256K,1M,4M
// --algo one-shot|two-shot --iters 300` (ranks bound to cores, median latency) on a
// 2-core AMD EPYC (Zen 5) VM: one-shot and two-shot tie up to 256 KiB at 2 ranks and
// two-shot wins from 1 MiB; with 4 ranks on 2 cores two-shot wins from 8 KiB (fewer
// bytes read per rank matters more than the extra wait when ranks share cores).
constexpr AllreduceTuningEntry kTable[] = {
    {"x86-avx512bf16", 2, {256 * KiB, 64 * MiB, 4 * MiB},
     "2-core AMD EPYC Zen 5, comm-bench shm f32, 2 ranks"},
    {"x86-avx512bf16", 4, {4 * KiB, 64 * MiB, 4 * MiB},
     "2-core AMD EPYC Zen 5, comm-bench shm f32, 4 ranks oversubscribed"},
    {"x86-avx512bf16", 8, {4 * KiB, 64 * MiB, 4 * MiB},
     "2-core AMD EPYC Zen 5, 8 ranks: the 4-rank crossover, not measured separately"},
};

constexpr AllreduceTuning kGeneric = {256 * KiB, 32 * MiB, 4 * MiB};

}  // namespace

const char* ProvenanceName(Provenance p) {
  switch (p) {
    case Provenance::kExact: return "exact match";
    case Provenance::kNearestFamily: return "nearest family";
    case Provenance::kGenericDefaults: return "generic defaults";
  }
  return "?";
}

const char* AllreduceKindName(AllreduceKind k) {
  return k == AllreduceKind::kOneShot ? "one-shot" : "two-shot";
}

std::span<const AllreduceTuningEntry> AllreduceTuningTable() { return kTable; }

AllreduceTuning GenericAllreduceTuning() { return kGeneric; }

AllreduceTuningLookup LookupAllreduceTuning(std::string_view platform_key, int world_size) {
  // 1. The family: the longest table key equal to or a prefix of the request.
  size_t best_len = 0;
  for (const auto& e : kTable) {
    std::string_view k = e.platform_key;
    if (k.size() > best_len && platform_key.substr(0, k.size()) == k) best_len = k.size();
  }
  if (best_len == 0) {
    std::string msg = "no tuned entry for " + std::string(platform_key) +
                      ": using generic defaults";
    LogOnce(LogLevel::kInfo, "registry-allreduce-" + std::string(platform_key), "comm init", msg);
    return {kGeneric, Provenance::kGenericDefaults, "generic", 0, msg};
  }
  std::string_view family = platform_key.substr(0, best_len);
  // 2. Within the family, the exact world size, else the nearest one (ties
  // go to the larger world, whose thresholds are the more conservative).
  const AllreduceTuningEntry* best = nullptr;
  for (const auto& e : kTable) {
    if (family != e.platform_key) continue;
    if (best == nullptr) {
      best = &e;
      continue;
    }
    int d_new = std::abs(e.world_size - world_size);
    int d_old = std::abs(best->world_size - world_size);
    if (d_new < d_old || (d_new == d_old && e.world_size > best->world_size)) best = &e;
  }
  AllreduceTuningLookup out{best->tuning, Provenance::kExact, best->platform_key, best->world_size,
                            ""};
  const bool same_key = family.size() == platform_key.size();
  const bool same_world = best->world_size == world_size;
  if (same_key && same_world) {
    out.note = "tuned for " + std::string(platform_key) + " at world " +
               std::to_string(world_size) + " (" + best->source + ")";
  } else {
    out.provenance = Provenance::kNearestFamily;
    out.note = "no entry for " + std::string(platform_key) + " at world " +
               std::to_string(world_size) + ": using " + best->platform_key + " at world " +
               std::to_string(best->world_size) + " (" + best->source + ")";
    LogOnce(LogLevel::kInfo,
            "registry-allreduce-" + std::string(platform_key) + "-" + std::to_string(world_size),
            "comm init", out.note);
  }
  return out;
}

AllreducePlan PlanAllreduce(std::string_view platform_key, int world_size, size_t bytes) {
  AllreduceTuningLookup lookup = LookupAllreduceTuning(platform_key, world_size);
  const AllreduceTuning& t = lookup.tuning;
  if (bytes <= t.one_shot_max_bytes) return {AllreduceKind::kOneShot, 0, std::move(lookup)};
  if (bytes <= t.two_shot_max_bytes) return {AllreduceKind::kTwoShot, 0, std::move(lookup)};
  return {AllreduceKind::kTwoShot, t.chunk_bytes, std::move(lookup)};
}

std::string DetectPlatformKey() {
  if (auto env = GetEnv(EnvVar::kPlatformKey)) return *env;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) {
    if (__builtin_cpu_supports("avx512bf16")) return "x86-avx512bf16";
    return "x86-avx512";
  }
  if (__builtin_cpu_supports("avx2")) return "x86-avx2";
#endif
  return "generic";
}

}  // namespace specd
