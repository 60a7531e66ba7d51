#include "model/moe_router.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace specd {
namespace {

// Indices of the k largest values (ties: lower index first).
void TopK(const float* v, int n, int k, std::vector<int>* out) {
  out->resize(n);
  std::iota(out->begin(), out->end(), 0);
  std::partial_sort(out->begin(), out->begin() + k, out->end(), [v](int a, int b) {
    return v[a] > v[b] || (v[a] == v[b] && a < b);
  });
  out->resize(k);
}

}  // namespace

void RouteExperts(const MoeConfig& m, const float* logits, const float* bias, int T, int32_t* ids,
                  float* weights) {
  const int E = m.n_routed_experts, K = m.top_k;
  const int per_group = E / m.n_group;
  const bool sigmoid = m.scoring == "sigmoid";
  std::vector<float> scores(E), choice(E), group_score(m.n_group);
  std::vector<int> top, groups;
  for (int t = 0; t < T; ++t) {
    const float* l = logits + static_cast<size_t>(t) * E;
    if (sigmoid) {
      for (int e = 0; e < E; ++e) scores[e] = 1.f / (1.f + std::exp(-l[e]));
    } else {
      float mx = *std::max_element(l, l + E), sum = 0.f;
      for (int e = 0; e < E; ++e) sum += scores[e] = std::exp(l[e] - mx);
      for (int e = 0; e < E; ++e) scores[e] /= sum;
    }
    for (int e = 0; e < E; ++e) choice[e] = scores[e] + (bias != nullptr ? bias[e] : 0.f);
    if (m.topk_method != "greedy" && m.n_group > 1) {
      // Group score: sum of the group's top 2 (noaux_tc) or its max
      // (group_limited_greedy); experts outside the best topk_group groups
      // cannot be chosen.
      for (int g = 0; g < m.n_group; ++g) {
        const float* c = choice.data() + g * per_group;
        if (m.topk_method == "noaux_tc") {
          TopK(c, per_group, 2, &top);
          group_score[g] = c[top[0]] + c[top[1]];
        } else {
          group_score[g] = *std::max_element(c, c + per_group);
        }
      }
      TopK(group_score.data(), m.n_group, m.topk_group, &groups);
      std::vector<bool> keep(m.n_group, false);
      for (int g : groups) keep[g] = true;
      for (int e = 0; e < E; ++e)
        if (!keep[e / per_group]) choice[e] = -std::numeric_limits<float>::infinity();
    }
    TopK(choice.data(), E, K, &top);
    std::sort(top.begin(), top.end());
    float sum = 0.f;
    for (int k = 0; k < K; ++k) sum += scores[top[k]];
    const float denom = m.norm_topk_prob ? sum + 1e-20f : 1.f;
    for (int k = 0; k < K; ++k) {
      ids[t * K + k] = top[k];
      weights[t * K + k] = scores[top[k]] / denom * m.routed_scaling_factor;
    }
  }
}

}  // namespace specd
