#include "server/openai_response.h"

#include <fmt/format.h>

#include <atomic>
#include <random>

namespace specd::server {

std::string NewRequestId(Endpoint endpoint) {
  // Random per process, then a counter: unique without locking.
  static const uint64_t base = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }();
  static std::atomic<uint64_t> counter{0};
  const uint64_t n = counter.fetch_add(1);
  std::mt19937_64 mix(base + n * 0x9E3779B97F4A7C15ull);
  return fmt::format("{}-{:016x}{:08x}", endpoint == Endpoint::kChat ? "chatcmpl" : "cmpl",
                     mix(), static_cast<uint32_t>(mix()));
}

OJson ErrorJson(const ApiError& e) {
  OJson err = {{"message", e.message}, {"type", e.type}};
  err["param"] = e.param.empty() ? OJson(nullptr) : OJson(e.param);
  err["code"] = e.code.empty() ? OJson(nullptr) : OJson(e.code);
  return {{"error", err}};
}

OJson UsageJson(int prompt_tokens, int completion_tokens) {
  return {{"prompt_tokens", prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}};
}

OJson ModelsJson(const std::string& model, int64_t created, int64_t max_model_len) {
  OJson m = {{"id", model},
             {"object", "model"},
             {"created", created},
             {"owned_by", "specd"},
             {"max_model_len", max_model_len}};
  return {{"object", "list"}, {"data", OJson::array({m})}};
}

std::string Dump(const OJson& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string SseData(const OJson& j) { return "data: " + Dump(j) + "\n\n"; }

ResponseBuilder::ResponseBuilder(Endpoint endpoint, std::string id, std::string model,
                                 int64_t created, int logprobs, const Tokenizer* tokenizer)
    : endpoint_(endpoint),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      logprobs_(logprobs),
      tokenizer_(tokenizer) {}

OJson ResponseBuilder::Base(bool chunk) const {
  const char* object = endpoint_ == Endpoint::kChat
                           ? (chunk ? "chat.completion.chunk" : "chat.completion")
                           : "text_completion";
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

std::string ResponseBuilder::TokenString(int32_t id) const {
  if (tokenizer_ == nullptr) return fmt::format("<{}>", id);
  return tokenizer_->TokenBytes(id, /*skip_special=*/false);
}

OJson ResponseBuilder::Logprobs(const std::vector<TokenLogprob>& lps) {
  if (logprobs_ < 0) return nullptr;
  if (endpoint_ == Endpoint::kChat) {
    auto entry = [&](int32_t id, float lp) {
      const std::string s = TokenString(id);
      OJson bytes = OJson::array();
      for (unsigned char c : s) bytes.push_back(static_cast<int>(c));
      return OJson{{"token", s}, {"logprob", lp}, {"bytes", bytes}};
    };
    OJson content = OJson::array();
    for (const TokenLogprob& t : lps) {
      OJson e = entry(t.id, t.logprob);
      OJson top = OJson::array();
      for (const TopLogprob& x : t.top) top.push_back(entry(x.id, x.logprob));
      e["top_logprobs"] = top;
      content.push_back(e);
    }
    return {{"content", content}};
  }
  OJson tokens = OJson::array(), token_logprobs = OJson::array(), top = OJson::array(),
        offsets = OJson::array();
  for (const TokenLogprob& t : lps) {
    const std::string s = TokenString(t.id);
    tokens.push_back(s);
    token_logprobs.push_back(t.logprob);
    OJson m = OJson::object();
    for (const TopLogprob& x : t.top) m[TokenString(x.id)] = x.logprob;
    top.push_back(m);
    offsets.push_back(text_offset_);
    text_offset_ += static_cast<int64_t>(s.size());
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

OJson ResponseBuilder::Chunk(const OutputDelta& d) {
  OJson j = Base(true);
  OJson choice = {{"index", 0}};
  if (endpoint_ == Endpoint::kChat) {
    OJson delta = OJson::object();
    if (!sent_role_) {
      delta["role"] = "assistant";
      sent_role_ = true;
    }
    if (!d.text.empty() || !d.finished) delta["content"] = d.text;
    choice["delta"] = delta;
  } else {
    choice["text"] = d.text;
  }
  choice["logprobs"] = Logprobs(d.logprobs);
  choice["finish_reason"] = d.finished ? OJson(d.finish_reason) : OJson(nullptr);
  j["choices"] = OJson::array({choice});
  return j;
}

OJson ResponseBuilder::UsageChunk(int prompt_tokens, int completion_tokens) const {
  OJson j = Base(true);
  j["choices"] = OJson::array();
  j["usage"] = UsageJson(prompt_tokens, completion_tokens);
  return j;
}

OJson ResponseBuilder::Full(const OutputDelta& all) {
  OJson j = Base(false);
  OJson choice = {{"index", 0}};
  if (endpoint_ == Endpoint::kChat) {
    choice["message"] = {{"role", "assistant"}, {"content", all.text}};
  } else {
    choice["text"] = all.text;
  }
  choice["logprobs"] = Logprobs(all.logprobs);
  choice["finish_reason"] = all.finish_reason;
  j["choices"] = OJson::array({choice});
  j["usage"] = UsageJson(all.prompt_tokens, all.completion_tokens);
  return j;
}

}  // namespace specd::server
