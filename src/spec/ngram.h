// N-gram (prompt lookup) drafting: propose the tokens that followed the most
// recent earlier occurrence of the longest matching suffix of the history.
// Needs no weights; pays off on repetitive text (code, lists, quoting).
#pragma once

#include <cstdint>
#include <vector>

#include "spec/draft_tree.h"

namespace specd {

struct NgramOptions {
  int max_ngram = 4;  // longest suffix tried
  int min_ngram = 1;  // shortest suffix tried
};

// history: every token so far (prompt + generated), its last element being
// the root (last verified token). Returns a chain of up to max_draft tokens
// under that root (just the root when nothing matches): the continuation of
// the match, which goes on past the end of the history when the tail is a
// loop (the tail agrees with the span before its match over at least the
// distance to that match).
DraftTree NgramDraft(const std::vector<int32_t>& history, int max_draft,
                     const NgramOptions& options = {});

}  // namespace specd
