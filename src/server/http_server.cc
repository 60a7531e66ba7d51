#include "server/http_server.h"

#include <malloc.h>
#include <signal.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <thread>

#include "base/logging.h"
#include "server/chat_prompt.h"
#include "server/http_front.h"
#include "server/metrics_text.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/worker_pool.h"

namespace specd::server {
namespace {

std::atomic<bool> g_terminate{false};

void OnTerminate(int) { g_terminate.store(true); }

ApiError Error(int status, std::string message, std::string param = "",
               std::string type = "invalid_request_error", std::string code = "") {
  ApiError e;
  e.http_status = status;
  e.message = std::move(message);
  e.param = std::move(param);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

// Maps a scheduler / template Status to the HTTP error a client sees. The
// messages start with the field they are about ("max_tokens: ..."), which
// becomes `param`.
ApiError FromStatus(const Status& s, Endpoint ep) {
  std::string param;
  const std::string& m = s.message();
  const size_t colon = m.find(':');
  if (colon != std::string::npos && colon < 32 &&
      m.find_first_of(" ()", 0) > colon)
    param = m.substr(0, colon);
  if (ep == Endpoint::kChat && param == "prompt") param = "messages";
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return Error(400, m, param);
    case StatusCode::kResourceExhausted:
      return Error(429, m, "", "rate_limit_error", "rate_limit_exceeded");
    case StatusCode::kUnavailable:
      return Error(503, m, "", "server_error");
    default:
      return Error(500, s.ToString(), "", "server_error");
  }
}

HttpResponse ErrorResponse(const ApiError& e) {
  HttpResponse r;
  r.status = e.http_status;
  r.body = Dump(ErrorJson(e));
  return r;
}

HttpResponse Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

// Longest byte string a single token decodes to (special tokens included).
size_t MaxTokenBytes(const Tokenizer& t) {
  size_t longest = 1;
  for (int id = 0; id < t.vocab_size(); ++id)
    longest = std::max(longest, t.TokenBytes(id, /*skip_special=*/false).size());
  return longest;
}

bool ConstantTimeEquals(const std::string& given, const std::string& key) {
  if (key.empty()) return false;
  unsigned char diff = given.size() != key.size() ? 1 : 0;
  for (size_t i = 0; i < key.size(); ++i)
    diff |= static_cast<unsigned char>((i < given.size() ? given[i] : 0) ^ key[i]);
  return diff == 0;
}

// Before the body is read: the API key on every /v1 route.
std::optional<HttpResponse> CheckApiKey(const HttpRequest& req, const std::string& api_key) {
  if (api_key.empty() || req.path.rfind("/v1/", 0) != 0) return std::nullopt;
  const std::string auth = req.Header("authorization");
  const std::string prefix = "Bearer ";
  const std::string key = auth.rfind(prefix, 0) == 0 ? auth.substr(prefix.size()) : "";
  if (ConstantTimeEquals(key, api_key)) return std::nullopt;
  return ErrorResponse(Error(401,
                             auth.empty() ? "missing API key: send 'Authorization: Bearer <key>'"
                                          : "invalid API key",
                             "", "invalid_request_error", "invalid_api_key"));
}

}  // namespace

OpenAiServer::OpenAiServer(ServerOptions options)
    : options_(std::move(options)),
      counter_(std::make_unique<RequestCounter>()) {
  created_ = static_cast<int64_t>(std::time(nullptr));
  if (options_.served_model_name.empty()) {
    std::filesystem::path p(options_.model_path);
    if (p.has_filename()) options_.served_model_name = p.filename().string();
    else options_.served_model_name = p.parent_path().filename().string();
    if (options_.served_model_name.empty()) options_.served_model_name = "specd";
  }
}

OpenAiServer::~OpenAiServer() { Shutdown(); }

bool OpenAiServer::ready() const {
  return ready_.load() && !shut_down_.load() && scheduler_ && scheduler_->healthy();
}

Status OpenAiServer::Start() {
  // A client that disconnects must not kill the process through SIGPIPE.
  ::signal(SIGPIPE, SIG_IGN);
  int threads = options_.http_threads;
  if (threads <= 0)
    threads = std::min(512, options_.scheduler.max_batch + options_.scheduler.max_queue + 16);
  workers_ = std::make_unique<WorkerPool>(threads);
  HttpFrontOptions fo;
  fo.listen = options_.listen;
  fo.keep_alive_timeout_s = options_.keep_alive_timeout_s;
  fo.write_timeout_s = options_.write_timeout_s;
  front_ = std::make_unique<HttpFront>(
      fo, [key = options_.api_key](const HttpRequest& head) { return CheckApiKey(head, key); },
      [this](std::shared_ptr<HttpExchange> ex) { Route(std::move(ex)); },
      [this](int status) { counter_->Add(status); },
      [](int status, const std::string& message) {
        return ErrorResponse(Error(status, message, "",
                                   status >= 500 ? "server_error" : "invalid_request_error"));
      });
  RETURN_IF_ERROR(front_->Start());
  port_ = front_->port();
  LOG_INFO("serve", "listening on http://{}:{} (model '{}'{}; at most {} connections)",
           options_.listen.host, port_, options_.served_model_name,
           options_.api_key.empty() ? "" : ", API key required", front_->max_connections());
  return Status::Ok();
}

Status OpenAiServer::Attach(Engine* engine, const Tokenizer* tokenizer, Eagle3Head* head,
                            const AcceptanceModel* acceptance_prior) {
  tokenizer_ = tokenizer;
  if (tokenizer_) {
    ASSIGN_OR_RETURN(chat_, ChatPrompt::Create(options_.model_path, tokenizer_));
    max_token_bytes_ = MaxTokenBytes(*tokenizer_);
  }
  SchedulerOptions so = options_.scheduler;
  if (acceptance_prior != nullptr) so.acceptance_prior = *acceptance_prior;
  scheduler_ = std::make_unique<Scheduler>(engine, tokenizer, head, so);
  RETURN_IF_ERROR(scheduler_->Start().WithStage("serve"));
  ready_.store(true);
  LOG_INFO("serve", "ready: max batch {}, max queue {}, context {} tokens, speculation {}",
           options_.scheduler.max_batch, options_.scheduler.max_queue,
           scheduler_->context_length(),
           options_.scheduler.spec.algorithm == SpecAlgorithm::kNone    ? "off"
           : options_.scheduler.spec.algorithm == SpecAlgorithm::kNgram ? "NGRAM"
                                                                        : "EAGLE3");
  return Status::Ok();
}

void OpenAiServer::Shutdown() {
  if (shut_down_.exchange(true)) return;
  if (scheduler_) scheduler_->Stop(options_.shutdown_grace_s);
  // Every request has its final delta now; let the streams write it (an
  // error event after a failure or cancellation) before the sockets close.
  const auto drain_until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (open_streams_.load() > 0 && std::chrono::steady_clock::now() < drain_until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (front_) front_->Stop(/*flush_s=*/1.0);
  if (workers_) workers_->Join();
  if (front_) LOG_INFO("serve", "stopped");
}

void OpenAiServer::Route(std::shared_ptr<HttpExchange> ex) {
  const HttpRequest& req = ex->request();
  const bool get = req.method == "GET";
  if (get && req.path == "/health") {
    if (ready()) return ex->Reply(Json(200, "{\"status\":\"ok\"}"));
    const std::string why = shut_down_ ? "shutting down"
                            : !ready_  ? "loading"
                                       : "engine failed: " + scheduler_->failure().message();
    return ex->Reply(Json(503, Dump(OJson{{"status", why}})));
  }
  if (get && req.path == "/metrics") {
    const SchedulerMetrics* m = ready_.load() && scheduler_ ? &scheduler_->metrics() : nullptr;
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4";
    r.body = RenderMetrics(*counter_, m, ready());
    r.body += fmt::format(
        "# HELP specd_http_open_connections Open HTTP connections (this one included).\n"
        "# TYPE specd_http_open_connections gauge\nspecd_http_open_connections {}\n",
        front_->connections());
    return ex->Reply(std::move(r));
  }
  if (get && req.path == "/v1/models") {
    const int64_t ctx = ready_.load() ? scheduler_->context_length() : 0;
    return ex->Reply(Json(200, Dump(ModelsJson(options_.served_model_name, created_, ctx))));
  }
  const bool post = req.method == "POST";
  if (post && (req.path == "/v1/completions" || req.path == "/v1/chat/completions")) {
    const Endpoint ep = req.path == "/v1/completions" ? Endpoint::kCompletions : Endpoint::kChat;
    workers_->Submit([this, ex, ep] {
      try {
        Generate(*ex, ep);
      } catch (const std::exception& e) {
        LOG_ERROR("serve", "{} {}: {}", ex->request().method, ex->request().path, e.what());
        ex->Reply(ErrorResponse(
            Error(500, "internal error while handling the request", "", "server_error")));
      }
    });
    return;
  }
  ex->Reply(ErrorResponse(Error(404, "no route " + req.method + " " + req.path)));
}

void OpenAiServer::Generate(HttpExchange& ex, Endpoint ep) {
  // After a large request, hand freed heap pages back to the system: the
  // worker threads' malloc arenas otherwise keep a flood of big prompts'
  // memory for good (glibc raises its mmap threshold as big blocks are
  // freed, so later ones land in the arenas).
  struct TrimAfterLargeBody {
    bool large;
    ~TrimAfterLargeBody() {
      if (large) ::malloc_trim(0);
    }
  } trim{ex.request().body.size() >= (256u << 10)};
  auto send_error = [&ex](const ApiError& e) { ex.Reply(ErrorResponse(e)); };
  if (!ready()) {
    return send_error(Error(503, shut_down_ ? "the server is shutting down"
                                 : !ready_  ? "the model is still loading"
                                            : "the engine failed: " +
                                                  scheduler_->failure().message(),
                            "", "server_error"));
  }
  ApiRequest r;
  ApiError err;
  const bool parsed = ParseApiRequest(ex.request().body, ep, &r, &err);
  ex.ReleaseBody();
  if (!parsed) return send_error(err);
  if (!r.model.empty() && r.model != options_.served_model_name)
    return send_error(Error(404, "The model `" + r.model + "` does not exist (this server "
                                 "serves `" + options_.served_model_name + "`)",
                            "model", "invalid_request_error", "model_not_found"));
  // A prompt of more bytes than max_prompt_tokens tokens can cover is
  // refused before tokenizing it (tokenizing megabytes costs seconds and
  // memory for an answer known in advance).
  const size_t max_prompt_bytes =
      static_cast<size_t>(scheduler_->max_prompt_tokens()) * max_token_bytes_ * 4 + 4096;
  auto too_long = [&](size_t bytes) {
    const char* field = ep == Endpoint::kChat ? "messages" : "prompt";
    return Error(400, fmt::format("{}: the prompt has {} bytes, more than any prompt of at "
                                  "most {} tokens can have (context length {})",
                                  field, bytes, scheduler_->max_prompt_tokens(),
                                  scheduler_->context_length()),
                 field);
  };
  ServeRequest sr;
  if (ep == Endpoint::kChat) {
    if (!tokenizer_ || !chat_)
      return send_error(Error(400, "messages: this model has no tokenizer, so chat is "
                                   "unavailable (use /v1/completions with token ids)",
                              "messages"));
    auto text = chat_->Render(r.messages);
    if (!text.ok()) return send_error(Error(400, "messages: " + text.status().message(), "messages"));
    if (text->size() > max_prompt_bytes) return send_error(too_long(text->size()));
    sr.prompt = tokenizer_->Encode(*text, chat_->add_special());
  } else if (r.prompt_is_ids) {
    sr.prompt = r.prompt_ids;
  } else {
    if (!tokenizer_)
      return send_error(Error(400, "prompt: this model has no tokenizer: send token ids", "prompt"));
    if (r.prompt_text.size() > max_prompt_bytes) return send_error(too_long(r.prompt_text.size()));
    sr.prompt = tokenizer_->Encode(r.prompt_text, /*add_special=*/true);
  }
  const int n_prompt = static_cast<int>(sr.prompt.size());
  if (n_prompt > scheduler_->max_prompt_tokens())
    return send_error(Error(
        400,
        fmt::format("{}: the prompt has {} tokens, more than this model's limit of {} (context "
                    "length {})",
                    ep == Endpoint::kChat ? "messages" : "prompt", n_prompt,
                    scheduler_->max_prompt_tokens(), scheduler_->context_length()),
        ep == Endpoint::kChat ? "messages" : "prompt"));
  // Without max_tokens: as many as the context and the KV cache leave.
  const int room =
      std::min(scheduler_->context_length(), scheduler_->kv_capacity_tokens()) - n_prompt;
  sr.max_tokens = r.max_tokens ? *r.max_tokens
                               : (ep == Endpoint::kCompletions ? std::min(16, room) : room);
  sr.sampling = r.sampling;
  sr.stop_strings = r.stop;
  sr.logprobs = r.logprobs;
  if (tokenizer_ && !r.ignore_eos) sr.stop_ids = tokenizer_->stop_ids();
  auto submitted = scheduler_->Submit(std::move(sr));
  if (!submitted.ok()) {
    HttpResponse res = ErrorResponse(FromStatus(submitted.status(), ep));
    if (res.status == 429) res.headers.emplace_back("Retry-After", "1");
    return ex.Reply(std::move(res));
  }
  std::shared_ptr<RequestStream> stream = std::move(submitted).value();
  ResponseBuilder builder(ep, NewRequestId(ep), options_.served_model_name,
                          static_cast<int64_t>(std::time(nullptr)), r.logprobs, tokenizer_);
  if (!r.stream) {
    OutputDelta all, d;
    while (!all.finished) {
      if (!stream->Next(&d, 0.25)) {
        if (ex.client_gone()) stream->Cancel();
        continue;
      }
      all.text += d.text;
      all.logprobs.insert(all.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
      all.finished = d.finished;
      all.finish_reason = d.finish_reason;
      all.error = d.error;
      all.prompt_tokens = d.prompt_tokens;
      all.completion_tokens = d.completion_tokens;
    }
    if (all.finish_reason == "error")
      return send_error(Error(500, "generation failed: " + all.error.ToString(), "", "server_error"));
    if (all.finish_reason == "cancelled")
      return send_error(Error(503, "the server is shutting down", "", "server_error"));
    return ex.Reply(Json(200, Dump(builder.Full(all))));
  }
  open_streams_.fetch_add(1);
  struct StreamOpen {
    std::atomic<int>& n;
    ~StreamOpen() { n.fetch_sub(1); }
  } open{open_streams_};
  ex.StartStream("text/event-stream", {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
  for (;;) {
    OutputDelta d;
    while (!stream->Next(&d, 0.25)) {
      if (ex.client_gone()) {
        stream->Cancel();
        return;
      }
    }
    std::string out;
    if (d.finished && (d.finish_reason == "error" || d.finish_reason == "cancelled")) {
      // Tokens decided before the failure arrive merged with it: send them
      // first, then the error.
      if (!d.text.empty() || !d.token_ids.empty() || !d.logprobs.empty()) {
        OutputDelta before = d;
        before.finished = false;
        before.finish_reason.clear();
        OJson chunk = builder.Chunk(before);
        if (r.include_usage) chunk["usage"] = nullptr;
        out += SseData(chunk);
      }
      const std::string msg = d.finish_reason == "error"
                                  ? "generation failed: " + d.error.ToString()
                                  : "the server is shutting down";
      out += SseData(ErrorJson(Error(500, msg, "", "server_error")));
    } else {
      OJson chunk = builder.Chunk(d);
      if (r.include_usage) chunk["usage"] = nullptr;
      out += SseData(chunk);
      if (d.finished && r.include_usage)
        out += SseData(builder.UsageChunk(d.prompt_tokens, d.completion_tokens));
    }
    if (d.finished) out += SseDone();
    if (!ex.Send(std::move(out))) {
      stream->Cancel();
      return;
    }
    if (d.finished) return ex.End();
  }
}

void WaitForTerminationSignal() {
  while (!WaitForTerminationSignalFor(3600)) {
  }
}

bool WaitForTerminationSignalFor(double seconds) {
  static bool installed = [] {
    struct sigaction sa = {};
    sa.sa_handler = OnTerminate;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    return true;
  }();
  (void)installed;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!g_terminate.load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return g_terminate.load();
}

Status RunServer(const ServerOptions& options, Engine& engine, const Tokenizer* tokenizer,
                 Eagle3Head* head, const std::function<void(int port)>& on_ready) {
  OpenAiServer server(options);
  RETURN_IF_ERROR(server.Start());
  Status s = server.Attach(&engine, tokenizer, head);
  if (!s.ok()) {
    server.Shutdown();
    return s;
  }
  if (on_ready) on_ready(server.port());
  WaitForTerminationSignal();
  LOG_INFO("serve", "signal received: shutting down");
  server.Shutdown();
  return Status::Ok();
}

}  // namespace specd::server
