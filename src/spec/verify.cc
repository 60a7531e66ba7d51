#include "spec/verify.h"

#include "sampling/logits_check.h"

namespace specd {
Status VerifyTree(const DraftTree& tree, const float* logits, int vocab,
                  const SamplingParams& params, Sampler* sampler, int64_t first_position,
                  VerifyResult* out) {
  VerifyResult& r = *out;
  r = VerifyResult();
  int node = 0;
  r.path.push_back(0);
  while (true) {
    const float* row = logits + static_cast<size_t>(node) * vocab;
    if (Status s = CheckLogitsRow(row, vocab); !s.ok()) {
      r.emitted.clear();
      return s;
    }
    const int64_t position = first_position + static_cast<int64_t>(r.path.size()) - 1;
    const int32_t want = params.greedy() ? GreedyToken(row, vocab)
                                         : sampler->Sample(row, vocab, params, position);
    int next = -1;
    for (int c : tree.Children(node))
      if (tree.tokens[c] == want) next = c;
    if (next < 0) {
      r.bonus_token = want;
      break;
    }
    r.path.push_back(next);
    r.emitted.push_back(want);
    node = next;
  }
  r.emitted.push_back(r.bonus_token);
  return Status::Ok();
}

}  // namespace specd
