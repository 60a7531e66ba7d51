// Path selection (dispatch.h) and the elementwise / attention entry points of
// ops.h; MatMul lives in matmul.cc.
#include <hwy/targets.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <vector>

#include "kernels/cpu/bf16_avx512.h"
#include "kernels/cpu/float_ops.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace specd::kernels {
namespace {

std::atomic<QuantDotIsa> g_quant_isa{QuantDotIsa::kScalar};
std::atomic<Bf16DotPath> g_bf16_path{Bf16DotPath::kHighway};
std::atomic<bool> g_amx{false};

void InitOnce() {
  const KernelPaths& paths = GetKernelPaths();  // logs the choice once
  QuantDotIsa isa = paths.quant_dot;
  if (cpu::GetQuantKernels(isa) == nullptr) isa = QuantDotIsa::kScalar;
  g_quant_isa.store(isa, std::memory_order_relaxed);
  g_amx.store(paths.amx_int8 && isa == QuantDotIsa::kAvx512Vnni && cpu::AmxKernels() != nullptr,
              std::memory_order_relaxed);
  Bf16DotPath bf16 = paths.bf16;
  if (bf16 == Bf16DotPath::kAvx512Bf16 && !cpu::HaveBf16Avx512()) bf16 = Bf16DotPath::kHighway;
  g_bf16_path.store(bf16, std::memory_order_relaxed);
  if (paths.hwy_target_mask != 0) hwy::SetSupportedTargetsForTest(paths.hwy_target_mask);
}

}  // namespace

void EnsureKernelPathsInitialized() {
  static std::once_flag once;
  std::call_once(once, InitOnce);
}

QuantDotIsa ActiveQuantDotIsa() {
  EnsureKernelPathsInitialized();
  return g_quant_isa.load(std::memory_order_relaxed);
}

bool SetQuantDotIsa(QuantDotIsa isa) {
  EnsureKernelPathsInitialized();
  if (!CpuSupports(GetCpuFeatures(), isa) || cpu::GetQuantKernels(isa) == nullptr) return false;
  g_quant_isa.store(isa, std::memory_order_relaxed);
  return true;
}

bool AmxActive() {
  EnsureKernelPathsInitialized();
  return g_amx.load(std::memory_order_relaxed) &&
         g_quant_isa.load(std::memory_order_relaxed) == QuantDotIsa::kAvx512Vnni;
}

bool SetAmx(bool on) {
  EnsureKernelPathsInitialized();
  if (on) {
    const CpuFeatures& cpu = GetCpuFeatures();
    if (!cpu.amx_tile || !cpu.amx_int8 || !CpuSupports(cpu, QuantDotIsa::kAvx512Vnni) ||
        cpu::AmxKernels() == nullptr || !RequestAmxTileData(nullptr)) {
      return false;
    }
  }
  g_amx.store(on, std::memory_order_relaxed);
  return true;
}

Bf16DotPath ActiveBf16Path() {
  EnsureKernelPathsInitialized();
  return g_bf16_path.load(std::memory_order_relaxed);
}

bool SetBf16Path(Bf16DotPath path) {
  EnsureKernelPathsInitialized();
  if (path == Bf16DotPath::kAvx512Bf16) {
    const CpuFeatures& cpu = GetCpuFeatures();
    if (!cpu.avx512_bf16 || !cpu.avx512bw || !cpu.avx512vl || !cpu::HaveBf16Avx512()) {
      return false;
    }
  }
  g_bf16_path.store(path, std::memory_order_relaxed);
  return true;
}

void SetFloatTargets(int64_t hwy_targets) {
  EnsureKernelPathsInitialized();
  if (hwy_targets == 0) hwy_targets = GetKernelPaths().hwy_target_mask;
  hwy::SetSupportedTargetsForTest(hwy_targets);
}

const char* ActiveFloatTarget() {
  EnsureKernelPathsInitialized();
  return cpu::FloatOpsTargetName();
}

void RmsNorm(const float* x, const float* w, int n_tokens, int dim, float eps, float* out) {
  EnsureKernelPathsInitialized();
  cpu::RmsNormF(x, w, n_tokens, dim, eps, out);
}

void RopeAngles(const int32_t* pos, int n_tokens, const float* inv_freq, int head_dim,
                std::vector<float>* angles) {
  const int half = head_dim / 2;
  angles->resize(static_cast<size_t>(n_tokens) * head_dim);
  for (int t = 0; t < n_tokens; ++t) {
    float* c = angles->data() + static_cast<size_t>(t) * head_dim;
    // Angles in f64: pos * inv_freq reaches 1e5 rad at long context, where an
    // f32 angle would be off by ~1e-2 rad.
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos[t]) * inv_freq[i];
      c[i] = static_cast<float>(std::cos(angle));
      c[half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void RopeWithAngles(float* x, int n_tokens, int n_heads, int head_dim, const float* angles,
                    bool interleaved) {
  EnsureKernelPathsInitialized();
  cpu::RopeRotateF(x, n_tokens, n_heads, head_dim, angles, interleaved);
}

void Rope(float* x, int n_tokens, int n_heads, int head_dim, const int32_t* pos,
          const float* inv_freq, bool interleaved) {
  thread_local std::vector<float> angles;
  RopeAngles(pos, n_tokens, inv_freq, head_dim, &angles);
  RopeWithAngles(x, n_tokens, n_heads, head_dim, angles.data(), interleaved);
}

void SwiGLU(const float* gate, const float* up, int64_t n, float* out) {
  EnsureKernelPathsInitialized();
  cpu::SwiGLUF(gate, up, n, out);
}

void Softmax(float* x, int64_t n) {
  EnsureKernelPathsInitialized();
  cpu::SoftmaxF(x, n);
}

int64_t Argmax(const float* x, int64_t n) {
  EnsureKernelPathsInitialized();
  return cpu::ArgmaxF(x, n);
}

float LogSumExp(const float* x, int64_t n) {
  EnsureKernelPathsInitialized();
  return cpu::LogSumExpF(x, n);
}

void Attention(const float* q, int n_q, int n_ctx, const KvPages& kv, const uint8_t* mask,
               int n_heads, int n_kv_heads, int head_dim, float* out, ThreadPool* pool) {
  EnsureKernelPathsInitialized();
  if (n_q <= 0 || n_heads <= 0) return;
  const cpu::AttentionArgs args{q, n_q, n_ctx, kv, mask, n_heads, n_kv_heads, head_dim, out};
  // Work items are (KV head, block of query rows), so long prefills split
  // over tokens too; threads take items round-robin because under the causal
  // mask later tokens see more slots (contiguous chunks would be unbalanced).
  const int64_t items = cpu::AttentionItemCount(args);
  const int64_t work = static_cast<int64_t>(n_q) * n_heads * n_ctx * head_dim;
  if (pool == nullptr || pool->size() == 1 || items == 1 || work < (1 << 15)) {
    cpu::AttentionItems(args, 0, items, 1);
    return;
  }
  pool->Run([&](int index, int count) { cpu::AttentionItems(args, index, items, count); });
}

}  // namespace specd::kernels
