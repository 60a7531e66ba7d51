// Element types of weights and activations, and the block-quantized layouts.
//
// Quantized types store rows as consecutive blocks of 32 elements along the
// innermost (input) dimension. Q8_0 and Q4_0 are ggml's, so GGUF tensors are
// used in place:
//   Q8_0:    {fp16 d; int8 qs[32]}     x[i] = d * qs[i]
//   Q4_0:    {fp16 d; uint8 qs[16]}    x[i] = d * ((qs[i] & 0xF) - 8),
//                                      x[i+16] = d * ((qs[i] >> 4) - 8)
//   Q4_BF16: {bf16 d; uint8 qs[16]}    the same nibbles with a bfloat16 scale:
//                                      compressed-tensors' symmetric INT4,
//                                      group 32 (W4A16 "pack-quantized"), after
//                                      the loader re-orders its packed int32
//                                      words into this layout. d * (q - 8) is
//                                      exact in f32 (8 + 4 significant bits).
// The other GGUF block types (Q4_1, Q5_0, Q5_1, the K-quants Q2_K..Q6_K,
// IQ4_NL, IQ4_XS) are ggml's too; tensor/ggml_blocks.h has their layouts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "base/status.h"
#include "tensor/ggml_blocks.h"

namespace specd {

// New types go at the end: the values are stable.
enum class DType : uint8_t {
  kF32, kF16, kBF16, kQ8_0, kQ4_0, kI8, kI32, kI64, kBool, kQ4_BF16,
  kQ4_1, kQ5_0, kQ5_1, kQ2_K, kQ3_K, kQ4_K, kQ5_K, kQ6_K, kIQ4_NL, kIQ4_XS
};

constexpr int kQuantBlock = 32;

struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[kQuantBlock];
};
static_assert(sizeof(BlockQ8_0) == 34);

struct BlockQ4_0 {
  uint16_t d;  // fp16 scale
  uint8_t qs[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

struct BlockQ4_BF16 {
  uint16_t d;  // bf16 scale
  uint8_t qs[kQuantBlock / 2];
};
static_assert(sizeof(BlockQ4_BF16) == 18);

const char* DTypeName(DType t);
// Accepts the names DTypeName prints ("f32", "q4_0", ...).
StatusOr<DType> ParseDType(std::string_view name);
// Elements per storage block: 256 for the K-quants and IQ4_XS, 32 for the
// other quantized types, else 1.
int DTypeBlockElems(DType t);
// Bytes per storage block.
size_t DTypeBlockBytes(DType t);
// Every block-quantized type (the ggml ones and Q4_BF16).
bool IsQuantized(DType t);
// Byte offsets within one block of t of its fp16 fields (scales, and mins
// where the type has them) into offsets[0..1]; returns how many (0 for float,
// integer and Q4_BF16 types). A block's values are all finite iff these are.
int BlockHalfOffsets(DType t, int* offsets);
// Bytes of a row of `n` elements. REQUIRES: n % DTypeBlockElems(t) == 0.
inline size_t RowBytes(DType t, int64_t n) {
  return static_cast<size_t>(n / DTypeBlockElems(t)) * DTypeBlockBytes(t);
}

// IEEE half <-> float (round to nearest even), and bfloat16 <-> float.
float F16ToF32(uint16_t h);
uint16_t F32ToF16(float f);
inline float BF16ToF32(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t F32ToBF16(float f) {  // round to nearest even; NaN stays NaN
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

// Reference (scalar) quantization of one row, ggml-compatible rounding.
// REQUIRES: n % 32 == 0.
void QuantizeRowQ8_0(const float* x, BlockQ8_0* out, int64_t n);
void QuantizeRowQ4_0(const float* x, BlockQ4_0* out, int64_t n);
// compressed-tensors 0.20.1's symmetric INT4 group-32 quantization of a bf16
// row, in its arithmetic (every step rounded to bf16, as torch computes on
// bf16 tensors), per block of 32:
//   amax = max |x[i]|; d = bf16(amax / 7.5f), or bf16 eps 2^-7 when that is 0;
//   q[i] = round_half_even(clamp(bf16(x[i] / d), -8, 7))    (stored as q + 8)
// REQUIRES: n % 32 == 0.
void QuantizeRowQ4_BF16(const uint16_t* x_bf16, BlockQ4_BF16* out, int64_t n);
// Converts one row of any float or quantized dtype to f32; exact (each
// quantized type as its format defines it). REQUIRES: n % DTypeBlockElems(t)
// == 0.
void DequantizeRow(DType t, const void* src, float* dst, int64_t n);
// Converts one f32 row into `t` (any float or quantized dtype; q4_bf16 rounds
// the row to bf16 first, then QuantizeRowQ4_BF16; the ggml types as
// QuantizeGgmlRow). REQUIRES: n % DTypeBlockElems(t) == 0.
void QuantizeRow(DType t, const float* src, void* dst, int64_t n);

}  // namespace specd
