#include "server/http_server.h"

#include <httplib.h>
#include <malloc.h>
#include <signal.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "base/logging.h"
#include "server/chat_prompt.h"
#include "server/metrics_text.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace specd::server {
namespace {

std::atomic<bool> g_terminate{false};

void OnTerminate(int) { g_terminate.store(true); }

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  res.set_content(Dump(ErrorJson(e)), "application/json");
}

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

// A Content-Length value: only decimal digits (RFC 9110), no sign, no
// overflow. False for anything else.
bool ParseContentLength(const std::string& v, uint64_t* out) {
  if (v.empty() || v.size() > 19) return false;
  uint64_t n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = n;
  return true;
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

// The stream of one SSE response, shared by the content provider and its
// releaser (which cancels the request if the client went away).
struct SseState {
  std::shared_ptr<RequestStream> stream;
  ResponseBuilder builder;
  bool include_usage = false;
};

}  // namespace

OpenAiServer::OpenAiServer(ServerOptions options)
    : options_(std::move(options)),
      http_(std::make_unique<httplib::Server>()),
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
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(options_.max_body_bytes);
  http_->set_read_timeout(options_.read_timeout_s, 0);
  http_->set_write_timeout(options_.write_timeout_s, 0);
  http_->set_keep_alive_timeout(options_.keep_alive_timeout_s);
  http_->set_keep_alive_max_count(1000);
  if (options_.port < 0 || options_.port > 65535)
    return InvalidArgumentError(fmt::format("--port: expected 0..65535 (0: any free port), got {}",
                                            options_.port))
        .WithStage("serve");
  // Exclusive bind: SO_REUSEADDR (restart while old connections linger in
  // TIME_WAIT) but not the library's SO_REUSEPORT, with which a second server
  // on the same port would "listen" too and take half the connections.
  int listen_fd = -1;
  http_->set_socket_options([&listen_fd](int sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd = sock;
  });
  Routes();
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    if (port_ <= 0) return IoError("cannot listen on " + options_.host + ": no free port");
  } else {
    if (!http_->bind_to_port(options_.host, options_.port))
      return IoError(fmt::format("cannot listen on {}:{} (address in use or not local?)",
                                 options_.host, options_.port))
          .WithStage("serve");
    port_ = options_.port;
  }
  // The library listens with a backlog of 5; a burst of connections then
  // overflows the accept queue. listen() again on the bound socket raises it.
  if (listen_fd >= 0 && ::listen(listen_fd, std::max(16, options_.listen_backlog)) != 0)
    LOG_WARN("serve", "could not raise the listen backlog to {}: {}", options_.listen_backlog,
             std::strerror(errno));
  listen_thread_ = std::thread([this] {
    http_->listen_after_bind();
    listen_returned_.store(true);
  });
  // Wait until the accept loop runs: the library's stop() is a no-op before
  // that, and a Shutdown() racing ahead of it would leave the thread in
  // accept() forever.
  while (!http_->is_running() && !listen_returned_.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  LOG_INFO("serve", "listening on http://{}:{} (model '{}'{})", options_.host, port_,
           options_.served_model_name, options_.api_key.empty() ? "" : ", API key required");
  return Status::Ok();
}

Status OpenAiServer::Attach(Engine* engine, const Tokenizer* tokenizer, Eagle3Head* head) {
  tokenizer_ = tokenizer;
  if (tokenizer_) {
    ASSIGN_OR_RETURN(chat_, ChatPrompt::Create(options_.model_path, tokenizer_));
    max_token_bytes_ = MaxTokenBytes(*tokenizer_);
  }
  scheduler_ = std::make_unique<Scheduler>(engine, tokenizer, head, options_.scheduler);
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
  if (http_->is_running() || listen_thread_.joinable()) http_->stop();
  if (listen_thread_.joinable()) listen_thread_.join();
  LOG_INFO("serve", "stopped");
}

void OpenAiServer::Routes() {
  httplib::Server& s = *http_;
  s.set_logger([this](const httplib::Request&, const httplib::Response& res) {
    counter_->Add(res.status);
  });
  s.set_error_handler(httplib::Server::HandlerWithResponse(
      [](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    e.http_status = res.status;
    if (res.status == 413) {
      e.message = "request body too large (--max-body-bytes)";
    } else if (res.status == 404) {
      e.message = "no route " + req.method + " " + req.path;
    } else {
      e.message = fmt::format("HTTP {}", res.status);
    }
    res.set_content(Dump(ErrorJson(e)), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  s.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    SendError(res, Error(500, "internal error while handling the request", "", "server_error"));
  });
  // Before the body is read: Content-Length checked at the header (a 413 for
  // a body over the limit, a 400 for a malformed one, then the connection
  // closes instead of waiting for bytes that may never come), then the API
  // key on every /v1 route.
  s.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const bool chunked = req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
    if (req.method == "POST" && !chunked && !req.has_header("Content-Length")) {
      // The library would read such a body until the client closes.
      SendError(res, Error(411, "a POST needs a Content-Length header (or chunked encoding)"));
      res.set_header("Connection", "close");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.has_header("Content-Length")) {
      const std::string v = req.get_header_value("Content-Length");
      uint64_t n = 0;
      if (!ParseContentLength(v, &n) || req.get_header_value_count("Content-Length") > 1) {
        SendError(res, Error(400, "Content-Length: expected one non-negative decimal integer, got '" +
                                      v + "'"));
        res.set_header("Connection", "close");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (n > options_.max_body_bytes) {
        SendError(res, Error(413, fmt::format("request body of {} bytes is larger than the limit "
                                              "of {} bytes (--max-body-bytes)",
                                              n, options_.max_body_bytes)));
        res.set_header("Connection", "close");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    if (options_.api_key.empty() || req.path.rfind("/v1/", 0) != 0)
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    const std::string key = auth.rfind(prefix, 0) == 0 ? auth.substr(prefix.size()) : "";
    if (ConstantTimeEquals(key, options_.api_key)) return httplib::Server::HandlerResponse::Unhandled;
    SendError(res, Error(401,
                         auth.empty() ? "missing API key: send 'Authorization: Bearer <key>'"
                                      : "invalid API key",
                         "", "invalid_request_error", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });

  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (ready()) {
      res.set_content("{\"status\":\"ok\"}", "application/json");
      return;
    }
    res.status = 503;
    std::string why = shut_down_ ? "shutting down"
                      : !ready_  ? "loading"
                                 : "engine failed: " + scheduler_->failure().message();
    res.set_content(Dump(OJson{{"status", why}}), "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const SchedulerMetrics* m = ready_.load() && scheduler_ ? &scheduler_->metrics() : nullptr;
    res.set_content(RenderMetrics(*counter_, m, ready()), "text/plain; version=0.0.4");
  });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    const int64_t ctx = ready_.load() ? scheduler_->context_length() : 0;
    res.set_content(Dump(ModelsJson(options_.served_model_name, created_, ctx)),
                    "application/json");
  });

  auto generate = [this](Endpoint ep) {
    return [this, ep](const httplib::Request& req, httplib::Response& res) {
      // After a large request, hand freed heap pages back to the system: the
      // HTTP threads' malloc arenas otherwise keep a flood of big prompts'
      // memory for good (glibc raises its mmap threshold as big blocks are
      // freed, so later ones land in the arenas).
      struct TrimAfterLargeBody {
        bool large;
        ~TrimAfterLargeBody() {
          if (large) ::malloc_trim(0);
        }
      } trim{req.body.size() >= (256u << 10)};
      if (!ready()) {
        SendError(res, Error(503, shut_down_ ? "the server is shutting down"
                                  : !ready_  ? "the model is still loading"
                                             : "the engine failed: " +
                                                   scheduler_->failure().message(),
                             "", "server_error"));
        return;
      }
      ApiRequest r;
      ApiError err;
      if (!ParseApiRequest(req.body, ep, &r, &err)) return SendError(res, err);
      if (!r.model.empty() && r.model != options_.served_model_name)
        return SendError(res, Error(404, "The model `" + r.model + "` does not exist (this server "
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
          return SendError(res, Error(400, "messages: this model has no tokenizer, so chat is "
                                           "unavailable (use /v1/completions with token ids)",
                                      "messages"));
        auto text = chat_->Render(r.messages);
        if (!text.ok()) return SendError(res, Error(400, "messages: " + text.status().message(), "messages"));
        if (text->size() > max_prompt_bytes) return SendError(res, too_long(text->size()));
        sr.prompt = tokenizer_->Encode(*text, chat_->add_special());
      } else if (r.prompt_is_ids) {
        sr.prompt = r.prompt_ids;
      } else {
        if (!tokenizer_)
          return SendError(res, Error(400, "prompt: this model has no tokenizer: send token ids",
                                      "prompt"));
        if (r.prompt_text.size() > max_prompt_bytes)
          return SendError(res, too_long(r.prompt_text.size()));
        sr.prompt = tokenizer_->Encode(r.prompt_text, /*add_special=*/true);
      }
      const int n_prompt = static_cast<int>(sr.prompt.size());
      if (n_prompt > scheduler_->max_prompt_tokens())
        return SendError(res, Error(400, fmt::format(
            "{}: the prompt has {} tokens, more than this model's limit of {} (context length {})",
            ep == Endpoint::kChat ? "messages" : "prompt", n_prompt,
            scheduler_->max_prompt_tokens(), scheduler_->context_length()),
            ep == Endpoint::kChat ? "messages" : "prompt"));
      const int room = scheduler_->context_length() - n_prompt;
      sr.max_tokens = r.max_tokens ? *r.max_tokens
                                   : (ep == Endpoint::kCompletions ? std::min(16, room) : room);
      sr.sampling = r.sampling;
      sr.stop_strings = r.stop;
      sr.logprobs = r.logprobs;
      if (tokenizer_ && !r.ignore_eos) sr.stop_ids = tokenizer_->stop_ids();
      auto submitted = scheduler_->Submit(std::move(sr));
      if (!submitted.ok()) {
        ApiError e = FromStatus(submitted.status(), ep);
        if (e.http_status == 429) res.set_header("Retry-After", "1");
        return SendError(res, e);
      }
      std::shared_ptr<RequestStream> stream = std::move(submitted).value();
      ResponseBuilder builder(ep, NewRequestId(ep), options_.served_model_name,
                              static_cast<int64_t>(std::time(nullptr)), r.logprobs, tokenizer_);
      if (!r.stream) {
        OutputDelta all, d;
        while (!all.finished) {
          if (!stream->Next(&d, 1.0)) continue;
          all.text += d.text;
          all.logprobs.insert(all.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
          all.finished = d.finished;
          all.finish_reason = d.finish_reason;
          all.error = d.error;
          all.prompt_tokens = d.prompt_tokens;
          all.completion_tokens = d.completion_tokens;
        }
        if (all.finish_reason == "error")
          return SendError(res, Error(500, "generation failed: " + all.error.ToString(), "",
                                      "server_error"));
        if (all.finish_reason == "cancelled")
          return SendError(res, Error(503, "the server is shutting down", "", "server_error"));
        res.set_content(Dump(builder.Full(all)), "application/json");
        return;
      }
      auto st = std::make_shared<SseState>(SseState{stream, std::move(builder), r.include_usage});
      res.set_header("Cache-Control", "no-cache");
      res.set_header("X-Accel-Buffering", "no");
      open_streams_.fetch_add(1);
      res.set_chunked_content_provider(
          "text/event-stream",
          [st](size_t, httplib::DataSink& sink) {
            OutputDelta d;
            while (!st->stream->Next(&d, 0.25)) {
              if (!sink.is_writable()) {
                st->stream->Cancel();
                return false;
              }
            }
            std::string out;
            if (d.finished && (d.finish_reason == "error" || d.finish_reason == "cancelled")) {
              // Tokens decided before the failure arrive merged with it:
              // send them first, then the error.
              if (!d.text.empty() || !d.token_ids.empty() || !d.logprobs.empty()) {
                OutputDelta before = d;
                before.finished = false;
                before.finish_reason.clear();
                OJson chunk = st->builder.Chunk(before);
                if (st->include_usage) chunk["usage"] = nullptr;
                out += SseData(chunk);
              }
              const std::string msg = d.finish_reason == "error"
                                          ? "generation failed: " + d.error.ToString()
                                          : "the server is shutting down";
              out += SseData(ErrorJson(Error(500, msg, "", "server_error")));
            } else {
              OJson chunk = st->builder.Chunk(d);
              if (st->include_usage) chunk["usage"] = nullptr;
              out += SseData(chunk);
              if (d.finished && st->include_usage)
                out += SseData(st->builder.UsageChunk(d.prompt_tokens, d.completion_tokens));
            }
            if (d.finished) out += SseDone();
            if (!sink.write(out.data(), out.size())) {
              st->stream->Cancel();
              return false;
            }
            if (d.finished) sink.done();
            return true;
          },
          [this, st](bool success) {
            if (!success) st->stream->Cancel();
            open_streams_.fetch_sub(1);
          });
    };
  };
  s.Post("/v1/completions", generate(Endpoint::kCompletions));
  s.Post("/v1/chat/completions", generate(Endpoint::kChat));
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
