// specd serve: the OpenAI-compatible HTTP server with continuous batching.
// Listens first (so /health answers 503 while the model loads), then loads
// the model, tokenizer and optional draft head and attaches them.
#include <cstdlib>

#include "app/commands.h"
#include "app/engine_flags.h"
#include "base/logging.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer.h"

namespace specd::app {
namespace {

struct ServeFlags {
  EngineFlags engine;
  SpecFlags spec;
  server::ServerOptions server;
  int max_body_bytes = 4 << 20;
};

Status RunServe(ServeFlags& f, int* exit_code) {
  server::ServerOptions& so = f.server;
  if (so.api_key.empty()) {
    if (const char* k = std::getenv("SPECD_API_KEY"); k && *k) so.api_key = k;
  }
  if (f.max_body_bytes <= 0)
    return InvalidArgumentError("--max-body-bytes: must be > 0, got " +
                                std::to_string(f.max_body_bytes));
  so.max_body_bytes = static_cast<size_t>(f.max_body_bytes);
  if (f.engine.tp > 1)
    return UnsupportedError("--tp " + std::to_string(f.engine.tp) +
                            ": tensor-parallel serving starts ranks through the launcher, which "
                            "this build does not have yet; use --tp 1");
  RunnerOptions ro = ToRunnerOptions(f.engine);
  so.model_path = ro.model_path;
  ASSIGN_OR_RETURN(so.scheduler.spec, ToSpecOptions(f.spec));

  server::OpenAiServer srv(so);
  RETURN_IF_ERROR(srv.Start());

  std::unique_ptr<Communicator> comm = NewLocalCommunicator();
  ASSIGN_OR_RETURN(auto runner, ModelRunner::Create(ro, comm.get()));
  std::unique_ptr<Tokenizer> tok;
  auto t = LoadTokenizerForModel(ro.model_path);
  if (t.ok()) tok = std::move(t).value();
  else LOG_WARN("tokenizer", "no tokenizer ({}): only token-id prompts on /v1/completions",
                t.status().message());
  std::unique_ptr<Eagle3Head> head;
  if (so.scheduler.spec.algorithm == SpecAlgorithm::kEagle3) {
    auto h = Eagle3Head::Create(f.spec.draft_model, runner->model(), ro.load, runner->pool());
    if (!h.ok()) return std::move(h).TakeStatus().WithStage("load draft model");
    head = std::move(h).value();
    runner->SetCaptureLayers(head->aux_layers());
  }
  Engine engine(runner.get());
  RETURN_IF_ERROR(srv.Attach(&engine, tok.get(), head.get()));
  server::WaitForTerminationSignal();
  LOG_INFO("serve", "signal received: shutting down");
  srv.Shutdown();
  RETURN_IF_ERROR(engine.Shutdown());
  *exit_code = 0;
  return Status::Ok();
}

}  // namespace

void AddServeCommand(CLI::App& root, int* exit_code) {
  auto* f = new ServeFlags();  // lives as long as the CLI
  auto* sub = root.add_subcommand("serve", "OpenAI-compatible HTTP server (continuous batching)");
  AddEngineFlags(sub, &f->engine);
  AddSpecFlags(sub, &f->spec);
  server::ServerOptions& so = f->server;
  sub->add_option("--host", so.host, "Address to listen on (default 127.0.0.1: this machine only)");
  sub->add_option("--port", so.port, "TCP port (default 8000; 0: any free port)");
  sub->add_option("--api-key", so.api_key,
                  "Require 'Authorization: Bearer KEY' on /v1 routes (default: $SPECD_API_KEY, "
                  "else none)");
  sub->add_option("--served-model-name", so.served_model_name,
                  "Model name in responses and /v1/models (default: the model file/folder name)");
  sub->add_option("--max-batch", so.scheduler.max_batch, "Concurrent sequences (default 16)");
  sub->add_option("--max-queue", so.scheduler.max_queue,
                  "Waiting requests before answering 429 (default 256)");
  sub->add_option("--prefill-chunk", so.scheduler.prefill_chunk,
                  "Most prompt tokens of one sequence per engine step (default 256)");
  sub->add_option("--max-step-tokens", so.scheduler.max_step_tokens,
                  "Most tokens of one engine step, all sequences together (default 1024)");
  sub->add_option("--max-body-bytes", f->max_body_bytes,
                  "Largest request body; larger ones get 413 (default 4194304)");
  sub->add_option("--http-threads", so.http_threads,
                  "HTTP worker threads (default max-batch + max-queue + 16, at most 512)");
  sub->add_option("--timeout", so.read_timeout_s,
                  "Seconds a client may take to send a request (default 30)");
  sub->add_option("--shutdown-grace", so.shutdown_grace_s,
                  "Seconds in-flight requests may run after SIGINT/SIGTERM (default 5)");
  sub->callback([f, exit_code] {
    Status s = RunServe(*f, exit_code);
    if (!s.ok()) {
      LogStatus(s);
      *exit_code = 1;
    }
  });
}

}  // namespace specd::app
