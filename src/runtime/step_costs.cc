#include "runtime/step_costs.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>

#include "base/clock.h"
#include "base/logging.h"
#include "spec/speculator.h"
#include "spec/tree_search.h"

namespace specd {
namespace {

// Of a few runs the fastest: another process can only make a run slower, so
// the minimum is the least disturbed estimate on a shared machine. Of many
// (a small model, run for kMinSeconds) the median: the fastest of many
// 0.2 ms runs catches a size with every cache warm, which the steps in use
// (a draft between two verify passes) never see, and t(2) / t(1), on which
// drafting a small model hinges, came out 1.15 for 1.3-1.5 in use.
double Typical(std::vector<double> v) {
  if (v.size() < 9) return *std::min_element(v.begin(), v.end());
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// A small model's forward takes a fraction of a millisecond, where the
// fastest of 3 still varies by a third between runs: sizes are run for at
// least kMinSeconds each, up to kMaxReps times: a few rounds, of which the
// fastest is taken, leave the ratio t(2) / t(1), on which drafting a small
// model hinges, to chance; tens of rounds give it a median.
constexpr double kMinSeconds = 0.015;
constexpr int kMaxReps = 50;

}  // namespace

StatusOr<StepCosts> MeasureStepCosts(Engine& engine, Eagle3Head* head, int max_tokens, int reps,
                                     int context) {
  Stopwatch total;
  const ModelConfig& c = engine.config();
  context = std::max(1, std::min(context, c.max_seq_len - max_tokens - 1));
  max_tokens = std::max(1, std::min(max_tokens, c.max_seq_len - context - 1));
  const ScopedSequence sequence(engine);
  const int seq = sequence.id();
  // Token ids do not change the cost; any valid ids will do.
  auto token = [&](int i) { return static_cast<int32_t>((i * 7 + 1) % c.vocab_size); };
  SeqInput in;
  in.seq = seq;
  for (int i = 0; i < context; ++i) in.tokens.push_back(token(i));
  ForwardOutput out;
  RETURN_IF_ERROR(engine.Forward({in}, false, &out).WithStage("step costs"));
  // Measured sizes; the rest is interpolated between them.
  std::vector<int> sizes;
  for (int n : {1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64})
    if (n <= max_tokens) sizes.push_back(n);
  if (sizes.back() != max_tokens) sizes.push_back(max_tokens);
  // Each size as a verify pass of a chain: positions, the chain's ancestor
  // mask (the masked attention path) and, with a draft head, the capture of
  // its hidden states.
  std::vector<SeqInput> inputs;
  for (int n : sizes) {
    SeqInput v;
    v.seq = seq;
    for (int i = 0; i < n; ++i) {
      v.tokens.push_back(token(context + i));
      v.pos.push_back(context + i);
    }
    v.tree_mask.assign(n > 1 ? static_cast<size_t>(n) * n : 0, 0);
    for (int i = 0; i < n && n > 1; ++i)
      for (int j = 0; j <= i; ++j) v.tree_mask[static_cast<size_t>(i) * n + j] = 1;
    v.all_logits = true;
    inputs.push_back(std::move(v));
  }
  // Rounds over every size (1, 2, 3, ..., 1, 2, 3, ...), the first one
  // untimed: sizes measured one after another each catch a different moment
  // (the first ones the kernels' and the caches' warm-up, a later one another
  // process), which moves the ratios t(n) / t(1) the choice hinges on.
  // Interleaved, a disturbance falls on every size alike.
  std::vector<std::vector<double>> runs(sizes.size());
  Stopwatch spent;
  const double budget = kMinSeconds * static_cast<double>(sizes.size());
  for (int r = 0; r <= std::max(1, reps) || (r <= kMaxReps && spent.Seconds() < budget); ++r) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      Stopwatch sw;
      RETURN_IF_ERROR(engine.Forward({inputs[k]}, head != nullptr, &out).WithStage("step costs"));
      if (r > 0) runs[k].push_back(sw.Seconds());
      RETURN_IF_ERROR(engine.Apply(KvEdit::Truncate(seq, context)));
    }
  }
  std::vector<double> at(max_tokens + 1, 0);
  for (size_t k = 0; k < sizes.size(); ++k) at[sizes[k]] = Typical(runs[k]);
  StepCosts costs;
  costs.target.resize(max_tokens);
  for (int n = 1; n <= max_tokens; ++n) {
    size_t k = 0;
    while (k + 1 < sizes.size() && sizes[k + 1] <= n) ++k;
    const int a = sizes[k], b = k + 1 < sizes.size() ? sizes[k + 1] : a;
    costs.target[n - 1] = b == a ? at[a] : at[a] + (at[b] - at[a]) * (n - a) / (b - a);
  }
  // Monotone: a forward over more tokens never costs less (noise aside).
  for (int n = 1; n < max_tokens; ++n)
    costs.target[n] = std::max(costs.target[n], costs.target[n - 1]);
  if (head != nullptr) {
    Eagle3Head::State st;
    const int H = head->hidden_dim(), V = head->draft_vocab();
    std::vector<float> hidden(static_cast<size_t>(context) * H, 0.f), hid, logits;
    std::vector<int32_t> toks, pos;
    for (int i = 0; i < context; ++i) {
      toks.push_back(token(i));
      pos.push_back(i);
    }
    RETURN_IF_ERROR(head->Forward(&st, toks, hidden.data(), false, pos, 0, {}, &hid, &logits));
    // Feeds the head m accepted rows from the target's captured hidden
    // states (3 per row), as Speculator does before a draft.
    const int max_rows = std::min(Speculator::kMaxPendingRows, context);
    std::vector<float> aux(static_cast<size_t>(max_rows) * 3 * c.hidden_dim, 0.f);
    auto feed = [&](int m) -> Status {
      std::vector<int32_t> rows_tok, rows_pos;
      for (int i = 0; i < m; ++i) {
        rows_tok.push_back(token(i));
        rows_pos.push_back(context + i);
      }
      RETURN_IF_ERROR(head->Forward(&st, rows_tok, aux.data(), /*from_aux=*/true, rows_pos,
                                    st.length, {}, &hid, &logits, /*last_logits_only=*/true));
      st.last_hidden.assign(hid.end() - H, hid.end());
      st.last_logits.assign(logits.end() - V, logits.end());
      return Status::Ok();
    };
    std::vector<double> runs;
    auto time = [&](const std::function<Status()>& fn) -> StatusOr<double> {
      runs.clear();
      Stopwatch spent;
      for (int r = 0; r <= std::max(1, reps) || (r <= kMaxReps && spent.Seconds() < kMinSeconds);
           ++r) {
        // After a target step, as in decoding: its weights have pushed the
        // head's out of the caches (a warm head drafts in half the time).
        in.tokens = {token(context)};
        in.pos = {context};
        in.tree_mask.clear();
        RETURN_IF_ERROR(engine.Forward({in}, true, &out).WithStage("step costs"));
        RETURN_IF_ERROR(engine.Apply(KvEdit::Truncate(seq, context)));
        Stopwatch sw;
        RETURN_IF_ERROR(fn());
        if (r > 0) runs.push_back(sw.Seconds());
        head->Truncate(&st, context);
      }
      return Typical(runs);
    };
    // Drafting as the cost model charges it: a chain of k tokens (tree search
    // included) is k head forwards, the first feeding the head one accepted
    // row (whose logits propose depth 1), after the target's forward; the
    // further ones find the head's weights in the caches.
    auto chain_of = [&](int k) {
      return time([&]() -> Status {
        TreeParams chain;
        chain.num_steps = k;
        chain.topk = 1;
        chain.num_draft_tokens = k + 1;
        RETURN_IF_ERROR(feed(1));
        return DraftEagleTree(*head, &st, token(0), context + 1, chain).status();
      });
    };
    constexpr int kChain = 4;
    ASSIGN_OR_RETURN(costs.draft_first, chain_of(1));
    ASSIGN_OR_RETURN(const double chain, chain_of(kChain));
    costs.draft_step = std::max(chain - costs.draft_first, 0.0) / (kChain - 1);
    // Noise can leave a further step at nothing; it costs at least a forward
    // over one row, of which the first is an upper bound.
    if (costs.draft_step <= 0) costs.draft_step = costs.draft_first / 2;
    // The catch-up after a plain stretch: the newest rows the head was not fed.
    ASSIGN_OR_RETURN(costs.catch_up, time([&] { return feed(max_rows); }));
  }
  LOG_INFO("step costs", "measured in {:.2f} s: {}", total.Seconds(), costs.Summary());
  return costs;
}

StatusOr<StepCosts> CachedStepCosts(Engine& engine, Eagle3Head* head, int max_tokens,
                                    const std::string& key, const std::string& cache_dir) {
  const std::string path =
      fmt::format("{}/step-costs-{:016x}.json", cache_dir, std::hash<std::string>{}(key));
  {
    std::ifstream in(path);
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.value("key", "") == key && j["target"].is_array() &&
        static_cast<int>(j["target"].size()) == max_tokens && j["draft_step"].is_number() &&
        j["draft_first"].is_number() &&
        j["catch_up"].is_number()) {
      StepCosts c;
      bool ok = true;
      for (const auto& v : j["target"]) {
        ok &= v.is_number() && v.get<double>() > 0;
        if (ok) c.target.push_back(v.get<double>());
      }
      c.draft_step = j["draft_step"].get<double>();
      c.draft_first = j["draft_first"].get<double>();
      c.catch_up = j["catch_up"].get<double>();
      if (ok && (head == nullptr) == (c.draft_step == 0)) {
        LOG_INFO("step costs", "from {}: {}", path, c.Summary());
        return c;
      }
    }
  }
  ASSIGN_OR_RETURN(StepCosts c, MeasureStepCosts(engine, head, max_tokens));
  std::error_code ec;
  std::filesystem::create_directories(cache_dir, ec);
  std::ofstream out(path + ".tmp");
  out << nlohmann::json{{"key", key},
                        {"target", c.target},
                        {"draft_first", c.draft_first},
                        {"draft_step", c.draft_step},
                        {"catch_up", c.catch_up}}.dump();
  out.close();
  if (!out || (std::filesystem::rename(path + ".tmp", path, ec), ec))
    LOG_WARN("step costs", "could not cache the step costs in {}", path);
  return c;
}

int StepCostTokens(const SpecOptions& spec, int max_batch) {
  const int chain = spec.max_auto_depth + 1;
  return std::max(chain, std::min(64, std::max(1, max_batch) * chain));
}

}  // namespace specd
