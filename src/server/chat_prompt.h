// The prompt of a /v1/chat/completions request: the model's own chat
// template (tokenizer_config.json / chat_template.jinja of a Hugging Face
// folder, or a GGUF file's tokenizer.chat_template) rendered with
// add_generation_prompt = true, else a fallback for models without one:
//
//   <role>: <content>\n   for every message, then   assistant:
//
// tokenized with the tokenizer's special tokens (BOS), while a model's own
// template writes its special tokens itself (tokenized without adding any).
// Thread-safe after Create.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "loader/model_source.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace specd::server {

class ChatPrompt {
 public:
  // Errors: a template the renderer rejects (message names the source and
  // line:column), an unreadable GGUF. A model without a template gets the
  // fallback and one log line.
  // The template `model` names (loader/model_source.h).
  static StatusOr<std::unique_ptr<ChatPrompt>> Create(const ModelSource& model,
                                                      const Tokenizer* tokenizer);
  // ResolveModelSource(model_path, {.need_weights = false}), then the above.
  static StatusOr<std::unique_ptr<ChatPrompt>> Create(const std::string& model_path,
                                                      const Tokenizer* tokenizer);
  // The fallback alone (for models without a template, and for tests).
  static std::unique_ptr<ChatPrompt> CreateFallback();

  // InvalidArgument when the messages do not fit the template.
  StatusOr<std::string> Render(const nlohmann::ordered_json& messages) const;
  // Whether the rendered text is tokenized with the tokenizer's BOS/EOS rule.
  bool add_special() const { return fallback_; }
  bool is_fallback() const { return fallback_; }
  const std::string& source() const { return source_; }

 private:
  std::unique_ptr<ChatTemplate> template_;
  bool fallback_ = false;
  std::string source_;
};

// The fallback template's Jinja source.
extern const char* const kFallbackChatTemplate;

}  // namespace specd::server
