#include "sampling/logits_check.h"

#include <cmath>
#include <cstdint>
#include <cstring>

namespace specd {

Status CheckLogitsRow(const float* logits, int V) {
  // Bits: an all-ones exponent is NaN or ±Inf; 0xFF800000 is -inf exactly.
  constexpr uint32_t kExp = 0x7F800000u, kNegInf = 0xFF800000u;
  uint32_t bad = 0;      // nonzero: some NaN or +Inf
  uint32_t usable = 0;   // nonzero: some entry above -inf
  for (int i = 0; i < V; ++i) {
    uint32_t b;
    std::memcpy(&b, &logits[i], 4);
    const uint32_t nonfinite = (b & kExp) == kExp;
    const uint32_t neg_inf = b == kNegInf;
    bad |= nonfinite & (neg_inf ^ 1u);
    usable |= neg_inf ^ 1u;
  }
  if (bad == 0 && usable != 0) return Status::Ok();
  for (int i = 0; i < V; ++i)
    if (std::isnan(logits[i])) return InternalError("contain NaN (token " + std::to_string(i) + ")");
  for (int i = 0; i < V; ++i)
    if (std::isinf(logits[i]) && logits[i] > 0)
      return InternalError("contain +Inf (token " + std::to_string(i) + ")");
  return InternalError("are all -inf");
}

}  // namespace specd
