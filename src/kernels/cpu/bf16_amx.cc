// AMX-BF16 matmul for BF16 weights and many tokens (prefill, verify passes):
// tdpbf16ps multiplies 16 weight rows by 16 tokens over 32 elements (bf16
// pairs, f32 sums). The activations are the ones the AVX512-BF16 path uses
// (rounded to bf16 once per call), so both compute the same products; only
// the f32 summation order differs.
//
// Tiles (palette 1): tmm0-3 C (16 rows x 16 tokens f32), one per k-chunk
// residue mod 4 so four accumulation chains are in flight; tmm4/5 A (16 weight
// rows x 32 bf16, straight from the weights, stride = row bytes); tmm6/7 B
// (16 element pairs x 16 tokens, the Bf16TiledActs chunk).
#include <cstring>
#include <vector>

#include "kernels/cpu/amx_tile_config.h"
#include "kernels/cpu/bf16_amx.h"
#include "kernels/cpu/bf16_avx512.h"

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace specd::kernels::cpu {
namespace {

#define SPECD_AMX_BF16_TARGET \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx2,fma")))

constexpr int kRows = kBf16AmxRows;

AmxTileConfig MakeConfig() {
  AmxTileConfig c;
  for (int i = 0; i < 8; ++i) c.Tile(i, 16, 64);
  return c;
}

// Chunk c into C tile c % 4, A / B tiles alternating.
SPECD_AMX_BF16_TARGET inline void Step(int64_t c, const uint8_t* a, int64_t a_stride,
                                       const uint16_t* b) {
  switch (c & 3) {
    case 0:
      _tile_loadd(4, a, a_stride);
      _tile_loadd(6, b, 64);
      _tile_dpbf16ps(0, 4, 6);
      break;
    case 1:
      _tile_loadd(5, a, a_stride);
      _tile_loadd(7, b, 64);
      _tile_dpbf16ps(1, 5, 7);
      break;
    case 2:
      _tile_loadd(4, a, a_stride);
      _tile_loadd(6, b, 64);
      _tile_dpbf16ps(2, 4, 6);
      break;
    default:
      _tile_loadd(5, a, a_stride);
      _tile_loadd(7, b, 64);
      _tile_dpbf16ps(3, 5, 7);
      break;
  }
}

// 16 rows (wg, stride row_bytes) against every token tile. bufs: 4 x 256 f32.
SPECD_AMX_BF16_TARGET void Group(const uint8_t* wg, size_t row_bytes, const Bf16TiledActs& a,
                                 int n_tokens, float* y, int64_t ldy, float* bufs,
                                 const uint8_t* next) {
  const int64_t nc = a.n_chunks;
  for (int tile = 0; tile < a.n_tiles; ++tile) {
    const uint16_t* bt = a.x + static_cast<int64_t>(tile) * nc * 512;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t c = 0; c < nc; ++c) {
      if (next != nullptr && tile == 0) {
        #pragma GCC unroll 16
        for (int r = 0; r < kRows; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(next + r * row_bytes + c * 64), _MM_HINT_T0);
        }
      }
      Step(c, wg + c * 64, static_cast<int64_t>(row_bytes), bt + c * 512);
    }
    _tile_stored(0, bufs, 64);
    _tile_stored(1, bufs + 256, 64);
    _tile_stored(2, bufs + 512, 64);
    _tile_stored(3, bufs + 768, 64);
    // Row r, token t: (C0 + C1) + (C2 + C3).
    alignas(64) float sum[kRows * 16];
    #pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const __m512 s01 = _mm512_add_ps(_mm512_load_ps(bufs + r * 16), _mm512_load_ps(bufs + 256 + r * 16));
      const __m512 s23 =
          _mm512_add_ps(_mm512_load_ps(bufs + 512 + r * 16), _mm512_load_ps(bufs + 768 + r * 16));
      _mm512_store_ps(sum + r * 16, _mm512_add_ps(s01, s23));
    }
    const int t0 = tile * 16;
    const int nt = n_tokens - t0 < 16 ? n_tokens - t0 : 16;
    for (int t = 0; t < nt; ++t) {
      float* yt = y + (t0 + t) * ldy;
      for (int r = 0; r < kRows; ++r) yt[r] = sum[r * 16 + t];
    }
  }
}

}  // namespace

bool HaveBf16Amx() { return true; }

void BuildBf16TiledActs(const uint16_t* xb, int64_t ldx, int n_tokens, int64_t k,
                        std::vector<uint16_t>* storage, Bf16TiledActs* out) {
  const int64_t nc = k / 32;
  const int n_tiles = (n_tokens + 15) / 16;
  storage->assign(static_cast<size_t>(n_tiles * nc * 512), 0);
  for (int t = 0; t < n_tokens; ++t) {
    const int tile = t / 16, col = t % 16;
    const uint16_t* src = xb + t * ldx;
    for (int64_t c = 0; c < nc; ++c) {
      uint16_t* dst = storage->data() + (static_cast<int64_t>(tile) * nc + c) * 512 + col * 2;
      for (int p = 0; p < 16; ++p) std::memcpy(dst + p * 32, src + c * 32 + 2 * p, 4);
    }
  }
  out->n_tiles = n_tiles;
  out->n_chunks = nc;
  out->x = storage->data();
}

SPECD_AMX_BF16_TARGET void AmxBf16Rows(const uint8_t* w, size_t row_bytes, int64_t n_rows,
                                       int64_t k, const Bf16TiledActs& a, const uint16_t* xb,
                                       int64_t ldx, int n_tokens, float* y, int64_t ldy,
                                       bool prefetch) {
  static const AmxTileConfig config = MakeConfig();
  const int64_t groups = n_rows / kRows;
  if (groups > 0) {
    thread_local std::vector<float> store;
    if (store.size() < 1024 + 16) store.resize(1024 + 16);
    const uintptr_t p = reinterpret_cast<uintptr_t>(store.data());
    float* bufs = store.data() + ((64 - p % 64) % 64) / 4;
    _tile_loadconfig(&config);
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* wg = w + g * kRows * row_bytes;
      Group(wg, row_bytes, a, n_tokens, y + g * kRows, ldy, bufs,
            prefetch && g + 1 < groups ? wg + kRows * row_bytes : nullptr);
    }
    _tile_release();
  }
  const int64_t done = groups * kRows;
  if (done < n_rows) {
    MatRowsBF16Avx512(w + done * row_bytes, row_bytes, n_rows - done, k, xb, ldx, n_tokens,
                      y + done, ldy);
  }
}

}  // namespace specd::kernels::cpu

#else  // !x86_64

namespace specd::kernels::cpu {
bool HaveBf16Amx() { return false; }
void BuildBf16TiledActs(const uint16_t*, int64_t, int, int64_t, std::vector<uint16_t>*,
                        Bf16TiledActs*) {}
void AmxBf16Rows(const uint8_t*, size_t, int64_t, int64_t, const Bf16TiledActs&,
                 const uint16_t*, int64_t, int, float*, int64_t, bool) {}
}  // namespace specd::kernels::cpu

#endif
