#include "server/chat_prompt.h"

#include "base/logging.h"
#include "base/mapped_file.h"
#include "loader/gguf_reader.h"

namespace specd::server {

const char* const kFallbackChatTemplate =
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";

namespace {

// tokenizer.chat_template of a GGUF file; NotFound when absent.
StatusOr<std::string> GgufChatTemplate(const std::string& path) {
  ASSIGN_OR_RETURN(auto file, MappedFile::Open(path));
  ASSIGN_OR_RETURN(GgufFile gguf, ParseGguf(file->data(), file->size(), path, false));
  if (!gguf.Has("tokenizer.chat_template"))
    return NotFoundError(path + ": no tokenizer.chat_template");
  return gguf.GetString("tokenizer.chat_template");
}

}  // namespace

std::unique_ptr<ChatPrompt> ChatPrompt::CreateFallback() {
  auto p = std::make_unique<ChatPrompt>();
  ChatTemplateOptions o;
  o.source_name = "fallback chat template";
  auto t = ChatTemplate::Create(kFallbackChatTemplate, o);
  p->template_ = std::move(t).value();  // a constant known to parse (tested)
  p->fallback_ = true;
  p->source_ = o.source_name;
  return p;
}

StatusOr<std::unique_ptr<ChatPrompt>> ChatPrompt::Create(const std::string& model_path,
                                                         const Tokenizer* tokenizer) {
  ResolveOptions options;
  options.need_weights = false;
  auto source = ResolveModelSource(model_path, options);
  if (source.ok()) return Create(*source, tokenizer);
  if (source.status().code() != StatusCode::kNotFound) {
    return std::move(source).TakeStatus().WithStage("chat template");
  }
  ModelSource none;  // nothing there: the fallback, as for a model without a template
  none.path = model_path;
  return Create(none, tokenizer);
}

StatusOr<std::unique_ptr<ChatPrompt>> ChatPrompt::Create(const ModelSource& model,
                                                         const Tokenizer* tokenizer) {
  const std::string& model_path = model.path;
  std::unique_ptr<ChatTemplate> tmpl;
  std::string source;
  switch (model.chat_template) {
    case ChatTemplateKind::kTokenizerConfig:
    case ChatTemplateKind::kJinjaFile:
    case ChatTemplateKind::kJsonFile: {
      // The folder's loader applies the same order as the resolver.
      auto t = LoadChatTemplate(model.dir);
      if (t.ok()) {
        tmpl = std::move(t).value();
        source = model_path;
      } else if (t.status().code() != StatusCode::kNotFound) {
        return std::move(t).TakeStatus().WithStage("chat template");
      }
      break;
    }
    case ChatTemplateKind::kGgufMetadata: {
      auto src = GgufChatTemplate(model.chat_template_file);
      if (src.ok()) {
        ChatTemplateOptions o;
        o.source_name = model.chat_template_file;
        if (tokenizer && tokenizer->bos_id() >= 0) o.bos_token = tokenizer->IdToPiece(tokenizer->bos_id());
        if (tokenizer && tokenizer->eos_id() >= 0) o.eos_token = tokenizer->IdToPiece(tokenizer->eos_id());
        auto t = ChatTemplate::Create(*src, o);
        if (!t.ok()) return std::move(t).TakeStatus().WithStage("chat template");
        tmpl = std::move(t).value();
        source = model.chat_template_file;
      } else if (src.status().code() != StatusCode::kNotFound) {
        return std::move(src).TakeStatus().WithStage("chat template");
      }
      break;
    }
    case ChatTemplateKind::kNone:
      break;
  }
  if (!tmpl) {
    LOG_INFO("chat template",
             "{} has no chat template: chat prompts use the fallback \"<role>: <content>\\n ... "
             "assistant:\"",
             model_path);
    return CreateFallback();
  }
  LOG_INFO("chat template", "using the chat template of {}", source);
  auto p = std::make_unique<ChatPrompt>();
  p->template_ = std::move(tmpl);
  p->source_ = source;
  return p;
}

StatusOr<std::string> ChatPrompt::Render(const nlohmann::ordered_json& messages) const {
  return template_->Render(messages, /*add_generation_prompt=*/true);
}

}  // namespace specd::server
