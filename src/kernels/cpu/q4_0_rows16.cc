// Repacking Q4_0 rows into 16-row groups, and the portable kernel over them.
#include "kernels/cpu/q4_0_rows16.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "tensor/dtype.h"

namespace specd::kernels::cpu {

void RepackQ4_0Rows16(uint8_t* data, int64_t rows, int64_t nb) {
  const size_t row_bytes = static_cast<size_t>(nb) * sizeof(BlockQ4_0);
  const size_t group_bytes = Rows16GroupBytes(nb);
  std::vector<uint8_t> src(group_bytes);
  for (int64_t g = 0; g < rows / kRows16; ++g) {
    uint8_t* dst = data + static_cast<size_t>(g) * group_bytes;
    std::memcpy(src.data(), dst, group_bytes);
    uint8_t* scales = dst;
    uint8_t* quants = dst + static_cast<size_t>(nb) * 32;
    for (int r = 0; r < kRows16; ++r) {
      const auto* row = reinterpret_cast<const BlockQ4_0*>(src.data() + r * row_bytes);
      for (int64_t b = 0; b < nb; ++b) {
        std::memcpy(scales + b * 32 + r * 2, &row[b].d, 2);
        for (int c = 0; c < 4; ++c) {
          std::memcpy(quants + b * 256 + c * 64 + r * 4, row[b].qs + 4 * c, 4);
        }
      }
    }
  }
}

void Rows16Q4Scalar(const uint8_t* w, int64_t n_groups, const QuantizedActs& a,
                    const int32_t* /*csum*/, float* y, int64_t ldy) {
  const int64_t nb = a.nb;
  const size_t group_bytes = Rows16GroupBytes(nb);
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* grp = w + static_cast<size_t>(g) * group_bytes;
    const uint8_t* quants = grp + static_cast<size_t>(nb) * 32;
    for (int r = 0; r < kRows16; ++r) {
      for (int t = 0; t < a.n_tokens; ++t) {
        float lane[kSumLanes] = {};
        for (int64_t b = 0; b < nb; ++b) {
          uint16_t d;
          std::memcpy(&d, grp + b * 32 + r * 2, 2);
          const int8_t* act = a.qs + t * a.k + b * 32;
          int32_t s = 0;
          for (int c = 0; c < 4; ++c) {
            const uint8_t* q = quants + b * 256 + c * 64 + r * 4;
            for (int i = 0; i < 4; ++i) {
              s += ((q[i] & 0x0F) - 8) * act[4 * c + i];
              s += ((q[i] >> 4) - 8) * act[16 + 4 * c + i];
            }
          }
          const float cb = F16ToF32(d) * a.d[t * nb + b];
          lane[b % 2] = std::fma(static_cast<float>(s), cb, lane[b % 2]);
        }
        y[t * ldy + g * kRows16 + r] = SumLanes(lane);
      }
    }
  }
}

}  // namespace specd::kernels::cpu
