// Kernel microbenchmarks (Google Benchmark).
//
//   BM_ReadBandwidth/threads:N/prefetch:P   STREAM-like read of a 1 GiB array
//                                (sum of floats), with (P=1) or without software
//                                prefetch: the faster of the two is the
//                                machine's attainable read GB/s.
//   BM_MatMul/<dtype>/<rows>/<cols>/<n_tokens>/<threads>
//                                y = x · Wᵀ at the Llama-3.2-1B shapes;
//                                "weight_GBps" counts weight bytes read per
//                                second, comparable with BM_ReadBandwidth.
//   BM_MatMulGgml/<dtype>/<rows>/<cols>/<n_tokens>/<threads>
//                                the same for the ggml block types that are
//                                dequantized to f32 rows (Q4_1 ... IQ4_XS),
//                                with Q4_0 and F32 as baselines.
//   BM_ThreadPoolRun/<threads>   fork/join cost of an empty parallel region.
//   BM_Attention/<shape>/<n_q>/<n_ctx>/<threads>
//                                paged attention (16-slot pages) of n_q query
//                                tokens under the causal mask over n_ctx
//                                slots; shape 0 is the demo model's heads
//                                (4 q / 2 kv, head_dim 40), 1 Llama-3.2-1B's
//                                (32 / 8, 64). A verify pass of n tokens runs
//                                n_q = n; its cost over n_q = 1 is what the
//                                attention part of speculation costs.
//   BM_ArithPeak/op:0|1          one core's arithmetic peak: 512-bit f32 FMA
//                                (op 0) or 512-bit vpdpbusd (op 1), 24
//                                independent chains; "GMACs" is the bound a
//                                compute-bound matmul (prefill, verify) can
//                                reach, e.g. 16 tokens of a 1.24 G-parameter
//                                model are 19.8 G multiply-adds.
//
// Quote GEMV results as a fraction of BM_ReadBandwidth at the same thread
// count, e.g.:
//   kernels_bench --benchmark_filter='ReadBandwidth|MatMul/q4_0/8192/2048/1/'
// SPECD_KERNEL_ISA=avx2 (etc.) benchmarks a narrower path.
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/read_calibration.h"
#include "kernels/thread_pool.h"
#include "platform/cpu_features.h"
#include "tensor/dtype.h"

namespace specd::kernels {
namespace {

constexpr DType kDtypes[] = {DType::kF32,  DType::kF16,  DType::kBF16,
                             DType::kQ8_0, DType::kQ4_0, DType::kQ4_BF16};

ThreadPool* Pool(int threads) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[threads];
  if (!p) p = std::make_unique<ThreadPool>(threads);
  return p.get();
}

// ---------------------------------------------------------------- bandwidth

// 1 GiB of floats in 2 MiB pages where the kernel grants them (the weights'
// anonymous copy gets MADV_HUGEPAGE too, loader/), so the probe pays the same
// TLB cost per byte as a decode step.
struct BigArrayT {
  float* data = nullptr;
  size_t size = 0;
};
const BigArrayT& BigArray() {
  static BigArrayT a = [] {
    BigArrayT v;
    v.size = size_t{1} << 28;
    const size_t bytes = v.size * sizeof(float);
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();  // benchmark harness: no memory, no probe
    madvise(p, bytes, MADV_HUGEPAGE);
    v.data = static_cast<float*>(p);
    for (size_t i = 0; i < v.size; ++i) v.data[i] = static_cast<float>(i & 1023);
    return v;
  }();
  return a;
}

// The read loop is kernels::SumFloats (read_calibration.h: 32-byte loads,
// AVX2 where present). Software prefetch 1 KiB ahead or none: which one reads
// faster depends on the machine (without it a single thread read ~6 GB/s on
// one Intel VM where the prefetching decode kernels reached 9; with it a Zen 4
// guest read less), so the probe runs both and the attainable bandwidth is
// the faster of the two.

void BM_ReadBandwidth(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const bool prefetch = state.range(1) != 0;
  const auto& a = BigArray();
  ThreadPool* pool = Pool(threads);
  std::vector<float> partial(threads * 16);
  for (auto _ : state) {
    pool->ParallelFor(threads, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t chunk = static_cast<int64_t>(a.size) / threads;
        partial[t * 16] = SumFloats(a.data + t * chunk, chunk, prefetch);
      }
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(a.size * sizeof(float)));
  state.counters["GBps"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * a.size * sizeof(float) / 1e9,
                         benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReadBandwidth)
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->ArgNames({"threads", "prefetch"})
    ->UseRealTime()
    ->MinTime(1.0);

// ------------------------------------------------------------------- matmul

// Random weights of the given dtype, generated straight into storage format
// (quantizing 260M floats would dominate the run). One matrix is kept at a time.
struct WeightCache {
  DType dtype = DType::kF32;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> bytes;
};

const std::vector<uint8_t>& Weights(DType dtype, int64_t rows, int64_t cols) {
  static WeightCache cache;
  if (cache.dtype == dtype && cache.rows == rows && cache.cols == cols) return cache.bytes;
  cache.bytes.clear();
  cache.bytes.shrink_to_fit();
  cache.dtype = dtype;
  cache.rows = rows;
  cache.cols = cols;
  cache.bytes.resize(RowBytes(dtype, cols) * rows);
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= cache.bytes.size(); i += 8) {
    uint64_t v = rng();
    std::memcpy(&cache.bytes[i], &v, 8);
  }
  // Make every float / scale finite and small.
  const uint16_t scale = F32ToF16(0.01f);
  uint8_t* p = cache.bytes.data();
  const size_t n = cache.bytes.size();
  switch (dtype) {
    case DType::kF32:
      for (size_t i = 0; i < n; i += 4) {
        float f = static_cast<float>(p[i] % 64) / 64.f - 0.5f;
        std::memcpy(p + i, &f, 4);
      }
      break;
    case DType::kF16:
    case DType::kBF16:
      for (size_t i = 0; i < n; i += 2) p[i + 1] &= 0x3b;  // |x| < 1, no inf/nan
      break;
    case DType::kQ8_0:
      for (size_t i = 0; i < n; i += sizeof(BlockQ8_0)) {
        std::memcpy(p + i, &scale, 2);
        for (size_t j = 2; j < sizeof(BlockQ8_0); ++j) {
          if (p[i + j] == 0x80) p[i + j] = 0x81;  // -128 never occurs in Q8_0 data
        }
      }
      break;
    case DType::kQ4_0:
      for (size_t i = 0; i < n; i += sizeof(BlockQ4_0)) std::memcpy(p + i, &scale, 2);
      break;
    case DType::kQ4_BF16: {
      const uint16_t bf16_scale = F32ToBF16(0.01f);
      for (size_t i = 0; i < n; i += sizeof(BlockQ4_BF16)) std::memcpy(p + i, &bf16_scale, 2);
      break;
    }
    default: {
      // The other block types: 16 quantized random rows, repeated.
      const size_t row_bytes = RowBytes(dtype, cols);
      std::normal_distribution<float> dist(0.f, 0.02f);
      std::vector<float> row(static_cast<size_t>(cols));
      for (int64_t r = 0; r < rows; ++r) {
        if (r < 16) {
          for (auto& v : row) v = dist(rng);
          QuantizeRow(dtype, row.data(), p + r * row_bytes, cols);
        } else {
          std::memcpy(p + r * row_bytes, p + (r % 16) * row_bytes, row_bytes);
        }
      }
      break;
    }
  }
  return cache.bytes;
}

// Times MatMul of `w` (rows x cols) over n_tokens random activations on
// `threads` threads; the label starts with `what`.
void TimeMatMul(benchmark::State& state, const TensorView& w, int n_tokens, int threads,
                const std::string& what) {
  const int64_t rows = w.rows(), cols = w.cols();
  std::vector<float> x(n_tokens * cols), y(n_tokens * rows);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  for (auto& v : x) v = dist(rng);
  ThreadPool* pool = Pool(threads);
  for (auto _ : state) {
    MatMul(w, x.data(), n_tokens, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetLabel(what + " " + std::to_string(rows) + "x" + std::to_string(cols) +
                 " tok=" + std::to_string(n_tokens) + " thr=" + std::to_string(threads) +
                 " q=" + QuantDotIsaName(ActiveQuantDotIsa()) +
                 (BatchInvariantEnabled() ? " batch-invariant" : ""));
  state.counters["weight_GBps"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * w.nbytes / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOPs"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * 2.0 * rows * cols * n_tokens / 1e9,
      benchmark::Counter::kIsRate);
}

void BM_MatMul(benchmark::State& state) {
  const DType dtype = kDtypes[state.range(0)];
  const int64_t rows = state.range(1), cols = state.range(2);
  const auto& bytes = Weights(dtype, rows, cols);
  TensorView w;
  w.name = "bench";
  w.dtype = dtype;
  w.shape = {rows, cols};
  w.data = bytes.data();
  w.nbytes = bytes.size();
  TimeMatMul(state, w, static_cast<int>(state.range(3)), static_cast<int>(state.range(4)),
             DTypeName(dtype));
}

void MatMulArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"dtype", "rows", "cols", "tok", "thr"});
  // dtype index into kDtypes: 4 = q4_0, 3 = q8_0, 1 = f16, 2 = bf16, 5 = q4_bf16.
  for (int dt : {4, 3, 1, 2, 5}) {
    for (auto [rows, cols] :
         {std::pair{512, 2048}, {2048, 2048}, {8192, 2048}, {2048, 8192}, {128256, 2048}}) {
      for (int tok : {1, 2, 4, 8, 12, 16, 64}) {
        for (int thr : {1, 2}) b->Args({dt, rows, cols, tok, thr});
      }
    }
    // Long rows (the down projection's k) in a matrix several times the size
    // of a last-level cache: decode of a down-projection-like shape from DRAM.
    for (int thr : {1, 2}) b->Args({dt, 16384, 8192, 1, thr});
  }
  // The embedded demo model's and its EAGLE-3 head's shapes (hidden 160,
  // ffn 432, vocab 2048, draft vocab 1536) at verify sizes: a small model's
  // matmuls are a few microseconds, where per-call costs show.
  for (auto [rows, cols] : {std::pair{320, 160}, {864, 160}, {160, 432}, {160, 480},
                            {1536, 160}, {2048, 160}}) {
    for (int tok : {1, 2, 3, 4}) b->Args({2, rows, cols, tok, 1});
  }
}
BENCHMARK(BM_MatMul)->Apply(MatMulArgs)->UseRealTime()->Unit(benchmark::kMicrosecond);

constexpr DType kGgmlDtypes[] = {DType::kQ4_0,  DType::kF32,  DType::kQ4_1,  DType::kQ5_0,
                                 DType::kQ5_1,  DType::kQ2_K, DType::kQ3_K,  DType::kQ4_K,
                                 DType::kQ5_K,  DType::kQ6_K, DType::kIQ4_NL, DType::kIQ4_XS};

void BM_MatMulGgml(benchmark::State& state) {
  const DType dtype = kGgmlDtypes[state.range(0)];
  const int64_t rows = state.range(1), cols = state.range(2);
  const auto& bytes = Weights(dtype, rows, cols);
  TensorView w;
  w.name = "bench";
  w.dtype = dtype;
  w.shape = {rows, cols};
  w.data = bytes.data();
  w.nbytes = bytes.size();
  TimeMatMul(state, w, static_cast<int>(state.range(3)), static_cast<int>(state.range(4)),
             DTypeName(dtype));
}
void MatMulGgmlArgs(benchmark::internal::Benchmark* b) {
  b->ArgNames({"dtype", "rows", "cols", "tok", "thr"});
  for (int dt = 0; dt < static_cast<int>(std::size(kGgmlDtypes)); ++dt) {
    for (auto [rows, cols] : {std::pair{2048, 2048}, {8192, 2048}, {2048, 8192}}) {
      for (int tok : {1, 16}) {
        for (int thr : {1, 2}) b->Args({dt, rows, cols, tok, thr});
      }
    }
  }
}
BENCHMARK(BM_MatMulGgml)->Apply(MatMulGgmlArgs)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Q4_0 / Q8_0 repacked into 16-row groups (RepackForMatMul), the same shapes
// as BM_MatMul's rows: compare with BM_MatMul/dtype:4 (q4_0) and 3 (q8_0).
void BM_MatMulRows16(benchmark::State& state) {
  const DType dtype = kDtypes[state.range(0)];
  const int64_t rows = state.range(1), cols = state.range(2);
  std::vector<uint8_t> bytes = Weights(dtype, rows, cols);
  TensorView w;
  w.name = "bench";
  w.dtype = dtype;
  w.shape = {rows, cols};
  w.nbytes = bytes.size();
  SetRepack(true);
  if (!RepackForMatMul(&w, bytes.data())) {
    state.SkipWithError("not repackable");
    return;
  }
  TimeMatMul(state, w, static_cast<int>(state.range(3)), static_cast<int>(state.range(4)),
             std::string(DTypeName(dtype)) + " rows16");
}
void Rows16Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"dtype", "rows", "cols", "tok", "thr"});
  for (int dt : {4, 3}) {
    for (auto [rows, cols] :
         {std::pair{512, 2048}, {2048, 2048}, {8192, 2048}, {2048, 8192}, {128256, 2048}}) {
      for (int tok : {1, 2, 4, 8, 12, 16, 64}) {
        for (int thr : {1, 2}) b->Args({dt, rows, cols, tok, thr});
      }
    }
    for (int thr : {1, 2}) b->Args({dt, 16384, 8192, 1, thr});
  }
  // BF16 (dtype 2): the 1B shapes, and the demo model's (see MatMulArgs).
  for (auto [rows, cols] : {std::pair{2048, 2048}, {8192, 2048}, {2048, 8192}, {128256, 2048}}) {
    for (int tok : {1, 2, 3, 4, 8, 16, 64}) b->Args({2, rows, cols, tok, 1});
  }
  for (auto [rows, cols] : {std::pair{320, 160}, {864, 160}, {160, 432}, {160, 480},
                            {1536, 160}, {2048, 160}}) {
    for (int tok : {1, 2, 3, 4}) b->Args({2, rows, cols, tok, 1});
  }
}
BENCHMARK(BM_MatMulRows16)->Apply(Rows16Args)->UseRealTime()->Unit(benchmark::kMicrosecond);

// -------------------------------------------------------------- thread pool

void BM_ThreadPoolRun(benchmark::State& state) {
  ThreadPool* pool = Pool(static_cast<int>(state.range(0)));
  std::vector<int64_t> sink(64 * 16);
  for (auto _ : state) {
    pool->Run([&](int i, int) { sink[i * 16] += 1; });
  }
  benchmark::DoNotOptimize(sink.data());
}
BENCHMARK(BM_ThreadPoolRun)->Arg(2)->Arg(4)->ArgName("threads")->UseRealTime();

// ---------------------------------------------------------------- attention

void BM_Attention(benchmark::State& state) {
  struct Heads {
    int n_heads, n_kv_heads, head_dim;
  };
  constexpr Heads kShapes[] = {{4, 2, 40}, {32, 8, 64}};
  const Heads hs = kShapes[state.range(0)];
  const int n_q = static_cast<int>(state.range(1)), n_ctx = static_cast<int>(state.range(2));
  const int threads = static_cast<int>(state.range(3));
  constexpr int kPage = 16;
  const int n_pages = (n_ctx + kPage - 1) / kPage;
  const size_t page_elems = size_t{kPage} * hs.n_kv_heads * hs.head_dim;
  std::mt19937 rng(3);
  std::normal_distribution<float> dist;
  std::vector<float> k(n_pages * page_elems), v(n_pages * page_elems);
  std::vector<float> q(size_t(n_q) * hs.n_heads * hs.head_dim), out(q.size());
  for (auto* buf : {&k, &v, &q})
    for (float& x : *buf) x = dist(rng);
  std::vector<float*> kp(n_pages), vp(n_pages);
  for (int p = 0; p < n_pages; ++p) {
    kp[p] = k.data() + p * page_elems;
    vp[p] = v.data() + p * page_elems;
  }
  const KvPages pages{kp.data(), vp.data(), kPage};
  ThreadPool* pool = Pool(threads);
  for (auto _ : state) {
    Attention(q.data(), n_q, n_ctx, pages, nullptr, hs.n_heads, hs.n_kv_heads, hs.head_dim,
              out.data(), pool);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_Attention)
    ->ArgNames({"shape", "n_q", "ctx", "thr"})
    ->ArgsProduct({{0}, {1, 2, 4, 8}, {128, 256}, {1}})
    ->ArgsProduct({{1}, {1, 2, 4, 8}, {64, 512, 2048}, {1, 2}})
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

// ---------------------------------------------------------- arithmetic peak

#if defined(__x86_64__)
constexpr int kPeakChains = 24;
constexpr int64_t kPeakSteps = 1 << 16;

__attribute__((target("avx512f"), noinline)) float FmaPeak(float seed) {
  __m512 acc[kPeakChains];
  for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm512_set1_ps(seed * static_cast<float>(i));
  __m512 a = _mm512_set1_ps(1.0001f), b = _mm512_set1_ps(0.9999f);
  for (int64_t s = 0; s < kPeakSteps; ++s) {
    #pragma GCC unroll 24
    for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm512_fmadd_ps(a, b, acc[i]);
    __asm__ volatile("" : "+v"(a));  // keeps the loop from being folded
  }
  __m512 sum = acc[0];
  for (int i = 1; i < kPeakChains; ++i) sum = _mm512_add_ps(sum, acc[i]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) int DpbusdPeak(int seed) {
  __m512i acc[kPeakChains];
  for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm512_set1_epi32(seed + i);
  __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
  for (int64_t s = 0; s < kPeakSteps; ++s) {
#pragma GCC unroll 24
    for (int i = 0; i < kPeakChains; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    __asm__ volatile("" : "+v"(a));
  }
  __m512i sum = acc[0];
  for (int i = 1; i < kPeakChains; ++i) sum = _mm512_add_epi32(sum, acc[i]);
  alignas(64) int lanes[16];
  _mm512_store_si512(lanes, sum);
  uint32_t total = 0;
  for (int v : lanes) total += static_cast<uint32_t>(v);
  return static_cast<int>(total & 0xFFFF);
}

void BM_ArithPeak(benchmark::State& state) {
  const bool dpbusd = state.range(0) == 1;
  const CpuFeatures& cpu = GetCpuFeatures();
  if (!cpu.avx512f || (dpbusd && !(cpu.avx512bw && cpu.avx512_vnni))) {
    state.SkipWithError("needs AVX-512 (and AVX512-VNNI for op 1)");
    return;
  }
  int64_t sink = 0;
  for (auto _ : state)
    sink += dpbusd ? DpbusdPeak(static_cast<int>(sink & 1)) : static_cast<int64_t>(FmaPeak(1.f));
  benchmark::DoNotOptimize(sink);
  const double macs_per_op = dpbusd ? 64 : 16;
  state.counters["GMACs"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * kPeakSteps * kPeakChains * macs_per_op / 1e9,
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ArithPeak)->Arg(0)->Arg(1)->ArgName("op")->UseRealTime();
#endif

}  // namespace
}  // namespace specd::kernels

BENCHMARK_MAIN();
