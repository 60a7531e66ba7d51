// What every rank runs: its shard of the target model, its KV cache, and the
// code that applies a step descriptor. Rank 0's Engine and the other ranks'
// worker loop both go through Execute, so their KV caches stay identical.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "comm/communicator.h"
#include "kernels/dispatch.h"
#include "kernels/thread_pool.h"
#include "loader/checkpoint.h"
#include "model/kv_cache.h"
#include "model/model.h"
#include "runtime/step.h"

namespace specd {

struct RunnerOptions {
  std::string model_path;
  LoadOptions load;
  int threads = 1;           // per rank
  // The pool sheds threads while workers are descheduled by other processes
  // and regrows them later (kernels::ThreadPool's adaptive mode); the
  // default thread count is adaptive, an explicit --threads is not.
  bool adapt_threads = false;
  double pool_spin_us = -1;  // ThreadPool spin before sleeping; < 0: its default
  // KV cache capacity, all sequences together (KvCacheTokens): the first of
  // kv_cache_tokens > 0 (exactly, rounded up to a page), kv_cache_bytes > 0
  // (as many tokens as fit in that many bytes, all ranks together) and
  // kv_request_tokens > 0 (one request of that many tokens, at most the
  // context, plus kv_request_extra slots); otherwise
  // kv_cache_memory_fraction of the memory available once every rank has
  // loaded its weights, at most 4 x the context.
  int kv_cache_tokens = 0;
  int64_t kv_cache_bytes = 0;
  int kv_request_tokens = 0;
  int kv_request_extra = 0;
  double kv_cache_memory_fraction = 0.25;
  int page_size = 16;
  TransformerOptions transformer;
  // MoE models under TP: whole routed experts per rank instead of a slice of
  // every expert's units (--ep).
  bool expert_parallel = false;
  // Process-wide: applied by Create (every rank runs one runner).
  kernels::MatMulSplit matmul_split = kernels::MatMulSplit::kDynamic;
  bool weight_prefetch = true;
  // One-token matmuls read one weight row at a time (kernels::SetStreamDecode).
  bool stream_decode = true;
  // Stream decode's software prefetch along a row: -1 measures once
  // (kernels::CalibrateStreamPrefetch), 0 off, > 0 that many bytes ahead.
  // weight_prefetch = false turns it off too.
  int stream_prefetch = -1;
  // AMX tile kernels for Q8_0/Q4_0/BF16 matmuls of many tokens, where the CPU
  // and OS allow them (false: AVX512-VNNI / AVX512-BF16).
  bool amx = true;
  // Repack Q4_0 / Q8_0 / BF16 matrices at load into the layout the active kernels read
  // fastest (kernels::RepackForMatMul; only where RepackEnabled(), in
  // anonymous memory, one rank). false: the file's layout (--no-repack).
  bool repack = true;
};

// The KV cache capacity in tokens, a multiple of o.page_size, that `o` asks
// for (see RunnerOptions) for a model of `context` tokens whose KV takes
// `bytes_per_token` bytes per token on all ranks together, with `available`
// bytes of memory free (nullopt: unknown, then 4 x min(context, 8192)).
// *why says where the number came from, for the log.
int KvCacheTokens(const RunnerOptions& o, int context, int64_t bytes_per_token,
                  std::optional<int64_t> available, std::string* why);

class ModelRunner {
 public:
  // Loads this rank's shard. Errors carry the stage ("load weights", "shard plan").
  static StatusOr<std::unique_ptr<ModelRunner>> Create(const RunnerOptions& options,
                                                       Communicator* comm);

  // Applies desc.kv_edits (ApplyKvEdit, as rank 0 did), then runs the forward pass if desc.batch is not empty.
  Status Execute(const StepDesc& desc, ForwardOutput* out);

  // Layers whose input hidden states a step with capture_aux returns (EAGLE-3).
  void SetCaptureLayers(std::vector<int> layers) { capture_layers_ = std::move(layers); }

  const ModelConfig& config() const { return model_->config(); }
  const Checkpoint& checkpoint() const { return *ckpt_; }
  // The options the weights were loaded with (RunnerOptions::load, plus the
  // repack hook where it applies): a draft model loads with them too.
  const LoadOptions& load_options() const { return load_; }
  Model& model() { return *model_; }
  KvCache& kv() { return *kv_; }
  Communicator* comm() { return comm_; }
  kernels::ThreadPool* pool() { return pool_.get(); }
  // Per-op timers of this rank's forward passes; off until enabled.
  OpProfile& profile() { return profile_; }

 private:
  ModelRunner() = default;
  std::unique_ptr<Checkpoint> ckpt_;
  LoadOptions load_;
  std::unique_ptr<kernels::ThreadPool> pool_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvCache> kv_;
  Communicator* comm_ = nullptr;
  std::vector<int> capture_layers_;
  OpProfile profile_;
};

// Moves step descriptors from rank 0 to the other ranks over the
// communicator (a size word, then the bytes). At world size 1 it is a no-op.
Status PublishStep(Communicator* comm, const StepDesc& desc);
StatusOr<StepDesc> ReceiveStep(Communicator* comm);

// The loop of ranks other than 0: receive, execute, until shutdown or error.
Status RunWorkerLoop(ModelRunner* runner);

}  // namespace specd
