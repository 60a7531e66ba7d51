#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace specd {

namespace {

// transformers' find_correction_dim: the dimension whose wavelength makes
// `rotations` turns over `max_pos` positions.
double CorrectionDim(double rotations, int dim, double base, int max_pos) {
  return (dim * std::log(max_pos / (rotations * 2 * M_PI))) / (2 * std::log(base));
}

std::vector<float> YarnInvFreq(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  const int dim = c.head_dim, half = dim / 2;
  const double base = c.rope_theta;
  double low = CorrectionDim(s.beta_fast, dim, base, s.original_max_position);
  double high = CorrectionDim(s.beta_slow, dim, base, s.original_max_position);
  if (s.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  if (low == high) high += 0.001;  // as transformers: no division by zero
  std::vector<float> inv(half);
  for (int i = 0; i < half; ++i) {
    // transformers computes these in f32; the ramp and blend likewise.
    float pos_freq = std::pow(static_cast<float>(base), static_cast<float>(2 * i) / dim);
    float extrapolation = 1.f / pos_freq;
    float interpolation = 1.f / (s.factor * pos_freq);
    float ramp = static_cast<float>((i - low) / (high - low));
    ramp = std::min(1.f, std::max(0.f, ramp));
    float extrapolation_factor = 1.f - ramp;
    inv[i] = interpolation * (1.f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return inv;
}

}  // namespace

double YarnGetMscale(double scale, double mscale) {
  if (scale <= 1) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

double RopeAttentionFactor(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  if (s.type != "yarn") return 1.0;
  if (s.mscale != 0 && s.mscale_all_dim != 0)
    return YarnGetMscale(s.factor, s.mscale) / YarnGetMscale(s.factor, s.mscale_all_dim);
  return YarnGetMscale(s.factor, 1.0);
}

double MlaSoftmaxScale(const ModelConfig& c) {
  double scale = 1.0 / std::sqrt(static_cast<double>(c.mla.qk_head_dim()));
  const RopeScaling& s = c.rope_scaling;
  if (!s.type.empty() && s.mscale_all_dim != 0) {
    double m = YarnGetMscale(s.factor, s.mscale_all_dim);
    scale *= m * m;
  }
  return scale;
}

std::vector<float> RopeInvFreq(const ModelConfig& c) {
  if (c.rope_scaling.type == "yarn") return YarnInvFreq(c);
  int half = c.head_dim / 2;
  std::vector<float> inv(half);
  const RopeScaling& s = c.rope_scaling;
  for (int i = 0; i < half; ++i) {
    double f = 1.0 / std::pow(static_cast<double>(c.rope_theta), 2.0 * i / c.head_dim);
    if (s.type == "llama3") {
      // As in Meta's reference (apply_scaling) and HF's _compute_llama3_parameters.
      double low_wavelen = s.original_max_position / s.low_freq_factor;
      double high_wavelen = s.original_max_position / s.high_freq_factor;
      double wavelen = 2 * M_PI / f;
      if (wavelen > low_wavelen) {
        f = f / s.factor;
      } else if (wavelen >= high_wavelen) {
        double smooth = (s.original_max_position / wavelen - s.low_freq_factor) /
                        (s.high_freq_factor - s.low_freq_factor);
        f = (1 - smooth) * f / s.factor + smooth * f;
      }
    } else if (s.type == "linear") {
      f = f / s.factor;
    }
    inv[i] = static_cast<float>(f);
  }
  return inv;
}

}  // namespace specd
