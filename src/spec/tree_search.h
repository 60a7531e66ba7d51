// EAGLE tree drafting with SGLang's parameters: each step expands the `topk`
// best frontier nodes by their `topk` most likely children, scored by
// cumulative draft log-probability; after `num_steps` depths the best
// num_draft_tokens − 1 nodes form the tree under the root. topk = 1 drafts a
// chain of num_steps tokens.
#pragma once

#include "base/status.h"
#include "spec/draft_tree.h"
#include "spec/eagle3_head.h"

namespace specd {

struct TreeParams {
  int num_steps = 5;         // --speculative-num-steps
  int topk = 4;              // --speculative-eagle-topk
  int num_draft_tokens = 8;  // --speculative-num-draft-tokens (root included)
  // Names the flag that is out of range.
  Status Validate() const;
};

// REQUIRES: st->last_hidden / last_logits come from the draft slot of the
// position before `root_pos` (the root token itself is not yet drafted).
// Drafting writes temporary slots into `st` and removes them before
// returning. Tree tokens are target ids.
StatusOr<DraftTree> DraftEagleTree(Eagle3Head& head, Eagle3Head::State* st, int32_t root_token,
                                   int root_pos, const TreeParams& params);

}  // namespace specd
