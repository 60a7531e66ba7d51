// RoPE frequencies for a ModelConfig, with rope_scaling folded in.
#pragma once

#include <vector>

#include "loader/model_config.h"

namespace specd {

// head_dim/2 inverse frequencies: theta^(-2i/head_dim), adjusted for
// "llama3" scaling (Llama 3.1: long wavelengths divided by `factor`, a smooth
// ramp between low_freq_factor and high_freq_factor) or "linear" scaling.
std::vector<float> RopeInvFreq(const ModelConfig& c);

}  // namespace specd
