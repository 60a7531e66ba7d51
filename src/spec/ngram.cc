#include "spec/ngram.h"

namespace specd {

DraftTree NgramDraft(const std::vector<int32_t>& h, int max_draft, const NgramOptions& o) {
  DraftTree tree;
  const int n = static_cast<int>(h.size());
  tree.Add(h.empty() ? 0 : h.back(), -1, 0.f);
  if (max_draft <= 0) return tree;
  for (int len = std::min(o.max_ngram, n - 1); len >= o.min_ngram; --len) {
    // Most recent earlier match of h[n-len .. n-1] ending before n-1.
    for (int end = n - 2; end >= len - 1; --end) {
      bool match = true;
      for (int k = 0; k < len && match; ++k) match = h[end - k] == h[n - 1 - k];
      if (!match) continue;
      int parent = 0;
      for (int j = end + 1; j < n && tree.size() <= max_draft; ++j)
        parent = tree.Add(h[j], parent, 0.f);
      return tree;
    }
  }
  return tree;
}

}  // namespace specd
