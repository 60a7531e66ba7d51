// The server's HTTP behaviour over a random-weight tiny model (no tokenizer:
// token-id prompts), with cpp-httplib's client, against the server itself
// and against the serve proxy in front of it (http_frontend_testing.h).
#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "runtime/reference_decode.h"
#include "server/http_frontend_testing.h"
#include "server/openai_response.h"

namespace specd::server {
namespace {

class HttpServerTest : public testing::HttpFrontendTest {
 protected:
  OJson PostJson(const std::string& path, const std::string& body, int* status,
                 const httplib::Headers& headers = {}) {
    auto res = client_->Post(path.c_str(), headers, body, "application/json");
    if (!res) {
      *status = -1;
      return nullptr;
    }
    *status = res->status;
    return OJson::parse(res->body, nullptr, false);
  }
};

TEST_P(HttpServerTest, HealthIs503UntilAttachedThen200) {
  StartServer(ServerOptions(), /*attach=*/false);
  auto res = client_->Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 503);
  int status = 0;
  OJson e = PostJson("/v1/completions", R"({"prompt":[1,2]})", &status);
  EXPECT_EQ(status, 503);
  EXPECT_TRUE(e["error"].contains("message"));
  Attach();
  res = client_->Get("/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  res = client_->Get("/v1/models");
  ASSERT_TRUE(res);
  OJson models = OJson::parse(res->body);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "tiny");
}

TEST_P(HttpServerTest, CompletionMatchesReferenceDecode) {
  StartServer(ServerOptions());
  int status = 0;
  OJson j = PostJson("/v1/completions",
                     R"({"model":"tiny","prompt":[5,6,7,8],"max_tokens":9,"temperature":0,)"
                     R"("logprobs":2})",
                     &status);
  ASSERT_EQ(status, 200) << j;
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(j["usage"]["completion_tokens"], 9);
  EXPECT_EQ(j["usage"]["total_tokens"], 13);
  // Without a tokenizer, logprob tokens read "<id>": compare the ids with
  // plain decoding written without the scheduler.
  server_->Shutdown();  // the engine is free again
  const std::vector<int32_t> ref = ReferenceDecode(*engine_, {5, 6, 7, 8}, 9);
  const OJson& toks = j["choices"][0]["logprobs"]["tokens"];
  ASSERT_EQ(toks.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_EQ(toks[i], "<" + std::to_string(ref[i]) + ">");
}

TEST_P(HttpServerTest, StreamIsServerSentEventsEndingInDone) {
  StartServer(ServerOptions());
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = R"({"prompt":[1,2,3],"max_tokens":6,"temperature":0,"stream":true,)"
             R"("stream_options":{"include_usage":true}})";
  req.set_header("Content-Type", "application/json");
  std::string raw;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    raw.append(data, n);
    return true;
  };
  auto res = client_->send(req);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
  // Split into events.
  std::vector<std::string> events;
  for (size_t pos = 0; pos < raw.size();) {
    size_t end = raw.find("\n\n", pos);
    ASSERT_NE(end, std::string::npos) << "unterminated event in " << raw;
    std::string ev = raw.substr(pos, end - pos);
    ASSERT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    events.push_back(ev.substr(6));
    pos = end + 2;
  }
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  int n_finish = 0;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    OJson c = OJson::parse(events[i]);
    EXPECT_EQ(c["object"], "text_completion");
    EXPECT_TRUE(c["usage"].is_null());
    if (!c["choices"][0]["finish_reason"].is_null()) ++n_finish;
  }
  EXPECT_EQ(n_finish, 1);
  OJson usage = OJson::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 6);
  EXPECT_EQ(usage["usage"]["prompt_tokens"], 3);
}

TEST_P(HttpServerTest, BadRequestsGetOpenAiErrors) {
  ServerOptions o;
  o.listen.max_body_bytes = 2048;
  StartServer(o);
  int status = 0;
  OJson e = PostJson("/v1/completions", R"({"prompt":[1],"max_tokens":"ten"})", &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "max_tokens");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(e["error"].contains("code"));
  e = PostJson("/v1/completions", "not json", &status);
  EXPECT_EQ(status, 400);
  e = PostJson("/v1/completions", R"({"prompt":[1],"n":3})", &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "n");
  e = PostJson("/v1/completions", R"({"prompt":[1],"model":"other"})", &status);
  EXPECT_EQ(status, 404);
  EXPECT_EQ(e["error"]["code"], "model_not_found");
  e = PostJson("/v1/completions", R"({"prompt":[1,999]})", &status);  // vocab 256
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "prompt");
  e = PostJson("/v1/completions", R"({"prompt":"text"})", &status);  // no tokenizer
  EXPECT_EQ(status, 400);
  e = PostJson("/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}]})", &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "messages");
  // Longer than the context: the message names the length and the limit.
  const int ctx = server_->scheduler()->context_length();
  std::string ids = "1";
  for (int i = 1; i < ctx; ++i) ids += ",1";
  client_ = std::make_unique<httplib::Client>("127.0.0.1", port());
  e = PostJson("/v1/completions", "{\"prompt\":[" + ids + "]}", &status);
  EXPECT_EQ(status, 413);  // the body itself is over the 2 KiB limit here
  EXPECT_TRUE(e["error"].contains("message"));
  ServerOptions big;
  server_->Shutdown();
  StartServer(big);
  e = PostJson("/v1/completions", "{\"prompt\":[" + ids + "]}", &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(e["error"]["param"], "prompt");
  const std::string msg = e["error"]["message"];
  EXPECT_NE(msg.find(std::to_string(ctx)), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(ctx - 1)), std::string::npos) << msg;
  auto res = client_->Get("/nope");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_TRUE(OJson::parse(res->body)["error"].contains("message"));
}

TEST_P(HttpServerTest, ApiKeyGuardsV1Routes) {
  ServerOptions o;
  o.api_key = "sekret";
  StartServer(o);
  int status = 0;
  OJson e = PostJson("/v1/completions", R"({"prompt":[1],"max_tokens":1})", &status);
  EXPECT_EQ(status, 401);
  EXPECT_EQ(e["error"]["code"], "invalid_api_key");
  PostJson("/v1/completions", R"({"prompt":[1],"max_tokens":1})", &status,
           {{"Authorization", "Bearer wrong"}});
  EXPECT_EQ(status, 401);
  PostJson("/v1/completions", R"({"prompt":[1],"max_tokens":1})", &status,
           {{"Authorization", "Bearer sekret"}});
  EXPECT_EQ(status, 200);
  auto res = client_->Get("/v1/models");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 401);
  res = client_->Get("/health");  // not under /v1
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
}

TEST_P(HttpServerTest, FullQueueAnswers429WithRetryAfter) {
  ServerOptions o;
  o.scheduler.max_queue = 0;
  StartServer(o);
  auto res =
      client_->Post("/v1/completions", R"({"prompt":[1],"max_tokens":1})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 429);
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  EXPECT_TRUE(OJson::parse(res->body)["error"].contains("message"));
  // The access counter runs after the response is written: poll briefly.
  std::string metrics;
  for (int i = 0; i < 200; ++i) {
    res = client_->Get("/metrics");
    ASSERT_TRUE(res);
    metrics = res->body;
    if (metrics.find("specd_requests_total{status=\"429\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(metrics.find("specd_requests_total{status=\"429\"} 1"), std::string::npos) << metrics;
}

TEST_P(HttpServerTest, ClientDisconnectCancelsAndFreesKv) {
  StartServer(ServerOptions());
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = R"({"prompt":[1,2,3],"max_tokens":100000,"temperature":0,"stream":true})";
  req.set_header("Content-Type", "application/json");
  int chunks = 0;
  req.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) {
    return ++chunks < 3;  // hang up after a few chunks
  };
  client_->send(req);
  EXPECT_GE(chunks, 3);
  const SchedulerMetrics& m = server_->scheduler()->metrics();
  for (int i = 0; i < 2000 && (m.running.load() != 0 || m.kv_used_pages.load() != 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(m.running.load(), 0);
  EXPECT_EQ(m.kv_used_pages.load(), 0);
  EXPECT_EQ(m.finished_cancelled.load(), 1);
}

SPECD_HTTP_FRONTENDS(HttpServerTest);

}  // namespace
}  // namespace specd::server
