#include "tokenizer/word_model.h"

#include <algorithm>

#include "tokenizer/utf8.h"

namespace specd::tok {
namespace {

// A symbol of the word being merged: a doubly linked list over the units, so
// a merge is O(1) and positions (indices) stay stable for tie-breaking.
struct Symbol {
  int32_t id;
  int32_t prev, next;
  uint32_t start, len;  // bytes of the word this symbol covers; len 0 = merged away
};

const char* ByteTokenName(int b) {
  static char names[256][7];
  static const bool init = [] {
    for (int i = 0; i < 256; ++i) {
      static const char hex[] = "0123456789ABCDEF";
      names[i][0] = '<';
      names[i][1] = '0';
      names[i][2] = 'x';
      names[i][3] = hex[i >> 4];
      names[i][4] = hex[i & 15];
      names[i][5] = '>';
      names[i][6] = 0;
    }
    return true;
  }();
  (void)init;
  return names[b];
}

void FillByteFallback(const PieceMap& vocab, int32_t* ids) {
  for (int b = 0; b < 256; ++b) {
    auto it = vocab.find(std::string_view(ByteTokenName(b)));
    ids[b] = it == vocab.end() ? -1 : it->second;
  }
}

}  // namespace

BpeModel::BpeModel(PieceMap vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                   const BpeOptions& options, size_t* skipped)
    : vocab_(std::move(vocab)), options_(options) {
  *skipped = 0;
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    joined = a;
    joined += b;
    auto ij = vocab_.find(joined);
    if (ia == vocab_.end() || ib == vocab_.end() || ij == vocab_.end()) {
      ++*skipped;
      continue;
    }
    // The first (lowest-rank) occurrence of a pair wins, as in tokenizers.
    merges_.try_emplace(Key(ia->second, ib->second), Merge{static_cast<int32_t>(rank), ij->second});
  }
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    auto it = vocab_.find(std::string_view(&c, 1));
    byte_unit_id_[b] = it == vocab_.end() ? -1 : it->second;
  }
  FillByteFallback(vocab_, byte_fallback_id_);
}

void BpeModel::Encode(std::string_view word, std::vector<int32_t>* out) const {
  if (options_.ignore_merges) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  auto add = [&](int32_t id, size_t start, size_t len) {
    const int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({id, idx - 1, idx + 1, static_cast<uint32_t>(start), static_cast<uint32_t>(len)});
  };
  bool prev_unk = false;
  for (size_t i = 0; i < word.size();) {
    const size_t n = options_.byte_units
                         ? 1
                         : std::min(Utf8SeqLen(static_cast<uint8_t>(word[i])), word.size() - i);
    int32_t id;
    if (n == 1) {
      id = byte_unit_id_[static_cast<uint8_t>(word[i])];
    } else {
      auto it = vocab_.find(word.substr(i, n));
      id = it == vocab_.end() ? -1 : it->second;
    }
    if (id >= 0) {
      add(id, i, n);
      prev_unk = false;
    } else {
      bool done = false;
      if (options_.byte_fallback) {
        done = true;
        for (size_t k = 0; k < n; ++k) {
          if (byte_fallback_id_[static_cast<uint8_t>(word[i + k])] < 0) done = false;
        }
        if (done) {
          for (size_t k = 0; k < n; ++k) add(byte_fallback_id_[static_cast<uint8_t>(word[i + k])], i + k, 1);
          prev_unk = false;
        }
      }
      if (!done && options_.unk_id >= 0) {
        if (options_.fuse_unk && prev_unk) {
          syms.back().len += static_cast<uint32_t>(n);
        } else {
          add(options_.unk_id, i, n);
        }
        prev_unk = true;
      }
    }
    i += n;
  }
  if (syms.empty()) return;
  syms.back().next = -1;

  // Min-heap on (rank, left position). An entry is stale once either side
  // changed; it is then skipped when popped (checked by comparing ids).
  struct Cand {
    int32_t rank, pos, left, right, id;
  };
  auto later = [](const Cand& x, const Cand& y) {
    return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
  };
  std::vector<Cand> heap;
  auto push = [&](int32_t l) {
    if (l < 0) return;
    const int32_t r = syms[l].next;
    if (r < 0) return;
    auto it = merges_.find(Key(syms[l].id, syms[r].id));
    if (it == merges_.end()) return;
    heap.push_back({it->second.rank, l, syms[l].id, syms[r].id, it->second.id});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(syms.size()); ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Cand c = heap.back();
    heap.pop_back();
    Symbol& l = syms[c.pos];
    if (l.len == 0 || l.id != c.left || l.next < 0) continue;
    Symbol& r = syms[l.next];
    if (r.id != c.right) continue;
    l.id = c.id;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.pos;
    push(l.prev);
    push(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) out->push_back(syms[i].id);
}

SpmModel::SpmModel(const std::vector<std::string>& pieces, std::vector<float> scores, int32_t unk_id)
    : scores_(std::move(scores)), unk_id_(unk_id) {
  vocab_.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) vocab_.try_emplace(pieces[i], static_cast<int32_t>(i));
  scores_.resize(pieces.size(), 0.0f);
  FillByteFallback(vocab_, byte_ids_);
}

void SpmModel::Encode(std::string_view word, std::vector<int32_t>* out) const {
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(Utf8SeqLen(static_cast<uint8_t>(word[i])), word.size() - i);
    const int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({-1, idx - 1, idx + 1, static_cast<uint32_t>(i), static_cast<uint32_t>(n)});
    i += n;
  }
  if (syms.empty()) return;
  syms.back().next = -1;

  // Max-heap on (score, -left): llama.cpp's llm_bigram_spm ordering.
  struct Bigram {
    float score;
    int32_t left, right;
    uint32_t size;
  };
  auto lower = [](const Bigram& x, const Bigram& y) {
    return x.score < y.score || (x.score == y.score && x.left > y.left);
  };
  std::vector<Bigram> heap;
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t size = syms[l].len + syms[r].len;
    auto it = vocab_.find(word.substr(syms[l].start, size));
    if (it == vocab_.end()) return;
    heap.push_back({scores_[it->second], l, r, size});
    std::push_heap(heap.begin(), heap.end(), lower);
  };
  for (int32_t i = 1; i < static_cast<int32_t>(syms.size()); ++i) try_add(i - 1, i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower);
    const Bigram b = heap.back();
    heap.pop_back();
    Symbol& l = syms[b.left];
    Symbol& r = syms[b.right];
    // Stale if either side was merged since the bigram was queued.
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.size || l.next != b.right) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const std::string_view text = word.substr(syms[i].start, syms[i].len);
    auto it = vocab_.find(text);
    if (it != vocab_.end()) {
      out->push_back(it->second);
      continue;
    }
    // Only single characters can miss the vocabulary (every merge result is a
    // piece): spell them as bytes.
    for (char c : text) {
      const int32_t id = byte_ids_[static_cast<uint8_t>(c)];
      if (id >= 0) {
        out->push_back(id);
      } else if (unk_id_ >= 0) {
        out->push_back(unk_id_);
      }
    }
  }
}

}  // namespace specd::tok
