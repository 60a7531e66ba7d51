// The one Tokenizer implementation behind both loaders: tokenizer.json
// (hf_tokenizer.cc) and GGUF vocabularies (gguf_tokenizer.cc) translate their
// format into a TokenizerSpec, and CoreTokenizer runs it:
//
//   Encode: text -> split on added tokens (leftmost-longest) -> per fragment:
//           normalize -> pre-tokenize -> model per piece (cached) -> ids;
//           then the post-processor's prefix/suffix ids when add_special.
//   Decode: concatenation of each id's decoded bytes; one leading space
//           dropped when `strip_leading_space` (SentencePiece's rule); bytes
//           that do not form UTF-8 become U+FFFD.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/pipeline.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/word_model.h"

namespace specd::tok {

// A token matched verbatim in the input before normalization.
struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;  // not matched when parse_special is false
  bool lstrip = false;   // also swallows whitespace on its left
  bool rstrip = false;   // ... and on its right
};

struct TokenizerSpec {
  std::string source;  // file the tokenizer came from (for messages)
  // Indexed by id; size() == vocab_size.
  std::vector<std::string> pieces;       // as written in the file ("Ġthe", "▁the", "<s>")
  std::vector<std::string> token_bytes;  // what the id decodes to (" the")
  std::vector<uint8_t> special;          // 1 for control / special tokens
  std::unique_ptr<WordModel> model;
  std::vector<Normalizer> normalizers;
  std::vector<PreTokenizer> pre_tokenizers;
  std::vector<AddedToken> added;
  // Post-processor for one sequence: prefix + ids + suffix (add_special).
  std::vector<int32_t> prefix_ids, suffix_ids;
  bool strip_leading_space = false;
  int32_t bos_id = -1, eos_id = -1;
  std::vector<int32_t> stop_ids;
};

// Fills spec->stop_ids from eos_id plus end-of-turn tokens found by name.
void FillStopIds(TokenizerSpec* spec);

// REQUIRES: spec.model != nullptr; pieces, token_bytes and special have the
// same size and every id in the spec is below it.
std::unique_ptr<Tokenizer> NewCoreTokenizer(TokenizerSpec spec);

}  // namespace specd::tok
