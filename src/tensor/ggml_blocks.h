// ggml's block-quantized layouts beyond Q8_0/Q4_0 (llama.cpp's ggml-common.h),
// byte for byte, so GGUF tensors of these types are used in place.
//
// Every fp16 field is an IEEE half (F16ToF32); every block dequantizes
// exactly as ggml's dequantize_row_* does, in f32 with one rounding per
// operation and no fused multiply-add (the order written below, which is
// also gguf-py's). Element j of a block is x[j].
//
// 32-element blocks:
//   Q4_1   {fp16 d, m; u8 qs[16]}            q = nibble; low nibbles are
//                                            x[0..15], high nibbles x[16..31];
//                                            x = d * q + m
//   Q5_0   {fp16 d; u8 qh[4]; u8 qs[16]}     q = nibble | (bit j of qh) << 4;
//                                            x = (q - 16) * d
//   Q5_1   {fp16 d, m; u8 qh[4]; u8 qs[16]}  q as Q5_0; x = d * q + m
//   IQ4_NL {fp16 d; u8 qs[16]}               x = d * kIq4NlValues[nibble]
//                                            (nibbles as Q4_1)
//
// 256-element super-blocks (the K-quants and IQ4_XS): sub-blocks of 16 or 32
// elements with their own small scale (and min), both scaled by fp16 d / dmin:
//   Q2_K   {u8 scales[16]; u8 qs[64]; fp16 d, dmin}
//          16 sub-blocks of 16: sc = scales[s] & 15, mn = scales[s] >> 4;
//          element e = 128 h + 32 j + l (h < 2, j < 4, l < 32) is bits
//          2j..2j+1 of qs[32 h + l], in sub-block e / 16;
//          x = (d * sc) * q - (dmin * mn)
//   Q3_K   {u8 hmask[32]; u8 qs[64]; u8 scales[12]; fp16 d}
//          16 sub-blocks of 16 with 6-bit scales s (UnpackQ3KScales, s - 32);
//          low 2 bits as Q2_K; q = low - (bit (e / 32) of hmask[e % 32] ? 0 : 4);
//          x = (d * (s - 32)) * q
//   Q4_K   {fp16 d, dmin; u8 scales[12]; u8 qs[128]}
//          8 sub-blocks of 32 with 6-bit scale and min (UnpackKScales);
//          element 64 p + l (p < 4, l < 64): l < 32 is the low nibble of
//          qs[32 p + l], l >= 32 the high nibble of qs[32 p + l - 32];
//          x = (d * sc) * q - (dmin * mn)
//   Q5_K   {fp16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}
//          as Q4_K, q |= (bit (e / 32) of qh[e % 32]) << 4
//   Q6_K   {u8 ql[128]; u8 qh[64]; i8 scales[16]; fp16 d}
//          16 sub-blocks of 16 with int8 scales; element 128 h + 32 j + l
//          (h < 2, j < 4, l < 32): low 4 bits are the low (j < 2) or high
//          (j >= 2) nibble of ql[64 h + 32 (j % 2) + l], high 2 bits are bits
//          2j..2j+1 of qh[32 h + l]; x = (d * scales[e / 16]) * (q - 32)
//   IQ4_XS {fp16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}
//          8 sub-blocks of 32 (IQ4_NL's nibble layout, 16 bytes each) with
//          6-bit scales ls = nibble s of scales_l | (bits 2s..2s+1 of
//          scales_h) << 4; x = (d * (ls - 32)) * kIq4NlValues[nibble]
#pragma once

#include <cstddef>
#include <cstdint>

namespace specd {

enum class DType : uint8_t;  // tensor/dtype.h

constexpr int kSuperBlock = 256;  // ggml's QK_K
constexpr int kKScaleBytes = 12;  // ggml's K_SCALE_SIZE

// The 16 levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl).
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

struct BlockQ4_1 {
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20);

struct BlockQ5_0 {
  uint16_t d;  // fp16
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22);

struct BlockQ5_1 {
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24);

struct BlockIQ4_NL {
  uint16_t d;  // fp16
  uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18);

struct BlockQ2_K {
  uint8_t scales[kSuperBlock / 16];
  uint8_t qs[kSuperBlock / 4];
  uint16_t d;     // fp16
  uint16_t dmin;  // fp16
};
static_assert(sizeof(BlockQ2_K) == 84);

struct BlockQ3_K {
  uint8_t hmask[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 4];
  uint8_t scales[kKScaleBytes];
  uint16_t d;  // fp16
};
static_assert(sizeof(BlockQ3_K) == 110);

struct BlockQ4_K {
  uint16_t d;     // fp16
  uint16_t dmin;  // fp16
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kSuperBlock / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

struct BlockQ5_K {
  uint16_t d;     // fp16
  uint16_t dmin;  // fp16
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kSuperBlock / 8];
  uint8_t qs[kSuperBlock / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

struct BlockQ6_K {
  uint8_t ql[kSuperBlock / 2];
  uint8_t qh[kSuperBlock / 4];
  int8_t scales[kSuperBlock / 16];
  uint16_t d;  // fp16
};
static_assert(sizeof(BlockQ6_K) == 210);

struct BlockIQ4_XS {
  uint16_t d;  // fp16
  uint16_t scales_h;
  uint8_t scales_l[kSuperBlock / 64];
  uint8_t qs[kSuperBlock / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136);

// Q4_K / Q5_K: the 8 six-bit scales and mins packed in 12 bytes:
//   s < 4:  sc = b[s] & 63,                      mn = b[s + 4] & 63
//   s >= 4: sc = (b[s + 4] & 15) | (b[s - 4] >> 6) << 4,
//           mn = (b[s + 4] >> 4) | (b[s] >> 6) << 4
void UnpackKScales(const uint8_t* b, uint8_t* sc, uint8_t* mn);
// The inverse. REQUIRES: every sc[s], mn[s] < 64.
void PackKScales(const uint8_t* sc, const uint8_t* mn, uint8_t* b);
// Q3_K: the 16 six-bit scales packed in 12 bytes, returned minus 32:
//   low 4 bits: s < 8 ? b[s] & 15 : b[s - 8] >> 4; high 2 bits: bits
//   2 (s / 4)..2 (s / 4) + 1 of b[8 + s % 4].
void UnpackQ3KScales(const uint8_t* b, int8_t* s);

// Exact dequantization of n elements (n a multiple of the block size) from
// consecutive blocks.
void DequantizeQ4_1(const BlockQ4_1* b, float* y, int64_t n);
void DequantizeQ5_0(const BlockQ5_0* b, float* y, int64_t n);
void DequantizeQ5_1(const BlockQ5_1* b, float* y, int64_t n);
void DequantizeIQ4_NL(const BlockIQ4_NL* b, float* y, int64_t n);
void DequantizeQ2_K(const BlockQ2_K* b, float* y, int64_t n);
void DequantizeQ3_K(const BlockQ3_K* b, float* y, int64_t n);
void DequantizeQ4_K(const BlockQ4_K* b, float* y, int64_t n);
void DequantizeQ5_K(const BlockQ5_K* b, float* y, int64_t n);
void DequantizeQ6_K(const BlockQ6_K* b, float* y, int64_t n);
void DequantizeIQ4_XS(const BlockIQ4_XS* b, float* y, int64_t n);

// Quantizes n elements of x (n a multiple of the block size) into consecutive
// blocks of t, for t one of the types above; false (nothing written) for any
// other t. Q4_1, Q5_0 and Q5_1 give ggml's quantize_row_*_ref bytes; the
// others round to nearest under min/max scales (ggml_quantize.cc).
bool QuantizeGgmlRow(DType t, const float* x, void* y, int64_t n);

}  // namespace specd
