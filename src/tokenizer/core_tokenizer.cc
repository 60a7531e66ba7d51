#include "tokenizer/core_tokenizer.h"

#include <algorithm>
#include <unordered_map>

#include "base/thread_annotations.h"
#include "tokenizer/utf8.h"

namespace specd::tok {
namespace {

bool IsSpaceByte(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

class CoreTokenizer final : public Tokenizer {
 public:
  explicit CoreTokenizer(TokenizerSpec spec) : spec_(std::move(spec)) {
    // Candidates per first byte, longest first, so the first hit at a
    // position is the longest match.
    for (size_t i = 0; i < spec_.added.size(); ++i) {
      const std::string& c = spec_.added[i].content;
      if (!c.empty()) by_first_byte_[static_cast<uint8_t>(c[0])].push_back(static_cast<int>(i));
    }
    for (auto& list : by_first_byte_) {
      std::stable_sort(list.begin(), list.end(), [&](int a, int b) {
        return spec_.added[a].content.size() > spec_.added[b].content.size();
      });
    }
  }

  std::vector<int32_t> Encode(std::string_view text, bool add_special,
                              bool parse_special) const override {
    std::vector<int32_t> ids;
    if (add_special) ids = spec_.prefix_ids;
    std::vector<Piece> pieces;
    auto encode_text = [&](size_t start, size_t end) {
      if (end <= start) return;
      std::string s(text.substr(start, end - start));
      Normalize(spec_.normalizers, &s);
      PreTokenize(spec_.pre_tokenizers, std::move(s), start == 0, &pieces);
      for (const Piece& p : pieces) EncodeWord(p.text, &ids);
    };
    // Leftmost-longest scan for added tokens.
    size_t frag_start = 0;
    size_t i = 0;
    while (i < text.size()) {
      const AddedToken* hit = nullptr;
      for (int idx : by_first_byte_[static_cast<uint8_t>(text[i])]) {
        const AddedToken& t = spec_.added[idx];
        if (t.special && !parse_special) continue;
        if (text.compare(i, t.content.size(), t.content) == 0) {
          hit = &t;
          break;
        }
      }
      if (hit == nullptr) {
        ++i;
        continue;
      }
      size_t text_end = i;
      if (hit->lstrip) {
        while (text_end > frag_start && IsSpaceByte(text[text_end - 1])) --text_end;
      }
      encode_text(frag_start, text_end);
      ids.push_back(hit->id);
      i += hit->content.size();
      if (hit->rstrip) {
        while (i < text.size() && IsSpaceByte(text[i])) ++i;
      }
      frag_start = i;
    }
    encode_text(frag_start, text.size());
    if (add_special) ids.insert(ids.end(), spec_.suffix_ids.begin(), spec_.suffix_ids.end());
    return ids;
  }

  std::string TokenBytes(int32_t id, bool skip_special) const override {
    if (id < 0 || id >= vocab_size()) return "";
    if (skip_special && spec_.special[id]) return "";
    return spec_.token_bytes[id];
  }

  std::string Decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    std::string raw;
    for (int32_t id : ids) raw += TokenBytes(id, skip_special);
    std::string_view view = raw;
    if (spec_.strip_leading_space && !view.empty() && view[0] == ' ') view.remove_prefix(1);
    std::string out;
    out.reserve(view.size());
    AppendValidUtf8(view, /*hold_tail=*/false, &out);
    return out;
  }

  int vocab_size() const override { return static_cast<int>(spec_.pieces.size()); }
  int bos_id() const override { return spec_.bos_id; }
  int eos_id() const override { return spec_.eos_id; }
  std::vector<int32_t> stop_ids() const override { return spec_.stop_ids; }
  bool IsSpecial(int32_t id) const override {
    return id >= 0 && id < vocab_size() && spec_.special[id] != 0;
  }
  bool strips_leading_space() const override { return spec_.strip_leading_space; }
  std::string IdToPiece(int32_t id) const override {
    return id >= 0 && id < vocab_size() ? spec_.pieces[id] : "";
  }

 private:
  // Words up to this many bytes are cached; longer ones (a whole metaspace
  // fragment, a long digit run) are rare and would only bloat the cache.
  static constexpr size_t kMaxCachedWord = 64;
  static constexpr size_t kMaxCacheEntries = size_t{1} << 18;

  void EncodeWord(const std::string& word, std::vector<int32_t>* out) const EXCLUDES(cache_mu_) {
    if (word.empty()) return;
    if (word.size() > kMaxCachedWord) {
      spec_.model->Encode(word, out);
      return;
    }
    {
      MutexLock lock(&cache_mu_);
      auto it = cache_.find(word);
      if (it != cache_.end()) {
        out->insert(out->end(), it->second.begin(), it->second.end());
        return;
      }
    }
    const size_t before = out->size();
    spec_.model->Encode(word, out);
    std::vector<int32_t> ids(out->begin() + static_cast<std::ptrdiff_t>(before), out->end());
    MutexLock lock(&cache_mu_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(word, std::move(ids));
  }

  TokenizerSpec spec_;
  std::vector<int> by_first_byte_[256];  // indices into spec_.added
  mutable Mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_ GUARDED_BY(cache_mu_);
};

}  // namespace

void FillStopIds(TokenizerSpec* spec) {
  static const char* const kEndOfTurn[] = {"<|eot_id|>",  "<|im_end|>", "<|end_of_text|>",
                                           "<|endoftext|>", "</s>",       "<|eom_id|>",
                                           "<|end|>",     "<end_of_turn>"};
  std::vector<int32_t>& stops = spec->stop_ids;
  stops.clear();
  if (spec->eos_id >= 0) stops.push_back(spec->eos_id);
  for (const char* name : kEndOfTurn) {
    for (const AddedToken& t : spec->added) {
      if (t.content == name && std::find(stops.begin(), stops.end(), t.id) == stops.end()) {
        stops.push_back(t.id);
      }
    }
  }
}

std::unique_ptr<Tokenizer> NewCoreTokenizer(TokenizerSpec spec) {
  return std::make_unique<CoreTokenizer>(std::move(spec));
}

}  // namespace specd::tok
