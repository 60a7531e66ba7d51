// Test helper: deterministic inputs and naive reference collectives.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "comm/reduce_kernels.h"

namespace specd::testing {

// Values in [-1, 1) from a seed; the same (seed, rank) gives the same data in
// every process.
inline std::vector<float> RandomF32(uint64_t seed, int rank, size_t n) {
  std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(rank) * 7919u + 17u);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<uint16_t> RandomBF16(uint64_t seed, int rank, size_t n) {
  std::vector<float> f = RandomF32(seed, rank, n);
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = comm_internal::F32ToBF16(f[i]);
  return v;
}

// Serial sum in rank order 0..world-1 (the order the protocol promises).
inline std::vector<float> ReferenceSumF32(uint64_t seed, int world, size_t n) {
  std::vector<float> acc = RandomF32(seed, 0, n);
  for (int r = 1; r < world; ++r) {
    std::vector<float> x = RandomF32(seed, r, n);
    for (size_t i = 0; i < n; ++i) acc[i] = acc[i] + x[i];
  }
  return acc;
}

// f32-accumulated in rank order, rounded to bf16 once.
inline std::vector<uint16_t> ReferenceSumBF16(uint64_t seed, int world, size_t n) {
  std::vector<float> acc(n, 0.0f);
  for (int r = 0; r < world; ++r) {
    std::vector<uint16_t> x = RandomBF16(seed, r, n);
    for (size_t i = 0; i < n; ++i) {
      float v = comm_internal::BF16ToF32(x[i]);
      acc[i] = r == 0 ? v : acc[i] + v;
    }
  }
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = comm_internal::F32ToBF16(acc[i]);
  return out;
}

// Unfused reference: residual += sum; out = residual / rms(residual) * weight,
// computed naively in double.
inline void ReferenceResidualRmsNorm(const std::vector<float>& sum, std::vector<float>& residual,
                                     const std::vector<float>& weight, float eps, int n_rows,
                                     int dim, std::vector<float>& out) {
  out.assign(static_cast<size_t>(n_rows) * dim, 0.0f);
  for (int r = 0; r < n_rows; ++r) {
    double ss = 0;
    for (int i = 0; i < dim; ++i) {
      float& v = residual[static_cast<size_t>(r) * dim + i];
      v = v + sum[static_cast<size_t>(r) * dim + i];
      ss += static_cast<double>(v) * v;
    }
    const double scale = 1.0 / std::sqrt(ss / dim + eps);
    for (int i = 0; i < dim; ++i) {
      const size_t k = static_cast<size_t>(r) * dim + i;
      out[k] = static_cast<float>(residual[k] * scale * weight[i]);
    }
  }
}

inline uint64_t Fnv1a(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// First index where a and b differ, as a message; empty when equal.
template <typename T>
std::string FirstDiff(const T* a, const T* b, size_t n, const std::string& what) {
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) {
      return what + ": element " + std::to_string(i) + " of " + std::to_string(n) + ": got " +
             std::to_string(static_cast<double>(a[i])) + ", expected " +
             std::to_string(static_cast<double>(b[i]));
    }
  }
  return "";
}

}  // namespace specd::testing
