// What speculative decoding runs with: the drafter and the draft shape.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "spec/ngram.h"
#include "spec/tree_search.h"

namespace specd {

// kOracle is for benchmarks only: it drafts the target's own greedy
// continuation (known beforehand), corrupted so that acceptance has a chosen
// rate, to measure the verification machinery apart from draft quality.
enum class SpecAlgorithm { kNone, kEagle3, kNgram, kOracle };
// NONE | EAGLE3 (or EAGLE) | NGRAM | ORACLE, any case; "" is NONE.
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
  // kOracle: prompt + the target's greedy continuation; each drafted token
  // is the true next token with probability oracle_accept, else a wrong one
  // (seeded by oracle_seed and the position, so runs repeat).
  std::vector<int32_t> oracle_sequence;
  double oracle_accept = 1;
  uint64_t oracle_seed = 1;

  // Deepest draft depth a step can verify (auto chains or the fixed tree):
  // how many depths an acceptance model of this configuration tracks.
  int MaxDraftDepth() const { return std::max(max_auto_depth, tree.num_draft_tokens - 1); }

  // KV slots one speculative step appends after the committed tokens: the
  // largest draft tree verified at once (1 without speculation).
  int MaxTreeTokens() const {
    if (algorithm == SpecAlgorithm::kNone) return 1;
    return auto_shape ? max_auto_depth + 1 : tree.num_draft_tokens;
  }
};

// The per-token acceptance probability p at which a chain of `depth` drafted
// tokens yields `tau` tokens per step on average: 1 + p + ... + p^depth = tau.
// REQUIRES: 1 <= tau < depth + 1.
double OracleAcceptFor(double tau, int depth);

}  // namespace specd
