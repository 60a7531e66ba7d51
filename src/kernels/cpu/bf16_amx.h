// AMX-BF16 matmul for BF16 weights and many tokens (bf16_amx.cc). Internal
// to the kernels module. The caller must hold the OS tile-data permission
// (RequestAmxTileData) and the CPU must have AMX-TILE, AMX-BF16 and AVX-512.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specd::kernels::cpu {

// Activations for the tile kernel: per 16-token tile and 32-element chunk c,
// a 16 x 64-byte B tile whose row p holds elements 32c + 2p, 32c + 2p + 1 of
// the 16 tokens (bf16 pairs, token-major within the row); padding tokens 0.
struct Bf16TiledActs {
  int n_tiles = 0;
  int64_t n_chunks = 0;          // k / 32
  const uint16_t* x = nullptr;   // (n_tiles, n_chunks, 16, 16, 2)
};

// Weight rows per tile group: split rows across threads in multiples of this.
constexpr int kBf16AmxRows = 16;

// True when this build has the path (x86-64); the caller checks the CPU.
bool HaveBf16Amx();
// From bf16 activations xb (n_tokens rows, stride ldx). REQUIRES: k % 32 == 0.
void BuildBf16TiledActs(const uint16_t* xb, int64_t ldx, int n_tokens, int64_t k,
                        std::vector<uint16_t>* storage, Bf16TiledActs* out);
// y[t * ldy + i] = sum_j W[i, j] * x[t, j] for i < n_rows, t < n_tokens; rows
// past a multiple of 16 go to MatRowsBF16Avx512 with xb. prefetch: prefetch
// the next 16 rows while a group is worked on.
void AmxBf16Rows(const uint8_t* w, size_t row_bytes, int64_t n_rows, int64_t k,
                 const Bf16TiledActs& a, const uint16_t* xb, int64_t ldx, int n_tokens,
                 float* y, int64_t ldy, bool prefetch);

}  // namespace specd::kernels::cpu
