// Exact dequantization of ggml's block types (ggml_blocks.h has the layouts
// and the arithmetic). Each product and difference is its own f32 operation:
// a fused multiply-add would round once where ggml rounds twice, so
// contraction is off in this file.
#include <cstring>

#include "tensor/dtype.h"
#include "tensor/ggml_blocks.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace specd {

void UnpackKScales(const uint8_t* b, uint8_t* sc, uint8_t* mn) {
  for (int s = 0; s < 4; ++s) {
    sc[s] = b[s] & 63;
    mn[s] = b[s + 4] & 63;
  }
  for (int s = 4; s < 8; ++s) {
    sc[s] = static_cast<uint8_t>((b[s + 4] & 15) | (b[s - 4] >> 6) << 4);
    mn[s] = static_cast<uint8_t>((b[s + 4] >> 4) | (b[s] >> 6) << 4);
  }
}

void PackKScales(const uint8_t* sc, const uint8_t* mn, uint8_t* b) {
  for (int s = 0; s < 4; ++s) {
    b[s] = static_cast<uint8_t>((sc[s] & 63) | (sc[s + 4] >> 4) << 6);
    b[s + 4] = static_cast<uint8_t>((mn[s] & 63) | (mn[s + 4] >> 4) << 6);
    b[s + 8] = static_cast<uint8_t>((sc[s + 4] & 15) | (mn[s + 4] & 15) << 4);
  }
}

void UnpackQ3KScales(const uint8_t* b, int8_t* s) {
  for (int i = 0; i < 16; ++i) {
    const int lo = i < 8 ? b[i] & 15 : b[i - 8] >> 4;
    const int hi = (b[8 + i % 4] >> (2 * (i / 4))) & 3;
    s[i] = static_cast<int8_t>((lo | hi << 4) - 32);
  }
}

void DequantizeQ4_1(const BlockQ4_1* b, float* y, int64_t n) {
  for (int64_t j = 0; j < n / kQuantBlock; ++j, y += kQuantBlock) {
    const float d = F16ToF32(b[j].d), m = F16ToF32(b[j].m);
    for (int i = 0; i < 16; ++i) {
      y[i] = d * static_cast<float>(b[j].qs[i] & 15) + m;
      y[i + 16] = d * static_cast<float>(b[j].qs[i] >> 4) + m;
    }
  }
}

namespace {

// The 32 five-bit quants of a Q5_0 / Q5_1 block.
void Unpack5(const uint8_t* qh_bytes, const uint8_t* qs, int* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int i = 0; i < 16; ++i) {
    q[i] = (qs[i] & 15) | ((qh >> i) & 1) << 4;
    q[i + 16] = (qs[i] >> 4) | ((qh >> (i + 16)) & 1) << 4;
  }
}

}  // namespace

void DequantizeQ5_0(const BlockQ5_0* b, float* y, int64_t n) {
  int q[kQuantBlock];
  for (int64_t j = 0; j < n / kQuantBlock; ++j, y += kQuantBlock) {
    const float d = F16ToF32(b[j].d);
    Unpack5(b[j].qh, b[j].qs, q);
    for (int i = 0; i < kQuantBlock; ++i) y[i] = d * static_cast<float>(q[i] - 16);
  }
}

void DequantizeQ5_1(const BlockQ5_1* b, float* y, int64_t n) {
  int q[kQuantBlock];
  for (int64_t j = 0; j < n / kQuantBlock; ++j, y += kQuantBlock) {
    const float d = F16ToF32(b[j].d), m = F16ToF32(b[j].m);
    Unpack5(b[j].qh, b[j].qs, q);
    for (int i = 0; i < kQuantBlock; ++i) y[i] = d * static_cast<float>(q[i]) + m;
  }
}

void DequantizeIQ4_NL(const BlockIQ4_NL* b, float* y, int64_t n) {
  for (int64_t j = 0; j < n / kQuantBlock; ++j, y += kQuantBlock) {
    const float d = F16ToF32(b[j].d);
    for (int i = 0; i < 16; ++i) {
      y[i] = d * static_cast<float>(kIq4NlValues[b[j].qs[i] & 15]);
      y[i + 16] = d * static_cast<float>(kIq4NlValues[b[j].qs[i] >> 4]);
    }
  }
}

void DequantizeQ2_K(const BlockQ2_K* b, float* y, int64_t n) {
  for (int64_t j = 0; j < n / kSuperBlock; ++j) {
    const float d = F16ToF32(b[j].d), dmin = F16ToF32(b[j].dmin);
    for (int e = 0; e < kSuperBlock; ++e) {
      const int h = e / 128, shift = 2 * (e % 128 / 32), l = e % 32;
      const uint8_t s = b[j].scales[e / 16];
      const float dl = d * static_cast<float>(s & 15), ml = dmin * static_cast<float>(s >> 4);
      const int q = (b[j].qs[32 * h + l] >> shift) & 3;
      y[j * kSuperBlock + e] = dl * static_cast<float>(q) - ml;
    }
  }
}

void DequantizeQ3_K(const BlockQ3_K* b, float* y, int64_t n) {
  int8_t sc[16];
  for (int64_t j = 0; j < n / kSuperBlock; ++j) {
    const float d = F16ToF32(b[j].d);
    UnpackQ3KScales(b[j].scales, sc);
    for (int e = 0; e < kSuperBlock; ++e) {
      const int h = e / 128, shift = 2 * (e % 128 / 32), l = e % 32;
      const int low = (b[j].qs[32 * h + l] >> shift) & 3;
      const int q = low - ((b[j].hmask[l] >> (e / 32)) & 1 ? 0 : 4);
      const float dl = d * static_cast<float>(sc[e / 16]);
      y[j * kSuperBlock + e] = dl * static_cast<float>(q);
    }
  }
}

void DequantizeQ4_K(const BlockQ4_K* b, float* y, int64_t n) {
  uint8_t sc[8], mn[8];
  for (int64_t j = 0; j < n / kSuperBlock; ++j) {
    const float d = F16ToF32(b[j].d), dmin = F16ToF32(b[j].dmin);
    UnpackKScales(b[j].scales, sc, mn);
    for (int s = 0; s < 8; ++s) {
      const float ds = d * static_cast<float>(sc[s]), ms = dmin * static_cast<float>(mn[s]);
      const uint8_t* qs = b[j].qs + 32 * (s / 2);
      const int shift = 4 * (s % 2);
      float* ys = y + j * kSuperBlock + 32 * s;
      for (int l = 0; l < 32; ++l) ys[l] = ds * static_cast<float>((qs[l] >> shift) & 15) - ms;
    }
  }
}

void DequantizeQ5_K(const BlockQ5_K* b, float* y, int64_t n) {
  uint8_t sc[8], mn[8];
  for (int64_t j = 0; j < n / kSuperBlock; ++j) {
    const float d = F16ToF32(b[j].d), dmin = F16ToF32(b[j].dmin);
    UnpackKScales(b[j].scales, sc, mn);
    for (int s = 0; s < 8; ++s) {
      const float ds = d * static_cast<float>(sc[s]), ms = dmin * static_cast<float>(mn[s]);
      const uint8_t* qs = b[j].qs + 32 * (s / 2);
      const int shift = 4 * (s % 2);
      float* ys = y + j * kSuperBlock + 32 * s;
      for (int l = 0; l < 32; ++l) {
        const int q = ((qs[l] >> shift) & 15) | ((b[j].qh[l] >> s) & 1) << 4;
        ys[l] = ds * static_cast<float>(q) - ms;
      }
    }
  }
}

void DequantizeQ6_K(const BlockQ6_K* b, float* y, int64_t n) {
  for (int64_t j = 0; j < n / kSuperBlock; ++j) {
    const float d = F16ToF32(b[j].d);
    for (int e = 0; e < kSuperBlock; ++e) {
      const int h = e / 128, jj = e % 128 / 32, l = e % 32;
      const uint8_t lo_byte = b[j].ql[64 * h + 32 * (jj % 2) + l];
      const int lo = jj < 2 ? lo_byte & 15 : lo_byte >> 4;
      const int hi = (b[j].qh[32 * h + l] >> (2 * jj)) & 3;
      const float ds = d * static_cast<float>(b[j].scales[e / 16]);
      y[j * kSuperBlock + e] = ds * static_cast<float>((lo | hi << 4) - 32);
    }
  }
}

void DequantizeIQ4_XS(const BlockIQ4_XS* b, float* y, int64_t n) {
  for (int64_t j = 0; j < n / kSuperBlock; ++j) {
    const float d = F16ToF32(b[j].d);
    for (int s = 0; s < 8; ++s) {
      const int ls =
          ((b[j].scales_l[s / 2] >> (4 * (s % 2))) & 15) | ((b[j].scales_h >> (2 * s)) & 3) << 4;
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* qs = b[j].qs + 16 * s;
      float* ys = y + j * kSuperBlock + 32 * s;
      for (int i = 0; i < 16; ++i) {
        ys[i] = dl * static_cast<float>(kIq4NlValues[qs[i] & 15]);
        ys[i + 16] = dl * static_cast<float>(kIq4NlValues[qs[i] >> 4]);
      }
    }
  }
}

}  // namespace specd
