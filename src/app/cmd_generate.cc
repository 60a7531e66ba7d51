// specd generate: one prompt in, text out, with a stats line or --json.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/engine_flags.h"
#include "app/rank_launch.h"
#include "app/spec_cache.h"
#include "base/clock.h"
#include "base/logging.h"
#include "base/sample_stats.h"
#include "kernels/dispatch.h"
#include "runtime/generate.h"
#include "runtime/step_costs.h"
#include "tokenizer/tokenizer.h"

namespace specd::app {
namespace {

// Matrices the loader repacked for the matmul kernels (--no-repack: 0).
int RepackedMatrices(const Checkpoint& ck) {
  int n = 0;
  for (const auto& [name, t] : ck.tensors()) n += t.layout != WeightLayout::kRows ? 1 : 0;
  return n;
}

struct GenerateFlags {
  EngineFlags engine;
  std::string prompt;
  std::string prompt_ids;
  int max_tokens = 128;
  float temperature = 0.f;
  int top_k = 0;
  float top_p = 1.f;
  float min_p = 0.f;
  uint64_t seed = 0;
  bool json = false;
  bool ignore_eos = false;
  bool baseline = false;
  bool profile = false;
  std::string verify_cost;  // "1,4,8,16"
  double oracle_tau = 3;    // --speculative-algorithm ORACLE: mean tokens per step
  int verify_iters = 10;
  SpecFlags spec;
  LaunchFlags launch;
};

StatusOr<std::vector<int32_t>> ParseIds(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (...) {
      return InvalidArgumentError("--prompt-ids: '" + item +
                                  "' is not a token id (expected comma-separated integers >= 0)");
    }
  }
  return ids;
}

// Times one target forward over n tokens appended to a context holding
// `prompt` (logits for every token, as a verification pass needs), for each n
// in `sizes`, and removes them again: the median of `iters` runs, in ms.
// When `profiles` is set, the per-op profile of each size's timed runs is
// appended to it (the profiler's earlier contents are restored afterwards).
// `reads` gets what each size's last forward read of the weights.
StatusOr<std::vector<double>> MeasureForwardCost(Engine& engine, OpProfile* profiler,
                                                 const std::vector<int32_t>& prompt,
                                                 const std::vector<int32_t>& sizes, int iters,
                                                 std::vector<OpProfile>* profiles,
                                                 std::vector<Model::StepReads>* reads) {
  const OpProfile saved = *profiler;
  const ScopedSequence sequence(engine);
  const int seq = sequence.id();
  ForwardOutput out;
  SeqInput in;
  in.seq = seq;
  in.tokens = prompt;
  RETURN_IF_ERROR(engine.Forward({in}, false, &out).WithStage("verify cost: prefill"));
  const int base = engine.kv().Length(seq);
  std::vector<double> ms;
  for (int32_t n : sizes) {
    if (n <= 0 || base + n > engine.config().max_seq_len)
      return InvalidArgumentError(fmt::format("--verify-cost: {} tokens after a {}-token context "
                                              "do not fit the context length {}",
                                              n, base, engine.config().max_seq_len));
    in.tokens.clear();
    for (int i = 0; i < n; ++i) in.tokens.push_back(prompt[static_cast<size_t>(i) % prompt.size()]);
    in.all_logits = true;
    std::vector<double> runs;
    for (int it = 0; it < std::max(1, iters) + 1; ++it) {
      // The first run warms caches and is neither timed nor profiled.
      if (profiles != nullptr && it == 1) {
        profiler->Reset();
        profiler->set_phase(ProfPhase::kDecode);
        profiler->set_enabled(true);
      }
      Stopwatch sw;
      Status st = engine.Forward({in}, false, &out).WithStage("verify cost");
      const double run_ms = sw.Seconds() * 1e3;
      if (profiler->enabled()) profiler->AddStep(static_cast<int64_t>(run_ms * 1e6));
      if (!st.ok()) {
        *profiler = saved;
        return st;
      }
      if (it > 0) runs.push_back(run_ms);
      RETURN_IF_ERROR(engine.Apply(KvEdit::Truncate(seq, base)));
    }
    reads->push_back(engine.runner().model().LastStepReads());
    if (profiles != nullptr) profiles->push_back(*profiler);
    std::sort(runs.begin(), runs.end());
    ms.push_back(runs[runs.size() / 2]);
  }
  *profiler = saved;
  return ms;
}

// The prompt's token ids and the tokenizer that made them (null when the
// model has none), prepared before the ranks start so that the KV cache can
// be sized to the request.
struct PreparedPrompt {
  std::unique_ptr<Tokenizer> tok;
  std::vector<int32_t> ids;
};

StatusOr<PreparedPrompt> PreparePrompt(const GenerateFlags& f, const std::string& model_path) {
  PreparedPrompt p;
  auto t = LoadTokenizerForModel(model_path);
  if (t.ok()) p.tok = std::move(t).value();
  else LOG_INFO("tokenizer", "no tokenizer: {}", t.status().message());
  if (!f.prompt_ids.empty()) {
    ASSIGN_OR_RETURN(p.ids, ParseIds(f.prompt_ids));
  } else {
    if (!p.tok) return InvalidArgumentError("--prompt needs a tokenizer, and " + model_path +
                                            " has none: pass --prompt-ids instead");
    p.ids = p.tok->Encode(f.prompt, /*add_special=*/true);
  }
  return p;
}

// KV slots this run needs at most, besides the verification rows of a
// speculative step: the request, the start-up step-cost measurement
// (MeasureStepCosts: a kStepCostContext-token context and up to 64 tokens,
// ORACLE's chain included) and --verify-cost's largest forward.
StatusOr<int> GenerateKvTokens(const GenerateFlags& f, int n_prompt) {
  int64_t need = int64_t{n_prompt} + std::max(0, f.max_tokens);
  ASSIGN_OR_RETURN(SpecOptions spec, ToSpecOptions(f.spec));
  if (spec.algorithm != SpecAlgorithm::kNone)
    need = std::max<int64_t>(need, kStepCostContext + 64 + 1);
  if (!f.verify_cost.empty()) {
    ASSIGN_OR_RETURN(std::vector<int32_t> sizes, ParseIds(f.verify_cost));
    for (int32_t n : sizes) need = std::max<int64_t>(need, int64_t{n_prompt} + n);
  }
  return static_cast<int>(std::min<int64_t>(need, INT32_MAX / 2));
}

Status RunGenerate(const GenerateFlags& f, const ResolvedEngineOptions& eo,
                   const PreparedPrompt& prepared, ModelRunner& rn, Engine& engine) {
  ModelRunner* runner = &rn;
  const RunnerOptions& ro = eo.runner;
  const Tokenizer* tok = prepared.tok.get();
  GenerateRequest req;
  req.prompt = prepared.ids;
  req.max_tokens = f.max_tokens;
  req.sampling.temperature = f.temperature;
  req.sampling.top_k = f.top_k;
  req.sampling.top_p = f.top_p;
  req.sampling.min_p = f.min_p;
  req.sampling.seed = f.seed;
  if (tok && !f.ignore_eos) req.stop_ids = tok->stop_ids();

  std::unique_ptr<StreamDecoder> stream;
  if (tok && !f.json) {
    stream = std::make_unique<StreamDecoder>(tok);
    std::fputs(f.prompt.c_str(), stdout);
  }
  ASSIGN_OR_RETURN(SpecOptions spec, ToSpecOptions(f.spec));
  std::unique_ptr<Eagle3Head> head;
  if (spec.algorithm == SpecAlgorithm::kEagle3) {
    auto h = Eagle3Head::Create(f.spec.draft_model, runner->model(), runner->load_options(),
                                 runner->pool());
    if (!h.ok()) return std::move(h).TakeStatus().WithStage("load draft model");
    head = std::move(h).value();
    runner->SetCaptureLayers(head->aux_layers());
  }
  RETURN_IF_ERROR(PrepareStepCosts(engine, head.get(), spec, ro, eo.tp, f.spec.draft_model)
                      .WithStage("step costs"));
  // Every speculative run of this request (the alternating rounds too)
  // starts from the same remembered acceptance; the first run's pooled
  // acceptance is remembered.
  const AcceptanceMemory memory(spec, ro, f.spec.draft_model,
                                req.sampling.greedy() ? "greedy" : "sampled",
                                !f.spec.no_acceptance_cache);
  const AcceptanceModel prior =
      memory.Load(spec.MaxDraftDepth()).value_or(AcceptanceModel(spec.MaxDraftDepth()));
  AcceptanceModel pooled = prior;
  // ORACLE (benchmarks): a fixed chain of the target's own greedy tokens,
  // corrupted so that a step yields oracle_tau tokens on average.
  const bool oracle = spec.algorithm == SpecAlgorithm::kOracle;
  int oracle_depth = 0;
  StepCosts oracle_costs;
  if (oracle) {
    if (!req.sampling.greedy())
      return InvalidArgumentError("--speculative-algorithm ORACLE drafts the greedy "
                                  "continuation: use --temperature 0");
    spec.auto_shape = false;
    oracle_depth = spec.tree.num_steps;
    spec.tree.topk = 1;
    spec.tree.num_draft_tokens = oracle_depth + 1;
    if (!(f.oracle_tau >= 1 && f.oracle_tau < oracle_depth + 1))
      return InvalidArgumentError(fmt::format(
          "--oracle-tau: must be in [1, {}) for a chain of {} drafted tokens, got {}",
          oracle_depth + 1, oracle_depth, f.oracle_tau));
    spec.oracle_accept = OracleAcceptFor(f.oracle_tau, oracle_depth);
    ASSIGN_OR_RETURN(oracle_costs, MeasureStepCosts(engine, nullptr, oracle_depth + 1));
  }
  // Plain greedy/sampled decoding of the same request first, for the speedup.
  double baseline_tok_s = 0, base_decode_s = 0;
  if ((f.baseline || oracle) && spec.algorithm != SpecAlgorithm::kNone) {
    GenerateResult base;
    RETURN_IF_ERROR(Generate(engine, req, [](int32_t) { return true; }, &base)
                        .WithStage("baseline generate"));
    baseline_tok_s = base.stats.decode_tok_s();
    base_decode_s = base.stats.prefill_s + base.stats.decode_s;
    if (oracle) {
      spec.oracle_sequence = req.prompt;
      spec.oracle_sequence.insert(spec.oracle_sequence.end(), base.tokens.begin(),
                                  base.tokens.end());
    }
  }
  // Enabled after the baseline, so the profile covers the reported run only.
  runner->profile().Reset();
  runner->profile().set_enabled(f.profile);
  GenerateResult res;
  Status s = Generate(engine, req, [&](int32_t id) {
    if (stream) {
      std::string piece = stream->Push(id);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  }, &res, spec, head.get(), &pooled);
  RETURN_IF_ERROR(s.WithStage("generate"));
  memory.Save(pooled);
  const GenerateStats& st = res.stats;
  runner->profile().set_enabled(false);
  // The speedup over plain decoding: while the runs are short (the demo's
  // take a few ms each, at the mercy of the machine), plain and speculative
  // runs alternate for up to kMaxRounds pairs within about a second, and the
  // speedup is the geometric mean of the pairs' ratios (drift of the machine
  // cancels). The text and the other stats are the first speculative run's.
  // That run wrote each token to the terminal as it came, which its plain
  // run did not: its pair counts only when no other pair fits the budget.
  // (A run with no decode phase, one token or none, has no rate: no ratio.)
  double spec_tok_s = st.decode_tok_s();
  RatioInterval speedup;
  const bool compare = baseline_tok_s > 0 && spec_tok_s > 0;
  if (compare) speedup = PairedRatio({baseline_tok_s}, {spec_tok_s});
  int rounds = baseline_tok_s > 0 ? 1 : 0;
  if (compare && !oracle) {
    constexpr int kMaxRounds = 5;
    constexpr double kRoundsBudgetS = 1.0;
    std::vector<double> base_rates, spec_rates;
    if (stream == nullptr) {
      base_rates.push_back(baseline_tok_s);
      spec_rates.push_back(spec_tok_s);
    }
    rounds = static_cast<int>(base_rates.size());
    const double pair_s = base_decode_s + st.prefill_s + st.decode_s;
    Stopwatch sw;
    while (rounds < kMaxRounds && (rounds + 1) * pair_s <= kRoundsBudgetS) {
      GenerateResult b, r;
      RETURN_IF_ERROR(Generate(engine, req, [](int32_t) { return true; }, &b)
                          .WithStage("baseline generate"));
      AcceptanceModel round_pooled = prior;
      RETURN_IF_ERROR(Generate(engine, req, [](int32_t) { return true; }, &r, spec, head.get(),
                               &round_pooled)
                          .WithStage("generate"));
      if (!(b.stats.decode_tok_s() > 0 && r.stats.decode_tok_s() > 0)) break;
      base_rates.push_back(b.stats.decode_tok_s());
      spec_rates.push_back(r.stats.decode_tok_s());
      ++rounds;
      if (sw.Seconds() > kRoundsBudgetS) break;
    }
    if (base_rates.empty()) {  // only the first (streamed) pair fits
      base_rates.push_back(baseline_tok_s);
      spec_rates.push_back(spec_tok_s);
      rounds = 1;
    }
    speedup = PairedRatio(base_rates, spec_rates);
    baseline_tok_s = Summarize(base_rates).median;
    spec_tok_s = Summarize(spec_rates).median;
  }
  std::vector<int32_t> cost_sizes;
  std::vector<double> cost;
  std::vector<OpProfile> cost_profiles;
  std::vector<Model::StepReads> cost_reads;
  if (!f.verify_cost.empty()) {
    ASSIGN_OR_RETURN(cost_sizes, ParseIds(f.verify_cost));
    ASSIGN_OR_RETURN(cost, MeasureForwardCost(engine, &runner->profile(), req.prompt, cost_sizes,
                                              f.verify_iters, f.profile ? &cost_profiles : nullptr,
                                              &cost_reads));
  }
  if (f.json) {
    nlohmann::json j;
    j["token_ids"] = res.tokens;
    j["text"] = tok ? tok->Decode(res.tokens) : "";
    j["finish_reason"] = res.finish_reason;
    j["prompt_ids"] = req.prompt;
    j["stats"] = {{"prefill_tok_s", st.prefill_tok_s()},
                  {"decode_tok_s", st.decode_tok_s()},
                  {"decode_gb_s", st.decode_gb_s()},
                  {"n_prompt", st.n_prompt},
                  {"n_generated", st.n_generated},
                  {"prefill_s", st.prefill_s},
                  {"decode_s", st.decode_s},
                  {"weight_bytes", st.weight_bytes},
                  {"threads", runner->pool()->size()},
                  {"amx", kernels::AmxActive()},
                  {"stream_decode", kernels::StreamDecodeEnabled()},
                  {"stream_prefetch", kernels::StreamPrefetchBytes()},
                  {"repacked_matrices", RepackedMatrices(runner->checkpoint())}};
    // Rank 0's seconds inside collectives during decode (waits for the
    // other ranks included): comm_s / decode_s is communication's share.
    j["stats"]["comm_s"] = st.comm_s;
    if (spec.algorithm != SpecAlgorithm::kNone) {
      // Where this run's acceptance estimate started: null, the blind prior.
      j["stats"]["acceptance_prior_p1"] =
          prior.observations() > 0 ? nlohmann::json(prior.p(1)) : nlohmann::json(nullptr);
      j["stats"]["accept_length_mean"] = st.accept_length_mean();
      j["stats"]["accept_hist"] = st.accept_hist;
      j["stats"]["target_forwards"] = st.target_forwards;
      j["stats"]["draft_s"] = st.draft_s;
      j["stats"]["verify_s"] = st.verify_s;
      // Auto shape: steps per chosen chain depth (0: plain) and the cost
      // model's mean predicted speedup (compare with "speedup" under --baseline).
      j["stats"]["auto_shape"] = spec.auto_shape;
      if (spec.auto_shape) {
        j["stats"]["draft_depth_hist"] = st.depth_hist;
        j["stats"]["predicted_speedup"] = st.predicted_speedup_mean();
      }
    }
    if (baseline_tok_s > 0) {
      // Over `baseline_rounds` alternating pairs of runs: the median rates,
      // and the geometric mean of the pairs' ratios with its 95% interval.
      j["stats"]["baseline_decode_tok_s"] = baseline_tok_s;
      j["stats"]["speculative_decode_tok_s"] = spec_tok_s;
      j["stats"]["baseline_rounds"] = rounds;
      j["stats"]["speedup"] = speedup.ratio;
      if (speedup.has_interval)
        j["stats"]["speedup_interval"] = {speedup.low, speedup.high};
    }
    if (oracle) {
      // Ideal speedup of a drafter with this acceptance: tau tokens per
      // step at the cost of drafting plus one verify pass of depth + 1
      // tokens, against one token per plain step (times measured at start).
      const double tau = st.accept_length_mean();
      const double steps = std::max(1, st.target_forwards);
      const double t1 = oracle_costs.Target(1), tn = oracle_costs.Target(oracle_depth + 1);
      const double ideal = tau * t1 / (st.draft_s / steps + tn);
      const double oracle_speedup = baseline_tok_s > 0 ? st.decode_tok_s() / baseline_tok_s : 0;
      j["oracle"] = {{"tau_target", f.oracle_tau}, {"tau", tau},
                     {"accept_p", spec.oracle_accept}, {"depth", oracle_depth},
                     {"t1_ms", t1 * 1e3}, {"t_verify_ms", tn * 1e3},
                     {"draft_ms_per_step", st.draft_s / steps * 1e3},
                     {"ideal_speedup", ideal}, {"speedup", oracle_speedup},
                     {"efficiency", ideal > 0 ? oracle_speedup / ideal : 0}};
    }
    if (f.profile) j["profile"] = ProfileJson(runner->profile());
    if (!cost.empty()) {
      nlohmann::json vc = nlohmann::json::array();
      for (size_t i = 0; i < cost.size(); ++i) {
        nlohmann::json c = {{"n", cost_sizes[i]},
                            {"ms", cost[i]},
                            {"weight_bytes", cost_reads[i].weight_bytes}};
        if (engine.config().moe.n_routed_experts > 0)
          c["experts_per_moe_layer"] = cost_reads[i].experts_per_moe_layer;
        if (i < cost_profiles.size()) c["profile"] = ProfileJson(cost_profiles[i])["decode"];
        vc.push_back(c);
      }
      j["forward_cost"] = vc;
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    if (stream) {
      std::string rest = stream->Flush();
      std::fwrite(rest.data(), 1, rest.size(), stdout);
      std::printf("\n");
    } else {
      for (size_t i = 0; i < res.tokens.size(); ++i)
        std::printf("%s%d", i ? "," : "", res.tokens[i]);
      std::printf("\n");
    }
    std::fflush(stdout);
    std::fprintf(stderr,
                 "[%d prompt tokens: %.1f tok/s prefill | %d generated: %.1f tok/s decode, "
                 "%.2f GB/s weights | finish: %s]\n",
                 st.n_prompt, st.prefill_tok_s(), st.n_generated, st.decode_tok_s(),
                 st.decode_gb_s(), res.finish_reason.c_str());
    if (spec.algorithm != SpecAlgorithm::kNone) {
      std::fprintf(stderr, "[speculative %s: mean acceptance length %.2f tokens per target forward",
                   f.spec.algorithm.c_str(), st.accept_length_mean());
      if (baseline_tok_s > 0)
        std::fprintf(stderr, " | plain decoding %.1f tok/s, speedup %.2fx%s", baseline_tok_s,
                     speedup.ratio,
                     rounds > 1 ? fmt::format(" ({} alternating runs each, 95% CI {:.2f}-{:.2f})",
                                              rounds, speedup.low, speedup.high).c_str()
                                : "");
      std::fprintf(stderr, " | draft %.0f%%, verify %.0f%% of decode time",
                   100 * st.draft_s / std::max(1e-9, st.decode_s),
                   100 * st.verify_s / std::max(1e-9, st.decode_s));
      if (spec.auto_shape) {
        std::string depths;
        for (size_t d = 0; d < st.depth_hist.size(); ++d)
          if (st.depth_hist[d] > 0)
            depths += fmt::format("{}{}:{}", depths.empty() ? "" : " ", d, st.depth_hist[d]);
        std::fprintf(stderr, " | auto shape, steps by depth {%s}, predicted speedup %.2fx",
                     depths.c_str(), st.predicted_speedup_mean());
      }
      std::fprintf(stderr, "]\n");
    }
  }
  if (f.profile) std::fputs(runner->profile().FormatTable().c_str(), stderr);
  if (!cost.empty()) {
    std::fprintf(stderr, "[forward over n tokens after %zu prompt tokens (median of %d):",
                 req.prompt.size(), f.verify_iters);
    for (size_t i = 0; i < cost_sizes.size(); ++i)
    {
      std::fprintf(stderr, " n=%d %.2f ms (%.2fx n=%d", cost_sizes[i], cost[i], cost[i] / cost[0],
                   cost_sizes[0]);
      if (engine.config().moe.n_routed_experts > 0)
        std::fprintf(stderr, ", %.1f experts/layer", cost_reads[i].experts_per_moe_layer);
      std::fprintf(stderr, ")");
    }
    std::fprintf(stderr, "]\n");
    for (size_t i = 0; i < cost_profiles.size(); ++i) {
      std::fputs(cost_profiles[i]
                     .FormatPhase(ProfPhase::kDecode, fmt::format("forward n={}", cost_sizes[i]))
                     .c_str(),
                 stderr);
    }
  }
  return Status::Ok();
}

}  // namespace

nlohmann::json ProfileJson(const OpProfile& p) {
  nlohmann::json j = nlohmann::json::object();
  const std::pair<ProfPhase, const char*> phases[] = {{ProfPhase::kPrefill, "prefill"},
                                                      {ProfPhase::kDecode, "decode"}};
  for (const auto& [phase, name] : phases) {
    const OpProfile::Cell& st = p.steps(phase);
    if (st.calls == 0) continue;
    nlohmann::json ops = nlohmann::json::object();
    for (int o = 0; o < static_cast<int>(ProfOp::kCount); ++o) {
      const OpProfile::Cell& c = p.cell(phase, static_cast<ProfOp>(o));
      if (c.calls == 0) continue;
      ops[ProfOpName(static_cast<ProfOp>(o))] = {{"ms", c.ns * 1e-6}, {"calls", c.calls}};
    }
    j[name] = {{"steps", st.calls}, {"step_ms_total", st.ns * 1e-6}, {"ops", ops}};
  }
  return j;
}

void AddGenerateCommand(CLI::App& root, int* exit_code) {
  // Owned for the whole process: the CLI's callbacks keep the pointer (and
  // bench's flag check adds a command per configuration).
  static std::vector<std::unique_ptr<GenerateFlags>> owned;
  auto* f = owned.emplace_back(std::make_unique<GenerateFlags>()).get();
  auto* sub = root.add_subcommand("generate", "Generate text from a prompt");
  AddEngineFlags(sub, &f->engine);
  auto* p = sub->add_option("-p,--prompt", f->prompt, "Prompt text (tokenized with the model's tokenizer)");
  auto* pi = sub->add_option("--prompt-ids", f->prompt_ids, "Prompt as token ids: 1,2,3");
  p->excludes(pi);
  sub->add_option("-n,--max-tokens", f->max_tokens, "Tokens to generate (default 128)");
  sub->add_option("--temperature", f->temperature, "0 = greedy (default 0)");
  sub->add_option("--top-k", f->top_k, "Keep the k most likely tokens (0 = off)");
  sub->add_option("--top-p", f->top_p, "Nucleus sampling mass (1 = off)");
  sub->add_option("--min-p", f->min_p, "Drop tokens below min_p x the top probability (0 = off)");
  sub->add_option("--seed", f->seed, "RNG seed: same seed, same output (default 0)");
  sub->add_flag("--ignore-eos", f->ignore_eos, "Keep generating past end-of-sequence tokens");
  AddSpecFlags(sub, &f->spec);
  sub->add_option("--oracle-tau", f->oracle_tau,
                  "With --speculative-algorithm ORACLE (benchmarks only): drafts the target's "
                  "own greedy continuation (computed first, as --baseline), corrupted so that a "
                  "step yields this many tokens on average (default 3; --speculative-num-steps "
                  "sets the chain depth, default 5); --json reports the speedup against the "
                  "ideal tau*t(1)/(t_draft + t_verify)");
  sub->add_flag("--baseline", f->baseline,
                "Also run plain decoding of the same request first and report the speedup "
                "(short runs alternate plain and speculative up to 5 times within about a "
                "second; the speedup is the geometric mean of the pairs' ratios)");
  sub->add_flag("--json", f->json,
                "Print one JSON object: token_ids (generated only), text, finish_reason, stats "
                "{prefill_tok_s, decode_tok_s, decode_gb_s, ...}");
  sub->add_flag("--profile", f->profile,
                "Time each op (matmul qkv / o / gate-up / down, lm_head, attention, norms, rope, "
                "allreduce, sampling, draft, verify) and print a table per phase (prefill, "
                "decode) on stderr; with --json also as \"profile\"");
  sub->add_option("--verify-cost", f->verify_cost,
                  "After generating, time one forward over N tokens (all logits, as a "
                  "verification pass) after the prompt, for each N of a list such as 1,4,8,16; "
                  "printed on stderr, with --json as \"forward_cost\": [{\"n\", \"ms\", "
                  "\"weight_bytes\" read, MoE: \"experts_per_moe_layer\"}]; "
                  "with --profile also a per-op table per N (\"profile\" in each entry)");
  sub->add_option("--verify-iters", f->verify_iters,
                  "Runs per --verify-cost size; the median is reported (default 10)");
  AddLaunchFlags(sub, &f->engine, &f->launch);
  sub->callback([f, exit_code, sub] {
    if (f->prompt.empty() && f->prompt_ids.empty()) f->prompt = "Once upon a time";
    ResolvedEngineOptions eo = ResolveEngineOptions(f->engine);
    // The embedded demo model runs with its EAGLE-3 head unless told otherwise.
    const std::string demo_head = std::string(SPECD_DEFAULT_MODEL) + "/eagle3";
    if (eo.default_model && sub->count("--speculative-algorithm") == 0 &&
        std::filesystem::exists(demo_head + "/config.json")) {
      f->spec.algorithm = "EAGLE3";
      f->spec.draft_model = demo_head;
    }
    // Tokenized here, before the ranks start: every rank sizes its KV cache
    // to this request.
    auto prepared = PreparePrompt(*f, eo.runner.model_path);
    if (!prepared.ok()) {
      LogStatus(prepared.status());
      *exit_code = 1;
      return;
    }
    auto kv_tokens = GenerateKvTokens(*f, static_cast<int>(prepared->ids.size()));
    auto spec = ToSpecOptions(f->spec);
    if (!kv_tokens.ok() || !spec.ok()) {
      LogStatus(!kv_tokens.ok() ? kv_tokens.status() : spec.status());
      *exit_code = 1;
      return;
    }
    eo.runner.kv_request_tokens = *kv_tokens;
    eo.runner.kv_request_extra = spec->MaxTreeTokens() - 1;
    *exit_code = RunOnRanks(eo, f->launch, [f, &eo, &prepared](ModelRunner& runner, Engine& engine) {
      return RunGenerate(*f, eo, *prepared, runner, engine);
    });
  });
}

}  // namespace specd::app
