// Decode GEMVs over block-quantized weights: y = W x for one token, with W in
// the 32-element block layouts of tensor/dtype.h, used in place (GGUF tensors
// and the loader's re-ordered compressed-tensors INT4 need no conversion):
//   Q8_0:    34-byte blocks {fp16 d; int8 qs[32]}     w[i] = d * qs[i]
//   Q4_0:    18-byte blocks {fp16 d; uint8 qs[16]}    w[i] = d * ((qs[i] & 0xF) - 8),
//                                                      w[i + 16] = d * ((qs[i] >> 4) - 8)
//   Q4_BF16: 18-byte blocks {bf16 d; uint8 qs[16]}    the Q4_0 nibbles, bf16 scale
//                                                      (W4A16, group 32)
// A row of W is n_in / 32 consecutive blocks; rows follow each other with no
// padding, so W is (n_out, n_in / 32) blocks.
//
// Activations stay f32 (W4A16 / weight-only style): the result is within f32
// rounding of x times the dequantized weights. This differs from the CPU
// Q8_0/Q4_0 path, which quantizes x to 8 bits per block first (kernels/ops.h),
// by that quantization error; Q4_BF16 matches the CPU path's arithmetic up
// to summation order.
//
// Summation order, fixed so results do not depend on the launch shape or on
// the load path: one warp owns one output row; lane l takes blocks
// l, l + 32, l + 64, ... in increasing order, and for each block adds
// d * (sum of q * x over its 32 elements, in one fixed order) to its partial;
// the 32 partials are then summed by a butterfly (WarpSum in reduce.cuh).
//
// Loads: when W is 16-byte aligned and n_in % 256 == 0 (every row starts on a
// 16-byte boundary), each warp copies 32 blocks of its row at a time into
// shared memory with coalesced 16-byte loads and each lane decodes one block
// from there; otherwise (and for the last n_in / 32 % 32 blocks of a row)
// each lane reads its block from global memory with 2-byte loads.
//
// A tuned version would: process several rows per warp so x loads are
// shared, keep x in shared memory as float4, use dp4a on int8 activations for
// Q8_0/Q4_0 (as the CPU path and llama.cpp's mmvq do), prefetch the next
// chunk (cp.async / TMA) while decoding the current one, and split long rows
// over several warps for small n_out (too few rows to fill the SMs).
#pragma once

#include <cstdint>

#include "base/status.h"

namespace specd::cuda {

// y[o] = sum_i W[o, i] * x[i], f32 accumulation.
// Device: w (n_out, n_in / 32) blocks, 2-byte aligned; x (n_in) f32; y (n_out) f32.
// REQUIRES: n_out >= 0; n_in > 0 and n_in % 32 == 0. Violations, and null or
// odd pointers when n_out > 0, return kInvalidArgument before any CUDA call.
// n_out == 0 does nothing.
Status GemvQ8_0(const void* w, const float* x, int n_out, int n_in, float* y);
Status GemvQ4_0(const void* w, const float* x, int n_out, int n_in, float* y);
Status GemvQ4BF16(const void* w, const float* x, int n_out, int n_in, float* y);

}  // namespace specd::cuda
