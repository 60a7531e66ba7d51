#include "runtime/step_costs.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>

#include "base/clock.h"
#include "base/logging.h"

namespace specd {
namespace {

// The fastest run: another process can only make a run slower, so the
// minimum is the least disturbed estimate on a shared machine.
double Fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

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
  std::vector<double> at(max_tokens + 1, 0);
  for (int n : sizes) {
    in.tokens.clear();
    for (int i = 0; i < n; ++i) in.tokens.push_back(token(context + i));
    in.all_logits = true;
    std::vector<double> runs;
    for (int r = 0; r <= std::max(1, reps); ++r) {
      Stopwatch sw;
      RETURN_IF_ERROR(engine.Forward({in}, false, &out).WithStage("step costs"));
      if (r > 0) runs.push_back(sw.Seconds());
      RETURN_IF_ERROR(engine.Apply(KvEdit::Truncate(seq, context)));
    }
    at[n] = Fastest(runs);
  }
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
    const int H = head->hidden_dim();
    std::vector<float> hidden(static_cast<size_t>(context) * H, 0.f), hid, logits;
    std::vector<int32_t> toks, pos;
    for (int i = 0; i < context; ++i) {
      toks.push_back(token(i));
      pos.push_back(i);
    }
    RETURN_IF_ERROR(head->Forward(&st, toks, hidden.data(), false, pos, 0, {}, &hid, &logits));
    std::vector<double> runs;
    for (int r = 0; r <= std::max(1, reps); ++r) {
      Stopwatch sw;
      RETURN_IF_ERROR(head->Forward(&st, {token(r)}, hidden.data(), false, {context}, 0, {}, &hid,
                                    &logits));
      if (r > 0) runs.push_back(sw.Seconds());
      head->Truncate(&st, context);
    }
    costs.draft_step = Fastest(runs);
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
        static_cast<int>(j["target"].size()) == max_tokens && j["draft_step"].is_number()) {
      StepCosts c;
      bool ok = true;
      for (const auto& v : j["target"]) {
        ok &= v.is_number() && v.get<double>() > 0;
        if (ok) c.target.push_back(v.get<double>());
      }
      c.draft_step = j["draft_step"].get<double>();
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
  out << nlohmann::json{{"key", key}, {"target", c.target}, {"draft_step", c.draft_step}}.dump();
  out.close();
  if (!out || (std::filesystem::rename(path + ".tmp", path, ec), ec))
    LOG_WARN("step costs", "could not cache the step costs in {}", path);
  return c;
}

}  // namespace specd
