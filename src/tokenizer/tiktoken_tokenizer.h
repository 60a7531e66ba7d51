// tiktoken BPE rank files (Kimi-K2's `tiktoken.model`, Meta's original
// Llama 3 `tokenizer.model`): one `base64(token bytes) rank` per line, the
// rank being both the token id and its merge priority. Special tokens, bos/eos
// and the pre-tokenizer pattern come from tokenizer_config.json beside the
// file (docs/formats.md, "tiktoken rank files").
//
// Encoding is tiktoken's: special tokens are cut out of the text first (when
// parse_special), each remaining fragment is split by the pattern (text the
// pattern does not match is dropped, as tiktoken's find_iter does), and each
// piece that is not itself a token is merged byte by byte, lowest rank first.
// The merging runs on the shared BpeModel with one merge (a, b) per way of
// splitting each token into two tokens, ranked by the token's rank: the
// conversion transformers applies to tiktoken files (Llama 3's
// tokenizer.json is exactly that list).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace specd {

struct TiktokenRank {
  std::string bytes;  // the token's bytes (base64-decoded)
  int32_t rank = 0;
  int line = 0;  // 1-based line in the file, for messages
};

// Parses a rank file's text. Empty lines are skipped; every other line must
// be `base64 rank` (one run of spaces or tabs between, optional trailing
// \r). Corruption names `source`, the line and what is wrong: not two
// fields, invalid base64, empty token, a rank that is not a decimal integer
// below 2^24, a duplicate rank or duplicate token bytes (with the first
// line).
StatusOr<std::vector<TiktokenRank>> ParseTiktokenRanks(std::string_view text,
                                                       const std::string& source);

// Loads the rank file `path` with `tokenizer_config.json` from its folder
// (optional: without it there are no special tokens and the default
// pattern). Errors name the file and the line or key.
StatusOr<std::unique_ptr<Tokenizer>> LoadTiktokenTokenizer(const std::string& path);

// True when `path`'s first non-empty line parses as `base64 rank`: tells a
// tiktoken `tokenizer.model` from a SentencePiece protobuf one.
bool LooksLikeTiktokenFile(const std::string& path);

}  // namespace specd
