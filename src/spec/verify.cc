#include "spec/verify.h"

#include "sampling/logits_check.h"

namespace specd {
Status VerifyTree(const DraftTree& tree, const float* logits, int vocab,
                  const SamplingParams& params, Sampler* sampler, VerifyResult* out) {
  VerifyResult& r = *out;
  r = VerifyResult();
  int node = 0;
  r.path.push_back(0);
  std::vector<float> p;
  while (true) {
    const float* row = logits + static_cast<size_t>(node) * vocab;
    if (Status s = CheckLogitsRow(row, vocab); !s.ok()) {
      r.emitted.clear();
      return s;
    }
    std::vector<int> children = tree.Children(node);
    int next = -1;
    if (params.greedy()) {
      int32_t want = GreedyToken(row, vocab);
      for (int c : children)
        if (tree.tokens[c] == want) next = c;
      if (next < 0) {
        r.bonus_token = want;
        break;
      }
    } else {
      Sampler::Probs(row, vocab, params, &p);
      double remaining = 1.0;
      for (int c : children) {
        int32_t tok = tree.tokens[c];
        double pc = p[tok];
        if (pc <= 0) continue;
        if (sampler->Uniform() * remaining < pc) {
          next = c;
          break;
        }
        remaining -= pc;
        p[tok] = 0.f;
      }
      if (next < 0) {
        r.bonus_token = sampler->SampleFrom(p);
        break;
      }
    }
    r.path.push_back(next);
    r.emitted.push_back(tree.tokens[next]);
    node = next;
  }
  r.emitted.push_back(r.bonus_token);
  return Status::Ok();
}

}  // namespace specd
