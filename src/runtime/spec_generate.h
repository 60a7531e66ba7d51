// Speculative generation on rank 0: each step drafts a tree (EAGLE-3 head or
// n-gram lookup), verifies it with one target forward over all tree nodes
// (tree attention mask, positions base + depth), commits the accepted path's
// KV entries and drops the rest. Greedy output equals plain greedy decoding;
// sampled output follows the target distribution exactly (spec/verify.h).
#pragma once

#include <string>

#include "runtime/generate.h"
#include "spec/eagle3_head.h"
#include "spec/ngram.h"
#include "spec/tree_search.h"

namespace specd {

enum class SpecAlgorithm { kNone, kEagle3, kNgram };
StatusOr<SpecAlgorithm> ParseSpecAlgorithm(const std::string& s);  // NONE|EAGLE3|NGRAM

struct SpecOptions {
  SpecAlgorithm algorithm = SpecAlgorithm::kNone;
  TreeParams tree;
  NgramOptions ngram;
};

// REQUIRES: head != nullptr for kEagle3, and the engine's runner capturing
// head->aux_layers() (ModelRunner::SetCaptureLayers).
Status GenerateSpeculative(Engine& engine, Eagle3Head* head, const SpecOptions& options,
                           const GenerateRequest& req, const TokenCallback& on_token,
                           GenerateResult* result);

}  // namespace specd
