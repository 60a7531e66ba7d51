// MatMul / MatMulRows: per-dtype dispatch, activation quantization and the
// split of output rows across threads.
//
// Q4_BF16 keeps f32 activations (W4A16) and has its own kernels
// (cpu/int4_kernels.h). The other ggml block types (Q4_1, Q5_0, Q5_1, the
// K-quants, IQ4_NL, IQ4_XS) keep f32 activations too: their rows are
// dequantized exactly and multiplied by the F32 kernel (cpu/dequant_matmul.h).
//
// Q8_0/Q4_0: every kernel sums a token's block terms in one order
// (cpu/quant_kernels.h), so the kernel a token count selects never changes a
// bit of the output (batch invariance in every mode).
//
// Decode (n_tokens = 1) is memory-bound: each thread streams a contiguous
// range of weight rows once. Verify / prefill (n_tokens > 1) reuse every
// weight row from L1 for all tokens in tiles of 4 or 16 tokens, so extra
// tokens cost compute, not memory traffic; with AMX the 16-token tiles run on
// the tile unit (quant_amx.cc).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/logging.h"
#include "kernels/cpu/bf16_amx.h"
#include "kernels/cpu/bf16_avx512.h"
#include "kernels/cpu/bf16_rows16.h"
#include "kernels/cpu/dequant_matmul.h"
#include "kernels/cpu/float_ops.h"
#include "kernels/cpu/int4_kernels.h"
#include "kernels/cpu/quant_rows16.h"
#include "kernels/cpu/quant_kernels.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace specd::kernels {
namespace {

// Below this many multiply-adds a parallel region costs more than it saves.
constexpr int64_t kMinParallelMacs = 1 << 16;

// Per calling thread: quantized activations reused across calls.
struct ActScratch {
  std::vector<int8_t> qs;
  std::vector<float> d;
  std::vector<int32_t> corr;
  std::vector<uint16_t> bf16;
  std::vector<uint16_t> bf16_tiled;
  std::vector<int8_t> tiled_qs;
  std::vector<int32_t> tiled_corr;
  std::vector<float> tiled_d;
  std::vector<int32_t> tiled_order;
  std::vector<int8_t> quad_qs;
  std::vector<int32_t> quad_corr;
  std::vector<float> quad_d;
  std::vector<int32_t> gemv_corr;
  std::vector<int8_t> stream_qs;
  std::vector<int32_t> csum;
};

ActScratch& Scratch() {
  thread_local ActScratch scratch;
  return scratch;
}

std::atomic<MatMulSplit> g_split{MatMulSplit::kDynamic};
std::atomic<bool> g_prefetch{true};
std::atomic<bool> g_stream{true};
// Bytes the stream decode kernels prefetch ahead along a row (0: none); set
// from CalibrateStreamPrefetch() by the model runner.
std::atomic<int> g_stream_prefetch{0};

// SPECD_DETERMINISTIC=1 turns batch-invariant mode on (0 or unset: off).
bool BatchInvariantFromEnv() {
  const std::optional<std::string> env = GetEnv(EnvVar::kDeterministic);
  if (!env || *env == "0") return false;
  if (*env == "1") return true;
  LogOnce(LogLevel::kWarn, "specd-deterministic-env", "matmul",
          "SPECD_DETERMINISTIC='" + *env + "' is not 0 or 1: ignored");
  return false;
}
// -1: auto (on for the AVX512-VNNI path without AMX), 0 off, 1 on.
std::atomic<int> g_repack{-1};

// -1: not read from the environment yet (read on first use, not during
// static initialization, so LogOnce is ready).
std::atomic<int> g_batch_invariant{-1};
bool BatchInvariant() {
  int v = g_batch_invariant.load(std::memory_order_relaxed);
  if (v < 0) {
    int expected = -1;
    g_batch_invariant.compare_exchange_strong(expected, BatchInvariantFromEnv() ? 1 : 0);
    v = g_batch_invariant.load(std::memory_order_relaxed);
  }
  return v == 1;
}

// Row chunks are multiples of 4 rows: the multi-row kernels work on groups of 4.
constexpr int64_t kRowAlign = 4;

void RunRows(int64_t n_out, int64_t macs_per_row, ThreadPool* pool,
             const std::function<void(int64_t, int64_t)>& body, int64_t align = kRowAlign) {
  if (pool == nullptr || pool->size() == 1 || n_out * macs_per_row < kMinParallelMacs) {
    body(0, n_out);
    return;
  }
  if (g_split.load(std::memory_order_relaxed) == MatMulSplit::kDynamic) {
    pool->ParallelForDynamic(n_out, align, body);
  } else if (align > kRowAlign) {
    // Kernels that need whole groups of `align` rows get whole groups.
    pool->ParallelFor((n_out + align - 1) / align, [&](int64_t g0, int64_t g1) {
      body(g0 * align, std::min(g1 * align, n_out));
    });
  } else {
    pool->ParallelFor(n_out, body);
  }
}

void RunTokens(int n_tokens, ThreadPool* pool, const std::function<void(int64_t, int64_t)>& body) {
  if (pool == nullptr || n_tokens < 8) {
    body(0, n_tokens);
    return;
  }
  pool->ParallelFor(n_tokens, body);
}

void FillNaN(float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = std::numeric_limits<float>::quiet_NaN();
}

// x (n_tokens, k) quantized per block of 32 into the scratch (corr too when
// corr_offset != 0, QuantizedActs::corr; prefetch fields unset).
cpu::QuantizedActs QuantizeActs(const cpu::QuantKernelTable* table, const float* x, int n_tokens,
                                int64_t k, int corr_offset, ThreadPool* pool, ActScratch& s) {
  const int64_t nb = k / kQuantBlock;
  s.qs.resize(static_cast<size_t>(n_tokens * k));
  s.d.resize(static_cast<size_t>(n_tokens * nb));
  s.corr.resize(corr_offset != 0 ? static_cast<size_t>(n_tokens * nb * 8) : 0);
  RunTokens(n_tokens, pool, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      table->quantize(x + t * k, k, corr_offset, s.qs.data() + t * k, s.d.data() + t * nb,
                      corr_offset != 0 ? s.corr.data() + t * nb * 8 : nullptr);
    }
  });
  cpu::QuantizedActs acts;
  acts.n_tokens = n_tokens;
  acts.k = k;
  acts.nb = nb;
  acts.qs = s.qs.data();
  acts.d = s.d.data();
  acts.corr = corr_offset != 0 ? s.corr.data() : nullptr;
  return acts;
}

// Q4_0 / Q8_0 in 16-row groups (cpu/quant_rows16.h): the AVX512-VNNI kernel
// when that path is active, else the portable one. REQUIRES: row_begin and
// n_out multiples of 16 (QuantizedMatMul covers other ranges).
void Rows16MatMul(const TensorView& w, int64_t row_begin, int64_t n_out, const float* x,
                  int n_tokens, float* y, ThreadPool* pool) {
  const int64_t k = w.cols();
  const int64_t nb = k / kQuantBlock;
  ActScratch& s = Scratch();
  cpu::QuantizedActs acts =
      QuantizeActs(cpu::GetQuantKernels(ActiveQuantDotIsa()), x, n_tokens, k,
                   cpu::Rows16CorrOffset(w.dtype), pool, s);
  s.csum.resize(static_cast<size_t>(n_tokens * nb));
  for (int64_t b = 0; b < n_tokens * nb; ++b) {
    int32_t sum = 0;
    for (int l = 0; l < 8; ++l) sum += s.corr[b * 8 + l];
    s.csum[b] = sum;
  }
  acts.prefetch_rows = g_prefetch.load(std::memory_order_relaxed) ? 1 : 0;
  cpu::Rows16Fn fn = ActiveQuantDotIsa() == QuantDotIsa::kAvx512Vnni ? cpu::Rows16Avx512(w.dtype)
                                                                     : nullptr;
  if (fn == nullptr) fn = w.dtype == DType::kQ8_0 ? cpu::Rows16Q8Scalar : cpu::Rows16Q4Scalar;
  const size_t group_bytes = cpu::Rows16GroupBytes(w.dtype, nb);
  const auto* base = static_cast<const uint8_t*>(w.data);
  RunRows(
      n_out, k * n_tokens, pool,
      [&](int64_t r0, int64_t r1) {
        fn(base + (row_begin + r0) / cpu::kRows16 * group_bytes, (r1 - r0) / cpu::kRows16, acts,
           s.csum.data(), y + r0, n_out);
      },
      cpu::kRows16);
}

// A matrix in 16-row groups: run(g0, n, out) computes rows [g0, g0 + n) of
// whole groups into out (n_tokens, n). A range off the 16-row grid computes
// the groups that cover it, then copies its rows (each output is the same
// whichever group range computes it).
void OnRowGroups(int64_t row_begin, int64_t n_out, int n_tokens, float* y,
                 const std::function<void(int64_t, int64_t, float*)>& run) {
  if (row_begin % cpu::kRows16 == 0 && n_out % cpu::kRows16 == 0) {
    run(row_begin, n_out, y);
    return;
  }
  const int64_t g0 = row_begin / cpu::kRows16 * cpu::kRows16;
  const int64_t g1 = (row_begin + n_out + cpu::kRows16 - 1) / cpu::kRows16 * cpu::kRows16;
  std::vector<float> full(static_cast<size_t>(n_tokens * (g1 - g0)));
  run(g0, g1 - g0, full.data());
  for (int t = 0; t < n_tokens; ++t) {
    std::copy_n(full.data() + t * (g1 - g0) + (row_begin - g0), n_out, y + t * n_out);
  }
}

void QuantizedMatMul(const TensorView& w, int64_t row_begin, int64_t n_out, const float* x,
                     int n_tokens, float* y, ThreadPool* pool) {
  if (w.layout == WeightLayout::kRows16) {
    OnRowGroups(row_begin, n_out, n_tokens, y, [&](int64_t g0, int64_t n, float* out) {
      Rows16MatMul(w, g0, n, x, n_tokens, out, pool);
    });
    return;
  }
  const cpu::QuantKernelTable* table = cpu::GetQuantKernels(ActiveQuantDotIsa());
  const bool q4 = w.dtype == DType::kQ4_0;
  const int corr_offset = q4 ? table->q4_0_corr_offset : table->q8_0_corr_offset;
  const int64_t k = w.cols();
  const int64_t nb = k / kQuantBlock;
  ActScratch& s = Scratch();
  cpu::QuantizedActs acts = QuantizeActs(table, x, n_tokens, k, corr_offset, pool, s);
  // Stream decode (one token): the kernels read one row at a time, one
  // stream per thread, and prefetch along the row if at all (stream_prefetch);
  // every other call prefetches the rows 4 rows further down. Every kernel
  // below sums in the one order of cpu/quant_kernels.h, so which one runs
  // does not change any output bit.
  const bool q4_gemv = q4 && table->q4_0_gemv != nullptr && acts.corr != nullptr;
  const bool stream = n_tokens == 1 && g_stream.load(std::memory_order_relaxed);
  acts.stream_prefetch = stream ? g_stream_prefetch.load(std::memory_order_relaxed) : 0;
  acts.prefetch_rows = g_prefetch.load(std::memory_order_relaxed) && !stream ? 4 : 0;
  cpu::QuantRowsFn fn = q4 ? table->q4_0 : table->q8_0;
  // Q4_0 up to 4 tokens (decode, small verify passes): 4 rows per vector,
  // each block unpacked once for every token.
  if (q4_gemv && n_tokens <= cpu::kGemvMaxTokens) {
    cpu::GemvActs g;
    table->build_gemv_acts(acts, &s.gemv_corr, &g);
    cpu::QuantGemvFn gemv = table->q4_0_gemv;
    // One token: the row-stream kernel. 2-4 tokens stay on the 4-row kernel,
    // which shares the scale work among the tokens and so beats the
    // row-stream kernel there (docs/performance.md, "Stream decode").
    if (stream && table->q4_0_stream != nullptr) {
      table->build_stream_lanes(acts, &s.stream_qs, &g);
      g.stream_prefetch = acts.stream_prefetch;
      gemv = table->q4_0_stream;
    }
    RunRows(n_out, k * n_tokens, pool, [&](int64_t r0, int64_t r1) {
      gemv(w.row(row_begin + r0), w.row_bytes(), r1 - r0, g, acts, y + r0, n_out);
    });
    return;
  }
  // Up to 8 tokens with AMX: two blocks per tile instruction (pair layout).
  // More tokens: every token through the tile kernels in 16-token tiles (the
  // last one padded).
  const cpu::AmxKernelTable* amx = AmxActive() ? cpu::AmxKernels() : nullptr;
  if (amx != nullptr && n_tokens >= (q4 ? amx->q4_0_pair_min_tokens : amx->q8_0_pair_min_tokens) &&
      n_tokens <= cpu::kPairTokens) {
    cpu::PairActs pair;
    cpu::BuildPairActs(acts, &s.tiled_qs, &s.tiled_d, &pair);
    cpu::QuantPairRowsFn pair_fn = q4 ? amx->q4_0_pair : amx->q8_0_pair;
    RunRows(
        n_out, k * n_tokens, pool,
        [&](int64_t r0, int64_t r1) {
          pair_fn(w.row(row_begin + r0), w.row_bytes(), r1 - r0, pair, acts, y + r0, n_out);
        },
        amx->row_align);
    return;
  }
  if (amx != nullptr && acts.corr != nullptr &&
      n_tokens >= (q4 ? amx->q4_0_min_tokens : amx->q8_0_min_tokens)) {
    const int n_tiles = (n_tokens + cpu::kTileTokens - 1) / cpu::kTileTokens;
    cpu::TiledActs tiled;
    cpu::BuildTiledActs(acts, 0, n_tiles, &s.tiled_qs, &s.tiled_corr, &s.tiled_d, &s.tiled_order,
                        &tiled);
    cpu::QuantTiledRowsFn amx_fn = q4 ? amx->q4_0 : amx->q8_0;
    RunRows(
        n_out, k * n_tokens, pool,
        [&](int64_t r0, int64_t r1) {
          amx_fn(w.row(row_begin + r0), w.row_bytes(), r1 - r0, tiled, n_tokens, y + r0, n_out);
        },
        amx->row_align);
    return;
  }
  cpu::QuantTiledRowsFn tiled_fn = q4 ? table->q4_0_tiled : table->q8_0_tiled;

  // Tokens [0, n_tiled) go through the token-lane kernel (16-token tiles; a
  // last partial tile only when it is big enough to beat the row kernel), the
  // rest through the row kernel.
  int n_tiled = 0;
  cpu::TiledActs tiled;
  if (tiled_fn != nullptr && acts.corr != nullptr && n_tokens >= table->tiled_min_tokens) {
    const int rem = n_tokens % cpu::kTileTokens;
    n_tiled = rem >= table->tiled_min_tokens ? n_tokens : n_tokens - rem;
    const int n_tiles = (n_tiled + cpu::kTileTokens - 1) / cpu::kTileTokens;
    cpu::BuildTiledActs(acts, 0, n_tiles, &s.tiled_qs, &s.tiled_corr, &s.tiled_d, &s.tiled_order,
                        &tiled);
  }
  // The rest: through the quad kernel when there are enough tokens for it,
  // else through the row kernel.
  cpu::QuantQuadRowsFn quad_fn = q4 ? table->q4_0_quad : table->q8_0_quad;
  const int n_rest = n_tokens - n_tiled;
  const bool use_quad =
      quad_fn != nullptr && acts.corr != nullptr && n_rest >= 2 && n_rest >= table->quad_min_tokens;
  cpu::QuadActs quad;
  if (use_quad) cpu::BuildQuadActs(acts, n_tiled, &s.quad_qs, &s.quad_corr, &s.quad_d, &quad);
  cpu::QuantizedActs rest = acts;
  rest.n_tokens = n_rest;
  rest.qs += n_tiled * k;
  rest.d += n_tiled * nb;
  if (rest.corr != nullptr) rest.corr += n_tiled * nb * 8;
  float* y_rest = y + n_tiled * n_out;

  RunRows(n_out, k * n_tokens, pool, [&](int64_t r0, int64_t r1) {
    if (n_tiled > 0) {
      tiled_fn(w.row(row_begin + r0), w.row_bytes(), r1 - r0, tiled, n_tiled, y + r0, n_out);
    }
    if (n_rest == 0) return;
    if (use_quad) {
      quad_fn(w.row(row_begin + r0), w.row_bytes(), r1 - r0, quad, n_rest, y_rest + r0, n_out);
    } else {
      fn(w.row(row_begin + r0), w.row_bytes(), r1 - r0, rest, y_rest + r0, n_out);
    }
  });
}

// Q4_BF16 (W4A16): f32 activations, the kernel of the active quantized-dot
// path. Batch-invariant in every mode (int4_kernels.h).
void Int4MatMul(const TensorView& w, int64_t row_begin, int64_t n_out, const float* x,
                int n_tokens, float* y, ThreadPool* pool) {
  const cpu::Int4RowsFn fn = cpu::Int4Rows(ActiveQuantDotIsa());
  const int64_t k = w.cols();
  RunRows(n_out, k * n_tokens, pool, [&](int64_t r0, int64_t r1) {
    fn(w.row(row_begin + r0), w.row_bytes(), r1 - r0, k, x, n_tokens, y + r0, n_out);
  });
}

// The weight-read layout of the float kernels (float_ops.h) for one call.
cpu::DecodeReads FloatDecodeReads() {
  cpu::DecodeReads reads;
  reads.stream = g_stream.load(std::memory_order_relaxed);
  reads.stream_prefetch = g_stream_prefetch.load(std::memory_order_relaxed);
  reads.prefetch_rows = g_prefetch.load(std::memory_order_relaxed) ? 4 : 0;
  return reads;
}

// The ggml block types without an integer kernel: rows dequantized exactly,
// then the F32 kernel (cpu/dequant_matmul.h). Batch-invariant in every mode.
void DequantMatMul(const TensorView& w, int64_t row_begin, int64_t n_out, const float* x,
                   int n_tokens, float* y, ThreadPool* pool) {
  const cpu::DequantRowFn dequant = cpu::DequantRowFor(w.dtype, ActiveQuantDotIsa());
  const cpu::DecodeReads reads = FloatDecodeReads();
  const int64_t k = w.cols();
  RunRows(n_out, k * n_tokens, pool, [&](int64_t r0, int64_t r1) {
    cpu::DequantMatRows(dequant, w.row(row_begin + r0), w.row_bytes(), r1 - r0, k, x, n_tokens,
                        y + r0, n_out, reads);
  });
}

}  // namespace

const char* ActiveDequantPath() {
  EnsureKernelPathsInitialized();
  const cpu::DequantRowFn avx2 = cpu::DequantRowAvx2(DType::kQ4_K);
  return avx2 != nullptr && cpu::DequantRowFor(DType::kQ4_K, ActiveQuantDotIsa()) == avx2
             ? "avx2"
             : "portable";
}

namespace {

// x [n_tokens, k] rounded to bf16 rows of ldx elements (zero past k), in
// *out; avx512: the AVX512-BF16 conversion, else the portable one (the same
// rounding).
void ToBf16Acts(const float* x, int n_tokens, int64_t k, int64_t ldx, bool avx512,
                std::vector<uint16_t>* out) {
  out->resize(static_cast<size_t>(n_tokens * ldx));
  for (int t = 0; t < n_tokens; ++t) {
    uint16_t* row = out->data() + t * ldx;
    if (avx512) {
      cpu::ConvertToBF16Avx512(x + t * k, k, ldx, row);
    } else {
      cpu::ConvertToBF16Scalar(x + t * k, k, ldx, row);
    }
  }
}

// BF16 in 16-row groups (cpu/bf16_rows16.h): the AVX512-BF16 kernel when
// that path is active, else the portable one (same summation order).
void Bf16Rows16MatMul(const TensorView& w, int64_t row_begin, int64_t n_out, const float* x,
                      int n_tokens, float* y, ThreadPool* pool) {
  const int64_t k = w.cols();
  const int64_t ldx = (k + 31) / 32 * 32;
  ActScratch& s = Scratch();
  const bool avx = ActiveBf16Path() == Bf16DotPath::kAvx512Bf16;
  ToBf16Acts(x, n_tokens, k, ldx, avx, &s.bf16);
  const cpu::Bf16Rows16Fn fn = avx ? cpu::Bf16Rows16Avx512() : cpu::Bf16Rows16Scalar;
  const bool prefetch = g_prefetch.load(std::memory_order_relaxed);
  const size_t group_bytes = static_cast<size_t>(cpu::kRows16) * w.row_bytes();
  const auto* base = static_cast<const uint8_t*>(w.data);
  OnRowGroups(row_begin, n_out, n_tokens, y, [&](int64_t g0, int64_t n, float* out) {
    RunRows(
        n, k * n_tokens, pool,
        [&](int64_t r0, int64_t r1) {
          fn(base + (g0 + r0) / cpu::kRows16 * group_bytes, (r1 - r0) / cpu::kRows16, k,
             s.bf16.data(), ldx, n_tokens, out + r0, n, prefetch);
        },
        cpu::kRows16);
  });
}

// From this many tokens a BF16 matmul goes to the AMX-BF16 tile kernel when
// AMX is on and the CPU has AMX-BF16 (same bf16-rounded activations as the
// AVX512-BF16 path).
constexpr int kAmxBf16MinTokens = 2;

// Whether BF16 matmuls of kAmxBf16MinTokens or more tokens over a k-column
// matrix in the file's rows go to the AMX-BF16 tiles. Not in batch-invariant
// mode: the tile kernel sums in another order than the row tile (four chains
// by k-chunk mod 4 against two), and so than the 16-row group kernel.
bool Bf16TilesTakeManyTokens(int64_t k) {
  return k % 32 == 0 && AmxActive() && GetCpuFeatures().amx_bf16 && cpu::HaveBf16Amx() &&
         !BatchInvariant();
}

void Bf16MatMulAvx512(const TensorView& w, int64_t row_begin, int64_t n_out, const float* x,
                      int n_tokens, float* y, ThreadPool* pool) {
  const int64_t k = w.cols();
  const int64_t ldx = (k + 31) / 32 * 32;
  ActScratch& s = Scratch();
  ToBf16Acts(x, n_tokens, k, ldx, /*avx512=*/true, &s.bf16);
  if (n_tokens >= kAmxBf16MinTokens && Bf16TilesTakeManyTokens(k)) {
    cpu::Bf16TiledActs tiled;
    cpu::BuildBf16TiledActs(s.bf16.data(), ldx, n_tokens, k, &s.bf16_tiled, &tiled);
    const bool prefetch = g_prefetch.load(std::memory_order_relaxed);
    RunRows(
        n_out, k * n_tokens, pool,
        [&](int64_t r0, int64_t r1) {
          cpu::AmxBf16Rows(w.row(row_begin + r0), w.row_bytes(), r1 - r0, k, tiled, s.bf16.data(),
                           ldx, n_tokens, y + r0, n_out, prefetch);
        },
        cpu::kBf16AmxRows);
    return;
  }
  RunRows(n_out, k * n_tokens, pool, [&](int64_t r0, int64_t r1) {
    cpu::MatRowsBF16Avx512(w.row(row_begin + r0), w.row_bytes(), r1 - r0, k, s.bf16.data(), ldx,
                           n_tokens, y + r0, n_out);
  });
}

}  // namespace

MatMulSplit ActiveMatMulSplit() { return g_split.load(std::memory_order_relaxed); }
void SetMatMulSplit(MatMulSplit split) { g_split.store(split, std::memory_order_relaxed); }
bool WeightPrefetchEnabled() { return g_prefetch.load(std::memory_order_relaxed); }
void SetWeightPrefetch(bool on) { g_prefetch.store(on, std::memory_order_relaxed); }
bool StreamDecodeEnabled() { return g_stream.load(std::memory_order_relaxed); }
void SetStreamDecode(bool on) { g_stream.store(on, std::memory_order_relaxed); }
bool BatchInvariantEnabled() { return BatchInvariant(); }
void SetBatchInvariant(bool on) { g_batch_invariant.store(on ? 1 : 0, std::memory_order_relaxed); }
int StreamPrefetchBytes() { return g_stream_prefetch.load(std::memory_order_relaxed); }
void SetStreamPrefetchBytes(int bytes) {
  g_stream_prefetch.store(std::max(0, bytes), std::memory_order_relaxed);
}

namespace {

// The defaults of RepackEnabled, per dtype: where the kernels that read the
// 16-row groups are the active path and AMX (whose tile kernels read the
// file's rows) is off or lacks that dtype.
bool QuantRepackDefault() {
  return ActiveQuantDotIsa() == QuantDotIsa::kAvx512Vnni && !AmxActive() &&
         cpu::Rows16Avx512(DType::kQ4_0) != nullptr;
}
bool Bf16RepackDefault() {
  return ActiveBf16Path() == Bf16DotPath::kAvx512Bf16 && cpu::Bf16Rows16Avx512() != nullptr &&
         !(AmxActive() && GetCpuFeatures().amx_bf16);
}
// Whether a BF16 matrix of `cols` columns may be repacked at all: only where
// the AVX512-BF16 group kernel reads it (the portable group kernel does not
// sum in the order of the portable row kernel), and not where the AMX-BF16
// tiles would take its many-token products in the file's rows (they read
// rows, and sum in another order than the group kernel): repacking never
// changes a bit of any product.
bool Bf16Repackable(int64_t cols) {
  return cols % 2 == 0 && ActiveBf16Path() == Bf16DotPath::kAvx512Bf16 &&
         cpu::Bf16Rows16Avx512() != nullptr && !Bf16TilesTakeManyTokens(cols);
}

}  // namespace

bool RepackEnabled() {
  const int v = g_repack.load(std::memory_order_relaxed);
  if (v >= 0) return v == 1;
  EnsureKernelPathsInitialized();
  return QuantRepackDefault() || Bf16RepackDefault();
}
void SetRepack(bool on) { g_repack.store(on ? 1 : 0, std::memory_order_relaxed); }
void ResetRepack() { g_repack.store(-1, std::memory_order_relaxed); }

bool WantsRepackForMatMul(const TensorView& w) {
  if (w.shape.size() != 2 || w.layout != WeightLayout::kRows || w.rows() % cpu::kRows16 != 0) {
    return false;
  }
  EnsureKernelPathsInitialized();
  const int v = g_repack.load(std::memory_order_relaxed);
  if (w.dtype == DType::kQ4_0 || w.dtype == DType::kQ8_0) {
    return w.cols() % kQuantBlock == 0 && (v >= 0 ? v == 1 : QuantRepackDefault());
  }
  if (w.dtype == DType::kBF16) {
    return Bf16Repackable(w.cols()) && (v >= 0 ? v == 1 : Bf16RepackDefault());
  }
  return false;
}

bool RepackForMatMul(TensorView* w, uint8_t* data) {
  if (!WantsRepackForMatMul(*w)) return false;
  if (w->dtype == DType::kBF16) {
    cpu::RepackBf16Rows16(data, w->rows(), w->cols());
  } else {
    cpu::RepackRows16(w->dtype, data, w->rows(), w->cols() / kQuantBlock);
  }
  w->data = data;
  w->layout = WeightLayout::kRows16;
  return true;
}

void MatMulRows(const TensorView& w, int64_t row_begin, int64_t row_end, const float* x,
                int n_tokens, float* y, ThreadPool* pool) {
  EnsureKernelPathsInitialized();
  const int64_t n_out = row_end - row_begin;
  if (n_out <= 0 || n_tokens <= 0) return;
  const int64_t k = w.cols();
  if (cpu::IsDequantMatMulType(w.dtype)) {
    DequantMatMul(w, row_begin, n_out, x, n_tokens, y, pool);
    return;
  }
  switch (w.dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
      QuantizedMatMul(w, row_begin, n_out, x, n_tokens, y, pool);
      return;
    case DType::kQ4_BF16:
      Int4MatMul(w, row_begin, n_out, x, n_tokens, y, pool);
      return;
    case DType::kBF16:
      if (w.layout == WeightLayout::kRows16) {
        Bf16Rows16MatMul(w, row_begin, n_out, x, n_tokens, y, pool);
        return;
      }
      if (ActiveBf16Path() == Bf16DotPath::kAvx512Bf16) {
        Bf16MatMulAvx512(w, row_begin, n_out, x, n_tokens, y, pool);
        return;
      }
      [[fallthrough]];
    case DType::kF32:
    case DType::kF16: {
      auto fn = w.dtype == DType::kF32   ? cpu::MatRowsF32
                : w.dtype == DType::kF16 ? cpu::MatRowsF16
                                         : cpu::MatRowsBF16;
      const cpu::DecodeReads reads = FloatDecodeReads();
      RunRows(n_out, k * n_tokens, pool, [&](int64_t r0, int64_t r1) {
        fn(w.row(row_begin + r0), w.row_bytes(), r1 - r0, k, x, n_tokens, y + r0, n_out, reads);
      });
      return;
    }
    default:
      // The loader admits only the dtypes above for linear weights; reaching
      // here is a caller bug. NaN outputs make it impossible to miss.
      LogOnce(LogLevel::kError, std::string("matmul-dtype-") + DTypeName(w.dtype), "matmul",
              std::string("MatMul: weight '") + w.name + "' has dtype " + DTypeName(w.dtype) +
                  ", expected a float or block-quantized dtype");
      FillNaN(y, n_out * n_tokens);
      return;
  }
}

void MatMul(const TensorView& w, const float* x, int n_tokens, float* y, ThreadPool* pool) {
  MatMulRows(w, 0, w.rows(), x, n_tokens, y, pool);
}

}  // namespace specd::kernels
