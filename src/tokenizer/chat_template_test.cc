// Chat templates against the reference renderer: real model templates
// (tests/chat_templates, and the tokenizer_config.json files of Llama 2,
// Llama 3 and Qwen3 in ../shared/data/tokenizers) rendered over a set of
// conversations by ChatTemplate and by jinja2 set up as transformers'
// apply_chat_template sets it up (tests/python/render_template.py), compared
// byte for byte. Also: loading from a model folder, load-time errors with line and
// column, raise_exception, and garbage templates that must never crash.
#include "tokenizer/chat_template.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "base/test_reference.h"
#include "jinja/reference_test_util.h"

namespace specd {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

const fs::path kSourceDir = SPECD_SOURCE_DIR;
const fs::path kTemplates = kSourceDir / "tests/chat_templates";
const fs::path kSharedTokenizers = fs::path(SPECD_SHARED_DATA) / "tokenizers";

std::string ReadText(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TemplateCase {
  std::string label;   // file name under tests/chat_templates, or tokenizers/NAME
  std::string source;  // the template text
  std::string bos, eos;
};

// The committed templates, then the chat_template of every tokenizer_config.json
// in ../shared/data/tokenizers (Llama 3, Qwen3; Llama 2's has none). *missing
// names a shared folder that is absent.
std::vector<TemplateCase> Templates(std::string* missing = nullptr) {
  std::vector<TemplateCase> t = {
      {"llama3-instruct.jinja", "", "<|begin_of_text|>", "<|end_of_text|>"},
      {"llama3.1-instruct.jinja", "", "<|begin_of_text|>", "<|eot_id|>"},
      {"qwen2.5-instruct.jinja", "", "", "<|im_end|>"},
      {"qwen3.jinja", "", "", "<|im_end|>"},
      {"mistral-7b-instruct-v0.3.jinja", "", "<s>", "</s>"},
      {"mixtral-8x7b-instruct-v0.1.jinja", "", "<s>", "</s>"},
      {"llama2-chat.jinja", "", "<s>", "</s>"},
      {"gemma3-it.jinja", "", "<bos>", "<eos>"},
  };
  for (auto& tc : t) tc.source = ReadText(kTemplates / tc.label);
  for (const char* name : {"llama2", "llama3", "qwen3"}) {
    const fs::path config = kSharedTokenizers / name / "tokenizer_config.json";
    if (!fs::exists(config)) {
      if (missing != nullptr) *missing = config.string();
      continue;
    }
    Json j = Json::parse(ReadText(config), nullptr, false);
    if (!j.is_object() || !j.contains("chat_template")) continue;
    auto token = [&](const char* key) {
      const Json& v = j.value(key, Json());
      return v.is_string() ? v.get<std::string>() : std::string();
    };
    t.push_back({std::string("tokenizers/") + name, j["chat_template"].get<std::string>(),
                 token("bos_token"), token("eos_token")});
  }
  return t;
}

struct Conversation {
  std::string name;
  Json messages;
  Json extra = Json::object();
};

Json Msg(const char* role, Json content) { return Json{{"role", role}, {"content", std::move(content)}}; }

Json WeatherTool() {
  return Json::parse(R"({"type": "function", "function": {"name": "get_weather",
      "description": "Get the current weather in a city", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "description": "City name, e.g. Zürich"},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}})");
}

std::vector<Conversation> Conversations() {
  std::vector<Conversation> c;
  c.push_back({"system_user", Json::array({Msg("system", "You are a terse assistant."), Msg("user", "Hi!")})});
  c.push_back({"user_only", Json::array({Msg("user", "What is 2+2?")})});
  c.push_back({"multi_turn", Json::array({Msg("system", "Be helpful."), Msg("user", "Hello"),
                                          Msg("assistant", "Hi, how can I help?"),
                                          Msg("user", "Tell me a joke.")})});
  c.push_back({"assistant_last", Json::array({Msg("user", "Say hi"), Msg("assistant", "  hi there  \n")})});
  c.push_back({"unicode", Json::array({Msg("system", "Réponds en français. 日本語も OK。"),
                                       Msg("user", " \u00a0Grüße 👋🏽 — «ça va?» مرحبا\t\n"),
                                       Msg("assistant", "Très bien 😀, 谢谢!"), Msg("user", "Ω≈ç√∫ ok")})});
  c.push_back({"jinja_looking", Json::array({Msg("user", "{{ messages }} {% if x %}y{% endif %} {# c #} {{- '") ,
                                             Msg("assistant", "raise_exception('no') }}{%"),
                                             Msg("user", "\\n \\u0041 \" ' ` $ {{{ }}}")})});
  c.push_back({"empty_content", Json::array({Msg("user", ""), Msg("assistant", ""), Msg("user", "ok")})});
  c.push_back({"system_only", Json::array({Msg("system", "Only a system prompt.")})});
  c.push_back({"two_systems", Json::array({Msg("system", "first"), Msg("user", "u"), Msg("system", "second"),
                                           Msg("user", "v")})});
  c.push_back({"not_alternating", Json::array({Msg("user", "a"), Msg("user", "b")})});

  Json tools = Json::array({WeatherTool()});
  Json call = Json::parse(R"({"id": "call12345", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}})");
  Json assistant_call = Json{{"role", "assistant"}, {"content", nullptr}, {"tool_calls", Json::array({call})}};
  Json tool_result = Json{{"role", "tool"}, {"tool_call_id", "call12345"}, {"name", "get_weather"},
                          {"content", "{\"temperature\": 21.5, \"sky\": \"clear\"}"}};
  c.push_back({"tools_offered", Json::array({Msg("system", "Use tools when useful."),
                                             Msg("user", "Weather in Zürich?")}),
               Json{{"tools", tools}}});
  c.push_back({"tool_round_trip",
               Json::array({Msg("user", "Weather in Zürich?"), assistant_call, tool_result,
                            Msg("assistant", "It is 21.5 °C and clear."), Msg("user", "Thanks")}),
               Json{{"tools", tools}}});
  Json assistant_call_str = assistant_call;
  assistant_call_str["content"] = "Let me check.";
  assistant_call_str["tool_calls"][0]["function"]["arguments"] = "{\"city\": \"Bern\"}";
  c.push_back({"tool_call_string_args", Json::array({Msg("user", "Weather in Bern?"), assistant_call_str,
                                                     tool_result, tool_result})});
  c.push_back({"thinking", Json::array({Msg("user", "2+2?"),
                                        Msg("assistant", "<think>\nsimple sum\n</think>\n\n4"),
                                        Msg("user", "and 3+3?")}),
               Json{{"enable_thinking", false}}});
  c.push_back({"thinking_last", Json::array({Msg("user", "2+2?"),
                                             Msg("assistant", "<think>\nadd\n</think>\n\n4")})});
  Json reasoning = Msg("assistant", "4");
  reasoning["reasoning_content"] = "two plus two";
  c.push_back({"reasoning_content", Json::array({Msg("user", "2+2?"), reasoning})});
  c.push_back({"content_parts", Json::array({Msg("user", Json::parse(R"([{"type": "text", "text": " part one "},
      {"type": "image"}, {"type": "text", "text": "part two"}])"))})});
  c.push_back({"builtin_tools", Json::array({Msg("user", "Search for specd")}),
               Json{{"builtin_tools", Json::array({"brave_search", "code_interpreter", "wolfram_alpha"})},
                    {"date_string", "02 Dec 2026"}}});
  return c;
}

class ReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = testing::PythonModuleMissing("jinja2");
    if (!why.empty()) SPECD_REFERENCE_MISSING("reference renderer unavailable: " << why);
  }
};

TEST_F(ReferenceTest, RealTemplatesMatchJinja2ByteForByte) {
  struct Job {
    std::string label;
    const TemplateCase* tc;
    const Conversation* conv;
    bool agp;
  };
  const auto conversations = Conversations();
  std::string missing;
  const auto templates = Templates(&missing);
  if (!missing.empty()) SPECD_REFERENCE_MISSING("shared data absent: " << missing);
  std::vector<Job> jobs;
  Json cases = Json::array();
  for (const auto& tc : templates) {
    const std::string& source = tc.source;
    ASSERT_FALSE(source.empty()) << tc.label;
    for (const auto& conv : conversations) {
      for (bool agp : {false, true}) {
        Json context = {{"messages", conv.messages}, {"add_generation_prompt", agp},
                        {"bos_token", tc.bos}, {"eos_token", tc.eos}};
        for (auto it = conv.extra.begin(); it != conv.extra.end(); ++it) context[it.key()] = it.value();
        cases.push_back({{"template", source}, {"context", context}});
        jobs.push_back({tc.label + " / " + conv.name + (agp ? " / gen" : ""), &tc, &conv, agp});
      }
    }
  }
  Json ref = testing::RenderWithReference(cases);
  ASSERT_TRUE(ref.is_array() && ref.size() == jobs.size()) << "reference renderer failed";

  int compared = 0, agreed_errors = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& job = jobs[i];
    auto tmpl = ChatTemplate::Create(cases[i]["template"].get<std::string>(),
                                     ChatTemplateOptions{job.tc->bos, job.tc->eos, job.tc->label});
    ASSERT_TRUE(tmpl.ok()) << job.label << ": " << tmpl.status().ToString();
    auto got = (*tmpl)->Render(job.conv->messages, job.agp, job.conv->extra);
    if (ref[i]["ok"].get<bool>()) {
      EXPECT_TRUE(got.ok()) << job.label << ": reference rendered, we failed: " << got.status().ToString();
      if (!got.ok()) continue;
      EXPECT_EQ(*got, ref[i]["text"].get<std::string>()) << job.label;
      ++compared;
    } else {
      EXPECT_FALSE(got.ok()) << job.label << ": reference failed with '" << ref[i]["error"].get<std::string>()
                             << "' but we rendered:\n" << *got;
      ++agreed_errors;
    }
  }
  // Most cases must render (guards against a reference that fails everything).
  EXPECT_GT(compared, static_cast<int>(jobs.size()) * 2 / 3);
  std::printf("compared %d renders byte for byte, %d cases where both refuse the conversation\n", compared,
              agreed_errors);
}

TEST_F(ReferenceTest, RaiseExceptionMessageMatchesReference) {
  const std::string source = ReadText(kTemplates / "mixtral-8x7b-instruct-v0.1.jinja");
  Json messages = Json::array({Msg("system", "sys"), Msg("user", "u")});
  Json cases = Json::array({{{"template", source},
                             {"context", {{"messages", messages}, {"bos_token", "<s>"}, {"eos_token", "</s>"}}}}});
  Json ref = testing::RenderWithReference(cases);
  ASSERT_TRUE(ref.is_array() && ref.size() == 1);
  ASSERT_FALSE(ref[0]["ok"].get<bool>());
  auto tmpl = ChatTemplate::Create(source, {"<s>", "</s>"});
  ASSERT_TRUE(tmpl.ok());
  auto got = (*tmpl)->Render(messages, false);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(got.status().message(), ref[0]["error"].get<std::string>());
  EXPECT_EQ(got.status().message(), "Conversation roles must alternate user/assistant/user/assistant/...");
}

// The committed copies of the Llama 3 and Qwen3 templates are the ones their
// tokenizer_config.json files ship (loaded the way a model folder is).
TEST(ChatTemplateLoad, CommittedCopiesMatchTokenizerConfigs) {
  for (const auto& [name, file] : std::vector<std::pair<std::string, std::string>>{
           {"llama3", "llama3-instruct.jinja"}, {"qwen3", "qwen3.jinja"}}) {
    const fs::path dir = kSharedTokenizers / name;
    if (!fs::exists(dir / "tokenizer_config.json")) {
      SPECD_REFERENCE_MISSING("shared data absent: " << dir);
    }
    auto loaded = LoadChatTemplate(dir.string());
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ((*loaded)->source(), ReadText(kTemplates / file)) << name;
  }
}

TEST(ChatTemplateLoad, ReadsBosEosAndPicksNamedTemplate) {
  fs::path dir = fs::temp_directory_path() / ("specd_ct_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream out(dir / "tokenizer_config.json");
    out << R"({"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>",
      "chat_template": [{"name": "tool_use", "template": "T{{ bos_token }}"},
                        {"name": "default", "template": "{{ bos_token }}{% for m in messages %}[{{ m.content }}]{% endfor %}{{ eos_token }}"}]})";
  }
  auto t = LoadChatTemplate(dir.string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto r = (*t)->Render(Json::array({Msg("user", "a"), Msg("assistant", "b")}), true);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "<s>[a][b]</s>");
  auto tool = LoadChatTemplate(dir.string(), "tool_use");
  ASSERT_TRUE(tool.ok());
  EXPECT_EQ(*(*tool)->Render(Json::array(), false), "T<s>");
  auto missing = LoadChatTemplate(dir.string(), "rag");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("default"), std::string::npos) << missing.status().message();

  {
    std::ofstream out(dir / "tokenizer_config.json");
    out << R"({"eos_token": "<|im_end|>"})";
  }
  auto none = LoadChatTemplate(dir.string());
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  {
    std::ofstream out(dir / "chat_template.jinja");
    out << "{{ messages[0].content }}{{ eos_token }}\n";
  }
  auto jinja_file = LoadChatTemplate(dir.string());
  ASSERT_TRUE(jinja_file.ok()) << jinja_file.status().ToString();
  EXPECT_EQ(*(*jinja_file)->Render(Json::array({Msg("user", "x")}), false), "x<|im_end|>");
  {
    std::ofstream out(dir / "tokenizer_config.json");
    out << R"({"chat_template": 42})";
  }
  EXPECT_EQ(LoadChatTemplate(dir.string()).status().code(), StatusCode::kInvalidArgument);
  fs::remove_all(dir);
}

// Load-time validation: the construct and its line:column.
TEST(ChatTemplateErrors, UnsupportedConstructsFailAtCreateWithPosition) {
  struct Case {
    std::string source;
    StatusCode code;
    std::string expect;  // substring of the message
  };
  const std::vector<Case> cases = {
      {"{{ x | frobnicate }}", StatusCode::kUnsupported, "t:1:8: unsupported filter 'frobnicate'"},
      {"line1\n{% if x is divisibleby %}{% endif %}", StatusCode::kUnsupported, "t:2:12: unsupported test 'divisibleby'"},
      {"{% set l = [] %}\n  {{ l.append(1) }}", StatusCode::kUnsupported, "t:2:8: unsupported method 'append'"},
      {"{{ cycler(1) }}", StatusCode::kUnsupported, "t:1:4: unsupported function 'cycler'"},
      {"{% include 'other.jinja' %}", StatusCode::kUnsupported, "t:1:4: unsupported statement 'include'"},
      {"{% extends 'base' %}", StatusCode::kUnsupported, "unsupported statement 'extends'"},
      {"{{ m | selectattr('role', 'sameas', 'x') }}", StatusCode::kUnsupported, "unsupported test 'sameas'"},
      {"{% for m in messages %}x", StatusCode::kInvalidArgument, "t:1:4: unclosed 'for'"},
      {"{% if x %}a{% else %}b", StatusCode::kInvalidArgument, "unclosed 'if'"},
      {"{{ 'abc }}", StatusCode::kInvalidArgument, "Unexpected end of input"},
      {"{{ x + }}", StatusCode::kInvalidArgument, "t:1:8: unexpected CloseExpression"},
      {"{# never closed", StatusCode::kInvalidArgument, "t:1:1: Missing end of comment tag"},
      {"ok\n\n   {{ a ? b }}", StatusCode::kInvalidArgument, "t:3:9: Unexpected character: ?"},
      {"{{ '\\q' }}", StatusCode::kInvalidArgument, "Unexpected escaped character: q"},
      {"{% endfor %}", StatusCode::kInvalidArgument, "t:1:4: unexpected '{% endfor %}'"},
      {"{{ foo.bar.baz( }}", StatusCode::kUnsupported, "unsupported method 'baz'"},
  };
  for (const auto& c : cases) {
    auto t = ChatTemplate::Create(c.source, ChatTemplateOptions{"", "", "t"});
    ASSERT_FALSE(t.ok()) << c.source;
    EXPECT_EQ(t.status().code(), c.code) << c.source << " -> " << t.status().ToString();
    EXPECT_NE(t.status().message().find(c.expect), std::string::npos)
        << c.source << "\n  got: " << t.status().message() << "\n  want: " << c.expect;
  }
}

TEST(ChatTemplateErrors, RenderErrorsAreInvalidArgumentWithPosition) {
  auto t = ChatTemplate::Create("a\n{{ messages[0].role + 1 }}", {"", "", "tpl"});
  ASSERT_TRUE(t.ok());
  auto r = (*t)->Render(Json::array({Json{{"role", "user"}}}), false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("tpl:2:"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("concatenate"), std::string::npos) << r.status().message();
  EXPECT_FALSE((*t)->Render(Json::object(), false).ok());  // messages must be an array
}

TEST(ChatTemplateErrors, RunawayTemplatesHitLimitsNotTheServer) {
  auto loop = ChatTemplate::Create("{% for i in range(1000) %}{% for j in range(1000) %}"
                                   "{% for k in range(1000) %}x{% endfor %}{% endfor %}{% endfor %}", {});
  ASSERT_TRUE(loop.ok());
  auto r = (*loop)->Render(Json::array(), false);
  ASSERT_FALSE(r.ok());
  auto rec = ChatTemplate::Create("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {});
  ASSERT_TRUE(rec.ok());
  auto r2 = (*rec)->Render(Json::array(), false);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("nested deeper"), std::string::npos) << r2.status().message();
  auto big = ChatTemplate::Create("{{ range(100000000) }}", {});
  ASSERT_TRUE(big.ok());
  EXPECT_FALSE((*big)->Render(Json::array(), false).ok());
  std::string deep(5000, '(');
  EXPECT_FALSE(ChatTemplate::Create("{{ " + deep + "1" + std::string(5000, ')') + " }}", {}).ok());
}

// Garbage and mutated templates: any Status is fine, a crash is not (this
// test is meant to run under the asan preset too).
TEST(ChatTemplateFuzz, GarbageNeverCrashes) {
  std::vector<std::string> seeds;
  for (const auto& tc : Templates()) seeds.push_back(tc.source);
  const std::vector<std::string> pieces = {
      "{{", "}}", "{%", "%}", "{#", "#}", "{%-", "-%}", "{{-", "-}}", " if ", " for ", " in ", " else ",
      " endif ", " endfor ", " set ", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "'", "\"",
      "\\", "-", "+", "~", "*", "**", "/", "//", "%", "<", "==", "not", " and ", " or ", " is ",
      "messages", "loop", "x", "0", "1.5", "-3", "trim", "tojson", "namespace(a=1)", "ns.a", "\n",
      " ", "\t", "\xc3\xa9", "\xff", "\xe2\x80\xa8", "macro", "endmacro", "call", "caller()",
      "break", "continue", "range(3)", "[1:]", "[::-1]", "raise_exception('e')", "none", "items()"};
  std::mt19937 rng(12345);
  Json messages = Json::array({Msg("system", "s"), Msg("user", "u\xc3\xa9"), Msg("assistant", "a")});
  int created = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string src;
    if (iter % 2 == 0) {
      int n = 1 + rng() % 24;
      for (int i = 0; i < n; ++i) src += pieces[rng() % pieces.size()];
    } else {
      src = seeds[rng() % seeds.size()];
      int edits = 1 + rng() % 4;
      for (int e = 0; e < edits && !src.empty(); ++e) {
        size_t at = rng() % src.size();
        switch (rng() % 3) {
          case 0: src.erase(at, 1 + rng() % 8); break;
          case 1: src.insert(at, pieces[rng() % pieces.size()]); break;
          default: src[at] = static_cast<char>(rng() % 256); break;
        }
      }
    }
    auto t = ChatTemplate::Create(src, {"<s>", "</s>"});
    if (!t.ok()) {
      EXPECT_FALSE(t.status().message().empty());
      continue;
    }
    ++created;
    for (bool agp : {false, true}) {
      auto r = (*t)->Render(messages, agp, Json{{"tools", Json::array({WeatherTool()})}});
      if (!r.ok()) {
        EXPECT_NE(r.status().code(), StatusCode::kInternal) << r.status().ToString();
      }
    }
  }
  EXPECT_GT(created, 100);  // the mutations must reach the renderer too
}

}  // namespace
}  // namespace specd
