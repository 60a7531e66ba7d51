#include "runtime/model_runner.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/clock.h"
#include "base/logging.h"
#include "base/meminfo.h"
#include "kernels/ops.h"
#include "kernels/read_calibration.h"
#include "platform/cpu_features.h"

namespace specd {

int KvCacheTokens(const RunnerOptions& o, int context, int64_t bytes_per_token,
                  std::optional<int64_t> available, std::string* why) {
  const int64_t ps = std::max(1, o.page_size);
  const int64_t bpt = std::max<int64_t>(1, bytes_per_token);
  auto up = [ps](int64_t t) { return (t + ps - 1) / ps * ps; };
  auto down = [ps](int64_t t) { return std::max(ps, t / ps * ps); };
  // Far beyond any context: keeps the arithmetic in int.
  constexpr int64_t kMaxTokens = int64_t{1} << 28;
  int64_t t;
  if (o.kv_cache_tokens > 0) {
    t = up(o.kv_cache_tokens);
    *why = "--kv-cache-tokens";
  } else if (o.kv_cache_bytes > 0) {
    t = down(o.kv_cache_bytes / bpt);
    *why = fmt::format("--kv-cache-memory {:.0f} MiB", o.kv_cache_bytes / 1048576.0);
  } else if (o.kv_request_tokens > 0) {
    t = up(int64_t{std::min(o.kv_request_tokens, context)} + std::max(0, o.kv_request_extra));
    *why = "sized to the request";
  } else if (available) {
    const int64_t budget = static_cast<int64_t>(o.kv_cache_memory_fraction *
                                                static_cast<double>(*available));
    const int64_t cap = up(int64_t{4} * context);
    t = std::min(cap, down(budget / bpt));
    *why = t == cap ? fmt::format("4 x context {}, within {:.0f}% of {:.0f} MiB available", context,
                                  o.kv_cache_memory_fraction * 100, *available / 1048576.0)
                    : fmt::format("{:.0f}% of {:.0f} MiB available", o.kv_cache_memory_fraction * 100,
                                  *available / 1048576.0);
  } else {
    t = up(int64_t{4} * std::min(context, 8192));
    *why = "4 x context, capped at 32768 (available memory unknown)";
  }
  return static_cast<int>(std::min(t, kMaxTokens / ps * ps));
}

StatusOr<std::unique_ptr<ModelRunner>> ModelRunner::Create(const RunnerOptions& options,
                                                           Communicator* comm) {
  std::unique_ptr<ModelRunner> r(new ModelRunner());
  r->comm_ = comm;
  Stopwatch sw;
  // Off always succeeds; on only where the probe chose AMX (SPECD_AMX=0 and
  // unsupported CPUs stay off, logged once by the probe). Set before loading:
  // whether Q4_0 / Q8_0 are repacked depends on it.
  kernels::SetAmx(options.amx && GetKernelPaths().amx_int8);
  LoadOptions load = options.load;
  // A rank of a TP group binds slices of columns, which the 16-row groups do
  // not hold.
  if (options.repack && comm->world_size() == 1) {
    load.repack_for_matmul = [](TensorView* t, uint8_t* bytes) {
      return bytes != nullptr ? kernels::RepackForMatMul(t, bytes)
                              : kernels::WantsRepackForMatMul(*t);
    };
  }
  auto ckpt = OpenCheckpoint(options.model_path, load);
  if (!ckpt.ok()) return std::move(ckpt).TakeStatus().WithStage("load weights");
  r->ckpt_ = std::move(ckpt).value();
  r->load_ = load;
  const ModelConfig& c = r->ckpt_->config();
  bool quantized = false;
  int quant_block = 1;  // the largest block of the weights' dtypes
  size_t weight_bytes = 0;
  for (const auto& [name, t] : r->ckpt_->tensors()) {
    quantized |= IsQuantized(t.dtype);
    quant_block = std::max(quant_block, DTypeBlockElems(t.dtype));
    weight_bytes += t.nbytes;
  }
  auto plan = ShardPlan::Create(c, comm->rank(), comm->world_size(), quantized,
                                options.expert_parallel, quant_block);
  if (!plan.ok()) return std::move(plan).TakeStatus().WithStage("shard plan");
  r->pool_ = std::make_unique<kernels::ThreadPool>(std::max(1, options.threads),
                                                     options.pool_spin_us, options.adapt_threads);
  kernels::SetMatMulSplit(options.matmul_split);
  kernels::SetWeightPrefetch(options.weight_prefetch);
  kernels::SetStreamDecode(options.stream_decode);
  int stream_prefetch = options.weight_prefetch ? options.stream_prefetch : 0;
  // Weights that stay in the last-level cache are not streamed from memory:
  // software prefetch cannot matter, and the probe would fault in a buffer of
  // up to 256 MiB on every start (most of a tiny model's start-up and RSS).
  // "Stay": at most half the reported L3 and at most kCachedWeightBytes,
  // because a VM may report a whole socket's L3 or a made-up figure.
  constexpr int64_t kCachedWeightBytes = int64_t{16} << 20;
  const int64_t l3 = GetCpuFeatures().l3_bytes;
  if (options.stream_decode && stream_prefetch < 0 &&
      static_cast<int64_t>(weight_bytes) <= std::min(l3 / 2, kCachedWeightBytes)) {
    LogOnce(LogLevel::kInfo, "stream-prefetch-calibration", "load weights",
            fmt::format("decode reads: the weights ({:.1f} MiB) stay in the {:.0f} MiB "
                        "last-level cache: no software prefetch, no read probe (override: "
                        "--stream-prefetch on|off)",
                        static_cast<double>(weight_bytes) / (1 << 20),
                        static_cast<double>(l3) / (1 << 20)));
    stream_prefetch = 0;
  }
  if (options.stream_decode && stream_prefetch < 0) {
    const kernels::ReadCalibration& cal = kernels::CalibrateStreamPrefetch();
    LogOnce(LogLevel::kInfo, "stream-prefetch-calibration", "load weights",
            "decode reads: " + cal.Summary() + " (override: --stream-prefetch on|off)");
    stream_prefetch = cal.stream_prefetch;
  }
  kernels::SetStreamPrefetchBytes(std::max(0, stream_prefetch));
  auto model = CreateModel(*r->ckpt_, *plan, comm, r->pool_.get(), options.transformer);
  if (!model.ok()) return std::move(model).TakeStatus().WithStage("load weights");
  r->model_ = std::move(model).value();
  r->model_->SetProfile(&r->profile_);
  // Every rank's cache must have the same number of pages (rank 0's
  // scheduler plans for all): rank 0 decides and tells the others. Memory is
  // measured once every rank holds its weights.
  const int world = comm->world_size();
  const int64_t bytes_per_token = static_cast<int64_t>(sizeof(float)) * c.n_layers *
                                  (r->model_->kv_k_dim() + r->model_->kv_v_dim()) * world;
  const bool from_memory = options.kv_cache_tokens <= 0 && options.kv_cache_bytes <= 0 &&
                           options.kv_request_tokens <= 0;
  if (from_memory && world > 1)
    RETURN_IF_ERROR(comm->Barrier().WithStage("size KV cache"));
  std::string why;
  int32_t tokens = KvCacheTokens(options, c.max_seq_len, bytes_per_token,
                                 from_memory ? AvailableMemoryBytes() : std::nullopt, &why);
  if (world > 1)
    RETURN_IF_ERROR(comm->Broadcast(&tokens, sizeof(tokens), 0).WithStage("size KV cache"));
  const int pages = tokens / options.page_size;
  r->kv_ = std::make_unique<KvCache>(c.n_layers, r->model_->kv_k_dim(), r->model_->kv_v_dim(),
                                     options.page_size, pages);
  LOG_INFO("load weights", "{} ({}, {} layers, hidden {}, vocab {}): {:.1f} MiB of weights on this "
           "rank, KV cache {} tokens ({:.1f} MiB{}: {}), loaded in {:.2f} s",
           options.model_path, c.arch, c.n_layers, c.hidden_dim, c.vocab_size,
           r->model_->weight_bytes() / 1048576.0, tokens,
           static_cast<double>(tokens) * bytes_per_token / 1048576.0,
           world > 1 ? ", all ranks" : "", why, sw.Seconds());
  return r;
}

Status ModelRunner::Execute(const StepDesc& desc, ForwardOutput* out) {
  for (const KvEdit& e : desc.kv_edits) RETURN_IF_ERROR(ApplyKvEdit(kv_.get(), e));
  if (desc.batch.empty()) return Status::Ok();
  for (const SeqInput& s : desc.batch) {
    if (!kv_->IsLive(s.seq))
      return InvalidArgumentError(fmt::format("forward on KV sequence {} that does not exist", s.seq));
  }
  pool_->Poll();
  model_->SetCaptureLayers(desc.capture_aux ? capture_layers_ : std::vector<int>{});
  if (!desc.capture_aux) out->aux_hidden.clear();
  return model_->Forward(desc.batch, kv_.get(), out);
}

Status PublishStep(Communicator* comm, const StepDesc& desc) {
  if (comm->world_size() == 1) return Status::Ok();
  std::string bytes = SerializeStep(desc);
  uint64_t n = bytes.size();
  RETURN_IF_ERROR(comm->Broadcast(&n, sizeof(n), 0).WithStage("publish step"));
  return comm->Broadcast(bytes.data(), n, 0).WithStage("publish step");
}

StatusOr<StepDesc> ReceiveStep(Communicator* comm) {
  uint64_t n = 0;
  RETURN_IF_ERROR(comm->Broadcast(&n, sizeof(n), 0).WithStage("receive step"));
  if (n > (uint64_t{1} << 30))
    return CorruptionError(fmt::format("step descriptor of {} bytes announced", n));
  std::string bytes(n, '\0');
  RETURN_IF_ERROR(comm->Broadcast(bytes.data(), n, 0).WithStage("receive step"));
  return DeserializeStep(bytes);
}

Status RunWorkerLoop(ModelRunner* runner) {
  ForwardOutput out;
  while (true) {
    ASSIGN_OR_RETURN(StepDesc desc, ReceiveStep(runner->comm()));
    if (desc.shutdown) return Status::Ok();
    RETURN_IF_ERROR(runner->Execute(desc, &out));
  }
}

}  // namespace specd
