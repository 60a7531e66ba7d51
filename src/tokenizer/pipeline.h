// The text stages before the BPE model: normalizers (NFC, Prepend("▁"),
// Replace(" ", "▁"), ...) and pre-tokenizers (regex Split, ByteLevel,
// Metaspace), configured from tokenizer.json or from a GGUF vocab.
//
// Byte-level models work on raw bytes here: the ByteLevel pre-tokenizer only
// splits (and may prepend a space); the byte -> "Ġ" mapping is folded into the
// model's vocabulary at load time, so pieces never need re-encoding.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace specd::tok {

struct Normalizer {
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kPrepend, kReplace, kStrip };
  Kind kind;
  std::string content;                  // kPrepend: the prefix; kReplace: the replacement
  std::shared_ptr<const Regex> pattern;  // kReplace: what is replaced
  bool strip_left = false, strip_right = false;  // kStrip
};

// Applies `steps` in order to `text`.
void Normalize(const std::vector<Normalizer>& steps, std::string* text);

// How a Split pre-tokenizer treats the matched delimiters (Hugging Face's
// SplitDelimiterBehavior).
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreTokenizer {
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  Kind kind;
  // kSplit
  std::shared_ptr<const Regex> pattern;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kByteLevel
  bool add_prefix_space = false;
  std::shared_ptr<const Regex> byte_level_regex;  // null: use_regex false
  // kMetaspace
  std::string replacement = "\xE2\x96\x81";  // U+2581 "▁"
  enum class Prepend { kAlways, kFirst, kNever } prepend = Prepend::kAlways;
  bool split = true;
};

// One pre-token. `first`: it starts at offset 0 of the caller's original
// text (Metaspace's prepend_scheme "first" prepends only there).
struct Piece {
  std::string text;
  bool first = false;
};

// Splits `text` (one normalized fragment between added tokens) into pieces.
void PreTokenize(const std::vector<PreTokenizer>& steps, std::string text, bool first,
                 std::vector<Piece>* out);

// GPT-2's ByteLevel pre-tokenizer regex (tokenizer.json `use_regex: true`).
extern const char kGpt2Pattern[];

}  // namespace specd::tok
