// The model stage: one pre-token ("word") -> token ids.
//
// BpeModel: Hugging Face BPE (merge ranks). Pieces are given in the model's
// alphabet: raw bytes for byte-level vocabularies (the loader undoes the
// "Ġ" mapping), UTF-8 with "▁" for metaspace ones. Merging is the classic
// rule, done with a heap in O(n log n): repeatedly merge the adjacent pair of
// lowest rank, leftmost first.
//
// SpmModel: SentencePiece-style BPE as llama.cpp's llm_tokenizer_spm: merge
// the adjacent pair whose concatenation is a vocabulary piece with the highest
// score (leftmost on ties); leftover characters become <0xXX> byte tokens.
//
// Both are immutable after construction and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace specd::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using PieceMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class WordModel {
 public:
  virtual ~WordModel() = default;
  // Appends the ids of `word` (non-empty) to *out.
  virtual void Encode(std::string_view word, std::vector<int32_t>* out) const = 0;
};

struct BpeOptions {
  // Units are single bytes (byte-level BPE) instead of UTF-8 characters.
  bool byte_units = false;
  // A unit missing from the vocabulary becomes its <0xXX> byte tokens.
  bool byte_fallback = false;
  // A word that is itself a vocabulary piece is not merged (Llama 3).
  bool ignore_merges = false;
  // Consecutive unknown units give a single unk id.
  bool fuse_unk = false;
  int32_t unk_id = -1;  // -1: unknown units are dropped
};

class BpeModel : public WordModel {
 public:
  // `vocab`: piece -> id in the model alphabet. `merges`: (left, right) piece
  // pairs in rank order; pairs naming unknown pieces are skipped and counted
  // in *skipped.
  BpeModel(PieceMap vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           const BpeOptions& options, size_t* skipped);
  void Encode(std::string_view word, std::vector<int32_t>* out) const override;

 private:
  struct Merge {
    int32_t rank;
    int32_t id;
  };
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  PieceMap vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  BpeOptions options_;
  int32_t byte_unit_id_[256];      // id of the one-byte piece, -1 if none
  int32_t byte_fallback_id_[256];  // id of <0xXX>, -1 if none
};

class SpmModel : public WordModel {
 public:
  // `pieces`/`scores` are indexed by id; <0xXX> pieces are the byte tokens.
  SpmModel(const std::vector<std::string>& pieces, std::vector<float> scores, int32_t unk_id);
  void Encode(std::string_view word, std::vector<int32_t>* out) const override;

 private:
  PieceMap vocab_;
  std::vector<float> scores_;
  int32_t unk_id_;
  int32_t byte_ids_[256];
};

}  // namespace specd::tok
