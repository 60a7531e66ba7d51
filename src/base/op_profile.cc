#include "base/op_profile.h"

#include <fmt/format.h>

namespace specd {

const char* ProfOpName(ProfOp op) {
  switch (op) {
    case ProfOp::kEmbed: return "embed";
    case ProfOp::kMatQkv: return "matmul qkv";
    case ProfOp::kMatO: return "matmul o";
    case ProfOp::kMatGateUp: return "matmul gate/up";
    case ProfOp::kMatDown: return "matmul down";
    case ProfOp::kLmHead: return "lm_head";
    case ProfOp::kAttention: return "attention";
    case ProfOp::kNorm: return "rmsnorm";
    case ProfOp::kRope: return "rope";
    case ProfOp::kSwiGlu: return "swiglu";
    case ProfOp::kAllReduce: return "allreduce+norm";
    case ProfOp::kSampling: return "sampling";
    case ProfOp::kVerify: return "verify";
    case ProfOp::kDraft: return "draft";
    case ProfOp::kCount: break;
  }
  return "?";
}

void OpProfile::Reset() {
  cells_ = {};
  steps_ = {};
}

std::string OpProfile::FormatTable() const {
  return FormatPhase(ProfPhase::kPrefill, "prefill") + FormatPhase(ProfPhase::kDecode, "decode");
}

std::string OpProfile::FormatPhase(ProfPhase phase, const std::string& title) const {
  std::string s;
  const int p = static_cast<int>(phase);
  const Cell& st = steps_[p];
  if (st.calls == 0) return s;
  const double step_ms = st.ns * 1e-6;
  s += fmt::format("profile ({}): {} steps, {:.2f} ms per step\n", title, st.calls,
                   step_ms / st.calls);
  s += fmt::format("  {:<16} {:>10} {:>8} {:>8} {:>10}\n", "op", "total ms", "% step", "calls",
                   "ms/step");
  int64_t accounted = 0;
  for (int o = 0; o < static_cast<int>(ProfOp::kCount); ++o) {
    const Cell& c = cells_[p][o];
    if (c.calls == 0) continue;
    accounted += c.ns;
    s += fmt::format("  {:<16} {:>10.2f} {:>7.1f}% {:>8} {:>10.3f}\n",
                     ProfOpName(static_cast<ProfOp>(o)), c.ns * 1e-6,
                     step_ms > 0 ? 100.0 * c.ns * 1e-6 / step_ms : 0.0, c.calls,
                     c.ns * 1e-6 / st.calls);
  }
  const int64_t other = st.ns - accounted;
  s += fmt::format("  {:<16} {:>10.2f} {:>7.1f}% {:>8} {:>10.3f}\n", "other", other * 1e-6,
                   step_ms > 0 ? 100.0 * other * 1e-6 / step_ms : 0.0, "",
                   other * 1e-6 / st.calls);
  return s;
}

}  // namespace specd
