#include "server/openai_request.h"

#include <gtest/gtest.h>

#include <random>

namespace specd::server {
namespace {

ApiRequest MustParse(const std::string& body, Endpoint ep = Endpoint::kCompletions) {
  ApiRequest r;
  ApiError e;
  EXPECT_TRUE(ParseApiRequest(body, ep, &r, &e)) << body << " -> " << e.message;
  return r;
}

ApiError MustFail(const std::string& body, Endpoint ep = Endpoint::kCompletions) {
  ApiRequest r;
  ApiError e;
  EXPECT_FALSE(ParseApiRequest(body, ep, &r, &e)) << body;
  EXPECT_GE(e.http_status, 400);
  EXPECT_LT(e.http_status, 500);
  EXPECT_FALSE(e.message.empty());
  EXPECT_EQ(e.type, "invalid_request_error");
  return e;
}

TEST(OpenAiRequestTest, CompletionFields) {
  ApiRequest r = MustParse(
      R"({"model":"m","prompt":"Hello","max_tokens":7,"temperature":0.5,"top_p":0.9,)"
      R"("top_k":40,"min_p":0.05,"seed":42,"stop":["a","bc"],"stream":true,)"
      R"("stream_options":{"include_usage":true},"logprobs":3,"n":1,"echo":false,"user":"u"})");
  EXPECT_EQ(r.model, "m");
  EXPECT_FALSE(r.prompt_is_ids);
  EXPECT_EQ(r.prompt_text, "Hello");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.05f);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.logprobs, 3);
}

TEST(OpenAiRequestTest, DefaultsFollowOpenAi) {
  ApiRequest r = MustParse(R"({"prompt":[1,2,3]})");
  EXPECT_TRUE(r.prompt_is_ids);
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.f);  // OpenAI's default
  EXPECT_EQ(r.logprobs, -1);
  EXPECT_FALSE(r.stream);
  // null means "not given".
  r = MustParse(R"({"prompt":"x","max_tokens":null,"stop":null,"temperature":null})");
  EXPECT_FALSE(r.max_tokens.has_value());
  EXPECT_TRUE(r.stop.empty());
  // A one-element string array is a single prompt; 2.0 is an integer.
  r = MustParse(R"({"prompt":["hi"],"max_tokens":2.0,"stop":"x"})");
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_EQ(r.max_tokens, 2);
  EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
}

TEST(OpenAiRequestTest, ChatFields) {
  ApiRequest r = MustParse(
      R"({"messages":[{"role":"system","content":"be brief"},)"
      R"({"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},)"
      R"({"role":"assistant","content":null}],"max_completion_tokens":5,"logprobs":true,)"
      R"("top_logprobs":2})",
      Endpoint::kChat);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1]["content"], "ab");
  EXPECT_EQ(r.messages[2]["content"], "");
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_EQ(MustParse(R"({"messages":[{"role":"user","content":"x"}],"logprobs":true})",
                      Endpoint::kChat).logprobs, 0);
}

TEST(OpenAiRequestTest, ErrorsNameTheField) {
  struct Case {
    const char* body;
    Endpoint ep;
    const char* param;  // "" → null
  } cases[] = {
      {"{", Endpoint::kCompletions, ""},
      {"[1,2]", Endpoint::kCompletions, ""},
      {R"({"prompt":"x","max_tokens":"ten"})", Endpoint::kCompletions, "max_tokens"},
      {R"({"prompt":"x","max_tokens":0})", Endpoint::kCompletions, "max_tokens"},
      {R"({"prompt":"x","max_tokens":-3})", Endpoint::kCompletions, "max_tokens"},
      {R"({"prompt":"x","max_tokens":1.5})", Endpoint::kCompletions, "max_tokens"},
      {R"({"prompt":"x","temperature":-0.1})", Endpoint::kCompletions, "temperature"},
      {R"({"prompt":"x","temperature":"hot"})", Endpoint::kCompletions, "temperature"},
      {R"({"prompt":"x","top_p":0})", Endpoint::kCompletions, "top_p"},
      {R"({"prompt":"x","top_p":1.5})", Endpoint::kCompletions, "top_p"},
      {R"({"prompt":"x","top_k":-2})", Endpoint::kCompletions, "top_k"},
      {R"({"prompt":"x","min_p":2})", Endpoint::kCompletions, "min_p"},
      {R"({"prompt":"x","n":2})", Endpoint::kCompletions, "n"},
      {R"({"prompt":"x","best_of":3})", Endpoint::kCompletions, "best_of"},
      {R"({"prompt":"x","echo":true})", Endpoint::kCompletions, "echo"},
      {R"({"prompt":"x","logprobs":21})", Endpoint::kCompletions, "logprobs"},
      {R"({"prompt":"x","stop":[1]})", Endpoint::kCompletions, "stop"},
      {R"({"prompt":"x","stop":""})", Endpoint::kCompletions, "stop"},
      {R"({"prompt":"x","stream":"yes"})", Endpoint::kCompletions, "stream"},
      {R"({"prompt":"x","model":3})", Endpoint::kCompletions, "model"},
      {R"({"prompt":"x","response_format":{"type":"json_object"}})", Endpoint::kCompletions,
       "response_format"},
      {R"({"prompt":"x","presence_penalty":0.5})", Endpoint::kCompletions, "presence_penalty"},
      {R"({"prompt":"x","logit_bias":{"5":1}})", Endpoint::kCompletions, "logit_bias"},
      {R"({"prompt":"x","suffix":"y"})", Endpoint::kCompletions, "suffix"},
      {R"({"max_tokens":3})", Endpoint::kCompletions, "prompt"},
      {R"({"prompt":[]})", Endpoint::kCompletions, "prompt"},
      {R"({"prompt":[1,-1]})", Endpoint::kCompletions, "prompt"},
      {R"({"prompt":[1,"a"]})", Endpoint::kCompletions, "prompt"},
      {R"({"prompt":["a","b"]})", Endpoint::kCompletions, "prompt"},
      {R"({"prompt":[[1],[2]]})", Endpoint::kCompletions, "prompt"},
      {R"({"prompt":{"a":1}})", Endpoint::kCompletions, "prompt"},
      {R"({"messages":[]})", Endpoint::kChat, "messages"},
      {R"({"messages":"hi"})", Endpoint::kChat, "messages"},
      {R"({"messages":[{"content":"x"}]})", Endpoint::kChat, "messages"},
      {R"({"messages":[{"role":"wizard","content":"x"}]})", Endpoint::kChat, "messages"},
      {R"({"messages":[{"role":"user","content":5}]})", Endpoint::kChat, "messages"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", Endpoint::kChat,
       "messages"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})",
       Endpoint::kChat, "tools"},
      {R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"auto"})", Endpoint::kChat,
       "tool_choice"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", Endpoint::kChat,
       "top_logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"logprobs":3})", Endpoint::kChat,
       "logprobs"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":0})",
       Endpoint::kChat, "max_completion_tokens"},
  };
  for (const Case& c : cases) {
    ApiError e = MustFail(c.body, c.ep);
    EXPECT_EQ(e.http_status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << " -> " << e.message;
    if (*c.param) {
      EXPECT_NE(e.message.find(c.param), std::string::npos) << e.message;
    }
  }
}

TEST(OpenAiRequestTest, InvalidUtf8IsA400) {
  ApiError e = MustFail(std::string("{\"prompt\":\"a\xff\xfe b\"}"));
  EXPECT_NE(e.message.find("UTF-8"), std::string::npos) << e.message;
  e = MustFail(R"({"prompt":"\ud800"})");  // lone surrogate
  EXPECT_NE(e.message.find("UTF-8"), std::string::npos) << e.message;
}

TEST(OpenAiRequestTest, DeepNestingIsRefusedBeforeParsing) {
  std::string deep = "{\"prompt\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  ApiError e = MustFail(deep);
  EXPECT_NE(e.message.find("nested"), std::string::npos);
}

// Random and mutated bodies: the parser never crashes or throws and always
// answers either a request or a 4xx error with a message.
TEST(OpenAiRequestTest, FuzzNeverCrashesAndAlwaysAnswers4xxOr2xx) {
  const std::vector<std::string> seeds = {
      R"({"model":"m","prompt":"Hello","max_tokens":7,"temperature":0.5,"stream":true})",
      R"({"prompt":[1,2,3],"logprobs":2,"stop":["a","b"],"seed":-5,"top_k":-1})",
      R"({"messages":[{"role":"user","content":"hi"}],"max_completion_tokens":3})",
      R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"n":1})",
      R"({"prompt":"x","stream_options":{"include_usage":true},"min_p":0.1,"top_p":0.5})",
  };
  const std::string tokens[] = {"{", "}", "[", "]", ",", ":", "\"", "null", "true", "-1",
                                "1e400", "0.5", "\\u0000", "\\ud800", "\xff", "\"prompt\"",
                                "\"messages\"", "\"max_tokens\"", "\"n\"", "99999999999999999999"};
  std::mt19937 rng(42);
  int ok = 0, rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string body = seeds[rng() % seeds.size()];
    const int n_mut = 1 + static_cast<int>(rng() % 6);
    for (int m = 0; m < n_mut && !body.empty(); ++m) {
      const size_t pos = rng() % body.size();
      switch (rng() % 4) {
        case 0: body.erase(pos, 1 + rng() % 4); break;
        case 1: body.insert(pos, tokens[rng() % std::size(tokens)]); break;
        case 2: body[pos] = static_cast<char>(rng() % 256); break;
        default: body.insert(pos, body.substr(rng() % body.size(), rng() % 8)); break;
      }
    }
    if (iter % 10 == 0) {  // pure noise
      body.resize(rng() % 64);
      for (char& c : body) c = static_cast<char>(rng() % 256);
    }
    for (Endpoint ep : {Endpoint::kCompletions, Endpoint::kChat}) {
      ApiRequest r;
      ApiError e;
      if (ParseApiRequest(body, ep, &r, &e)) {
        ++ok;
      } else {
        ++rejected;
        ASSERT_GE(e.http_status, 400) << body;
        ASSERT_LT(e.http_status, 500) << body;
        ASSERT_FALSE(e.message.empty()) << body;
      }
    }
  }
  // Both outcomes are exercised.
  EXPECT_GT(ok, 100);
  EXPECT_GT(rejected, 100);
}

}  // namespace
}  // namespace specd::server
