// What speculative decoding runs with: the drafter and the draft shape.
#pragma once

#include <string>

#include "base/status.h"
#include "spec/ngram.h"
#include "spec/tree_search.h"

namespace specd {

enum class SpecAlgorithm { kNone, kEagle3, kNgram };
// NONE | EAGLE3 (or EAGLE) | NGRAM, any case; "" is NONE.
StatusOr<SpecAlgorithm> ParseSpecAlgorithm(const std::string& s);

struct SpecOptions {
  SpecAlgorithm algorithm = SpecAlgorithm::kNone;
  // false: every step drafts `tree` (EAGLE-3) or up to num_draft_tokens - 1
  // tokens (n-gram). true: each step drafts a chain whose depth, 0 (a plain
  // step) to max_auto_depth, the cost model chooses (spec/draft_cost.h).
  bool auto_shape = false;
  int max_auto_depth = 8;
  TreeParams tree;
  NgramOptions ngram;
};

}  // namespace specd
