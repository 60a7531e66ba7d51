// specd bench: one-command A/B benchmark of engine configurations.
//
// Every run is `specd generate --json` of this same binary as a child
// process, so a configuration is exactly a set of generate flags and each run
// starts from a fresh process (its own load, page-cache state as the
// configuration leaves it). Runs are interleaved, A B C A B C ..., so slow
// drift of the machine (other jobs, thermal state) hits every configuration
// alike, and each round gives one paired ratio per configuration.
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app/bench_child.h"
#include "app/commands.h"
#include "app/engine_flags.h"
#include "base/logging.h"
#include "base/sample_stats.h"
#include "loader/checkpoint.h"

namespace specd::app {
namespace {

using nlohmann::json;

struct BenchFlags {
  std::string model;
  std::string draft_model;
  bool has_compare = false;
  std::vector<std::string> compare;
  std::string common;
  int repeats = 3;
  int warmup = 1;
  int n_prompts = 2;
  int prompt_len = 64;
  int max_tokens = 64;
  std::string prompt_ids;
  bool json = false;
  std::string plot;
  bool profile = false;
  std::string verify_cost;
};

const char* const kRatioMethod =
    "geometric mean of per-round paired ratios (decode tok/s of the configuration / of the "
    "first, same round); 95% Student-t interval on the per-round log ratios";

struct Config {
  std::string label;              // A, B, ...
  std::string text;               // as given
  std::vector<std::string> args;  // generate flags
  json runs = json::array();
  std::vector<double> round_tok_s;
};

// Built-in workload: token-id prompts, so models without a tokenizer work.
// Prompt 0 is pseudo-random ids; prompt 1 repeats a 16-token phrase (text
// with repetition, where n-gram drafting has something to find); further
// prompts are pseudo-random with other seeds.
std::vector<std::vector<int32_t>> BuiltinPrompts(int n_prompts, int len, int vocab) {
  const int lo = std::min(vocab - 1, 3), hi = std::min(vocab, 32000);
  std::vector<std::vector<int32_t>> prompts;
  for (int p = 0; p < n_prompts; ++p) {
    uint64_t state = 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(p + 1);
    auto next = [&] {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      return lo + static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(std::max(1, hi - lo)));
    };
    std::vector<int32_t> ids;
    if (p == 1) {
      std::vector<int32_t> phrase(16);
      for (auto& t : phrase) t = next();
      for (int i = 0; i < len; ++i) ids.push_back(phrase[static_cast<size_t>(i) % phrase.size()]);
    } else {
      for (int i = 0; i < len; ++i) ids.push_back(next());
    }
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

std::string JoinIds(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

json SummaryJson(const Summary& s) {
  return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"q1", s.q1}, {"q3", s.q3},
          {"n", s.n}};
}

// Sums the per-op decode profile over runs: {op: {"ms", "calls"}}, steps.
json SumProfiles(const json& runs) {
  json ops = json::object();
  int64_t steps = 0;
  double step_ms = 0;
  for (const json& r : runs) {
    if (!r.contains("profile") || !r["profile"].contains("decode")) continue;
    const json& d = r["profile"]["decode"];
    steps += d["steps"].get<int64_t>();
    step_ms += d["step_ms_total"].get<double>();
    for (const auto& [name, v] : d["ops"].items()) {
      if (!ops.contains(name)) ops[name] = {{"ms", 0.0}, {"calls", int64_t{0}}};
      ops[name]["ms"] = ops[name]["ms"].get<double>() + v["ms"].get<double>();
      ops[name]["calls"] = ops[name]["calls"].get<int64_t>() + v["calls"].get<int64_t>();
    }
  }
  if (steps == 0) return nullptr;
  return {{"steps", steps}, {"step_ms_total", step_ms}, {"ops", ops}};
}

Status RunBench(const BenchFlags& f) {
  if (f.compare.empty()) return InvalidArgumentError("--compare: give at least one configuration");
  if (f.repeats < 1) return InvalidArgumentError("--repeats: must be >= 1");
  if (f.n_prompts < 1 || f.prompt_len < 1 || f.max_tokens < 2)
    return InvalidArgumentError("--prompts and --prompt-len must be >= 1, --max-tokens >= 2");
  const std::string model = ResolveModelPath(f.model);

  // Flags every run gets; a configuration's own flags come last and win.
  ASSIGN_OR_RETURN(std::vector<std::string> common, SplitFlags(f.common));
  common.insert(common.begin(), {"--model", model});
  if (!f.draft_model.empty()) common.insert(common.end(), {"--draft-model", f.draft_model});
  if (f.profile) common.push_back("--profile");

  // Parse every configuration before running anything.
  const std::vector<std::string> owned = {"--json", "--prompt", "-p", "--prompt-ids",
                                          "--max-tokens", "-n", "--baseline", "--verify-cost"};
  std::vector<Config> configs;
  for (size_t i = 0; i < f.compare.size(); ++i) {
    Config c;
    c.label = i < 26 ? std::string(1, static_cast<char>('A' + i)) : fmt::format("C{}", i + 1);
    c.text = f.compare[i];
    const std::string name = fmt::format("configuration {} \"{}\"", c.label, c.text);
    auto args = SplitFlags(c.text);
    if (!args.ok()) return InvalidArgumentError(name + ": " + args.status().message());
    c.args = *args;
    for (const std::string& a : c.args) {
      std::string flag = a.substr(0, a.find('='));
      if (std::find(owned.begin(), owned.end(), flag) != owned.end())
        return InvalidArgumentError(fmt::format("{}: {} is set by specd bench itself (see "
                                                "specd bench --help)", name, flag));
    }
    std::vector<std::string> all = common;
    all.insert(all.end(), c.args.begin(), c.args.end());
    Status s = CheckGenerateFlags(all);
    if (!s.ok())
      return InvalidArgumentError(name + ": not valid specd generate flags: " + s.message());
    configs.push_back(std::move(c));
  }

  std::vector<std::vector<int32_t>> prompts;
  if (!f.prompt_ids.empty()) {
    std::vector<int32_t> ids;
    std::stringstream ss(f.prompt_ids);
    std::string item;
    while (std::getline(ss, item, ',')) {
      char* end = nullptr;
      long v = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != 0 || v < 0 || v > INT32_MAX)
        return InvalidArgumentError("--prompt-ids: '" + item + "' is not a token id");
      ids.push_back(static_cast<int32_t>(v));
    }
    prompts.push_back(ids);
  } else {
    LoadOptions lo;
    ASSIGN_OR_RETURN(auto ck, OpenCheckpoint(model, lo));
    prompts = BuiltinPrompts(f.n_prompts, f.prompt_len, ck->config().vocab_size);
  }

  auto run_args = [&](const Config& c, const std::vector<int32_t>& prompt, int max_tokens,
                      bool cost) {
    std::vector<std::string> a = {"generate", "--json", "--ignore-eos", "--prompt-ids",
                                  JoinIds(prompt), "--max-tokens", std::to_string(max_tokens)};
    a.insert(a.end(), common.begin(), common.end());
    if (cost) a.insert(a.end(), {"--verify-cost", f.verify_cost, "--verify-iters", "3"});
    a.insert(a.end(), c.args.begin(), c.args.end());
    return a;
  };
  const double load_start = LoadAverage1();
  // Warm-up: loads each configuration once (page cache, and any error that
  // only shows at run time, e.g. a missing draft model), untimed.
  for (int w = 0; w < f.warmup; ++w) {
    for (Config& c : configs) {
      std::fprintf(stderr, "[warm-up] %s \"%s\"\n", c.label.c_str(), c.text.c_str());
      auto r = RunSelfJson(run_args(c, prompts[0], 2, false));
      if (!r.ok())
        return InvalidArgumentError(fmt::format("configuration {} \"{}\": {}", c.label, c.text,
                                                r.status().message()));
    }
  }
  for (int round = 0; round < f.repeats; ++round) {
    for (Config& c : configs) {
      double tokens = 0, seconds = 0;
      for (size_t p = 0; p < prompts.size(); ++p) {
        const bool cost = !f.verify_cost.empty() && p == 0;
        auto r = RunSelfJson(run_args(c, prompts[p], f.max_tokens, cost));
        if (!r.ok())
          return InternalError(fmt::format("configuration {} \"{}\", round {}: {}", c.label, c.text,
                                           round + 1, r.status().message()));
        const json& st = (*r)["stats"];
        json run = {{"round", round},
                    {"prompt", p},
                    {"decode_tok_s", st["decode_tok_s"]},
                    {"decode_gb_s", st["decode_gb_s"]},
                    {"prefill_s", st["prefill_s"]},
                    {"prefill_tok_s", st["prefill_tok_s"]},
                    {"decode_s", st["decode_s"]},
                    {"n_prompt", st["n_prompt"]},
                    {"n_generated", st["n_generated"]},
                    {"weight_bytes", st.value("weight_bytes", uint64_t{0})},
                    {"threads", st.value("threads", 0)}};
        if (st.contains("accept_length_mean")) run["accept_length_mean"] = st["accept_length_mean"];
        for (const char* k : {"draft_depth_hist", "predicted_speedup"})
          if (st.contains(k)) run[k] = st[k];
        if (r->contains("profile")) run["profile"] = (*r)["profile"];
        if (r->contains("forward_cost")) run["forward_cost"] = (*r)["forward_cost"];
        tokens += st["n_generated"].get<double>() - 1;
        seconds += st["decode_s"].get<double>();
        c.runs.push_back(std::move(run));
      }
      c.round_tok_s.push_back(seconds > 0 ? tokens / seconds : 0);
      std::fprintf(stderr, "[round %d/%d] %s \"%s\": %.2f tok/s decode\n", round + 1, f.repeats,
                   c.label.c_str(), c.text.c_str(), c.round_tok_s.back());
    }
  }
  const double load_end = LoadAverage1();

  // Report.
  json out = {{"model", model},
              {"workload",
               {{"prompts", prompts.size()},
                {"prompt_len", prompts[0].size()},
                {"max_tokens", f.max_tokens},
                {"repeats", f.repeats},
                {"warmup", f.warmup},
                {"common_flags", common}}},
              {"load_avg", {{"start", load_start}, {"end", load_end}}},
              {"ratio_method", kRatioMethod},
              {"configs", json::array()}};
  for (Config& c : configs) {
    std::vector<double> ttft_ms, prefill_tok_s, accept;
    for (const json& r : c.runs) {
      ttft_ms.push_back(r["prefill_s"].get<double>() * 1e3);
      prefill_tok_s.push_back(r["prefill_tok_s"].get<double>());
      if (r.contains("accept_length_mean")) accept.push_back(r["accept_length_mean"].get<double>());
    }
    RatioInterval ratio = PairedRatio(configs[0].round_tok_s, c.round_tok_s);
    json jc = {{"label", c.label},
               {"config", c.text},
               {"args", c.args},
               {"decode_tok_s", SummaryJson(Summarize(c.round_tok_s))},
               {"ttft_ms", SummaryJson(Summarize(ttft_ms))},
               {"prefill_tok_s", SummaryJson(Summarize(prefill_tok_s))},
               {"accept_length_mean", accept.empty() ? json(nullptr)
                                                     : json(Summarize(accept).median)},
               {"ratio",
                {{"vs", configs[0].label},
                 {"ratio", ratio.ratio},
                 {"ci_low", ratio.has_interval ? json(ratio.low) : json(nullptr)},
                 {"ci_high", ratio.has_interval ? json(ratio.high) : json(nullptr)}}},
               {"runs", c.runs}};
    jc["decode_tok_s"]["rounds"] = c.round_tok_s;
    if (f.profile) jc["profile"] = SumProfiles(c.runs);
    if (!f.verify_cost.empty()) {
      std::map<int, std::vector<double>> by_n;
      for (const json& r : c.runs)
        if (r.contains("forward_cost"))
          for (const json& e : r["forward_cost"]) by_n[e["n"].get<int>()].push_back(e["ms"]);
      json fc = json::array();
      for (auto& [n, v] : by_n) fc.push_back({{"n", n}, {"ms", Summarize(v).median}});
      jc["forward_cost"] = fc;
    }
    out["configs"].push_back(jc);
  }
  if (f.json) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::fputs(FormatBenchReport(out).c_str(), stdout);
  }
  std::fflush(stdout);
  if (!f.plot.empty()) {
    Status s = PlotBench(out, f.plot);
    if (!s.ok()) LogStatus(s.WithStage("plot"));
  }
  return Status::Ok();
}

}  // namespace

void AddBenchCommand(CLI::App& root, int* exit_code) {
  // Owned for the whole process: the CLI's callbacks keep the pointer (and
  // bench's flag check adds a command per configuration).
  static std::vector<std::unique_ptr<BenchFlags>> owned;
  auto* f = owned.emplace_back(std::make_unique<BenchFlags>()).get();
  auto* sub = root.add_subcommand(
      "bench",
      "A/B benchmark of engine configurations: the same workload under each configuration,\n"
      "runs interleaved (A B C A B C ...) so machine drift cancels.\n\n"
      "  specd bench --model M --compare \"\" \"--mmap\" \"--threads 1\"\n"
      "  specd bench --model M --compare \"\" \"--speculative-algorithm NGRAM\" --json\n\n"
      "Each run is `specd generate --json` of this binary in a child process, with\n"
      "--model, the workload, --common flags and then the configuration's flags.\n"
      "Table: decode tok/s per round (median [min, max]), TTFT (prefill of the prompt\n"
      "plus the first token), prefill tok/s, acceptance length (speculative configs),\n"
      "and the ratio to the first configuration: the geometric mean of per-round paired\n"
      "ratios with a 95% Student-t interval on the log ratios (needs --repeats >= 2).");
  sub->add_option("-m,--model", f->model,
                  "Model folder or .gguf (default: $SPECD_MODEL, else the embedded demo model)");
  sub->add_option("--draft-model", f->draft_model, "EAGLE-3 head passed to every configuration");
  // Configuration strings start with "--", which CLI11 would take for
  // options: --compare is a marker and the strings are collected as extras,
  // in command-line order.
  sub->add_flag("--compare", f->has_compare,
                "Followed by the configurations, one string each: extra specd generate flags, "
                "e.g. \"\" \"--mmap\" \"--tp 2 --allreduce-algo mpi\" "
                "\"--speculative-algorithm NGRAM\"; the first is the baseline of the ratios. "
                "A configuration that is exactly one of bench's own flags needs a leading space");
  sub->allow_extras();
  sub->add_option("--common", f->common, "Flags for every configuration, e.g. \"--threads 2\"");
  sub->add_option("-r,--repeats", f->repeats, "Rounds of interleaved runs (default 3)");
  sub->add_option("--warmup", f->warmup,
                  "Untimed warm-up rounds (2 tokens each; default 1): page cache, and errors of "
                  "a configuration show before the long runs");
  sub->add_option("--prompts", f->n_prompts,
                  "Built-in token-id prompts per round (default 2: random ids, and a repeated "
                  "16-token phrase)");
  sub->add_option("--prompt-len", f->prompt_len, "Tokens per built-in prompt (default 64)");
  sub->add_option("-n,--max-tokens", f->max_tokens, "Tokens generated per run (default 64)");
  sub->add_option("--prompt-ids", f->prompt_ids, "One prompt of token ids (1,2,3) instead");
  sub->add_flag("--json", f->json,
                "Print one JSON object (shape in README.md) instead of the table");
  sub->add_option("--plot", f->plot,
                  "Also draw decode tok/s (median, min-max error bars) to FILE.svg or FILE.png "
                  "with gnuplot (skipped with a message when gnuplot is missing)");
  sub->add_flag("--profile", f->profile,
                "Run every configuration with --profile and report the per-op decode profile");
  sub->add_option("--verify-cost", f->verify_cost,
                  "Also time one forward over N tokens for each N of a list such as 1,4,8,16 "
                  "(first prompt of each round)");
  // Scripts append overrides to a base command line: the last value wins.
  for (const char* name : {"--repeats", "--warmup", "--prompts", "--prompt-len", "--max-tokens",
                           "--model", "--common"})
    sub->get_option(name)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub->callback([f, exit_code, sub] {
    f->compare = sub->remaining();
    Status s = f->has_compare || f->compare.empty()
                   ? RunBench(*f)
                   : InvalidArgumentError("unexpected arguments before --compare: " +
                                          f->compare[0]);
    if (!s.ok()) {
      LogStatus(s.WithStage("bench"));
      *exit_code = s.code() == StatusCode::kInvalidArgument ? 2 : 1;
      return;
    }
    *exit_code = 0;
  });
}

}  // namespace specd::app
