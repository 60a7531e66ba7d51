// Verification of a draft tree against the target's logits at every node.
//
// Greedy: walk from the root; at each node take the target's argmax; if a
// child carries that token, accept it and continue there; else stop. The
// argmax at the last accepted node is the bonus token. The output equals
// plain greedy decoding token for token.
//
// Sampling (temperature > 0): the same walk with the sampled token in place
// of the argmax. The token after a node at depth d is the Sampler's draw for
// position first_position + d (sampling/sampler.h: a function of the seed,
// the position and that node's logits row only), so the emitted tokens are
// exactly the tokens plain sampling with the same seed would produce, for any
// tree. Lossless: each emitted token is distributed as the filtered target
// distribution p; a node's children are accepted with probability
// sum over children of p(child), as with SpecInfer's multi-candidate rule for
// deterministic drafts.
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
// on the accepted path are read. first_position: the sequence position of the
// token the root's row predicts (the root token's position + 1). When one of them cannot be sampled, returns
// CheckLogitsRow's error with out->path ending at that node (its position is
// the root's plus out->path.size() - 1) and out->emitted empty.
Status VerifyTree(const DraftTree& tree, const float* logits, int vocab,
                  const SamplingParams& params, Sampler* sampler, int64_t first_position,
                  VerifyResult* out);

}  // namespace specd
