#include "spec/tree_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kernels/ops.h"

namespace specd {
namespace {

// Top-k (index, log-prob) of a softmax over `logits`. A chain (k = 1), what
// auto shapes draft, takes the vectorized argmax: on a small head the scalar
// exp and sort over the draft vocabulary cost a tenth of its forward.
std::vector<std::pair<int, float>> TopKLogProbs(const float* logits, int n, int k) {
  const float lse = kernels::LogSumExp(logits, n);
  if (k == 1) {
    const int i = static_cast<int>(kernels::Argmax(logits, n));
    return {{i, logits[i] - lse}};
  }
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  k = std::min(k, n);
  std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                    [&](int a, int b) { return logits[a] > logits[b]; });
  std::vector<std::pair<int, float>> out;
  for (int i = 0; i < k; ++i) out.push_back({idx[i], logits[idx[i]] - lse});
  return out;
}

}  // namespace

Status TreeParams::Validate() const {
  if (num_steps < 1 || num_steps > 64)
    return InvalidArgumentError(
        fmt::format("--speculative-num-steps must be in [1, 64], got {}", num_steps));
  if (topk < 1 || topk > 64)
    return InvalidArgumentError(
        fmt::format("--speculative-eagle-topk must be in [1, 64], got {}", topk));
  if (num_draft_tokens < 2 || num_draft_tokens > 256)
    return InvalidArgumentError(fmt::format(
        "--speculative-num-draft-tokens must be in [2, 256], got {}", num_draft_tokens));
  return Status::Ok();
}

StatusOr<DraftTree> DraftEagleTree(Eagle3Head& head, Eagle3Head::State* st, int32_t root_token,
                                   int root_pos, const TreeParams& p) {
  const int V = head.draft_vocab();
  const int H = head.hidden_dim();
  const int base = st->length;
  std::vector<DraftCandidate> cands;
  // Frontier: candidate indices to feed next, with the hidden state of the
  // draft row that produced them and their draft slot ancestry.
  struct Front {
    int cand;
    std::vector<float> parent_hidden;
    std::vector<int> slots;  // draft slots of fed ancestors
  };
  std::vector<Front> frontier;
  for (auto [d, lp] : TopKLogProbs(st->last_logits.data(), V, p.topk)) {
    cands.push_back({head.ToTarget(d), -1, lp, 1});
    frontier.push_back({static_cast<int>(cands.size()) - 1, st->last_hidden, {}});
  }
  std::vector<float> hid_out, logits;
  for (int step = 1; step < p.num_steps && !frontier.empty(); ++step) {
    const int n = static_cast<int>(frontier.size());
    std::vector<int32_t> tokens(n), pos(n, root_pos + step - 1);
    std::vector<float> hidden(static_cast<size_t>(n) * H);
    std::vector<std::vector<int>> visible(n);
    const int first_slot = st->length;
    for (int i = 0; i < n; ++i) {
      tokens[i] = cands[frontier[i].cand].token;
      std::copy(frontier[i].parent_hidden.begin(), frontier[i].parent_hidden.end(),
                hidden.begin() + static_cast<size_t>(i) * H);
      visible[i] = frontier[i].slots;
      visible[i].push_back(first_slot + i);
    }
    RETURN_IF_ERROR(head.Forward(st, tokens, hidden.data(), /*from_aux=*/false, pos, base,
                                 visible, &hid_out, &logits));
    // Children of every fed node, then keep the best topk as the next frontier.
    struct Child {
      int cand;
      int parent_i;
    };
    std::vector<Child> children;
    for (int i = 0; i < n; ++i) {
      const DraftCandidate parent = cands[frontier[i].cand];
      for (auto [d, lp] : TopKLogProbs(&logits[static_cast<size_t>(i) * V], V, p.topk)) {
        cands.push_back({head.ToTarget(d), frontier[i].cand, parent.score + lp, parent.depth + 1});
        children.push_back({static_cast<int>(cands.size()) - 1, i});
      }
    }
    std::stable_sort(children.begin(), children.end(), [&](const Child& a, const Child& b) {
      return cands[a.cand].score > cands[b.cand].score;
    });
    if (static_cast<int>(children.size()) > p.topk) children.resize(p.topk);
    std::vector<Front> next;
    for (const Child& c : children) {
      Front f;
      f.cand = c.cand;
      f.parent_hidden.assign(hid_out.begin() + static_cast<size_t>(c.parent_i) * H,
                             hid_out.begin() + static_cast<size_t>(c.parent_i + 1) * H);
      f.slots = frontier[c.parent_i].slots;
      f.slots.push_back(first_slot + c.parent_i);
      next.push_back(std::move(f));
    }
    frontier = std::move(next);
  }
  head.Truncate(st, base);
  return SelectTree(root_token, cands, p.num_draft_tokens - 1);
}

}  // namespace specd
