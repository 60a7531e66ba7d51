#include "runtime/model_runner.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/clock.h"
#include "base/logging.h"
#include "kernels/read_calibration.h"

namespace specd {

StatusOr<std::unique_ptr<ModelRunner>> ModelRunner::Create(const RunnerOptions& options,
                                                           Communicator* comm) {
  std::unique_ptr<ModelRunner> r(new ModelRunner());
  r->comm_ = comm;
  Stopwatch sw;
  auto ckpt = OpenCheckpoint(options.model_path, options.load);
  if (!ckpt.ok()) return std::move(ckpt).TakeStatus().WithStage("load weights");
  r->ckpt_ = std::move(ckpt).value();
  const ModelConfig& c = r->ckpt_->config();
  bool quantized = false;
  for (const auto& [name, t] : r->ckpt_->tensors()) quantized |= IsQuantized(t.dtype);
  auto plan = ShardPlan::Create(c, comm->rank(), comm->world_size(), quantized,
                                options.expert_parallel);
  if (!plan.ok()) return std::move(plan).TakeStatus().WithStage("shard plan");
  r->pool_ = std::make_unique<kernels::ThreadPool>(std::max(1, options.threads),
                                                     options.pool_spin_us);
  kernels::SetMatMulSplit(options.matmul_split);
  kernels::SetWeightPrefetch(options.weight_prefetch);
  kernels::SetStreamDecode(options.stream_decode);
  int stream_prefetch = options.weight_prefetch ? options.stream_prefetch : 0;
  if (options.stream_decode && stream_prefetch < 0) {
    const kernels::ReadCalibration& cal = kernels::CalibrateStreamPrefetch();
    LogOnce(LogLevel::kInfo, "stream-prefetch-calibration", "load weights",
            "decode reads: " + cal.Summary() + " (override: --stream-prefetch on|off)");
    stream_prefetch = cal.stream_prefetch;
  }
  kernels::SetStreamPrefetchBytes(std::max(0, stream_prefetch));
  // Off always succeeds; on only where the probe chose AMX (SPECD_AMX=0 and
  // unsupported CPUs stay off, logged once by the probe).
  kernels::SetAmx(options.amx && GetKernelPaths().amx_int8);
  auto model = CreateModel(*r->ckpt_, *plan, comm, r->pool_.get(), options.transformer);
  if (!model.ok()) return std::move(model).TakeStatus().WithStage("load weights");
  r->model_ = std::move(model).value();
  r->model_->SetProfile(&r->profile_);
  int tokens = options.kv_cache_tokens > 0 ? options.kv_cache_tokens
                                           : std::min(c.max_seq_len, 8192) * 4;
  int pages = (tokens + options.page_size - 1) / options.page_size;
  r->kv_ = std::make_unique<KvCache>(c.n_layers, r->model_->kv_k_dim(), r->model_->kv_v_dim(),
                                     options.page_size, pages);
  LOG_INFO("load weights", "{} ({}, {} layers, hidden {}, vocab {}): {:.1f} MiB of weights on this "
           "rank, KV cache {} tokens, loaded in {:.2f} s",
           options.model_path, c.arch, c.n_layers, c.hidden_dim, c.vocab_size,
           r->model_->weight_bytes() / 1048576.0, pages * options.page_size, sw.Seconds());
  return r;
}

Status ModelRunner::Execute(const StepDesc& desc, ForwardOutput* out) {
  for (const KvEdit& e : desc.kv_edits) RETURN_IF_ERROR(ApplyKvEdit(kv_.get(), e));
  if (desc.batch.empty()) return Status::Ok();
  for (const SeqInput& s : desc.batch) {
    if (!kv_->IsLive(s.seq))
      return InvalidArgumentError(fmt::format("forward on KV sequence {} that does not exist", s.seq));
  }
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
