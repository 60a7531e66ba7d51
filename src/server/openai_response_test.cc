#include "server/openai_response.h"

#include <gtest/gtest.h>

#include <cmath>

#include "server/chat_prompt.h"
#include "server/metrics_text.h"

namespace specd::server {
namespace {

OutputDelta Delta(std::string text, bool finished = false, std::string reason = "") {
  OutputDelta d;
  d.text = std::move(text);
  d.finished = finished;
  d.finish_reason = std::move(reason);
  d.prompt_tokens = 5;
  d.completion_tokens = 3;
  return d;
}

TEST(OpenAiResponseTest, IdsHaveOpenAiPrefixesAndAreUnique) {
  const std::string a = NewRequestId(Endpoint::kCompletions);
  const std::string b = NewRequestId(Endpoint::kCompletions);
  EXPECT_EQ(a.rfind("cmpl-", 0), 0u);
  EXPECT_EQ(NewRequestId(Endpoint::kChat).rfind("chatcmpl-", 0), 0u);
  EXPECT_NE(a, b);
}

TEST(OpenAiResponseTest, ErrorObjectShape) {
  ApiError e;
  e.message = "max_tokens: must be > 0, got 0";
  e.param = "max_tokens";
  OJson j = ErrorJson(e);
  EXPECT_EQ(j["error"]["message"], e.message);
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "max_tokens");
  EXPECT_TRUE(j["error"]["code"].is_null());
  e.param = "";
  EXPECT_TRUE(ErrorJson(e)["error"]["param"].is_null());
}

TEST(OpenAiResponseTest, CompletionFullAndChunks) {
  ResponseBuilder b(Endpoint::kCompletions, "cmpl-1", "demo", 1700000000, -1, nullptr);
  OJson full = b.Full(Delta("Hello world", true, "length"));
  EXPECT_EQ(full["id"], "cmpl-1");
  EXPECT_EQ(full["object"], "text_completion");
  EXPECT_EQ(full["created"], 1700000000);
  EXPECT_EQ(full["model"], "demo");
  EXPECT_EQ(full["choices"][0]["index"], 0);
  EXPECT_EQ(full["choices"][0]["text"], "Hello world");
  EXPECT_TRUE(full["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(full["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(full["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(full["usage"]["completion_tokens"], 3);
  EXPECT_EQ(full["usage"]["total_tokens"], 8);

  OJson c = b.Chunk(Delta("Hel"));
  EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(c["choices"][0]["text"], "Hel");
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  c = b.Chunk(Delta("", true, "stop"));
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  OJson u = b.UsageChunk(5, 3);
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["total_tokens"], 8);
}

TEST(OpenAiResponseTest, ChatRoleComesFirstThenContent) {
  ResponseBuilder b(Endpoint::kChat, "chatcmpl-1", "demo", 1, -1, nullptr);
  OJson c1 = b.Chunk(Delta("Hi"));
  EXPECT_EQ(c1["object"], "chat.completion.chunk");
  EXPECT_EQ(c1["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(c1["choices"][0]["delta"]["content"], "Hi");
  OJson c2 = b.Chunk(Delta(" there"));
  EXPECT_FALSE(c2["choices"][0]["delta"].contains("role"));
  EXPECT_EQ(c2["choices"][0]["delta"]["content"], " there");
  OJson c3 = b.Chunk(Delta("", true, "stop"));
  EXPECT_TRUE(c3["choices"][0]["delta"].empty());
  EXPECT_EQ(c3["choices"][0]["finish_reason"], "stop");
  OJson full = ResponseBuilder(Endpoint::kChat, "chatcmpl-2", "demo", 1, -1, nullptr)
                   .Full(Delta("Hi there", true, "stop"));
  EXPECT_EQ(full["object"], "chat.completion");
  EXPECT_EQ(full["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(full["choices"][0]["message"]["content"], "Hi there");
}

TEST(OpenAiResponseTest, LogprobsInBothFormats) {
  OutputDelta d = Delta("ab", true, "length");
  d.logprobs = {{7, -0.5f, {{7, -0.5f}, {9, -1.5f}}}, {9, -2.f, {{8, -1.f}, {9, -2.f}}}};
  OJson c = ResponseBuilder(Endpoint::kCompletions, "x", "m", 1, 2, nullptr).Full(d);
  const OJson& lp = c["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], OJson::array({"<7>", "<9>"}));
  EXPECT_EQ(lp["token_logprobs"][1], -2.0);
  EXPECT_EQ(lp["top_logprobs"][0]["<9>"], -1.5);
  EXPECT_EQ(lp["text_offset"], OJson::array({0, 3}));
  OJson chat = ResponseBuilder(Endpoint::kChat, "x", "m", 1, 2, nullptr).Full(d);
  const OJson& content = chat["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], "<7>");
  EXPECT_EQ(content[0]["logprob"], -0.5);
  EXPECT_EQ(content[0]["bytes"], OJson::array({'<', '7', '>'}));
  EXPECT_EQ(content[1]["top_logprobs"][0]["token"], "<8>");
}

TEST(OpenAiResponseTest, SseFraming) {
  EXPECT_EQ(SseData(OJson{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_STREQ(SseDone(), "data: [DONE]\n\n");
  // Partial UTF-8 (a token that is half a character) never throws: the
  // incomplete sequence (one maximal subpart) becomes one U+FFFD.
  EXPECT_EQ(Dump(OJson{{"t", std::string("\xe2\x82")}}), "{\"t\":\"\xEF\xBF\xBD\"}");
}

TEST(ChatPromptTest, FallbackTemplateRendersRolesAndGenerationPrompt) {
  auto p = ChatPrompt::CreateFallback();
  ASSERT_TRUE(p->is_fallback());
  OJson msgs = OJson::array({{{"role", "system"}, {"content", "Be brief."}},
                             {{"role", "user"}, {"content", "Hi"}}});
  auto text = p->Render(msgs);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "system: Be brief.\nuser: Hi\nassistant:");
}

TEST(MetricsTextTest, PrometheusExposition) {
  RequestCounter c;
  c.Add(200);
  c.Add(200);
  c.Add(429);
  SchedulerMetrics m;
  m.prompt_tokens = 11;
  m.generation_tokens = 7;
  m.kv_total_pages = 10;
  m.kv_used_pages = 4;
  m.ttft.Observe(0.02);
  m.ttft.Observe(3);
  m.accept_length.Observe(2);
  m.accept_length.Observe(4);
  const std::string t = RenderMetrics(c, &m, true);
  EXPECT_NE(t.find("specd_requests_total{status=\"200\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("specd_requests_total{status=\"429\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("specd_prompt_tokens_total 11\n"), std::string::npos);
  EXPECT_NE(t.find("specd_generation_tokens_total 7\n"), std::string::npos);
  EXPECT_NE(t.find("specd_kv_cache_usage_ratio 0.4\n"), std::string::npos);
  EXPECT_NE(t.find("specd_time_to_first_token_seconds_bucket{le=\"0.025\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("specd_time_to_first_token_seconds_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("specd_time_to_first_token_seconds_count 2\n"), std::string::npos);
  EXPECT_NE(t.find("specd_spec_accept_length_mean 3\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE specd_inter_token_latency_seconds histogram\n"), std::string::npos);
  EXPECT_NE(t.find("specd_allreduce_seconds_total"), std::string::npos);
  EXPECT_NE(t.find("specd_queue_depth 0\n"), std::string::npos);
  EXPECT_NE(t.find("specd_running_sequences 0\n"), std::string::npos);
  // Every sample line belongs to a declared metric family.
  std::string declared;
  size_t pos = 0;
  while ((pos = t.find("# TYPE ", pos)) != std::string::npos) {
    size_t end = t.find(' ', pos + 7);
    declared += "|" + t.substr(pos + 7, end - pos - 7) + "|";
    pos = end;
  }
  std::istringstream lines(t);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::string name = line.substr(0, line.find_first_of("{ "));
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
          declared.find("|" + name + "|") == std::string::npos)
        name.resize(name.size() - s.size());
    }
    EXPECT_NE(declared.find("|" + name + "|"), std::string::npos) << line;
  }
}

}  // namespace
}  // namespace specd::server
