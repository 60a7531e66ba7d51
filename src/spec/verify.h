// Verification of a draft tree against the target's logits at every node.
//
// Greedy: walk from the root; at each node take the target's argmax; if a
// child carries that token, accept it and continue there; else stop. The
// argmax at the last accepted node is the bonus token. The output equals
// plain greedy decoding token for token.
//
// Sampling (temperature > 0), lossless tree rejection sampling for
// deterministic drafts (SpecInfer's multi-candidate rule with a point-mass
// draft, as SGLang's target-only tree sampling): at node u with target
// distribution p (after temperature/top-k/top-p/min-p), try the children in
// order; accept child c with probability p(c) / (remaining mass); on
// rejection set p(c) = 0 and renormalize. If every child is rejected, the
// bonus token is drawn from what remains. Each emitted token is therefore
// distributed exactly as p: P(c_k) = p(c_k) for proposed tokens, and other
// tokens keep their relative mass.
//
// Every row verification reads is checked first (CheckLogitsRow): a NaN there
// must end the request, not be silently accepted or rejected.
#pragma once

#include <cstdint>
#include <vector>

#include "sampling/sampler.h"
#include "spec/draft_tree.h"

namespace specd {

struct VerifyResult {
  std::vector<int> path;    // accepted node indices, starting with the root (0)
  int32_t bonus_token = -1; // the token after the last accepted node
  // Tokens newly decided by this step: the accepted draft tokens (path[1:])
  // then the bonus token.
  std::vector<int32_t> emitted;
};

// logits: (tree.size(), vocab), row i for node i. Only the rows of the nodes
// on the accepted path are read. When one of them cannot be sampled, returns
// CheckLogitsRow's error with out->path ending at that node (its position is
// the root's plus out->path.size() - 1) and out->emitted empty.
Status VerifyTree(const DraftTree& tree, const float* logits, int vocab,
                  const SamplingParams& params, Sampler* sampler, VerifyResult* out);

}  // namespace specd
