// MatMul / MatMulRows on every ISA path this CPU supports, against the scalar
// reference (kernels/cpu/reference.h), on odd shapes.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/reference.h"
#include "kernels/dispatch.h"
#include "kernels/kernel_paths_test_util.h"
#include "kernels/matmul_test_util.h"
#include "kernels/ops.h"

namespace specd::kernels {
namespace {

// sum_i |w[r, i] * x[t, i]|: the scale of rounding errors in output (t, r).
double AbsDot(const Weights& w, const std::vector<float>& x, int64_t cols, int64_t r, int t) {
  double s = 0;
  for (int64_t i = 0; i < cols; ++i)
    s += std::fabs(static_cast<double>(w.deq[r * cols + i]) * x[t * cols + i]);
  return s;
}

// Bound on |x·w - x̃·w| where x̃ is x quantized per block of 32 with
// d = amax / 127: each element moves by at most d / 2, so per block
// |Δ| <= ||w_b||_2 * sqrt(32) * amax_b / 254 (Cauchy-Schwarz).
double ActQuantBound(const Weights& w, const std::vector<float>& x, int64_t cols, int64_t r,
                     int t) {
  double bound = 0;
  for (int64_t b = 0; b < cols / 32; ++b) {
    double wn = 0, amax = 0;
    for (int i = 0; i < 32; ++i) {
      double wv = w.deq[r * cols + b * 32 + i];
      wn += wv * wv;
      amax = std::fmax(amax, std::fabs(static_cast<double>(x[t * cols + b * 32 + i])));
    }
    bound += std::sqrt(wn) * std::sqrt(32.0) * amax / 254.0;
  }
  return bound;
}

struct QuantCase {
  QuantDotIsa isa;
  DType dtype;
  bool amx = false;  // AMX-INT8 tiles for the multi-token matmuls
};

std::string QuantCaseName(const testing::TestParamInfo<QuantCase>& info) {
  return std::string(info.param.amx ? "amx" : QuantDotIsaName(info.param.isa)) + "_" +
         DTypeName(info.param.dtype);
}

class QuantMatMulTest : public testing::TestWithParam<QuantCase> {
 protected:
  void SetUp() override {
    if (!SetQuantDotIsa(GetParam().isa)) {
      GTEST_SKIP() << "not supported: this CPU lacks " << QuantDotIsaName(GetParam().isa)
                   << " (flags: " << GetCpuFeatures().FlagString() << ")";
    }
    if (!SetAmx(GetParam().amx)) {
      GTEST_SKIP() << "not supported: AMX-INT8 tiles unavailable (" << GetKernelPaths().amx_reason
                   << "; flags: " << GetCpuFeatures().FlagString() << ")";
    }
    ASSERT_EQ(AmxActive(), GetParam().amx);
  }
  void TearDown() override {
    SetQuantDotIsa(GetKernelPaths().quant_dot);
    SetAmx(GetKernelPaths().amx_int8);
  }
};

// Decode layouts the tests cover: 0 stream (the default), 1 stream with
// software prefetch along the row, 2 four rows side by side.
constexpr const char* kDecodeModeNames[] = {"stream decode", "stream decode + prefetch",
                                            "4-row decode"};
void SetDecodeMode(int mode) {
  SetStreamDecode(mode != 2);
  SetStreamPrefetchBytes(mode == 1 ? 1024 : 0);
}

TEST_P(QuantMatMulTest, MatchesReferenceOnOddShapes) {
  const DType dtype = GetParam().dtype;
  ThreadPool pool(3);
  // Every decode layout: one row at a time (default) without and with
  // software prefetch along the row, and 4 rows side by side.
  for (int mode : {0, 1, 2}) {
    SCOPED_TRACE(kDecodeModeNames[mode]);
    SetDecodeMode(mode);
    // cols: 1, 3, 5, 33 and 64 blocks; rows odd and even.
    for (int64_t cols : {32, 96, 160, 1056, 2048}) {
      // 33, 50: 16-row AMX groups and a rest on the AVX512-VNNI kernel.
      for (int64_t rows : {1, 7, 33, 50}) {
        Weights w = MakeWeights(dtype, rows, cols, static_cast<uint32_t>(rows * 131 + cols));
        // 2-5, 8: quad kernel (one, two quads, padding); 12 = one partial
        // 16-token tile; 20 = a tile + a quad; 33 = two tiles + 1 token on the
        // row kernel. AMX: 4 and up (Q8_0) / 9 and up (Q4_0) in padded
        // 16-token tiles.
        for (int n_tokens : {1, 2, 3, 4, 5, 7, 8, 12, 16, 20, 33}) {
          SCOPED_TRACE("cols=" + std::to_string(cols) + " rows=" + std::to_string(rows) +
                       " n_tokens=" + std::to_string(n_tokens));
          std::vector<float> x = MakeActs(n_tokens, cols, static_cast<uint32_t>(n_tokens + cols));
          std::vector<float> y(n_tokens * rows), y_pool(n_tokens * rows);
          std::vector<float> y_qref(n_tokens * rows), y_ref(n_tokens * rows);
          MatMul(w.view, x.data(), n_tokens, y.data(), nullptr);
          MatMul(w.view, x.data(), n_tokens, y_pool.data(), &pool);
          ref::MatMulQuantizedActs(w.view, 0, rows, x.data(), n_tokens, y_qref.data());
          ref::MatMul(w.view, x.data(), n_tokens, y_ref.data());
          double max_q = 0, max_f = 0;
          for (int t = 0; t < n_tokens; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const int64_t i = t * rows + r;
              const double s = AbsDot(w, x, cols, r, t);
              // Same integer block dots as the quantized reference; only f32
              // accumulation order and the f32 product dw * da differ.
              ASSERT_NEAR(y[i], y_qref[i], 1e-5 * s + 1e-30) << "t=" << t << " r=" << r;
              // Against exact f32 math: the activation quantization bound.
              ASSERT_NEAR(y[i], y_ref[i], ActQuantBound(w, x, cols, r, t) + 1e-5 * s)
                  << "t=" << t << " r=" << r;
              // Splitting rows across threads must not change any row's math.
              ASSERT_EQ(y[i], y_pool[i]) << "t=" << t << " r=" << r;
              max_q = std::fmax(max_q, std::fabs(y[i] - y_qref[i]));
              max_f = std::fmax(max_f, std::fabs(y[i] - y_ref[i]));
            }
          }
          RecordProperty("maxdiff", std::to_string(max_f));
        }
      }
    }
  }
  SetDecodeMode(0);
}

TEST_P(QuantMatMulTest, MatMulRowsSelectsRows) {
  const DType dtype = GetParam().dtype;
  const int64_t rows = 45, cols = 160;
  Weights w = MakeWeights(dtype, rows, cols, 7);
  for (int n_tokens : {1, 5}) {
    std::vector<float> x = MakeActs(n_tokens, cols, 11);
    const int64_t b = 13, e = 40;
    std::vector<float> y(n_tokens * (e - b)), y_ref(n_tokens * (e - b));
    MatMulRows(w.view, b, e, x.data(), n_tokens, y.data(), nullptr);
    ref::MatMulQuantizedActs(w.view, b, e, x.data(), n_tokens, y_ref.data());
    for (int t = 0; t < n_tokens; ++t) {
      for (int64_t r = 0; r < e - b; ++r) {
        ASSERT_NEAR(y[t * (e - b) + r], y_ref[t * (e - b) + r],
                    1e-5 * AbsDot(w, x, cols, b + r, t));
      }
    }
  }
}

TEST_P(QuantMatMulTest, ZeroActivationBlocksGiveZero) {
  // All-zero activations quantize with d = 0 (no division by zero).
  const DType dtype = GetParam().dtype;
  Weights w = MakeWeights(dtype, 9, 96, 3);
  std::vector<float> x(2 * 96, 0.f), y(2 * 9, 1.f);
  MatMul(w.view, x.data(), 2, y.data(), nullptr);
  for (float v : y) EXPECT_EQ(v, 0.f);
}

INSTANTIATE_TEST_SUITE_P(AllPaths, QuantMatMulTest,
                         testing::Values(QuantCase{QuantDotIsa::kScalar, DType::kQ8_0},
                                         QuantCase{QuantDotIsa::kScalar, DType::kQ4_0},
                                         QuantCase{QuantDotIsa::kAvx2, DType::kQ8_0},
                                         QuantCase{QuantDotIsa::kAvx2, DType::kQ4_0},
                                         QuantCase{QuantDotIsa::kAvxVnni, DType::kQ8_0},
                                         QuantCase{QuantDotIsa::kAvxVnni, DType::kQ4_0},
                                         QuantCase{QuantDotIsa::kAvx512Vnni, DType::kQ8_0},
                                         QuantCase{QuantDotIsa::kAvx512Vnni, DType::kQ4_0},
                                         QuantCase{QuantDotIsa::kAvx512Vnni, DType::kQ8_0, true},
                                         QuantCase{QuantDotIsa::kAvx512Vnni, DType::kQ4_0, true}),
                         QuantCaseName);

// Float weights on every Highway target this CPU supports (and, for bf16,
// the AVX512-BF16 path too).
void CheckFloatMatMul(DType dtype, double rel_tol) {
  ThreadPool pool(2);
  for (int64_t cols : {1, 13, 64, 77, 300}) {
    for (int64_t rows : {1, 5, 31}) {
      Weights w = MakeWeights(dtype, rows, cols, static_cast<uint32_t>(rows + 17 * cols));
      for (int n_tokens : {1, 3, 7, 8, 10, 16, 33}) {
        SCOPED_TRACE("cols=" + std::to_string(cols) + " rows=" + std::to_string(rows) +
                     " n_tokens=" + std::to_string(n_tokens));
        std::vector<float> x = MakeActs(n_tokens, cols, static_cast<uint32_t>(n_tokens * 3 + cols));
        std::vector<float> y(n_tokens * rows), y_pool(n_tokens * rows), y_ref(n_tokens * rows);
        MatMul(w.view, x.data(), n_tokens, y.data(), nullptr);
        MatMul(w.view, x.data(), n_tokens, y_pool.data(), &pool);
        ref::MatMul(w.view, x.data(), n_tokens, y_ref.data());
        for (int t = 0; t < n_tokens; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t i = t * rows + r;
            ASSERT_NEAR(y[i], y_ref[i], rel_tol * AbsDot(w, x, cols, r, t) + 1e-30)
                << "t=" << t << " r=" << r;
            ASSERT_EQ(y[i], y_pool[i]);
          }
        }
      }
    }
  }
}

class FloatMatMulTest : public testing::TestWithParam<DType> {
 protected:
  void TearDown() override {
    SetFloatTargets(0);
    SetBf16Path(GetKernelPaths().bf16);
  }
};

TEST_P(FloatMatMulTest, EveryHighwayTargetMatchesReference) {
  // The weights are exact in their dtype, so the reference multiplies the same
  // values; only f32 rounding differs: tolerance 1e-5 relative to sum |w x|.
  ASSERT_TRUE(SetBf16Path(Bf16DotPath::kHighway));
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    SetFloatTargets(target);
    ASSERT_STREQ(ActiveFloatTarget(), hwy::TargetName(target));
    CheckFloatMatMul(GetParam(), 1e-5);
  }
}

// A token's outputs are bitwise the same whether it is multiplied alone
// (decode) or inside a batch of any size at any offset (prefill, verify):
// speculative greedy decoding relies on it to reproduce plain greedy tokens.
// Token counts cover every float tile split (7 = 4 + 3, 8 = 4 + 4,
// 11 = 6 + 5, 13 = 5 + 4 + 4, 16 = 6 + 5 + 5 on AVX-512) and every quantized
// kernel's token range (2-4 one-token kernels, 5-8 quads, 9+ 16-token tiles
// and their rests, 64 = four tiles); cols cover Q4_0's tail blocks (nb % 4)
// and rows the 4-row kernels' leftover rows.
void CheckBatchInvariance(DType dtype, ThreadPool* pool = nullptr) {
  const bool quant = DTypeBlockElems(dtype) == 32;
  const std::vector<int64_t> cols_list =
      quant ? std::vector<int64_t>{32, 96, 160, 1056, 2048}
            : std::vector<int64_t>{13, 64, 300, 2048, 4100, 4112};
  for (int64_t cols : cols_list) {
    for (int64_t rows : quant ? std::vector<int64_t>{1, 7, 33, 50} : std::vector<int64_t>{1, 7, 33}) {
      Weights w = MakeWeights(dtype, rows, cols, static_cast<uint32_t>(rows * 5 + cols));
      const std::vector<int> token_counts =
          quant ? std::vector<int>{2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16, 17, 20, 33, 64}
                : std::vector<int>{2, 5, 6, 7, 8, 11, 13, 16, 33};
      for (int n_tokens : token_counts) {
        SCOPED_TRACE("cols=" + std::to_string(cols) + " rows=" + std::to_string(rows) +
                     " n_tokens=" + std::to_string(n_tokens));
        std::vector<float> x = MakeActs(n_tokens, cols, static_cast<uint32_t>(n_tokens + cols));
        std::vector<float> y(n_tokens * rows), y1(rows);
        MatMul(w.view, x.data(), n_tokens, y.data(), pool);
        for (int t = 0; t < n_tokens; ++t) {
          MatMul(w.view, x.data() + t * cols, 1, y1.data(), nullptr);
          for (int64_t r = 0; r < rows; ++r)
            ASSERT_EQ(y[t * rows + r], y1[r]) << "t=" << t << " r=" << r;
        }
      }
    }
  }
}

// Every path (AMX tiles included) and decode layout, in the default mode and
// with --deterministic: all Q8_0/Q4_0 kernels share one summation order, so
// the flag changes nothing for them.
TEST_P(QuantMatMulTest, BatchedEqualsOneTokenBitwise) {
  ThreadPool pool(3);
  for (bool invariant : {false, true}) {
    SCOPED_TRACE(invariant ? "batch-invariant mode" : "default mode");
    SetBatchInvariant(invariant);
    for (int mode : {0, 1, 2}) {
      SCOPED_TRACE(kDecodeModeNames[mode]);
      SetDecodeMode(mode);
      CheckBatchInvariance(GetParam().dtype);
      CheckBatchInvariance(GetParam().dtype, &pool);
    }
  }
  SetDecodeMode(0);
  SetBatchInvariant(false);
}

// The written-out summation order against the f64 quantized reference (same
// integer dots, f64 sums): they may differ by f32 rounding only.
TEST(QuantOrderReferenceTest, MatchesF64QuantizedReference) {
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0}) {
    for (int64_t cols : {32, 608, 2048}) {
      const int64_t rows = 9;
      const int n_tokens = 3;
      Weights w = MakeWeights(dtype, rows, cols, static_cast<uint32_t>(cols));
      std::vector<float> x = MakeActs(n_tokens, cols, 5);
      std::vector<float> y_ord(n_tokens * rows), y_q(n_tokens * rows);
      ref::MatMulQuantizedActsInOrder(w.view, 0, rows, x.data(), n_tokens, y_ord.data());
      ref::MatMulQuantizedActs(w.view, 0, rows, x.data(), n_tokens, y_q.data());
      for (int t = 0; t < n_tokens; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_NEAR(y_ord[t * rows + r], y_q[t * rows + r], 1e-5 * AbsDot(w, x, cols, r, t))
              << DTypeName(dtype) << " cols=" << cols << " t=" << t << " r=" << r;
        }
      }
    }
  }
}

// The summation order itself: every path, token count (one-token, 4-row,
// quad, 16-token, AMX pair and tile kernels with their leftover rows) and
// decode layout equals the order written out in the scalar reference, bit
// for bit; cols cover nb % 16 and nb % 4 tails and fewer than 16 blocks.
TEST_P(QuantMatMulTest, EqualsSummationOrderReferenceBitwise) {
  const DType dtype = GetParam().dtype;
  ThreadPool pool(3);
  for (int mode : {0, 2}) {
    SCOPED_TRACE(kDecodeModeNames[mode]);
    SetDecodeMode(mode);
    for (int64_t cols : {32, 96, 160, 608, 1056, 2048}) {
      for (int64_t rows : {5, 33, 50}) {
        Weights w = MakeWeights(dtype, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
        for (int n_tokens : {1, 2, 3, 4, 5, 8, 9, 16, 21}) {
          SCOPED_TRACE("cols=" + std::to_string(cols) + " rows=" + std::to_string(rows) +
                       " n_tokens=" + std::to_string(n_tokens));
          std::vector<float> x = MakeActs(n_tokens, cols, static_cast<uint32_t>(n_tokens * 3 + cols));
          std::vector<float> y(n_tokens * rows), y_pool(n_tokens * rows), y_ord(n_tokens * rows);
          MatMul(w.view, x.data(), n_tokens, y.data(), nullptr);
          MatMul(w.view, x.data(), n_tokens, y_pool.data(), &pool);
          ref::MatMulQuantizedActsInOrder(w.view, 0, rows, x.data(), n_tokens, y_ord.data());
          for (size_t i = 0; i < y.size(); ++i) {
            ASSERT_EQ(y[i], y_ord[i]) << "t=" << i / rows << " r=" << i % rows;
            ASSERT_EQ(y_pool[i], y_ord[i]) << "t=" << i / rows << " r=" << i % rows;
          }
        }
      }
    }
  }
  SetDecodeMode(0);
}

TEST_P(FloatMatMulTest, BatchedEqualsOneTokenBitwiseOnEveryTarget) {
  ASSERT_TRUE(SetBf16Path(Bf16DotPath::kHighway));
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    SetFloatTargets(target);
    for (int mode : {0, 1, 2}) {
      SCOPED_TRACE(kDecodeModeNames[mode]);
      SetDecodeMode(mode);
      CheckBatchInvariance(GetParam());
    }
    SetDecodeMode(0);
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FloatMatMulTest,
                         testing::Values(DType::kF32, DType::kF16, DType::kBF16),
                         [](const testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

// Q4_BF16 (compressed-tensors INT4, W4A16): f32 activations on every path.
class Int4MatMulTest : public testing::TestWithParam<QuantDotIsa> {
 protected:
  void SetUp() override {
    if (!SetQuantDotIsa(GetParam())) {
      GTEST_SKIP() << "not supported: this CPU lacks " << QuantDotIsaName(GetParam())
                   << " (flags: " << GetCpuFeatures().FlagString() << ")";
    }
  }
  void TearDown() override {
    SetQuantDotIsa(GetKernelPaths().quant_dot);
    SetDecodeMode(0);
    SetBatchInvariant(false);
  }
};

// The weights are exact in f32, so the reference (f64 sums of the dequantized
// weights) differs by f32 accumulation only: each output sums k products, so
// |error| <= k * 2^-24 * sum |w x| to first order, for any summation order.
double Int4Tolerance(int64_t cols, double abs_dot) {
  return static_cast<double>(cols) * std::ldexp(1.0, -24) * abs_dot + 1e-30;
}

TEST_P(Int4MatMulTest, MatchesReferenceOnOddShapes) {
  ThreadPool pool(3);
  // cols: 1, 3, 5 blocks, then 33 and 64 (k chunks of 16 blocks and a rest).
  for (int64_t cols : {32, 96, 160, 1056, 2048}) {
    // rows: 4-row decode groups and rests, 16-row prefill groups and rests.
    for (int64_t rows : {1, 7, 33, 50}) {
      Weights w = MakeWeights(DType::kQ4_BF16, rows, cols, static_cast<uint32_t>(rows * 131 + cols));
      // 1 decode; 2-7 one partial token chunk; 8 one AVX-512 chunk (two AVX2
      // chunks); 9, 17, 33 full chunks and a rest.
      for (int n_tokens : {1, 2, 3, 5, 7, 8, 9, 12, 17, 33}) {
        SCOPED_TRACE("cols=" + std::to_string(cols) + " rows=" + std::to_string(rows) +
                     " n_tokens=" + std::to_string(n_tokens));
        std::vector<float> x = MakeActs(n_tokens, cols, static_cast<uint32_t>(n_tokens + cols));
        std::vector<float> y(n_tokens * rows), y_pool(n_tokens * rows), y_ref(n_tokens * rows);
        MatMul(w.view, x.data(), n_tokens, y.data(), nullptr);
        MatMul(w.view, x.data(), n_tokens, y_pool.data(), &pool);
        ref::MatMul(w.view, x.data(), n_tokens, y_ref.data());
        double max_f = 0;
        for (int t = 0; t < n_tokens; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t i = t * rows + r;
            ASSERT_NEAR(y[i], y_ref[i], Int4Tolerance(cols, AbsDot(w, x, cols, r, t)))
                << "t=" << t << " r=" << r;
            ASSERT_EQ(y[i], y_pool[i]) << "t=" << t << " r=" << r;
            max_f = std::fmax(max_f, std::fabs(y[i] - y_ref[i]));
          }
        }
        RecordProperty("maxdiff", std::to_string(max_f));
      }
    }
  }
}

TEST_P(Int4MatMulTest, MatMulRowsSelectsRows) {
  const int64_t rows = 45, cols = 160;
  Weights w = MakeWeights(DType::kQ4_BF16, rows, cols, 7);
  for (int n_tokens : {1, 5, 11}) {
    std::vector<float> x = MakeActs(n_tokens, cols, 11);
    const int64_t b = 13, e = 40;
    std::vector<float> y(n_tokens * (e - b)), y_ref(n_tokens * (e - b));
    MatMulRows(w.view, b, e, x.data(), n_tokens, y.data(), nullptr);
    ref::MatMulRows(w.view, b, e, x.data(), n_tokens, y_ref.data());
    for (int t = 0; t < n_tokens; ++t) {
      for (int64_t r = 0; r < e - b; ++r) {
        ASSERT_NEAR(y[t * (e - b) + r], y_ref[t * (e - b) + r],
                    Int4Tolerance(cols, AbsDot(w, x, cols, b + r, t)))
            << "t=" << t << " r=" << r;
      }
    }
  }
}

TEST_P(Int4MatMulTest, ActivationsAreNotQuantized) {
  // One weight of 1 and activations too fine for any 8-bit block scale: an
  // activation-quantizing kernel would return 0 for the small one.
  std::vector<uint16_t> row(32, 0);
  row[3] = F32ToBF16(7.5f);  // scale 1, q = 7 -> weight 7
  BlockQ4_BF16 blk;
  QuantizeRowQ4_BF16(row.data(), &blk, 32);
  TensorView w{"one", DType::kQ4_BF16, {1, 32}, &blk, sizeof(blk)};
  std::vector<float> x(32, 0.f);
  x[0] = 1000.f;
  x[3] = 1e-3f;
  float y = 0;
  MatMul(w, x.data(), 1, &y, nullptr);
  EXPECT_EQ(y, 7.f * x[3]);  // the one non-zero product, rounded once
}

// Either mode and decode-layout flag: a token's outputs are bitwise the same
// alone or in a batch (the kernels keep one summation order per output).
TEST_P(Int4MatMulTest, BatchedEqualsOneTokenBitwiseInEveryMode) {
  ThreadPool pool(3);
  for (bool invariant : {true, false}) {
    SCOPED_TRACE(invariant ? "batch-invariant mode" : "default mode");
    SetBatchInvariant(invariant);
    for (int mode : {0, 2}) {
      SCOPED_TRACE(kDecodeModeNames[mode]);
      SetDecodeMode(mode);
      CheckBatchInvariance(DType::kQ4_BF16);
      CheckBatchInvariance(DType::kQ4_BF16, &pool);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllPaths, Int4MatMulTest,
                         testing::Values(QuantDotIsa::kScalar, QuantDotIsa::kAvx2,
                                         QuantDotIsa::kAvxVnni, QuantDotIsa::kAvx512Vnni),
                         [](const testing::TestParamInfo<QuantDotIsa>& info) {
                           return std::string(QuantDotIsaName(info.param));
                         });

TEST(Bf16AmxMatMulTest, MatchesReferenceAndTheAvx512Bf16Path) {
  if (!SetBf16Path(Bf16DotPath::kAvx512Bf16)) {
    GTEST_SKIP() << "not supported: this CPU lacks avx512_bf16";
  }
  if (!GetCpuFeatures().amx_bf16 || !SetAmx(true)) {
    SetBf16Path(GetKernelPaths().bf16);
    GTEST_SKIP() << "not supported: AMX-BF16 unavailable (" << GetKernelPaths().amx_reason
                 << "; flags: " << GetCpuFeatures().FlagString() << ")";
  }
  ThreadPool pool(3);
  // cols: multiples of 32 take the tile kernel; 77 falls back. rows: 16-row
  // groups and rests; tokens: from the tile threshold (2) up, partial tiles.
  for (int64_t cols : {32, 96, 77, 2048}) {
    for (int64_t rows : {1, 16, 31, 50}) {
      Weights w = MakeWeights(DType::kBF16, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
      for (int n_tokens : {2, 3, 4, 7, 16, 33}) {
        SCOPED_TRACE("cols=" + std::to_string(cols) + " rows=" + std::to_string(rows) +
                     " n_tokens=" + std::to_string(n_tokens));
        std::vector<float> x = MakeActs(n_tokens, cols, static_cast<uint32_t>(n_tokens + 3 * cols));
        std::vector<float> y(n_tokens * rows), y_pool(n_tokens * rows), y_vec(n_tokens * rows),
            y_ref(n_tokens * rows);
        ASSERT_TRUE(SetAmx(true));
        MatMul(w.view, x.data(), n_tokens, y.data(), nullptr);
        MatMul(w.view, x.data(), n_tokens, y_pool.data(), &pool);
        ASSERT_TRUE(SetAmx(false));
        MatMul(w.view, x.data(), n_tokens, y_vec.data(), nullptr);
        ref::MatMul(w.view, x.data(), n_tokens, y_ref.data());
        for (int t = 0; t < n_tokens; ++t) {
          for (int64_t r = 0; r < rows; ++r) {
            const int64_t i = t * rows + r;
            const double s = AbsDot(w, x, cols, r, t);
            // The same bf16 products as vdpbf16ps, summed in another order.
            ASSERT_NEAR(y[i], y_vec[i], 1e-5 * s + 1e-30) << "t=" << t << " r=" << r;
            // Activations rounded to bf16, as on the AVX512-BF16 path.
            ASSERT_NEAR(y[i], y_ref[i], std::ldexp(1.0, -8) * s + 1e-5 * s + 1e-30)
                << "t=" << t << " r=" << r;
            ASSERT_EQ(y[i], y_pool[i]) << "t=" << t << " r=" << r;
          }
        }
      }
    }
  }
  SetAmx(GetKernelPaths().amx_int8);
  SetBf16Path(GetKernelPaths().bf16);
}

TEST(Bf16Avx512MatMulTest, MatchesReference) {
  if (!SetBf16Path(Bf16DotPath::kAvx512Bf16)) {
    GTEST_SKIP() << "not supported: this CPU lacks avx512_bf16";
  }
  // Activations are rounded to bf16 (8 significant bits: relative error
  // <= 2^-8 each), so the tolerance is 2^-8 relative to sum |w x| plus f32
  // rounding.
  CheckFloatMatMul(DType::kBF16, std::ldexp(1.0, -8) + 1e-5);
  SetBf16Path(GetKernelPaths().bf16);
}

// BF16 is batch-invariant on every kernel path of this CPU in batch-invariant
// mode, and outside it wherever the AMX-BF16 tiles are not on (with them, the
// many-token products sum in another order than the one-token kernel).
TEST(Bf16MatMulTest, BatchedEqualsOneTokenBitwiseOnEveryPath) {
  for (const KernelPathCase& c : KernelPathCasesOfThisCpu()) {
    ScopedKernelPaths paths(c.paths);
    for (bool invariant : {true, false}) {
      if (!invariant && c.paths.amx_int8 && GetCpuFeatures().amx_bf16) continue;
      SCOPED_TRACE("path " + c.name + (invariant ? ", batch-invariant" : ""));
      SetBatchInvariant(invariant);
      CheckBatchInvariance(DType::kBF16);
      if (HasFatalFailure()) break;
    }
    SetBatchInvariant(false);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace specd::kernels
