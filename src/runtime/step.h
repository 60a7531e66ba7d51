// The step descriptor: everything a rank needs to run one engine step in
// lockstep with rank 0 (which alone decides tokens, acceptance and batching).
// Rank 0 builds it, broadcasts it, and every rank (rank 0 included) applies it
// with the same code, so KV caches on all ranks evolve identically.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/kv_edit.h"
#include "model/model.h"

namespace specd {

struct StepDesc {
  bool shutdown = false;
  bool capture_aux = false;
  std::vector<KvEdit> kv_edits;  // applied in order before the batch runs
  std::vector<SeqInput> batch;   // empty: only apply kv_edits
};

// Compact little-endian binary encoding (same binary on every rank).
std::string SerializeStep(const StepDesc& d);
// Corruption if the bytes are not a well-formed descriptor.
StatusOr<StepDesc> DeserializeStep(const std::string& bytes);

}  // namespace specd
