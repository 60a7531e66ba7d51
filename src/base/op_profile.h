// Per-op wall-time accounting for `--profile`: where a forward step's time
// goes (matmuls by layer kind, attention, norms, RoPE, allreduce, sampling).
//
// Timers run on the thread that issues the op (the engine loop thread; the
// pool's workers are inside the op), so no synchronisation is needed.
// Zero cost when off: OpTimer checks one pointer and one bool and reads no
// clock. Two phases are kept apart (prefill, decode) because their op mix
// differs: prefill is matmul-bound over many tokens, decode is a sequence of
// matrix-vector products bound by memory bandwidth.
//
// Thread-compatible: one thread records, and reads after recording stops.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "base/clock.h"

namespace specd {

enum class ProfOp : int {
  kEmbed,        // token embedding lookup (dequantize rows)
  kMatQkv,       // q, k, v projections (+ bias)
  kMatO,         // attention output projection
  kMatGateUp,    // MLP gate and up projections
  kMatDown,      // MLP down projection
  kLmHead,       // LM head (+ vocab all-gather)
  kAttention,    // scaled dot-product attention over the KV cache (+ KV writes)
  kNorm,         // RMSNorms not fused into a collective (+ q/k norms)
  kRope,         // rotary embeddings
  kSwiGlu,       // silu(gate) * up
  kAllReduce,    // allreduce + residual + RMSNorm (fused or not)
  kSampling,     // sampling / argmax from logits
  kVerify,       // speculative acceptance and KV commit
  kDraft,        // draft proposal (n-gram lookup or EAGLE-3 head)
  kCount
};

const char* ProfOpName(ProfOp op);

enum class ProfPhase : int { kPrefill, kDecode, kCount };

class OpProfile {
 public:
  bool enabled() const { return enabled_; }
  void set_enabled(bool on) { enabled_ = on; }
  void set_phase(ProfPhase p) { phase_ = static_cast<int>(p); }
  ProfPhase phase() const { return static_cast<ProfPhase>(phase_); }
  void Reset();

  void Add(ProfOp op, int64_t ns) {
    Cell& c = cells_[phase_][static_cast<int>(op)];
    c.ns += ns;
    c.calls++;
  }
  // One whole forward step (or sampling round) of the current phase: the
  // denominator of "% of step" and the count that gives ms per step.
  void AddStep(int64_t ns) {
    steps_[phase_].ns += ns;
    steps_[phase_].calls++;
  }

  struct Cell {
    int64_t ns = 0;
    int64_t calls = 0;
  };
  const Cell& cell(ProfPhase p, ProfOp op) const {
    return cells_[static_cast<int>(p)][static_cast<int>(op)];
  }
  const Cell& steps(ProfPhase p) const { return steps_[static_cast<int>(p)]; }

  // A table per phase with recorded steps: op, total ms, % of step time,
  // calls, ms per step; "other" is step time no op accounts for.
  std::string FormatTable() const;
  // The table of one phase under a caller's title ("forward n=8"), or "" when
  // the phase recorded no step.
  std::string FormatPhase(ProfPhase p, const std::string& title) const;

 private:
  bool enabled_ = false;
  int phase_ = 0;
  std::array<std::array<Cell, static_cast<int>(ProfOp::kCount)>,
             static_cast<int>(ProfPhase::kCount)>
      cells_{};
  std::array<Cell, static_cast<int>(ProfPhase::kCount)> steps_{};
};

// Times a scope into `profile` when it is non-null and enabled.
class OpTimer {
 public:
  OpTimer(OpProfile* profile, ProfOp op)
      : profile_(profile != nullptr && profile->enabled() ? profile : nullptr), op_(op) {
    if (profile_) start_ = NowNanos();
  }
  ~OpTimer() {
    if (profile_) profile_->Add(op_, NowNanos() - start_);
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  OpProfile* profile_;
  ProfOp op_;
  int64_t start_ = 0;
};

}  // namespace specd
