// Text <-> token ids for Hugging Face tokenizer.json files (byte-level BPE as
// in GPT-2 / Llama 3 / Qwen2/3, and SentencePiece-style metaspace BPE with byte
// fallback as in Llama 2 / Mistral) and for GGUF vocabularies (`llama` SPM and
// `gpt2` BPE).
//
// Thread-safe after construction (all methods are const).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "loader/checkpoint.h"

namespace specd {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // add_special: apply the tokenizer's own post-processor (e.g. prepend BOS
  // for Llama; nothing for Qwen). false adds no special tokens at all.
  // Special/added tokens written in the text ("<|eot_id|>") are recognised
  // as single ids when `parse_special` is true.
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special,
                                      bool parse_special = true) const = 0;
  // The bytes of one token as they appear in decoded text (byte-level tokens
  // mapped back to raw bytes, "▁" to space, <0x0A> to "\n"). Special tokens
  // give their literal text unless skip_special.
  virtual std::string TokenBytes(int32_t id, bool skip_special = true) const = 0;
  // Whole-sequence decoding (handles SPM's leading-space rule).
  virtual std::string Decode(const std::vector<int32_t>& ids, bool skip_special = true) const = 0;

  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;  // -1 if none
  virtual int eos_id() const = 0;  // -1 if none
  // Every id that ends generation (eos plus e.g. <|eot_id|>, <|im_end|>).
  virtual std::vector<int32_t> stop_ids() const = 0;
  virtual bool IsSpecial(int32_t id) const = 0;
  // "" if out of range.
  virtual std::string IdToPiece(int32_t id) const = 0;
  // SentencePiece's decoding rule: Decode() drops one leading space of the
  // decoded text (the one the encoder's "▁" prefix added).
  virtual bool strips_leading_space() const { return false; }
};

// Loads `dir`/tokenizer.json (and tokenizer_config.json when present, for
// bos/eos and added tokens). Errors name the file and the key.
StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& dir);
// Builds a tokenizer from a GGUF file's tokenizer.ggml.* metadata.
StatusOr<std::unique_ptr<Tokenizer>> NewGgufTokenizer(const GgufVocab& vocab,
                                                      const std::string& source);
// The tokenizer a resolved model source names (loader/model_source.h):
// tokenizer.json, a tiktoken rank file or a GGUF vocab. NotFound when the
// source has none (the message says what was looked for).
StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const ModelSource& source);
// For a model path (folder, .gguf, or a tokenizer file alone):
// ResolveModelSource(path, {.need_weights = false}), then LoadTokenizer.
StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerForModel(const std::string& model_path);

// Streams decoded text token by token without ever emitting half a UTF-8
// character: bytes of an incomplete character are held until it completes.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer* tok) : tok_(tok) {}
  // Returns the text that became complete with this token (maybe empty).
  std::string Push(int32_t id);
  // Returns whatever is still held (invalid bytes become U+FFFD).
  std::string Flush();

 private:
  const Tokenizer* tok_;
  std::string pending_;
  bool first_ = true;
};

}  // namespace specd
