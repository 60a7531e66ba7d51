#include "model/rope.h"

#include <cmath>

namespace specd {

std::vector<float> RopeInvFreq(const ModelConfig& c) {
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
