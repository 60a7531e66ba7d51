// Repacking Q4_0 / Q8_0 rows into 16-row groups, and the portable kernels
// over them.
#include "kernels/cpu/quant_rows16.h"

#include <cmath>
#include <cstring>
#include <vector>

namespace specd::kernels::cpu {
namespace {

// Quant bytes of one block of 16 rows, and of one row's block.
size_t QuantBytes16(DType dtype) { return dtype == DType::kQ8_0 ? 512 : 256; }
size_t RowQuantBytes(DType dtype) { return dtype == DType::kQ8_0 ? 32 : 16; }

// The exact integer dot of row r's block b with the block's activations.
int32_t BlockDot(DType dtype, const uint8_t* quants16, int r, const int8_t* act) {
  int32_t s = 0;
  const int chunks = static_cast<int>(RowQuantBytes(dtype) / 4);
  for (int c = 0; c < chunks; ++c) {
    const uint8_t* q = quants16 + c * 64 + r * 4;
    for (int i = 0; i < 4; ++i) {
      if (dtype == DType::kQ8_0) {
        s += static_cast<int8_t>(q[i]) * act[4 * c + i];
      } else {
        s += ((q[i] & 0x0F) - 8) * act[4 * c + i];
        s += ((q[i] >> 4) - 8) * act[16 + 4 * c + i];
      }
    }
  }
  return s;
}

void Rows16Scalar(DType dtype, const uint8_t* w, int64_t n_groups, const QuantizedActs& a,
                  float* y, int64_t ldy) {
  const int64_t nb = a.nb;
  const size_t group_bytes = Rows16GroupBytes(dtype, nb);
  const size_t q16 = QuantBytes16(dtype);
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* grp = w + static_cast<size_t>(g) * group_bytes;
    const uint8_t* quants = grp + static_cast<size_t>(nb) * 32;
    for (int r = 0; r < kRows16; ++r) {
      for (int t = 0; t < a.n_tokens; ++t) {
        float lane[kSumLanes] = {};
        for (int64_t b = 0; b < nb; ++b) {
          uint16_t d;
          std::memcpy(&d, grp + b * 32 + r * 2, 2);
          const int32_t s = BlockDot(dtype, quants + b * q16, r, a.qs + t * a.k + b * 32);
          const float cb = F16ToF32(d) * a.d[t * nb + b];
          lane[b % 2] = std::fma(static_cast<float>(s), cb, lane[b % 2]);
        }
        y[t * ldy + g * kRows16 + r] = SumLanes(lane);
      }
    }
  }
}

}  // namespace

void RepackRows16(DType dtype, uint8_t* data, int64_t rows, int64_t nb) {
  const size_t block_bytes = DTypeBlockBytes(dtype);
  const size_t row_bytes = static_cast<size_t>(nb) * block_bytes;
  const size_t group_bytes = Rows16GroupBytes(dtype, nb);
  const size_t q16 = QuantBytes16(dtype), qrow = RowQuantBytes(dtype);
  std::vector<uint8_t> src(group_bytes);
  for (int64_t g = 0; g < rows / kRows16; ++g) {
    uint8_t* dst = data + static_cast<size_t>(g) * group_bytes;
    std::memcpy(src.data(), dst, group_bytes);
    uint8_t* scales = dst;
    uint8_t* quants = dst + static_cast<size_t>(nb) * 32;
    for (int r = 0; r < kRows16; ++r) {
      for (int64_t b = 0; b < nb; ++b) {
        // A GGUF block: f16 d, then qrow quant bytes.
        const uint8_t* blk = src.data() + r * row_bytes + b * block_bytes;
        std::memcpy(scales + b * 32 + r * 2, blk, 2);
        for (size_t c = 0; c < qrow / 4; ++c) {
          std::memcpy(quants + b * q16 + c * 64 + r * 4, blk + 2 + 4 * c, 4);
        }
      }
    }
  }
}

void Rows16Q4Scalar(const uint8_t* w, int64_t n_groups, const QuantizedActs& a,
                    const int32_t* /*csum*/, float* y, int64_t ldy) {
  Rows16Scalar(DType::kQ4_0, w, n_groups, a, y, ldy);
}

void Rows16Q8Scalar(const uint8_t* w, int64_t n_groups, const QuantizedActs& a,
                    const int32_t* /*csum*/, float* y, int64_t ldy) {
  Rows16Scalar(DType::kQ8_0, w, n_groups, a, y, ldy);
}

}  // namespace specd::kernels::cpu
