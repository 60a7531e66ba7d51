#include "spec/ngram.h"

#include <vector>

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
      // Copy what followed the match. When the matched suffix covers a whole
      // period (period = n-1-end <= len: the tail has repeated at least
      // twice, "7 7 7" or "1 2 1 2"), the history is in a loop and the copy
      // goes on past its end, reading its own drafted tokens; otherwise it
      // stops at the end of the history.
      const int period = n - 1 - end;
      std::vector<int32_t> chain;
      int parent = 0;
      for (int j = end + 1; static_cast<int>(chain.size()) < max_draft; ++j) {
        if (j >= n && period > len) break;
        chain.push_back(j < n ? h[j] : chain[j - n]);
        parent = tree.Add(chain.back(), parent, 0.f);
      }
      return tree;
    }
  }
  return tree;
}

}  // namespace specd
