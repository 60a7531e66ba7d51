// A draft tree for one verify step, and the choice of which nodes to verify.
//
// Node 0 is the root: the last verified token, not yet in the target's KV
// cache. Every other node is a draft token whose parent comes before it
// (parents[i] < i), so the nodes are in topological order and the target can
// verify them all in one forward pass at positions base + depth[i] with the
// tree attention mask (node i sees exactly its ancestors and itself).
#pragma once

#include <cstdint>
#include <vector>

namespace specd {

struct DraftTree {
  std::vector<int32_t> tokens;   // (n)
  std::vector<int32_t> parents;  // (n), -1 for the root
  std::vector<int32_t> depth;    // (n), 0 for the root
  std::vector<float> scores;     // (n) cumulative draft log-probability; 0 for the root

  int size() const { return static_cast<int>(tokens.size()); }
  // Adds a node, returns its index. REQUIRES: parent < size().
  int Add(int32_t token, int parent, float score);
  // (n, n) row-major: mask[i * n + j] = 1 iff j is i or an ancestor of i.
  std::vector<uint8_t> AncestorMask() const;
  // Children of node i in index order.
  std::vector<int> Children(int i) const;
};

// A scored candidate produced while drafting: `parent` indexes the
// candidate list itself (-1: child of the root).
struct DraftCandidate {
  int32_t token;
  int parent;
  float score;  // cumulative log-probability along the path
  int depth;    // 1 for children of the root
};

// Keeps the best `max_nodes` candidates by score (ties: shallower first,
// then earlier), which is closed under ancestors because a child's score
// never exceeds its parent's, and builds the tree under `root_token`.
// Candidates whose parent was not kept are dropped.
DraftTree SelectTree(int32_t root_token, const std::vector<DraftCandidate>& candidates,
                     int max_nodes);

}  // namespace specd
