// specd serve: the OpenAI-compatible HTTP server with continuous batching.
// Listens first (so /health answers 503 while the model loads), then loads
// the model, tokenizer and optional draft head and attaches them. With --tp N
// the server and scheduler run on rank 0 and the other ranks follow its step
// descriptors (app/rank_launch.h). With --tp > 1 or --restart-ranks > 0 the
// supervisor owns the public address and proxies to rank 0's server on
// 127.0.0.1 (launch/serve_proxy.h), so clients hear about a dead rank and a
// fresh rank group can take over behind the same address.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <vector>

#include "app/commands.h"
#include "app/engine_flags.h"
#include "app/rank_launch.h"
#include "app/spec_cache.h"
#include "base/env.h"
#include "base/logging.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer.h"

namespace specd::app {
namespace {

struct ServeFlags {
  EngineFlags engine;
  SpecFlags spec;
  LaunchFlags launch;
  server::ServerOptions server;
  int max_body_bytes = 4 << 20;
  bool no_tokenizer = false;
  int restart_ranks = 0;
};

// Rank 0's part: load the tokenizer and draft head, attach the engine to the
// already listening server, and serve until SIGINT/SIGTERM or until the
// engine fails (a rank died), then shut down.
// `reporter` (null when unsupervised) hears rank 0's port once it serves.
Status ServeOnRank0(const ServeFlags& f, const ResolvedEngineOptions& eo,
                    server::OpenAiServer& srv, ModelRunner& runner, Engine& engine,
                    RankReporter* reporter) {
  const server::ServerOptions& so = f.server;
  // A model without tokenizer files serves token-id prompts; a tokenizer
  // that is present but broken stops start-up (a server that silently
  // ignored it would answer every text request with an error), unless
  // --no-tokenizer asks to run without one.
  std::unique_ptr<Tokenizer> tok;
  if (f.no_tokenizer) {
    LOG_INFO("tokenizer", "--no-tokenizer: only token-id prompts on /v1/completions");
  } else if (auto t = LoadTokenizerForModel(so.model_path); t.ok()) {
    tok = std::move(t).value();
  } else if (t.status().code() == StatusCode::kNotFound) {
    LOG_WARN("tokenizer", "no tokenizer ({}): only token-id prompts on /v1/completions",
             t.status().message());
  } else {
    srv.Shutdown();
    Status st = t.status();
    st.WithStage("load tokenizer")
        .WithHint("fix or replace the tokenizer files, or pass --no-tokenizer to serve token-id "
                  "prompts only");
    return st;
  }
  std::unique_ptr<Eagle3Head> head;
  if (so.scheduler.spec.algorithm == SpecAlgorithm::kEagle3) {
    auto h = Eagle3Head::Create(f.spec.draft_model, runner.model(), runner.load_options(),
                                 runner.pool());
    if (!h.ok()) return std::move(h).TakeStatus().WithStage("load draft model");
    head = std::move(h).value();
    runner.SetCaptureLayers(head->aux_layers());
  }
  Status s = PrepareStepCosts(engine, head.get(), so.scheduler.spec, eo.runner, eo.tp,
                              f.spec.draft_model, so.scheduler.max_batch)
                 .WithStage("step costs");
  const AcceptanceMemory memory(so.scheduler.spec, eo.runner, f.spec.draft_model, "serve",
                                !f.spec.no_acceptance_cache);
  const std::optional<AcceptanceModel> prior = memory.Load(so.scheduler.spec.MaxDraftDepth());
  if (s.ok()) s = srv.Attach(&engine, tok.get(), head.get(), prior ? &*prior : nullptr);
  if (!s.ok()) {
    srv.Shutdown();
    return s;
  }
  if (reporter != nullptr) reporter->Serving(std::to_string(srv.port()));
  bool signalled = false;
  while (!(signalled = server::WaitForTerminationSignalFor(0.2))) {
    if (srv.scheduler() != nullptr && !srv.scheduler()->healthy()) break;
  }
  if (signalled) LOG_INFO("serve", "signal received: shutting down");
  else LOG_ERROR("serve", "the engine failed: shutting down");
  srv.Shutdown();
  // The scheduler's loop has stopped: its pooled acceptance is final.
  if (srv.scheduler() != nullptr) memory.Save(srv.scheduler()->pooled_acceptance());
  if (srv.scheduler() != nullptr && !srv.scheduler()->healthy())
    return srv.scheduler()->failure().WithStage("serve");
  return Status::Ok();
}

int RunServe(ServeFlags& f) {
  server::ServerOptions& so = f.server;
  if (so.api_key.empty()) {
    if (auto k = GetEnv(EnvVar::kApiKey)) so.api_key = *k;
  }
  if (f.max_body_bytes <= 0) {
    LOG_ERROR("serve", "--max-body-bytes: must be > 0, got {}", f.max_body_bytes);
    return 2;
  }
  so.listen.max_body_bytes = static_cast<size_t>(f.max_body_bytes);
  const ResolvedEngineOptions eo = ResolveEngineOptions(f.engine);
  so.model_path = eo.runner.model_path;
  auto spec = ToSpecOptions(f.spec);
  if (!spec.ok()) {
    LogStatus(spec.status());
    return 2;
  }
  so.scheduler.spec = *spec;

  if (f.restart_ranks < 0) {
    LOG_ERROR("serve", "--restart-ranks: expected a count >= 0, got {}", f.restart_ranks);
    return 2;
  }
  if (f.restart_ranks > 0 && f.launch.comm != "shm") {
    LOG_ERROR("serve", "--restart-ranks: needs --comm shm (mpirun owns the processes of --comm "
                       "mpi)");
    return 2;
  }
  RankJob job;
  job.max_restarts = f.restart_ranks;
  // Rank 0's server: the public one, or behind the supervisor's proxy.
  server::ServerOptions rank0_so = so;
  if (f.launch.comm == "shm" && (eo.tp > 1 || f.restart_ranks > 0)) {
    launch::ServeProxyOptions po;
    po.listen = so.listen;
    po.max_pending = so.scheduler.max_queue;
    job.proxy = po;
    rank0_so.listen.host = "127.0.0.1";
    rank0_so.listen.port = 0;
  }
  // The server lives on rank 0 (in its process with --tp N): it listens
  // before the model loads and turns healthy once every rank is ready.
  std::unique_ptr<server::OpenAiServer> srv;
  RankReporter* reporter = nullptr;
  job.rank0_prepare = [&](RankReporter* rep) {
    reporter = rep;
    srv = std::make_unique<server::OpenAiServer>(rank0_so);
    return srv->Start();
  };
  job.rank0_main = [&](ModelRunner& runner, Engine& engine) {
    Status s = ServeOnRank0(f, eo, *srv, runner, engine, reporter);
    srv.reset();
    return s;
  };
  // Rank 0 shuts down gracefully (the grace period, then cancellation) and
  // then releases the other ranks.
  job.rank0_stop_s = std::max(0.0, so.shutdown_grace_s) + 10;
  return RunOnRanks(eo, f.launch, job);
}

}  // namespace

void AddServeCommand(CLI::App& root, int* exit_code) {
  // Owned for the whole process: the CLI's callbacks keep the pointer (and
  // bench's flag check adds a command per configuration).
  static std::vector<std::unique_ptr<ServeFlags>> owned;
  auto* f = owned.emplace_back(std::make_unique<ServeFlags>()).get();
  auto* sub = root.add_subcommand("serve", "OpenAI-compatible HTTP server (continuous batching)");
  AddEngineFlags(sub, &f->engine);
  AddSpecFlags(sub, &f->spec);
  AddLaunchFlags(sub, &f->engine, &f->launch);
  server::ServerOptions& so = f->server;
  sub->add_option("--host", so.listen.host, "Address to listen on (default 127.0.0.1: this machine only)");
  sub->add_option("--port", so.listen.port, "TCP port (default 8000; 0: any free port)");
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
                  "Worker threads for completion requests; socket I/O runs on one event loop "
                  "(default max-batch + max-queue + 16, at most 512)");
  sub->add_option("--max-connections", so.listen.max_connections,
                  "Open connections; more are answered 503 (default 4096, within the open-file "
                  "limit)");
  sub->add_option("--header-timeout", so.listen.header_timeout_s,
                  "Seconds a client has for a request's whole header, not extended by arriving "
                  "bytes (default 10)");
  sub->add_flag("--no-tokenizer", f->no_tokenizer,
                "Serve without a tokenizer (token-id prompts on /v1/completions only), even "
                "when the model has one; without this flag a broken tokenizer stops start-up");
  sub->add_option("--timeout", so.listen.body_timeout_s,
                  "Seconds a client has for a request's whole body after its header, not "
                  "extended by arriving bytes (default 30)");
  sub->add_option("--restart-ranks", f->restart_ranks,
                  "Start a fresh rank group up to this many times when a rank dies after the "
                  "server became ready (default 0: exit with the failure report); meanwhile "
                  "/health answers 503 \"recovering\" and new requests wait for the new group");
  sub->add_option("--shutdown-grace", so.shutdown_grace_s,
                  "Seconds in-flight requests may run after SIGINT/SIGTERM (default 5)");
  sub->callback([f, exit_code] { *exit_code = RunServe(*f); });
}

}  // namespace specd::app
