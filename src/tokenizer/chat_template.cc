#include "tokenizer/chat_template.h"

#include <fstream>
#include <sstream>
#include <system_error>
#include <filesystem>

#include "jinja/builtins.h"
#include "jinja/eval.h"
#include "jinja/parser.h"

namespace specd {
namespace {

std::string Located(const std::string& source_name, const jinja::JinjaError& e) {
  if (e.pos.line <= 0) return source_name + ": " + e.message;
  return source_name + ":" + std::to_string(e.pos.line) + ":" + std::to_string(e.pos.col) + ": " +
         e.message;
}

StatusOr<std::string> ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoError("cannot open " + path.string(), errno);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return IoError("error reading " + path.string());
  return ss.str();
}

// bos_token / eos_token: a string, {"content": "..."} or null.
StatusOr<std::string> TokenText(const nlohmann::json& config, const char* key, const std::string& file) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  return InvalidArgumentError(file + ": '" + key + "' must be a string or an object with a string 'content'");
}

}  // namespace

StatusOr<std::unique_ptr<ChatTemplate>> ChatTemplate::Create(const std::string& template_source,
                                                             ChatTemplateOptions options) {
  std::unique_ptr<ChatTemplate> t(new ChatTemplate());
  t->source_ = template_source;
  t->options_ = std::move(options);
  try {
    t->program_ = jinja::ParseTemplate(t->source_);
  } catch (const jinja::JinjaError& e) {
    std::string msg = Located(t->options_.source_name, e);
    bool unsupported = e.message.rfind("unsupported", 0) == 0;
    return (unsupported ? UnsupportedError(std::move(msg)) : InvalidArgumentError(std::move(msg)))
        .WithStage("chat template");
  } catch (const std::exception& e) {
    return InternalError(t->options_.source_name + ": " + e.what()).WithStage("chat template");
  }
  return t;
}

StatusOr<std::string> ChatTemplate::Render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                           const nlohmann::ordered_json& extra_context) const {
  if (!messages.is_array()) return InvalidArgumentError("chat template: 'messages' must be an array");
  if (!extra_context.is_null() && !extra_context.is_object()) {
    return InvalidArgumentError("chat template: extra context must be a JSON object");
  }
  try {
    jinja::Object globals;
    jinja::Object builtins = jinja::GlobalFunctions();
    for (auto& [k, v] : builtins.entries) globals.Set(k, v);
    for (const char* t : {"true", "True"}) globals.Set(t, jinja::Value::Bool(true));
    for (const char* f : {"false", "False"}) globals.Set(f, jinja::Value::Bool(false));
    for (const char* n : {"none", "None"}) globals.Set(n, jinja::Value::Null());
    globals.Set("bos_token", jinja::Value::String(options_.bos_token));
    globals.Set("eos_token", jinja::Value::String(options_.eos_token));
    globals.Set("add_generation_prompt", jinja::Value::Bool(add_generation_prompt));
    globals.Set("messages", jinja::FromJson(messages));
    if (extra_context.is_object()) {
      for (auto it = extra_context.begin(); it != extra_context.end(); ++it) {
        globals.Set(it.key(), jinja::FromJson(it.value()));
      }
    }
    return jinja::RenderProgram(program_, globals);
  } catch (const jinja::JinjaError& e) {
    if (e.raised) return InvalidArgumentError(e.message).WithStage("chat template");
    return InvalidArgumentError(Located(options_.source_name, e)).WithStage("chat template");
  } catch (const std::bad_alloc&) {
    return ResourceExhaustedError(options_.source_name + ": out of memory while rendering").WithStage("chat template");
  } catch (const std::exception& e) {
    return InternalError(options_.source_name + ": " + e.what()).WithStage("chat template");
  }
}

StatusOr<std::unique_ptr<ChatTemplate>> LoadChatTemplate(const std::string& model_dir, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  const fs::path config_path = dir / "tokenizer_config.json";
  nlohmann::json config = nlohmann::json::object();
  std::error_code ec;
  if (fs::exists(config_path, ec)) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(config_path));
    config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object()) {
      return CorruptionError(config_path.string() + ": not a JSON object");
    }
  }
  ChatTemplateOptions options;
  ASSIGN_OR_RETURN(options.bos_token, TokenText(config, "bos_token", config_path.string()));
  ASSIGN_OR_RETURN(options.eos_token, TokenText(config, "eos_token", config_path.string()));

  std::string source;
  auto ct = config.find("chat_template");
  if (ct != config.end() && !ct->is_null()) {
    options.source_name = config_path.string();
    if (ct->is_string()) {
      source = ct->get<std::string>();
    } else if (ct->is_array()) {
      std::string names;
      for (const auto& entry : *ct) {
        if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
            !entry["name"].is_string() || !entry["template"].is_string()) {
          return InvalidArgumentError(config_path.string() +
                                      ": 'chat_template' list entries must be {\"name\": string, \"template\": string}");
        }
        const std::string entry_name = entry["name"].get<std::string>();
        names += (names.empty() ? "" : ", ") + entry_name;
        if (entry_name == name) {
          source = entry["template"].get<std::string>();
          options.source_name += " (chat_template '" + name + "')";
        }
      }
      if (source.empty()) {
        return NotFoundError(config_path.string() + ": no chat template named '" + name + "' (have: " + names + ")");
      }
    } else {
      return InvalidArgumentError(config_path.string() + ": 'chat_template' must be a string or a list");
    }
  } else if (fs::exists(dir / "chat_template.jinja", ec)) {
    ASSIGN_OR_RETURN(source, ReadFile(dir / "chat_template.jinja"));
    options.source_name = (dir / "chat_template.jinja").string();
  } else if (fs::exists(dir / "chat_template.json", ec)) {
    const fs::path p = dir / "chat_template.json";
    ASSIGN_OR_RETURN(std::string text, ReadFile(p));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("chat_template") || !j["chat_template"].is_string()) {
      return InvalidArgumentError(p.string() + ": expected an object with a string 'chat_template'");
    }
    source = j["chat_template"].get<std::string>();
    options.source_name = p.string();
  } else {
    return NotFoundError(model_dir + ": no chat template (no 'chat_template' in tokenizer_config.json, "
                                     "no chat_template.jinja or chat_template.json)");
  }
  return ChatTemplate::Create(source, std::move(options));
}

}  // namespace specd
