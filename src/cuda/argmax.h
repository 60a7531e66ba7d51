// Greedy token selection on the device: the index of the largest logit, the
// first one on ties, as sampling/sampler.h GreedyToken and kernels/ops.h
// Argmax. NaN entries are never chosen; a row of only NaN gives 0 (the CPU
// path rejects such rows before sampling: sampling/logits_check.h).
//
// One thread block per row; each thread scans a strided share keeping
// (value, index), then a block reduction keeps the larger value, the lower
// index on equal values. That picks the maximum of a total order, so the
// result does not depend on the block size or reduction order. A tuned
// version would load float4, split a long row over several blocks for small
// batches (a 128k-entry row is 512 KB: one SM cannot stream it at full
// bandwidth), or fuse the argmax into the LM-head GEMV epilogue.
#pragma once

#include <cstdint>

#include "base/status.h"

namespace specd::cuda {

// out[r] = first index of the maximum of logits[r, 0 .. vocab_size).
// Device: logits (n_rows, vocab_size) f32 row-major; out (n_rows) int32.
// REQUIRES: n_rows >= 0, vocab_size > 0. Violations, and null pointers when
// n_rows > 0, return kInvalidArgument before any CUDA call. n_rows == 0 does
// nothing.
Status ArgmaxRowsF32(const float* logits, int n_rows, int vocab_size, int32_t* out);

// One row: ArgmaxRowsF32(logits, 1, vocab_size, out).
inline Status ArgmaxF32(const float* logits, int vocab_size, int32_t* out) {
  return ArgmaxRowsF32(logits, 1, vocab_size, out);
}

}  // namespace specd::cuda
