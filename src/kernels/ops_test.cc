// Elementwise ops on every Highway target this CPU supports, against the
// scalar reference and independent invariants.
#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/cpu/reference.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"

namespace specd::kernels {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Runs `body` once per supported Highway target.
template <class F>
void ForEachTarget(F body) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    SetFloatTargets(target);
    body();
  }
  SetFloatTargets(0);
}

TEST(OpsTest, RmsNormMatchesReference) {
  ForEachTarget([] {
    for (int dim : {1, 7, 64, 130, 2048}) {
      for (int n_tokens : {1, 3}) {
        auto x = Random(n_tokens * dim, dim, 3.f);
        auto w = Random(dim, dim + 1);
        std::vector<float> out(x.size()), ref_out(x.size());
        RmsNorm(x.data(), w.data(), n_tokens, dim, 1e-5f, out.data());
        ref::RmsNorm(x.data(), w.data(), n_tokens, dim, 1e-5f, ref_out.data());
        // f32 sum of squares: relative error ~dim * 2^-24; 1e-5 relative covers dim 2048.
        for (size_t i = 0; i < out.size(); ++i) {
          ASSERT_NEAR(out[i], ref_out[i], 1e-5 * std::fabs(ref_out[i]) + 1e-7) << "dim=" << dim;
        }
        // In place (out aliases x) gives the same result.
        RmsNorm(x.data(), w.data(), n_tokens, dim, 1e-5f, x.data());
        for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(x[i], out[i]);
      }
    }
  });
}

// A token's normalized row is bitwise the same alone or inside a batch.
TEST(OpsTest, RmsNormRowAloneEqualsRowInBatch) {
  ForEachTarget([] {
    for (int dim : {1, 7, 64, 130, 2048, 2050}) {
      for (int n_tokens : {2, 5, 16, 64}) {
        auto x = Random(n_tokens * dim, dim * 7 + n_tokens, 3.f);
        auto w = Random(dim, dim + 2);
        std::vector<float> out(x.size()), out1(dim);
        RmsNorm(x.data(), w.data(), n_tokens, dim, 1e-5f, out.data());
        for (int t = 0; t < n_tokens; ++t) {
          RmsNorm(x.data() + t * dim, w.data(), 1, dim, 1e-5f, out1.data());
          for (int i = 0; i < dim; ++i) {
            ASSERT_EQ(out[t * dim + i], out1[i]) << "dim=" << dim << " t=" << t;
          }
        }
      }
    }
  });
}

TEST(OpsTest, RopeMatchesReferenceBothConventions) {
  ForEachTarget([] {
    for (bool interleaved : {false, true}) {
      for (int head_dim : {2, 10, 64, 128}) {
        const int n_tokens = 3, n_heads = 5;
        std::vector<float> inv_freq(head_dim / 2);
        for (int i = 0; i < head_dim / 2; ++i) {
          inv_freq[i] = std::pow(10000.f, -2.f * i / head_dim);
        }
        std::vector<int32_t> pos = {0, 17, 131000};  // long-context position too
        auto x = Random(n_tokens * n_heads * head_dim, head_dim);
        auto y = x, y_ref = x;
        Rope(y.data(), n_tokens, n_heads, head_dim, pos.data(), inv_freq.data(), interleaved);
        ref::Rope(y_ref.data(), n_tokens, n_heads, head_dim, pos.data(), inv_freq.data(),
                  interleaved);
        for (size_t i = 0; i < y.size(); ++i) {
          // cos/sin are rounded to f32 (2^-24 each): 1e-6 absolute per unit input.
          ASSERT_NEAR(y[i], y_ref[i], 1e-5 * (std::fabs(x[i]) + 1)) << "head_dim=" << head_dim;
        }
        // Position 0 is the identity; rotations preserve each pair's norm.
        for (int i = 0; i < n_heads * head_dim; ++i) ASSERT_EQ(y[i], x[i]);
        for (int64_t p = 0; p < static_cast<int64_t>(y.size()) / 2; ++p) {
          const int64_t base = p / (head_dim / 2) * head_dim;
          const int64_t j = p % (head_dim / 2);
          const int64_t i0 = interleaved ? base + 2 * j : base + j;
          const int64_t i1 = interleaved ? base + 2 * j + 1 : base + j + head_dim / 2;
          double before = std::hypot(x[i0], x[i1]), after = std::hypot(y[i0], y[i1]);
          ASSERT_NEAR(after, before, 1e-5 * before + 1e-7);
        }
      }
    }
  });
}

TEST(OpsTest, SwiGLUMatchesReference) {
  ForEachTarget([] {
    for (int64_t n : {1, 15, 64, 1001}) {
      auto g = Random(n, n, 4.f), u = Random(n, n + 1);
      g[0] = -120.f;  // exp(-g) overflow territory
      if (n > 1) g[1] = 90.f;
      std::vector<float> out(n), ref_out(n);
      SwiGLU(g.data(), u.data(), n, out.data());
      ref::SwiGLU(g.data(), u.data(), n, ref_out.data());
      // Highway's Exp is within 1 ulp; a few ulp after the divide and multiply.
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(out[i], ref_out[i], 1e-6 * std::fabs(ref_out[i]) + 1e-30) << "i=" << i;
      }
      SwiGLU(g.data(), u.data(), n, g.data());  // out may alias gate
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[i], out[i]);
    }
  });
}

TEST(OpsTest, SoftmaxMatchesReferenceAndSumsToOne) {
  ForEachTarget([] {
    for (int64_t n : {1, 3, 16, 17, 1000, 128256}) {
      auto x = Random(n, n, 10.f);
      x[n / 2] = 500.f;  // would overflow exp without the max shift
      auto y = x, y_ref = x;
      Softmax(y.data(), n);
      ref::Softmax(y_ref.data(), n);
      double sum = 0;
      const float mx = x[ref::Argmax(x.data(), n)];
      for (int64_t i = 0; i < n; ++i) {
        // f32 x - max is rounded (relative 2^-24 of |x - max|, which exp turns
        // into that much relative error), plus a few ulp from exp and the sum.
        const double rel = (4.0 + std::fabs(x[i] - mx)) * std::ldexp(1.0, -23);
        ASSERT_NEAR(y[i], y_ref[i], rel * y_ref[i] + 1e-37) << "n=" << n << " i=" << i;
        sum += y[i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  });
}

TEST(OpsTest, LogSumExpMatchesALongDoubleSum) {
  ForEachTarget([] {
    for (int64_t n : {1, 3, 16, 17, 1536, 128256}) {
      auto x = Random(n, n + 7, 10.f);
      x[n / 2] = 500.f;  // would overflow exp without the max shift
      long double mx = x[0], sum = 0;
      for (float v : x) mx = std::max<long double>(mx, v);
      for (float v : x) sum += std::exp(static_cast<long double>(v) - mx);
      const double want = static_cast<double>(mx + std::log(sum));
      EXPECT_NEAR(LogSumExp(x.data(), n), want, 4e-7 * std::fabs(want) + 1e-6) << "n=" << n;
    }
    const float ninf = -std::numeric_limits<float>::infinity();
    std::vector<float> all_ninf(20, ninf);
    EXPECT_EQ(LogSumExp(all_ninf.data(), 20), ninf);
    EXPECT_EQ(LogSumExp(all_ninf.data(), 0), ninf);
    all_ninf[3] = 2.f;  // masked-out entries add nothing
    EXPECT_FLOAT_EQ(LogSumExp(all_ninf.data(), 20), 2.f);
  });
}

TEST(OpsTest, ArgmaxReturnsFirstMaximum) {
  ForEachTarget([] {
    for (int64_t n : {1, 5, 16, 33, 128256}) {
      auto x = Random(n, n);
      ASSERT_EQ(Argmax(x.data(), n), ref::Argmax(x.data(), n)) << "n=" << n;
      // Ties: the first index wins.
      x[n - 1] = 100.f;
      if (n > 2) x[n / 3] = 100.f;
      ASSERT_EQ(Argmax(x.data(), n), ref::Argmax(x.data(), n)) << "n=" << n;
    }
  });
}

}  // namespace
}  // namespace specd::kernels
