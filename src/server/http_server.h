// The OpenAI-compatible HTTP server of rank 0:
//   POST /v1/completions, POST /v1/chat/completions (JSON or, with
//   "stream": true, server-sent events "data: {json}\n\n" ending in
//   "data: [DONE]"), GET /v1/models, GET /health, GET /metrics.
//
// Threads: one event loop (server/http_front.h, on libevent 2.1's core) does
// all socket I/O and answers /health, /metrics and /v1/models itself; the
// completion routes run on a pool of up to http_threads workers (parse,
// tokenize, submit, wait for the engine), which hand responses and SSE
// chunks back to the loop. A slow or idle client costs a buffer and a timer,
// not a thread, so it cannot starve /health. libevent's own evhttp is not
// used: in 2.1 it has no hook at accept or close of a connection (no
// per-connection header deadline, no connection cap; both came in 2.2), and
// its timeouts restart on every byte.
//
// Lifecycle: Start() listens at once, answering /health with 503 while the
// model loads; Attach() hands it the engine (it then builds the scheduler and
// chat template and /health turns 200); Shutdown() gives in-flight requests
// the grace period, cancels the rest and stops listening. If an engine step
// fails, every in-flight request gets an error (streams an error event, then
// [DONE]) and /health turns 503. A client that disconnects has its request
// cancelled.
//
// Security defaults: 127.0.0.1, exclusive bind, optional API key (Bearer) on
// every /v1 route (checked at the header), body size limit (413, decided from
// Content-Length before the body is read; a malformed or negative
// Content-Length is a 400, a POST without one a 411), prompt size bounded
// before tokenization, 16 KiB header limit, whole-header and whole-body
// deadlines that arriving bytes do not extend (listen.header_timeout_s,
// listen.body_timeout_s), write and keep-alive timeouts, a connection cap answered
// with 503, a listen backlog sized for bursts.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "http/listen_options.h"
#include "runtime/engine.h"
#include "runtime/scheduler.h"
#include "spec/eagle3_head.h"
#include "tokenizer/tokenizer.h"

namespace specd::server {

class ChatPrompt;
class HttpExchange;
class HttpFront;
class RequestCounter;
class WorkerPool;
enum class Endpoint;

struct ServerOptions {
  // Address, backlog, head/body sizes and deadlines, connection cap (port 0:
  // any free port, see OpenAiServer::port; body_timeout_s is --timeout).
  http::ListenOptions listen;
  std::string api_key;           // empty: no authentication
  std::string served_model_name; // empty: the model file or folder name
  std::string model_path;        // where the chat template is looked up
  int http_threads = 0;          // workers for completions; 0: max_batch + max_queue + 16, at most 512
  double write_timeout_s = 30;   // a response making no progress at all
  double keep_alive_timeout_s = 5;
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
  // acceptance_prior (may be null): where the scheduler's pooled acceptance
  // starts (SchedulerOptions::acceptance_prior).
  Status Attach(Engine* engine, const Tokenizer* tokenizer, Eagle3Head* head,
                const AcceptanceModel* acceptance_prior = nullptr);
  bool ready() const;
  // Lets in-flight requests finish for up to shutdown_grace_s (new ones get
  // 503), cancels the rest (a stream gets an error event, then [DONE]),
  // waits up to 2 s for open streams to send their last events, then stops
  // listening. Idempotent.
  void Shutdown();
  // The scheduler once attached (tests, metrics).
  Scheduler* scheduler() { return scheduler_.get(); }

 private:
  // Loop thread: routes a complete request.
  void Route(std::shared_ptr<HttpExchange> ex);
  // A worker: one completion request, start to finish.
  void Generate(HttpExchange& ex, Endpoint ep);

  ServerOptions options_;
  std::unique_ptr<RequestCounter> counter_;
  std::unique_ptr<WorkerPool> workers_;
  std::unique_ptr<HttpFront> front_;
  int port_ = 0;
  const Tokenizer* tokenizer_ = nullptr;
  std::unique_ptr<ChatPrompt> chat_;
  std::unique_ptr<Scheduler> scheduler_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> shut_down_{false};
  std::atomic<int> open_streams_{0};  // SSE responses not yet ended
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
