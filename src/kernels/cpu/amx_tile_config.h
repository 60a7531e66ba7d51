// The 64-byte operand of ldtilecfg (palette 1), shared by the AMX kernels.
// Internal to the kernels module.
#pragma once

#include <cstdint>

namespace specd::kernels::cpu {

struct alignas(64) AmxTileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};  // bytes per row of tile i
  uint8_t rows[16] = {};    // rows of tile i
  AmxTileConfig& Tile(int i, int n_rows, int bytes_per_row) {
    rows[i] = static_cast<uint8_t>(n_rows);
    colsb[i] = static_cast<uint16_t>(bytes_per_row);
    return *this;
  }
};

}  // namespace specd::kernels::cpu
