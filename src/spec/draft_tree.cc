#include "spec/draft_tree.h"

#include <algorithm>
#include <numeric>

namespace specd {

int DraftTree::Add(int32_t token, int parent, float score) {
  tokens.push_back(token);
  parents.push_back(parent);
  depth.push_back(parent < 0 ? 0 : depth[parent] + 1);
  scores.push_back(score);
  return size() - 1;
}

std::vector<uint8_t> DraftTree::AncestorMask() const {
  const int n = size();
  std::vector<uint8_t> m(static_cast<size_t>(n) * n, 0);
  for (int i = 0; i < n; ++i)
    for (int j = i; j >= 0; j = parents[j]) m[static_cast<size_t>(i) * n + j] = 1;
  return m;
}

std::vector<int> DraftTree::Children(int i) const {
  std::vector<int> c;
  for (int j = i + 1; j < size(); ++j)
    if (parents[j] == i) c.push_back(j);
  return c;
}

DraftTree SelectTree(int32_t root_token, const std::vector<DraftCandidate>& cands,
                     int max_nodes) {
  std::vector<int> order(cands.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (cands[a].score != cands[b].score) return cands[a].score > cands[b].score;
    return cands[a].depth < cands[b].depth;
  });
  std::vector<char> keep(cands.size(), 0);
  int kept = 0;
  for (int i : order) {
    if (kept >= max_nodes) break;
    int p = cands[i].parent;
    if (p >= 0 && !keep[p]) continue;  // ancestor not kept (only possible on exact ties)
    keep[i] = 1;
    ++kept;
  }
  // Emit in (depth, candidate index) order so parents precede children.
  std::vector<int> emit;
  for (size_t i = 0; i < cands.size(); ++i)
    if (keep[i]) emit.push_back(static_cast<int>(i));
  std::stable_sort(emit.begin(), emit.end(),
                   [&](int a, int b) { return cands[a].depth < cands[b].depth; });
  DraftTree tree;
  tree.Add(root_token, -1, 0.f);
  std::vector<int> node_of(cands.size(), -1);
  for (int i : emit) {
    int parent_node = cands[i].parent < 0 ? 0 : node_of[cands[i].parent];
    node_of[i] = tree.Add(cands[i].token, parent_node, cands[i].score);
  }
  return tree;
}

}  // namespace specd
