#include "app/engine_flags.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include "base/env.h"
#include "base/meminfo.h"
#include "kernels/dispatch.h"
#include "kernels/read_calibration.h"

namespace specd::app {

void AddEngineFlags(CLI::App* sub, EngineFlags* f) {
  sub->add_option("-m,--model", f->model,
                  "Model: a Hugging Face folder (config.json + *.safetensors) or a .gguf file "
                  "(default: $SPECD_MODEL, else the embedded demo model)");
  sub->add_option("-t,--threads", f->threads,
                  "Threads per rank, fixed (default: up to cores / tp, one fewer while other "
                  "processes keep workers off their cores, retried after a back-off)");
  auto* mm = sub->add_flag("--mmap", f->mmap,
                           "mmap the weight files (zero copy, shared page cache; pages faulted "
                           "in at load) instead of reading them into anonymous huge-page memory");
  sub->add_flag("--no-mmap", f->no_mmap,
                "Read weights into anonymous memory (the default; see docs/performance.md)")
      ->excludes(mm);
  sub->add_option("--quantize", f->quantize,
                  "Quantize float weight matrices to q8_0 or q4_0 while loading (same quantizer "
                  "as specd quantize)")
      ->check(CLI::IsMember({"q8_0", "q4_0"}));
  sub->add_option("--check-tensors", f->check_tensors,
                  "NaN/Inf scan of the weights at load: default (norms, embeddings and the "
                  "block scales of quantized tensors), full (every float) or off; overlapping "
                  "tensor bytes are always refused")
      ->check(CLI::IsMember({"off", "default", "full"}));
  sub->add_option("--kv-cache-tokens", f->kv_cache_tokens,
                  "KV cache capacity in tokens, all sequences together (default: generate sizes "
                  "it to its request; serve from --kv-cache-memory)");
  sub->add_option("--kv-cache-memory", f->kv_cache_memory,
                  "KV cache memory, all ranks together: 512M, 2G (a plain number is MiB); serve's "
                  "default is 25% of the memory available once the weights are loaded, at most 4 "
                  "x context (the log line says how many tokens); --kv-cache-tokens overrides")
      ->check([](const std::string& v) {
        auto r = ParseMemorySize(v, "--kv-cache-memory");
        return r.ok() ? std::string() : r.status().message();
      });
  sub->add_flag("--no-fuse-allreduce-norm", f->no_fuse_allreduce_norm,
                "Run allreduce, residual add and RMSNorm as three passes (A/B baseline)");
  sub->add_flag("--ep", f->ep,
                "Mixture-of-experts models under --tp: each rank holds whole routed experts "
                "(n_routed_experts / tp of them) instead of a slice of every expert; attention "
                "and shared experts stay split, still two allreduces per layer");
  sub->add_option("--matmul-split", f->matmul_split,
                  "How matmul rows are shared among threads: dynamic (each thread takes the "
                  "chunks of its own range in order, then those the others have not started; "
                  "the default) or static (one equal range per thread; A/B baseline)")
      ->check(CLI::IsMember({"dynamic", "static"}));
  sub->add_option("--pool-spin-us", f->pool_spin_us,
                  "Microseconds an idle compute thread spins before sleeping (default 50, or "
                  "$SPECD_POOL_SPIN_US): longer catches the next op without a wake-up, shorter "
                  "leaves the core to other ranks")
      ->check(CLI::Range(0.0, 100000.0));
  sub->add_flag("--no-prefetch", f->no_prefetch,
                "Do not prefetch weight rows in software in any matmul kernel: neither rows "
                "ahead (multi-token and --no-stream-decode kernels) nor along the row "
                "(--stream-prefetch) (A/B baseline)");
  sub->add_flag("--no-stream-decode", f->no_stream_decode,
                "Decode (one-token matmuls) reads 4 weight rows side by side with software "
                "prefetch instead of one row at a time front to back (A/B baseline; see "
                "docs/performance.md)");
  sub->add_flag("--no-repack", f->no_repack,
                "Keep Q4_0 / Q8_0 / BF16 weights in the file's layout instead of repacking them at "
                "load into 16-row groups for the AVX512-VNNI / AVX512-BF16 kernels (done where "
                "that path is active without AMX, weights in anonymous memory, no --tp; A/B "
                "baseline, same outputs)");
  sub->add_option("--stream-prefetch", f->stream_prefetch,
                  "Software prefetch along the row in stream decode: auto (default: measured once "
                  "at start-up, on only where it reads faster on this machine; the choice is "
                  "logged), on (1024 bytes ahead) or off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  // Sets the kernels' process-wide mode while the flags are parsed (before any
  // matmul runs).
  sub->add_flag_callback(
      "--deterministic", [] { kernels::SetBatchInvariant(true); },
      "Batch-invariant kernels: a token's logits are bitwise the same however many tokens share "
      "its forward pass (speculative greedy == plain greedy bit for bit). Q8_0/Q4_0/Q4_BF16/"
      "F32/F16 weights are so without the flag; it keeps BF16 matmuls off the AMX tiles "
      "(docs/performance.md, \"Batch invariance\"; also SPECD_DETERMINISTIC=1)");
  sub->add_flag("--no-amx", f->no_amx,
                "Do not use AMX tiles for Q8_0/Q4_0/BF16 matmuls of many tokens (prefill, "
                "verify); they then run on AVX512-VNNI / AVX512-BF16 (A/B baseline; also "
                "SPECD_AMX=0)");
}

void AddSpecFlags(CLI::App* sub, SpecFlags* f) {
  sub->add_option("--speculative-algorithm", f->algorithm,
                  "NONE, EAGLE3 (needs --draft-model) or NGRAM (prompt lookup); default NONE");
  sub->add_option(
      "--draft-model", f->draft_model,
      "EAGLE-3 draft head folder (config.json with LlamaForCausalLMEagle3 + safetensors)");
  sub->add_option("--speculative-num-steps", f->num_steps,
                  "Draft tree depth, or auto (default): each step the cost model picks the "
                  "chain depth (0 = a plain step) that maximises expected tokens/s from the "
                  "forward times measured at start and this sequence's acceptance so far. A "
                  "number (or --speculative-eagle-topk / --speculative-num-draft-tokens) fixes "
                  "the shape for A/B runs (then default depth 5)");
  sub->add_option("--speculative-eagle-topk", f->topk,
                  "Fixed shape: children expanded per node; 1 drafts a chain (default 4)");
  sub->add_option("--speculative-num-draft-tokens", f->num_draft_tokens,
                  "Fixed shape: tree nodes verified per step, root included (default 8)");
  sub->add_flag("--no-acceptance-cache", f->no_acceptance_cache,
                "Auto shapes: start from p = 0.5 instead of the acceptance that earlier runs of "
                "this model and drafter measured (kept beside the step costs in "
                "$XDG_CACHE_HOME/specd; A/B baseline), and do not update it");
}

StatusOr<SpecOptions> ToSpecOptions(const SpecFlags& f) {
  SpecOptions o;
  ASSIGN_OR_RETURN(o.algorithm, ParseSpecAlgorithm(f.algorithm));
  o.auto_shape = f.num_steps == "auto" && f.topk == 0 && f.num_draft_tokens == 0;
  if (f.num_steps != "auto") {
    char* end = nullptr;
    const long v = std::strtol(f.num_steps.c_str(), &end, 10);
    if (f.num_steps.empty() || *end != '\0' || v < 1 || v > 64)
      return InvalidArgumentError("--speculative-num-steps: expected auto or a depth in [1, 64], "
                                  "got '" + f.num_steps + "'");
    o.tree.num_steps = static_cast<int>(v);
  }
  if (f.topk != 0) o.tree.topk = f.topk;
  if (f.num_draft_tokens != 0) o.tree.num_draft_tokens = f.num_draft_tokens;
  RETURN_IF_ERROR(o.tree.Validate());
  if (o.algorithm == SpecAlgorithm::kEagle3 && f.draft_model.empty())
    return InvalidArgumentError("--speculative-algorithm EAGLE3 needs --draft-model PATH");
  return o;
}

std::string ResolveModelPath(const std::string& model_flag, bool* is_default) {
  if (is_default != nullptr) *is_default = false;
  if (!model_flag.empty()) return model_flag;
  if (auto env = GetEnv(EnvVar::kModel)) return *env;
  if (is_default != nullptr) *is_default = true;
  return SPECD_DEFAULT_MODEL;
}

ResolvedEngineOptions ResolveEngineOptions(const EngineFlags& f) {
  ResolvedEngineOptions r;
  r.tp = f.tp;
  RunnerOptions& o = r.runner;
  o.model_path = ResolveModelPath(f.model, &r.default_model);
  o.load.use_mmap = f.mmap && !f.no_mmap;
  o.load.populate = o.load.use_mmap;
  if (!f.quantize.empty()) o.load.quantize = f.quantize == "q4_0" ? DType::kQ4_0 : DType::kQ8_0;
  if (auto c = ParseCheckTensors(f.check_tensors); c.ok()) o.load.check_tensors = *c;
  int cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  o.threads = f.threads > 0 ? f.threads : std::max(1, cores / std::max(1, f.tp));
  o.adapt_threads = f.threads <= 0;
  o.kv_cache_tokens = f.kv_cache_tokens;
  if (!f.kv_cache_memory.empty()) {
    if (auto b = ParseMemorySize(f.kv_cache_memory, "--kv-cache-memory"); b.ok())
      o.kv_cache_bytes = *b;
  }
  o.transformer.fuse_allreduce_norm = !f.no_fuse_allreduce_norm;
  o.expert_parallel = f.ep;
  o.pool_spin_us = f.pool_spin_us;
  o.weight_prefetch = !f.no_prefetch;
  o.stream_decode = !f.no_stream_decode;
  o.stream_prefetch = f.stream_prefetch == "auto" ? -1
                      : f.stream_prefetch == "on" ? kernels::kStreamPrefetchBytes
                                                  : 0;
  o.amx = !f.no_amx;
  o.repack = !f.no_repack;
  o.matmul_split =
      f.matmul_split == "static" ? kernels::MatMulSplit::kStatic : kernels::MatMulSplit::kDynamic;
  return r;
}

}  // namespace specd::app
