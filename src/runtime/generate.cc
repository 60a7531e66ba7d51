#include "runtime/generate.h"

#include "runtime/scheduler.h"

namespace specd {

Status Generate(Engine& engine, const GenerateRequest& req, const TokenCallback& on_token,
                GenerateResult* result, const SpecOptions& spec, Eagle3Head* head,
                AcceptanceModel* pooled) {
  *result = GenerateResult();
  const int context = engine.config().max_seq_len;
  SchedulerOptions options;
  options.max_batch = 1;
  options.max_queue = 1;
  // The whole prompt in one forward, as a single-request job expects.
  options.prefill_chunk = context;
  options.max_step_tokens = context + spec.tree.num_draft_tokens;
  options.spec = spec;
  if (pooled != nullptr && pooled->observations() > 0) options.acceptance_prior = *pooled;
  Scheduler scheduler(&engine, /*tokenizer=*/nullptr, head, options);
  ServeRequest r;
  r.prompt = req.prompt;
  r.max_tokens = req.max_tokens;
  r.sampling = req.sampling;
  r.stop_ids = req.stop_ids;
  ASSIGN_OR_RETURN(std::shared_ptr<RequestStream> stream, scheduler.Submit(std::move(r)));
  OutputDelta last;
  Status s = scheduler.RunToCompletion([&] {
    OutputDelta d;
    while (stream->Next(&d, 0)) {
      // Tokens decided after the callback said stop are not delivered.
      for (int32_t t : d.token_ids) {
        if (stream->cancelled()) break;
        result->tokens.push_back(t);
        if (!on_token(t)) stream->Cancel();
      }
      if (d.finished) last = std::move(d);
    }
  });
  if (pooled != nullptr) *pooled = scheduler.pooled_acceptance();
  result->finish_reason = last.finish_reason;
  result->stats = last.stats;
  if (!s.ok()) return s;
  return last.error;
}

}  // namespace specd
