// Block-quantized decode GEMVs (gemv_quant.h): one warp per output row; the
// per-format part is how one 32-element block is decoded and dotted with x.
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "cuda/cuda_status.h"
#include "cuda/gemv_quant.h"
#include "cuda/reduce.cuh"

namespace specd::cuda {
namespace {

constexpr int kQuantBlock = 32;      // elements per block (tensor/dtype.h kQuantBlock)
constexpr int kGemvWarpsPerCta = 4;  // output rows per thread block

// Sum over the block's 32 elements of q[i] * xb[i], in element order. `qs`
// holds the block's bytes after the scale as 2-byte words (blocks are only
// 2-byte aligned), little-endian: word j = bytes 2j (low) and 2j + 1.
struct Q8_0Format {
  static constexpr int kBytes = 34;
  __device__ static float Scale(uint16_t d) { return __half2float(__ushort_as_half(d)); }
  __device__ static float Dot(const uint16_t* qs, const float* xb) {
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      const uint32_t u = qs[j];
      s += static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(u & 0xffu))) * xb[2 * j];
      s += static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(u >> 8))) * xb[2 * j + 1];
    }
    return s;
  }
};

// Byte j (0..15) holds element j in its low nibble and element j + 16 in its
// high nibble; the value is nibble - 8.
__device__ __forceinline__ float Q4Dot(const uint16_t* qs, const float* xb) {
  float lo = 0.0f, hi = 0.0f;  // elements 0..15 and 16..31
#pragma unroll
  for (int j = 0; j < kQuantBlock / 4; ++j) {
    const uint32_t u = qs[j];
    const int b0 = static_cast<int>(u & 0xffu), b1 = static_cast<int>(u >> 8);
    lo += static_cast<float>((b0 & 0xf) - 8) * xb[2 * j];
    lo += static_cast<float>((b1 & 0xf) - 8) * xb[2 * j + 1];
    hi += static_cast<float>((b0 >> 4) - 8) * xb[2 * j + 16];
    hi += static_cast<float>((b1 >> 4) - 8) * xb[2 * j + 17];
  }
  return lo + hi;
}

struct Q4_0Format {
  static constexpr int kBytes = 18;
  __device__ static float Scale(uint16_t d) { return __half2float(__ushort_as_half(d)); }
  __device__ static float Dot(const uint16_t* qs, const float* xb) { return Q4Dot(qs, xb); }
};

struct Q4BF16Format {
  static constexpr int kBytes = 18;
  __device__ static float Scale(uint16_t d) {
    return __uint_as_float(static_cast<uint32_t>(d) << 16);
  }
  __device__ static float Dot(const uint16_t* qs, const float* xb) { return Q4Dot(qs, xb); }
};

// d * sum(q * x) of the block at `blk` (global or shared memory, 2-byte aligned).
template <class F>
__device__ __forceinline__ float BlockDot(const uint8_t* blk, const float* xb) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(blk);
  return F::Scale(h[0]) * F::Dot(h + 1, xb);
}

// w: (n_out, nb) blocks of F; x: (nb * 32); y: (n_out). Grid: ceil(n_out /
// kGemvWarpsPerCta) blocks of kGemvWarpsPerCta warps. staged: w is 16-byte
// aligned and nb % 8 == 0, so every row and every run of 32 blocks in it
// starts on a 16-byte boundary (8 blocks are 272 or 144 bytes).
template <class F, bool staged>
__global__ void GemvQuantKernel(const uint8_t* w, const float* x, int n_out, int nb, float* y) {
  constexpr int kChunkVecs = kWarpSize * F::kBytes / 16;  // 32 blocks as uint4: 68 or 36
  static_assert(kWarpSize * F::kBytes % 16 == 0);
  __shared__ uint4 stage[kGemvWarpsPerCta][staged ? kChunkVecs : 1];
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int o = blockIdx.x * kGemvWarpsPerCta + warp;
  if (o >= n_out) return;  // whole warp leaves together
  const uint8_t* row = w + static_cast<size_t>(o) * nb * F::kBytes;
  float acc = 0.0f;
  int b0 = 0;  // first block not yet taken by the staged loop
  if constexpr (staged) {
    const uint8_t* st = reinterpret_cast<const uint8_t*>(stage[warp]);
    for (; b0 + kWarpSize <= nb; b0 += kWarpSize) {
      const uint4* chunk =
          reinterpret_cast<const uint4*>(row + static_cast<size_t>(b0) * F::kBytes);
      for (int v = lane; v < kChunkVecs; v += kWarpSize) stage[warp][v] = chunk[v];
      __syncwarp();
      acc += BlockDot<F>(st + lane * F::kBytes, x + static_cast<size_t>(b0 + lane) * kQuantBlock);
      __syncwarp();  // the next chunk overwrites stage[warp]
    }
  }
  for (int b = b0 + lane; b < nb; b += kWarpSize) {
    acc += BlockDot<F>(row + static_cast<size_t>(b) * F::kBytes,
                       x + static_cast<size_t>(b) * kQuantBlock);
  }
  acc = WarpSum(acc);
  if (lane == 0) y[o] = acc;
}

template <class F>
Status LaunchGemvQuant(const char* name, const void* w, const float* x, int n_out, int n_in,
                       float* y) {
  if (n_out < 0 || n_in <= 0 || n_in % kQuantBlock != 0) {
    return InvalidArgumentError(std::string(name) + ": n_out " + std::to_string(n_out) + ", n_in " +
                                std::to_string(n_in) +
                                " (need n_out >= 0, n_in > 0 and a multiple of 32)");
  }
  if (n_out == 0) return Status::Ok();
  if (w == nullptr || x == nullptr || y == nullptr) {
    return InvalidArgumentError(std::string(name) + ": null device pointer (w, x or y)");
  }
  const uintptr_t wa = reinterpret_cast<uintptr_t>(w);
  if (wa % 2 != 0) {
    return InvalidArgumentError(std::string(name) + ": weights at an odd address; blocks " +
                                "need 2-byte alignment");
  }
  const int nb = n_in / kQuantBlock;
  const auto blocks =
      static_cast<unsigned>((int64_t{n_out} + kGemvWarpsPerCta - 1) / kGemvWarpsPerCta);
  const int threads = kGemvWarpsPerCta * kWarpSize;
  const auto* wb = static_cast<const uint8_t*>(w);
  if (wa % 16 == 0 && nb % 8 == 0) {
    GemvQuantKernel<F, true><<<blocks, threads>>>(wb, x, n_out, nb, y);
  } else {
    GemvQuantKernel<F, false><<<blocks, threads>>>(wb, x, n_out, nb, y);
  }
  return CudaStatus(cudaGetLastError(), (std::string(name) + " launch").c_str());
}

}  // namespace

Status GemvQ8_0(const void* w, const float* x, int n_out, int n_in, float* y) {
  return LaunchGemvQuant<Q8_0Format>("GemvQ8_0", w, x, n_out, n_in, y);
}

Status GemvQ4_0(const void* w, const float* x, int n_out, int n_in, float* y) {
  return LaunchGemvQuant<Q4_0Format>("GemvQ4_0", w, x, n_out, n_in, y);
}

Status GemvQ4BF16(const void* w, const float* x, int n_out, int n_in, float* y) {
  return LaunchGemvQuant<Q4BF16Format>("GemvQ4BF16", w, x, n_out, n_in, y);
}

}  // namespace specd::cuda
