// AVX-512 Q4_BF16 kernels (int4_kernels.h has the contract and the
// accumulation order every kernel here keeps).
//
// A block unpacks in 6 instructions: the 16-entry table {-8 .. 7} times the
// block's scale (exact) is indexed by each nibble with vpermps, which reads
// only the low 4 bits of each index lane, so the low nibbles need no mask.
// With its 2 FMAs per token that is 8 vector operations per block and token
// at decode: ~4 cycles per 18 bytes, so decode is bound by these ports, not
// by memory, and reads 4 rows side by side, whose 8 independent FMA chains
// hide the latency a single row's 2 chains expose (about 20% faster than one
// row at a time on Sapphire Rapids).
#include "kernels/cpu/int4_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/avx512_common.h"
#include "tensor/dtype.h"

// GCC 12 flags the deliberately undefined upper lanes inside its own AVX-512
// intrinsics (_mm256_undefined_pd) as uninitialized.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specd::kernels::cpu {
namespace {

#define SPECD_INT4_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma")))

constexpr int64_t kBlockBytes = sizeof(BlockQ4_BF16);
// Tokens sharing one unpacked block in the multi-token kernel (2 accumulators
// each: 16 of the 32 vector registers).
constexpr int kMaxTokens = 8;
// The multi-token kernel works on groups of kChunkRows rows and chunks of
// kChunkBlocks blocks: a chunk's activations (8 tokens x 512 floats, 16 KiB,
// copied into a panel so that every load is a fixed offset from one pointer)
// stay in L1 while the group's rows pass over them (from L2 they held the
// kernel to half its arithmetic rate), and the group's accumulators (16 KiB)
// wait in L1 between chunks. Storing and reloading an accumulator does not
// change its sums, so the order stays the one-token kernel's.
constexpr int64_t kChunkRows = 16;
constexpr int64_t kChunkBlocks = 16;

SPECD_INT4_TARGET inline __m512 Table() {
  return _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
}

// Elements 0-15 (lo) and 16-31 (hi) of a block as exact f32 weights.
SPECD_INT4_TARGET inline void Unpack(const uint8_t* blk, __m512 table, __m512* lo, __m512* hi) {
  // The scale from a broadcast load of the block's first dword (the scale,
  // then qs[0..1]) shifted up by 16: no trip through a general register.
  uint32_t head;
  std::memcpy(&head, blk, 4);
  const __m512i head16 = _mm512_set1_epi32(static_cast<int32_t>(head));
  const __m512 ts = _mm512_mul_ps(table, _mm512_castsi512_ps(_mm512_slli_epi32(head16, 16)));
  const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2)));
  *lo = _mm512_permutexvar_ps(q, ts);
  *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), ts);
}

// One token against R rows side by side (decode: R = 4, and 1 for the rows
// past a multiple of 4).
template <int R>
SPECD_INT4_TARGET void DecodeRows(const uint8_t* w, size_t row_bytes, int64_t nb, const float* x,
                                  float* y) {
  const __m512 table = Table();
  __m512 lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const __m512 xlo = _mm512_loadu_ps(x + b * kQuantBlock);
    const __m512 xhi = _mm512_loadu_ps(x + b * kQuantBlock + 16);
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      __m512 wlo, whi;
      Unpack(w + r * row_bytes + b * kBlockBytes, table, &wlo, &whi);
      lo[r] = _mm512_fmadd_ps(wlo, xlo, lo[r]);
      hi[r] = _mm512_fmadd_ps(whi, xhi, hi[r]);
    }
  }
  for (int r = 0; r < R; ++r) y[r] = ReduceAdd512(_mm512_add_ps(lo[r], hi[r]));
}

// T tokens against nb blocks of one row, continuing the accumulators in
// acc[2t] (lo) and acc[2t + 1] (hi). panel: (nb, T, 32) activations.
template <int T>
SPECD_INT4_TARGET void RowTokensChunk(const uint8_t* row, int64_t nb, const float* panel,
                                      __m512* acc) {
  const __m512 table = Table();
  __m512 lo[T], hi[T];
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    lo[t] = acc[2 * t];
    hi[t] = acc[2 * t + 1];
  }
  for (int64_t b = 0; b < nb; ++b) {
    __m512 wlo, whi;
    Unpack(row + b * kBlockBytes, table, &wlo, &whi);
    const float* xb = panel + b * T * kQuantBlock;
    #pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      lo[t] = _mm512_fmadd_ps(wlo, _mm512_load_ps(xb + t * kQuantBlock), lo[t]);
      hi[t] = _mm512_fmadd_ps(whi, _mm512_load_ps(xb + t * kQuantBlock + 16), hi[t]);
    }
  }
  #pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    acc[2 * t] = lo[t];
    acc[2 * t + 1] = hi[t];
  }
}

SPECD_INT4_TARGET void RowTokensChunkN(int n, const uint8_t* row, int64_t nb, const float* panel,
                                       __m512* acc) {
  switch (n) {
    case 1: RowTokensChunk<1>(row, nb, panel, acc); return;
    case 2: RowTokensChunk<2>(row, nb, panel, acc); return;
    case 3: RowTokensChunk<3>(row, nb, panel, acc); return;
    case 4: RowTokensChunk<4>(row, nb, panel, acc); return;
    case 5: RowTokensChunk<5>(row, nb, panel, acc); return;
    case 6: RowTokensChunk<6>(row, nb, panel, acc); return;
    case 7: RowTokensChunk<7>(row, nb, panel, acc); return;
    default: RowTokensChunk<8>(row, nb, panel, acc); return;
  }
}

SPECD_INT4_TARGET void Rows(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k,
                            const float* x, int n_tokens, float* y, int64_t ldy) {
  const int64_t nb = k / kQuantBlock;
  if (n_tokens == 1) {
    int64_t r = 0;
    for (; r + 4 <= n_rows; r += 4) DecodeRows<4>(w + r * row_bytes, row_bytes, nb, x, y + r);
    for (; r < n_rows; ++r) DecodeRows<1>(w + r * row_bytes, row_bytes, nb, x, y + r);
    return;
  }
  __m512 acc[kChunkRows][kMaxTokens * 2];  // (rows, tokens, lo/hi)
  alignas(64) float panel[kChunkBlocks * kMaxTokens * kQuantBlock];
  for (int64_t r0 = 0; r0 < n_rows; r0 += kChunkRows) {
    const int64_t nr = std::min(kChunkRows, n_rows - r0);
    for (int t0 = 0; t0 < n_tokens; t0 += kMaxTokens) {
      const int nt = std::min(kMaxTokens, n_tokens - t0);
      for (int64_t r = 0; r < nr; ++r) {
        for (int i = 0; i < 2 * nt; ++i) acc[r][i] = _mm512_setzero_ps();
      }
      for (int64_t b0 = 0; b0 < nb; b0 += kChunkBlocks) {
        const int64_t nbc = std::min(kChunkBlocks, nb - b0);
        for (int64_t b = 0; b < nbc; ++b) {
          for (int t = 0; t < nt; ++t) {
            std::memcpy(panel + (b * nt + t) * kQuantBlock,
                        x + (t0 + t) * k + (b0 + b) * kQuantBlock, kQuantBlock * sizeof(float));
          }
        }
        for (int64_t r = 0; r < nr; ++r) {
          RowTokensChunkN(nt, w + (r0 + r) * row_bytes + b0 * kBlockBytes, nbc, panel, acc[r]);
        }
      }
      for (int64_t r = 0; r < nr; ++r) {
        for (int t = 0; t < nt; ++t) {
          y[(t0 + t) * ldy + r0 + r] =
              ReduceAdd512(_mm512_add_ps(acc[r][2 * t], acc[r][2 * t + 1]));
        }
      }
    }
  }
}

}  // namespace

Int4RowsFn Int4RowsAvx512() { return Rows; }

}  // namespace specd::kernels::cpu

#else

namespace specd::kernels::cpu {
Int4RowsFn Int4RowsAvx512() { return nullptr; }
}  // namespace specd::kernels::cpu

#endif
