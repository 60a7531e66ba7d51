// Expert choice of the DeepSeek-V2/V3 family's MoE layers, exactly as
// transformers' DeepseekV3TopkRouter / DeepseekV2TopkRouter compute it (see
// MoeConfig in loader/model_config.h for the rule).
#pragma once

#include <cstdint>

#include "loader/model_config.h"

namespace specd {

// logits: (T, E) router logits in f32 (x · router_wᵀ); bias: (E) correction
// bias or null. Writes ids (T, top_k) in ascending expert order and their
// weights (T, top_k). Ties go to the lower expert id.
void RouteExperts(const MoeConfig& m, const float* logits, const float* bias, int T, int32_t* ids,
                  float* weights);

}  // namespace specd
