// The OpenAI-compatible HTTP server of rank 0 (cpp-httplib):
//   POST /v1/completions, POST /v1/chat/completions (JSON or, with
//   "stream": true, server-sent events "data: {json}\n\n" ending in
//   "data: [DONE]"), GET /v1/models, GET /health, GET /metrics.
//
// Lifecycle: Start() listens at once, answering /health with 503 while the
// model loads; Attach() hands it the engine (it then builds the scheduler and
// chat template and /health turns 200); Shutdown() stops accepting, gives
// in-flight requests the grace period, cancels the rest and returns. If an
// engine step fails, every in-flight request gets an error (streams an error
// event, then [DONE]) and /health turns 503.
//
// Security defaults: 127.0.0.1, exclusive bind, optional API key (Bearer) on
// every /v1 route, body size limit (413, decided from Content-Length before
// the body is read; a malformed or negative Content-Length is a 400), prompt
// size bounded before tokenization, header/URI limits (cpp-httplib's 8 KiB),
// read/write and keep-alive timeouts, a listen backlog sized for bursts.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "runtime/engine.h"
#include "runtime/scheduler.h"
#include "spec/eagle3_head.h"
#include "tokenizer/tokenizer.h"

namespace httplib {
class Server;
}

namespace specd::server {

class ChatPrompt;
class RequestCounter;

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;               // 0..65535; 0: any free port (see OpenAiServer::port)
  int listen_backlog = 1024;     // pending connections the kernel queues (capped by somaxconn)
  std::string api_key;           // empty: no authentication
  std::string served_model_name; // empty: the model file or folder name
  std::string model_path;        // where the chat template is looked up
  size_t max_body_bytes = 4u << 20;
  int http_threads = 0;          // 0: max_batch + max_queue + 16, at most 512
  int read_timeout_s = 30;
  int write_timeout_s = 30;
  int keep_alive_timeout_s = 5;
  double shutdown_grace_s = 5;
  SchedulerOptions scheduler;
};

class OpenAiServer {
 public:
  explicit OpenAiServer(ServerOptions options);
  ~OpenAiServer();

  // Binds host:port exclusively (no SO_REUSEPORT: a second server on the
  // same port fails with IoError naming the address; InvalidArgument for a
  // port outside 0..65535) and serves on a background thread.
  Status Start();
  // The bound port (after Start).
  int port() const { return port_; }
  // Makes the server ready: builds the chat template (errors: a template the
  // renderer rejects) and starts the scheduler. engine, tokenizer (may be
  // null: token-id prompts only) and head must outlive the server.
  Status Attach(Engine* engine, const Tokenizer* tokenizer, Eagle3Head* head);
  bool ready() const;
  // Stops accepting, lets in-flight requests finish for up to
  // shutdown_grace_s, cancels the rest (a stream gets an error event, then
  // [DONE]), waits up to 2 s for open streams to send their last events,
  // then stops listening. Idempotent.
  void Shutdown();
  // The scheduler once attached (tests, metrics).
  Scheduler* scheduler() { return scheduler_.get(); }

 private:
  void Routes();

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::unique_ptr<RequestCounter> counter_;
  std::thread listen_thread_;
  int port_ = 0;
  const Tokenizer* tokenizer_ = nullptr;
  std::unique_ptr<ChatPrompt> chat_;
  std::unique_ptr<Scheduler> scheduler_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> shut_down_{false};
  std::atomic<int> open_streams_{0};  // SSE responses not yet released
  std::atomic<bool> listen_returned_{false};  // the accept loop has ended
  int64_t created_ = 0;
  // Longest byte sequence one token stands for (set by Attach): a prompt of
  // more than max_prompt_tokens * this * 4 bytes cannot fit, and is refused
  // before it is tokenized (4: room for normalizers that shrink text).
  size_t max_token_bytes_ = 0;
};

// Runs a server over an already loaded engine until SIGINT or SIGTERM, then
// shuts down (see OpenAiServer::Shutdown) and returns, so the caller can stop
// the other ranks. `on_ready` (optional) runs once listening and attached.
Status RunServer(const ServerOptions& options, Engine& engine, const Tokenizer* tokenizer,
                 Eagle3Head* head, const std::function<void(int port)>& on_ready = {});

// Blocks until SIGINT or SIGTERM arrives (installed on first use; other
// threads keep running). For callers that drive OpenAiServer themselves.
void WaitForTerminationSignal();
// The same, for at most `seconds`; true once a signal has arrived.
bool WaitForTerminationSignalFor(double seconds);

}  // namespace specd::server
