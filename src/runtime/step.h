// The step descriptor: everything a rank needs to run one engine step in
// lockstep with rank 0 (which alone decides tokens, acceptance and batching).
// Rank 0 builds it, broadcasts it, and every rank (rank 0 included) applies it
// with the same code, so KV caches on all ranks evolve identically.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/transformer.h"

namespace specd {

// A KV-cache mutation, applied in order before the forward pass.
struct KvOp {
  enum Kind : int32_t { kNew = 0, kFree = 1, kTruncate = 2, kMove = 3 };
  Kind kind = kNew;
  int32_t seq = -1;
  int32_t a = 0;  // kNew: expected id (checked); kTruncate: new length; kMove: src slot
  int32_t b = 0;  // kMove: dst slot
};

struct StepDesc {
  bool shutdown = false;
  bool capture_aux = false;
  std::vector<KvOp> kv_ops;
  std::vector<SeqInput> batch;  // empty: only apply kv_ops
};

// Compact little-endian binary encoding (same binary on every rank).
std::string SerializeStep(const StepDesc& d);
// Corruption if the bytes are not a well-formed descriptor.
StatusOr<StepDesc> DeserializeStep(const std::string& bytes);

}  // namespace specd
