// RoPE frequencies for a ModelConfig, with rope_scaling folded in.
#pragma once

#include <vector>

#include "loader/model_config.h"

namespace specd {

// head_dim/2 inverse frequencies: theta^(-2i/head_dim), adjusted for
// "llama3" scaling (Llama 3.1: long wavelengths divided by `factor`, a smooth
// ramp between low_freq_factor and high_freq_factor), "linear" scaling, or
// "yarn" (transformers' _compute_yarn_parameters: interpolated 1/(factor·f)
// below the correction range, extrapolated f above it, a linear ramp between).
std::vector<float> RopeInvFreq(const ModelConfig& c);

// YaRN's "mscale" of the YaRN paper: 0.1·mscale·ln(scale) + 1, 1 for scale <= 1.
double YarnGetMscale(double scale, double mscale);

// The factor YaRN multiplies cos and sin by (transformers' attention_factor):
// mscale(factor, mscale) / mscale(factor, mscale_all_dim) when both are set,
// else mscale(factor, 1). 1 without yarn.
double RopeAttentionFactor(const ModelConfig& c);

// Softmax scale of Multi-head Latent Attention: qk_head_dim^-0.5, times
// mscale(factor, mscale_all_dim)² under yarn with mscale_all_dim set
// (transformers' yarn_apply_mscale).
double MlaSoftmaxScale(const ModelConfig& c);

}  // namespace specd
