// Chat templates: a model's own Jinja `chat_template` (from
// tokenizer_config.json, chat_template.jinja or GGUF metadata
// `tokenizer.chat_template`) rendered in C++ to build the prompt of a
// /v1/chat/completions request.
//
// The renderer implements the Jinja subset real chat templates use (Llama 2 /
// 3 / 3.1 / 3.2, Qwen 2.5 / 3, Mistral / Mixtral, Gemma, ...) with jinja2,
// set up as transformers' apply_chat_template sets it up, as the reference:
// its output is checked byte for byte against that library
// (tests/python/render_template.py). HF's settings apply: trim_blocks and
// lstrip_blocks on.
//
// A template using anything this renderer does not implement (an unknown
// filter, test, method, function or statement) is rejected by Create with
// the construct and its line:column, so a model never gets a silently wrong
// prompt.
//
// Thread safety: a ChatTemplate is immutable after Create; Render may be
// called concurrently.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "jinja/ast.h"

namespace specd {

struct ChatTemplateOptions {
  std::string bos_token;  // e.g. "<|begin_of_text|>"; "" when the model has none
  std::string eos_token;  // e.g. "<|eot_id|>"
  // Where the template came from, for error messages
  // ("model/tokenizer_config.json", "model.gguf").
  std::string source_name = "chat template";
};

class ChatTemplate {
 public:
  // Parses and validates `template_source`. Errors (InvalidArgument /
  // Unsupported) read "<source_name>:<line>:<col>: <what>".
  static StatusOr<std::unique_ptr<ChatTemplate>> Create(const std::string& template_source,
                                                        ChatTemplateOptions options);

  // Renders the prompt.
  //   messages: array of {"role": ..., "content": ..., "tool_calls": ...,
  //     ...} exactly as in the request (content may be a string, null or a
  //     list of parts; the template decides).
  //   extra_context: an object whose members become template variables
  //     ("tools", "documents", "enable_thinking", "date_string", ...); they
  //     override bos_token / eos_token / add_generation_prompt if present.
  // ordered_json keeps the request's key order, which `tojson` output shows.
  // Errors are InvalidArgument (the request does not fit the template: the
  // server answers 400). A template's raise_exception("msg") gives exactly
  // "msg" as the message, with stage "chat template".
  StatusOr<std::string> Render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                               const nlohmann::ordered_json& extra_context =
                                   nlohmann::ordered_json::object()) const;

  const std::string& source() const { return source_; }
  const ChatTemplateOptions& options() const { return options_; }

 private:
  ChatTemplate() = default;
  std::string source_;
  ChatTemplateOptions options_;
  jinja::Program program_;
};

// Reads the chat template of a Hugging Face model folder:
// tokenizer_config.json's "chat_template" (a string, or a list of
// {"name", "template"} from which `name` is picked), else chat_template.jinja,
// else chat_template.json's "chat_template". bos_token / eos_token come from
// tokenizer_config.json (a string or {"content": ...}). NotFound when the
// model has no chat template.
StatusOr<std::unique_ptr<ChatTemplate>> LoadChatTemplate(const std::string& model_dir,
                                                         const std::string& name = "default");

}  // namespace specd
