#include "server/openai_request.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace specd::server {
namespace {

using Json = nlohmann::ordered_json;

// Thrown inside this file only; ParseApiRequest converts it to an ApiError.
struct Reject {
  std::string param;
  std::string message;
};

[[noreturn]] void Fail(const std::string& param, const std::string& message) {
  throw Reject{param, message};
}

const char* TypeName(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::string: return "string";
    case Json::value_t::array: return "array";
    case Json::value_t::object: return "object";
    case Json::value_t::number_float: return "number";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    default: return "value";
  }
}

// An integral JSON number (2 and 2.0 are accepted, 2.5 and "2" are not).
int64_t GetInt(const Json& v, const std::string& name) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX})
      Fail(name, fmt::format("{}: integer out of range", name));
    return v.get<int64_t>();
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)
      return static_cast<int64_t>(d);
  }
  Fail(name, fmt::format("{}: expected an integer, got {}", name, TypeName(v)));
}

int GetInt32(const Json& v, const std::string& name) {
  const int64_t x = GetInt(v, name);
  if (x < INT32_MIN || x > INT32_MAX) Fail(name, fmt::format("{}: {} is out of range", name, x));
  return static_cast<int>(x);
}

double GetNumber(const Json& v, const std::string& name) {
  if (!v.is_number()) Fail(name, fmt::format("{}: expected a number, got {}", name, TypeName(v)));
  const double d = v.get<double>();
  if (!std::isfinite(d)) Fail(name, fmt::format("{}: expected a finite number", name));
  return d;
}

bool GetBool(const Json& v, const std::string& name) {
  if (!v.is_boolean())
    Fail(name, fmt::format("{}: expected a boolean, got {}", name, TypeName(v)));
  return v.get<bool>();
}

// The member `name` of `o`, or nullptr when absent or null.
const Json* Field(const Json& o, const char* name) {
  auto it = o.find(name);
  if (it == o.end() || it->is_null()) return nullptr;
  return &*it;
}

// Depth of bracket nesting outside strings; stops early past the limit.
bool NestingWithin(std::string_view s, int limit) {
  int depth = 0;
  bool in_str = false, esc = false;
  for (char c : s) {
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if (c == '[' || c == '{') {
      if (++depth > limit) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

void ParsePrompt(const Json& body, ApiRequest* r) {
  const Json* p = Field(body, "prompt");
  if (!p) Fail("prompt", "prompt: required (a string or an array of token ids)");
  if (p->is_string()) {
    r->prompt_text = p->get<std::string>();
    return;
  }
  if (!p->is_array())
    Fail("prompt", fmt::format("prompt: expected a string or an array of token ids, got {}",
                               TypeName(*p)));
  if (p->empty()) Fail("prompt", "prompt: empty array (expected a string or token ids)");
  if (p->size() == 1 && (*p)[0].is_string()) {
    r->prompt_text = (*p)[0].get<std::string>();
    return;
  }
  if ((*p)[0].is_string() || (*p)[0].is_array())
    Fail("prompt", "prompt: batches of several prompts are not supported (send one per request)");
  r->prompt_is_ids = true;
  for (size_t i = 0; i < p->size(); ++i) {
    const Json& t = (*p)[i];
    const std::string name = fmt::format("prompt[{}]", i);
    if (!t.is_number()) Fail("prompt", fmt::format("{}: expected a token id, got {}", name, TypeName(t)));
    const int64_t id = GetInt(t, "prompt");
    if (id < 0 || id > INT32_MAX)
      Fail("prompt", fmt::format("{}: token id {} is negative or too large", name, id));
    r->prompt_ids.push_back(static_cast<int32_t>(id));
  }
}

void ParseMessages(const Json& body, ApiRequest* r) {
  const Json* m = Field(body, "messages");
  if (!m) Fail("messages", "messages: required (an array of {role, content})");
  if (!m->is_array()) Fail("messages", fmt::format("messages: expected an array, got {}", TypeName(*m)));
  if (m->empty()) Fail("messages", "messages: empty (expected at least one message)");
  for (size_t i = 0; i < m->size(); ++i) {
    const Json& msg = (*m)[i];
    const std::string name = fmt::format("messages[{}]", i);
    if (!msg.is_object())
      Fail("messages", fmt::format("{}: expected an object, got {}", name, TypeName(msg)));
    const Json* role = Field(msg, "role");
    if (!role || !role->is_string())
      Fail("messages", fmt::format("{}.role: required string", name));
    const std::string rs = role->get<std::string>();
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "tool" && rs != "developer")
      Fail("messages", fmt::format("{}.role: expected system, developer, user, assistant or tool, "
                                   "got '{}'", name, rs));
    Json out = msg;
    const Json* content = Field(msg, "content");
    if (!content) {
      if (rs != "assistant")
        Fail("messages", fmt::format("{}.content: required for role '{}'", name, rs));
      out["content"] = "";
    } else if (content->is_array()) {
      std::string joined;
      for (size_t k = 0; k < content->size(); ++k) {
        const Json& part = (*content)[k];
        const Json* type = part.is_object() ? Field(part, "type") : nullptr;
        const Json* text = part.is_object() ? Field(part, "text") : nullptr;
        if (!type || !type->is_string() || type->get<std::string>() != "text" || !text ||
            !text->is_string())
          Fail("messages", fmt::format("{}.content[{}]: only {{\"type\": \"text\", \"text\": ...}} "
                                       "parts are supported", name, k));
        joined += text->get<std::string>();
      }
      out["content"] = joined;
    } else if (!content->is_string()) {
      Fail("messages", fmt::format("{}.content: expected a string or an array of text parts, got {}",
                                   name, TypeName(*content)));
    }
    r->messages.push_back(std::move(out));
  }
}

// Fields asking for behaviour specd does not implement: refused by name.
void RejectUnsupported(const Json& body, Endpoint ep) {
  if (const Json* n = Field(body, "n"); n && GetInt(*n, "n") != 1)
    Fail("n", fmt::format("n: only 1 choice per request is supported, got {}", GetInt(*n, "n")));
  if (const Json* b = Field(body, "best_of"); b && GetInt(*b, "best_of") != 1)
    Fail("best_of", "best_of: only 1 is supported");
  if (const Json* e = Field(body, "echo"); e && GetBool(*e, "echo"))
    Fail("echo", "echo: only false is supported");
  if (const Json* s = Field(body, "suffix"))
    if (!s->is_string() || !s->get<std::string>().empty()) Fail("suffix", "suffix: not supported");
  for (const char* k : {"tools", "functions"}) {
    if (const Json* t = Field(body, k); t && !(t->is_array() && t->empty()))
      Fail(k, fmt::format("{}: tool calling is not supported", k));
  }
  for (const char* k : {"tool_choice", "function_call"}) {
    if (const Json* t = Field(body, k); t && !(t->is_string() && t->get<std::string>() == "none"))
      Fail(k, fmt::format("{}: tool calling is not supported (only \"none\")", k));
  }
  if (const Json* f = Field(body, "response_format")) {
    const Json* type = f->is_object() ? Field(*f, "type") : nullptr;
    if (!type || !type->is_string() || type->get<std::string>() != "text")
      Fail("response_format", "response_format: only {\"type\": \"text\"} is supported");
  }
  if (const Json* lb = Field(body, "logit_bias"); lb && !(lb->is_object() && lb->empty()))
    Fail("logit_bias", "logit_bias: not supported");
  for (const char* k : {"presence_penalty", "frequency_penalty"}) {
    if (const Json* p = Field(body, k); p && GetNumber(*p, k) != 0)
      Fail(k, fmt::format("{}: not supported (only 0)", k));
  }
  if (const Json* p = Field(body, "repetition_penalty"); p && GetNumber(*p, "repetition_penalty") != 1)
    Fail("repetition_penalty", "repetition_penalty: not supported (only 1)");
  (void)ep;
}

void ParseBody(const Json& body, Endpoint ep, ApiRequest* r) {
  r->endpoint = ep;
  if (const Json* m = Field(body, "model")) {
    if (!m->is_string()) Fail("model", fmt::format("model: expected a string, got {}", TypeName(*m)));
    r->model = m->get<std::string>();
  }
  RejectUnsupported(body, ep);
  if (ep == Endpoint::kCompletions) ParsePrompt(body, r);
  else ParseMessages(body, r);

  const char* max_name = "max_tokens";
  const Json* mt = Field(body, "max_tokens");
  if (ep == Endpoint::kChat && Field(body, "max_completion_tokens")) {
    mt = Field(body, "max_completion_tokens");
    max_name = "max_completion_tokens";
  }
  if (mt) {
    const int v = GetInt32(*mt, max_name);
    if (v <= 0) Fail(max_name, fmt::format("{}: must be > 0, got {}", max_name, v));
    r->max_tokens = v;
  }
  SamplingParams& sp = r->sampling;
  sp.temperature = 1.f;
  if (const Json* t = Field(body, "temperature")) {
    const double v = GetNumber(*t, "temperature");
    if (v < 0) Fail("temperature", fmt::format("temperature: must be >= 0, got {}", v));
    sp.temperature = static_cast<float>(v);
  }
  if (const Json* t = Field(body, "top_p")) {
    const double v = GetNumber(*t, "top_p");
    if (!(v > 0 && v <= 1)) Fail("top_p", fmt::format("top_p: must be in (0, 1], got {}", v));
    sp.top_p = static_cast<float>(v);
  }
  if (const Json* t = Field(body, "top_k")) {
    const int v = GetInt32(*t, "top_k");
    if (v < -1) Fail("top_k", fmt::format("top_k: must be >= 0 (0 or -1: off), got {}", v));
    sp.top_k = v < 0 ? 0 : v;
  }
  if (const Json* t = Field(body, "min_p")) {
    const double v = GetNumber(*t, "min_p");
    if (v < 0 || v > 1) Fail("min_p", fmt::format("min_p: must be in [0, 1], got {}", v));
    sp.min_p = static_cast<float>(v);
  }
  if (const Json* t = Field(body, "seed")) sp.seed = static_cast<uint64_t>(GetInt(*t, "seed"));

  if (const Json* s = Field(body, "stop")) {
    if (s->is_string()) {
      r->stop.push_back(s->get<std::string>());
    } else if (s->is_array()) {
      if (s->size() > 16) Fail("stop", fmt::format("stop: at most 16 strings, got {}", s->size()));
      for (const Json& x : *s) {
        if (!x.is_string())
          Fail("stop", fmt::format("stop: expected strings, found {}", TypeName(x)));
        r->stop.push_back(x.get<std::string>());
      }
    } else {
      Fail("stop", fmt::format("stop: expected a string or an array of strings, got {}",
                               TypeName(*s)));
    }
    for (const std::string& x : r->stop)
      if (x.empty()) Fail("stop", "stop: empty stop string");
  }
  if (const Json* s = Field(body, "stream")) r->stream = GetBool(*s, "stream");
  if (const Json* so = Field(body, "stream_options")) {
    if (!so->is_object())
      Fail("stream_options", fmt::format("stream_options: expected an object, got {}", TypeName(*so)));
    if (const Json* iu = Field(*so, "include_usage"))
      r->include_usage = GetBool(*iu, "stream_options.include_usage");
  }
  if (ep == Endpoint::kCompletions) {
    if (const Json* lp = Field(body, "logprobs")) {
      const int v = GetInt32(*lp, "logprobs");
      if (v < 0 || v > kMaxTopLogprobs)
        Fail("logprobs", fmt::format("logprobs: must be in [0, {}], got {}", kMaxTopLogprobs, v));
      r->logprobs = v;
    }
  } else {
    bool want = false;
    if (const Json* lp = Field(body, "logprobs")) want = GetBool(*lp, "logprobs");
    if (const Json* tl = Field(body, "top_logprobs")) {
      const int v = GetInt32(*tl, "top_logprobs");
      if (v < 0 || v > kMaxTopLogprobs)
        Fail("top_logprobs",
             fmt::format("top_logprobs: must be in [0, {}], got {}", kMaxTopLogprobs, v));
      if (!want) Fail("top_logprobs", "top_logprobs: needs \"logprobs\": true");
      r->logprobs = v;
    } else if (want) {
      r->logprobs = 0;
    }
  }
  if (const Json* ie = Field(body, "ignore_eos")) r->ignore_eos = GetBool(*ie, "ignore_eos");
}

}  // namespace

bool ParseApiRequest(std::string_view body, Endpoint endpoint, ApiRequest* out, ApiError* err) {
  *err = ApiError();
  *out = ApiRequest();
  if (!NestingWithin(body, kMaxJsonDepth)) {
    err->message = fmt::format("request body: JSON nested deeper than {} levels", kMaxJsonDepth);
    return false;
  }
  Json j;
  try {
    j = Json::parse(body.begin(), body.end());
  } catch (const nlohmann::json::exception& e) {
    std::string what = e.what();
    const bool utf8 = what.find("UTF-8") != std::string::npos ||
                      what.find("surrogate") != std::string::npos;
    err->message = utf8 ? "request body: invalid UTF-8 in a string (" + what + ")"
                        : "request body: malformed JSON (" + what + ")";
    return false;
  }
  if (!j.is_object()) {
    err->message = fmt::format("request body: expected a JSON object, got {}", TypeName(j));
    return false;
  }
  try {
    ParseBody(j, endpoint, out);
  } catch (const Reject& r) {
    err->param = r.param;
    err->message = r.message;
    return false;
  } catch (const std::exception& e) {
    err->message = std::string("request body: ") + e.what();
    return false;
  }
  return true;
}

}  // namespace specd::server
