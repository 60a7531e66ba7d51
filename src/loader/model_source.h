// What a model path means, decided once: which files hold the weights, the
// config, the tokenizer, the chat template and the special tokens. The
// checkpoint loader (OpenCheckpoint), the tokenizer (LoadTokenizerForModel)
// and the chat prompt (server::ChatPrompt) all take their files from here,
// so a path that loads as a model also gives that model's tokenizer and
// template, and a path that does not fails the same way everywhere.
//
// Rules (ResolveModelSource), in order:
//   a file:   *.gguf or GGUF magic -> that GGUF (weights, config, vocab,
//             tokenizer.chat_template); *.json -> a tokenizer.json alone;
//             a tiktoken rank file -> that tokenizer alone (no weights).
//   a folder: weights: model.safetensors.index.json (sharded) >
//             model.safetensors > model-*-of-*.safetensors > exactly one
//             *.gguf (several: an error naming them). Config: config.json
//             for safetensors, the GGUF's metadata for a GGUF.
//             Tokenizer: the GGUF's vocab when the weights are a GGUF, else
//             tokenizer.json > tiktoken.model > tokenizer.model (tiktoken
//             text) > the folder's only *.gguf.
//             Chat template: the GGUF's metadata when the weights are a
//             GGUF, else tokenizer_config.json's "chat_template" >
//             chat_template.jinja > chat_template.json > the metadata of the
//             GGUF the tokenizer comes from.
//             Special tokens: tokenizer_config.json (bos/eos and added
//             tokens), else the GGUF's tokenizer.ggml.* ids.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace specd {

enum class WeightsFormat {
  kNone,                // no weights (a tokenizer-only folder; only with need_weights = false)
  kSafetensors,         // one model.safetensors
  kSafetensorsIndex,    // shards listed in model.safetensors.index.json
  kSafetensorsShards,   // model-0000N-of-0000M.safetensors without an index
  kGguf,                // one .gguf file (named, or the only one in the folder)
};
const char* WeightsFormatName(WeightsFormat f);

enum class TokenizerKind { kNone, kHfJson, kTiktoken, kGgufVocab };
const char* TokenizerKindName(TokenizerKind k);

enum class ChatTemplateKind {
  kNone,            // the fallback template applies
  kTokenizerConfig, // tokenizer_config.json "chat_template" (a string or a named list)
  kJinjaFile,       // chat_template.jinja
  kJsonFile,        // chat_template.json {"chat_template": ...}
  kGgufMetadata,    // tokenizer.chat_template of a GGUF (may be absent in the file)
};
const char* ChatTemplateKindName(ChatTemplateKind k);

struct ModelSource {
  std::string path;  // as given
  std::string dir;   // the folder of the model's side files (path itself, or a file's folder)

  WeightsFormat format = WeightsFormat::kNone;
  // Full paths. kSafetensorsIndex: the shards named in the index (read when
  // the checkpoint opens); kSafetensors / kSafetensorsShards: the files;
  // kGguf: the one file.
  std::vector<std::string> weight_files;
  std::string index_file;   // model.safetensors.index.json (kSafetensorsIndex)
  std::string config_file;  // config.json, or the GGUF file (its metadata)

  TokenizerKind tokenizer = TokenizerKind::kNone;
  std::string tokenizer_file;  // tokenizer.json / rank file / GGUF file

  ChatTemplateKind chat_template = ChatTemplateKind::kNone;
  std::string chat_template_file;

  // tokenizer_config.json or the GGUF file; "" when neither exists.
  std::string special_tokens_file;

  bool is_gguf() const { return format == WeightsFormat::kGguf; }
  // One line per source, for logs and errors.
  std::string Describe() const;
};

struct ResolveOptions {
  // false: a folder without weights resolves (tokenizer-only folders for
  // `specd tokenize`); format is then kNone.
  bool need_weights = true;
};

// Errors: NotFound for a missing path or (need_weights) a folder without
// weights; InvalidArgument for a folder with several .gguf files and nothing
// else to choose (the message names them and asks for one) or a file that is
// neither GGUF nor a tokenizer file.
StatusOr<ModelSource> ResolveModelSource(const std::string& path,
                                         const ResolveOptions& options = {});

// A tiktoken rank file ("<base64 token> <rank>" lines, as Kimi's
// tiktoken.model or Meta's original Llama 3 tokenizer.model), told apart from
// a SentencePiece protobuf by its first non-empty line.
bool LooksLikeTiktokenRankFile(const std::string& path);

}  // namespace specd
