// Whether a row of logits can be sampled at all.
//
// A row is usable when no entry is NaN or +Inf and at least one entry is
// above -inf (-inf alone marks a forbidden token). Anything else means the
// model's weights or activations are not finite: argmax of such a row is an
// arbitrary index (token 0 for an all-NaN row) and softmax is NaN, so the
// caller ends the request instead of emitting it.
#pragma once

#include "base/status.h"

namespace specd {

// OK for a usable row of V logits; otherwise Internal "contain NaN" /
// "contain +Inf" / "are all -inf" (the first that applies, in that order), a
// phrase meant to follow "logits of <what>". Reads the row once, branch-free
// in the common case; the classification pass runs only on a bad row.
Status CheckLogitsRow(const float* logits, int V);

}  // namespace specd
