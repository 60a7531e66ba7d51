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
      // Copy what followed the match. When the tail agrees with the span
      // before the match over a whole period (period = n-1-end: the tail has
      // repeated at least twice, "7 7 7", "1 2 1 2" or a period longer than
      // max_ngram), the history is in a loop and the copy goes on past its
      // end, reading its own drafted tokens; otherwise it stops at the end
      // of the history.
      const int period = n - 1 - end;
      int agree = len;
      while (agree < period && end - agree >= 0 && h[end - agree] == h[n - 1 - agree]) ++agree;
      std::vector<int32_t> chain;
      int parent = 0;
      for (int j = end + 1; static_cast<int>(chain.size()) < max_draft; ++j) {
        if (j >= n && agree < period) break;
        chain.push_back(j < n ? h[j] : chain[j - n]);
        parent = tree.Add(chain.back(), parent, 0.f);
      }
      return tree;
    }
  }
  return tree;
}

}  // namespace specd
