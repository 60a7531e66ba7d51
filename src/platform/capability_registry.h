// Capability registry: tuned parameters per platform with provenance.
//
// A lookup by platform key ("x86-avx512bf16", "x86-avx512", "x86-avx2",
// "generic"; later "sm_90") and world size returns parameters plus where they
// came from: an exact table entry, the nearest family (a table key that is a
// prefix of the requested key, e.g. "x86-avx512" for "x86-avx512bf16", or an
// entry measured at another world size), or generic defaults. Lookups never
// fail; an unknown key logs one line ("no tuned entry for X: using generic
// defaults") and returns the defaults.
//
// Thread-safe (the table is immutable; logging is LogOnce).
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace specd {

enum class Provenance { kExact, kNearestFamily, kGenericDefaults };
const char* ProvenanceName(Provenance p);  // "exact match", "nearest family", "generic defaults"

enum class AllreduceKind { kOneShot, kTwoShot };
const char* AllreduceKindName(AllreduceKind k);  // "one-shot", "two-shot"

// Allreduce algorithm thresholds for one (platform, world size).
struct AllreduceTuning {
  size_t one_shot_max_bytes;  // messages <= this use one-shot
  size_t two_shot_max_bytes;  // messages <= this use two-shot in a single chunk
  size_t chunk_bytes;         // larger messages: two-shot in chunks of this size
};

struct AllreduceTuningEntry {
  const char* platform_key;
  int world_size;
  AllreduceTuning tuning;
  const char* source;  // how the numbers were obtained (machine, command)
};

struct AllreduceTuningLookup {
  AllreduceTuning tuning;
  Provenance provenance;
  std::string entry_key;  // table key used; "generic" for the defaults
  int entry_world = 0;    // world size of the entry used; 0 for the defaults
  std::string note;       // one sentence: why this entry
};

struct AllreducePlan {
  AllreduceKind kind;
  size_t chunk_bytes;  // 0: the whole message in one step (bounded by the staging buffer)
  AllreduceTuningLookup lookup;
};

// The tuned table, for reports and tests.
std::span<const AllreduceTuningEntry> AllreduceTuningTable();
// The defaults used when no entry fits.
AllreduceTuning GenericAllreduceTuning();

AllreduceTuningLookup LookupAllreduceTuning(std::string_view platform_key, int world_size);
// The algorithm for a message of `bytes` bytes.
AllreducePlan PlanAllreduce(std::string_view platform_key, int world_size, size_t bytes);

// The key of the running CPU: "x86-avx512bf16", "x86-avx512", "x86-avx2" or
// "generic". SPECD_PLATFORM_KEY overrides it (to test another table entry).
std::string DetectPlatformKey();

}  // namespace specd
