// Repacking BF16 rows into 16-row groups, and the portable kernel over them.
#include "kernels/cpu/bf16_rows16.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace specd::kernels::cpu {
namespace {

constexpr int kRows = 16;

float Bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
uint32_t BitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
// Denormals to signed zero (vdpbf16ps's DAZ / FTZ).
float Flush(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; }
float FromBf16(uint16_t b) { return Flush(Bits(static_cast<uint32_t>(b) << 16)); }

// One lane of vdpbf16ps: acc + w1 x1, then + w0 x0, each rounded (the
// products of two bf16 are exact in f32).
float DotPair(float acc, uint32_t w, uint32_t x) {
  acc = Flush(Flush(acc) +
              FromBf16(static_cast<uint16_t>(w >> 16)) * FromBf16(static_cast<uint16_t>(x >> 16)));
  return Flush(acc + FromBf16(static_cast<uint16_t>(w)) * FromBf16(static_cast<uint16_t>(x)));
}

}  // namespace

void RepackBf16Rows16(uint8_t* data, int64_t rows, int64_t k) {
  const int64_t np = k / 2;
  const size_t group_bytes = static_cast<size_t>(kRows * k * 2);
  std::vector<int64_t> order;  // chunk c holds pair order[c]
  order.reserve(static_cast<size_t>(np));
  Bf16Rows16Order(np, [&](int64_t p) { order.push_back(p); });
  std::vector<uint32_t> in(static_cast<size_t>(np * kRows)), out(in.size());
  for (int64_t g = 0; g < rows / kRows; ++g) {
    uint8_t* grp = data + static_cast<size_t>(g) * group_bytes;
    std::memcpy(in.data(), grp, group_bytes);  // row r's pair p at in[r * np + p]
    for (int64_t c = 0; c < np; ++c) {
      const uint32_t* src = in.data() + order[static_cast<size_t>(c)];
      uint32_t* dst = out.data() + c * kRows;
      for (int r = 0; r < kRows; ++r) dst[r] = src[r * np];
    }
    std::memcpy(grp, out.data(), group_bytes);
  }
}

void Bf16Rows16Scalar(const uint8_t* w, int64_t n_groups, int64_t k, const uint16_t* xb,
                      int64_t ldx, int n_tokens, float* y, int64_t ldy, bool /*prefetch*/) {
  const int64_t np = k / 2, nv = (np + 15) / 16;
  const size_t group_bytes = static_cast<size_t>(kRows * k * 2);
  // acc[c][l][r]: accumulator (parity c, lane l) of row r.
  float acc[2][16][kRows];
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* grp = w + static_cast<size_t>(g) * group_bytes;
    for (int t = 0; t < n_tokens; ++t) {
      const uint16_t* x = xb + t * ldx;
      std::memset(acc, 0, sizeof acc);
      int64_t chunk = 0;
      Bf16Rows16Order(np, [&](int64_t p) {
        const int l = static_cast<int>(p % 16), c = static_cast<int>((p / 16) % 2);
        uint32_t xp;
        std::memcpy(&xp, x + 2 * p, 4);
        for (int r = 0; r < kRows; ++r) {
          uint32_t wp;
          std::memcpy(&wp, grp + static_cast<size_t>(chunk * 64 + r * 4), 4);
          acc[c][l][r] = DotPair(acc[c][l][r], wp, xp);
        }
        ++chunk;
      });
      // The missing lanes of a partial last vector: a pair of zeros each.
      if (np % 16 != 0) {
        const int c = static_cast<int>((nv - 1) % 2);
        for (int l = static_cast<int>(np % 16); l < 16; ++l) {
          for (int r = 0; r < kRows; ++r) acc[c][l][r] = DotPair(acc[c][l][r], 0, 0);
        }
      }
      for (int r = 0; r < kRows; ++r) {
        float s[16];
        for (int l = 0; l < 16; ++l) s[l] = acc[0][l][r] + acc[1][l][r];
        for (int width = 8; width >= 1; width /= 2) {
          for (int i = 0; i < width; ++i) s[i] += s[i + width];
        }
        y[t * ldy + g * kRows + r] = s[0];
      }
    }
  }
}

void ConvertToBF16Scalar(const float* x, int64_t n, int64_t n_padded, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = BitsOf(Flush(x[i]));
    if (std::isnan(x[i])) {
      out[i] = static_cast<uint16_t>((u >> 16) | 0x40);
    } else {
      out[i] = static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
    }
  }
  for (int64_t i = n; i < n_padded; ++i) out[i] = 0;
}

}  // namespace specd::kernels::cpu
