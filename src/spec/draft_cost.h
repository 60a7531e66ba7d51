// The draft-shape choice: how many tokens a sequence should draft this step
// (a chain of `depth` tokens under the root; 0 = a plain step), from what a
// step costs on this machine and how often this sequence's drafts are
// accepted at each depth.
//
// A step of a batch whose sequences draft depths k_i costs
//   t_target(Σ (k_i + 1)) + Σ_{k_i > 0} (t_first + (k_i - 1) · t_draft)
// (one target forward over every tree; k draft-head forwards for a chain of
// k: the first over the rows accepted last step, whose last row proposes
// depth 1, then one per further depth; the deepest token is fed only once
// accepted, as part of the next step's first forward) and is expected to
// yield Σ E_i(k_i) tokens, where
//   E(k) = 1 + Σ_{j=1..k} Π_{d=1..j} p_d
// and p_d = P(the draft token at depth d is accepted | depth d-1 was).
// ChooseDepths maximises expected tokens per second; with no depth that
// beats a plain step it returns zeros, so speculation never makes a step
// slower than plain decoding by the model's own estimate.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace specd {

// Measured costs, in seconds.
//
// Learning model: t(n) = measured(n) · scale · correction(n). `target` stays
// as measured at start; `scale`, common to every size, follows the ratio
// observed / measured of the steps in use, fast, because a busier machine or
// a longer context slows every size alike; correction(n) follows, slowly,
// size n's ratio against the scale (a verify pass that costs more, against a
// decode step, than the start-up measurement said). Moving only the observed size would bias the choice: plain
// steps would raise t(1) alone, make a verify pass look cheap against it, and
// start drafts that do not pay.
struct StepCosts {
  // target[n - 1]: one target forward over n new tokens with logits for every
  // token (a verify pass), n = 1..target.size(), as measured.
  std::vector<double> target;
  // A draft's first head forward, over the rows accepted last step: the
  // target's forward has just pushed the head's weights out of the caches,
  // so on a small model it takes about twice a further chain step; with the
  // step's verification and bookkeeping, as learned (0 at start: n-gram).
  double draft_first = 0;
  double draft_step = 0;  // each further draft-head forward of a chain (0: n-gram)
  // The draft head catching up after a plain stretch: one forward over the
  // newest accepted rows it was not fed (Speculator::kMaxPendingRows), which
  // the first draft after the stretch pays (0: n-gram).
  double catch_up = 0;
  // What a plain step of a speculating sequence costs besides its forward
  // and emitting its token (sampling, queueing the head's row), as observed
  // (0 at start): a drafting step pays its own sampling and bookkeeping
  // inside what ObserveDraft sees, so that part is its cost only beyond this.
  double plain_extra = 0;
  bool learn = true;      // false: Observe changes nothing (fixed costs for tests)
  double scale = 1;       // observed / measured, every size
  std::vector<double> correction;  // per size n - 1 (empty or missing: 1)

  // Interpolated for n inside the measured range, extended linearly from the
  // last two points beyond it; times scale and correction(n).
  // REQUIRES: !target.empty(), n >= 1.
  double Target(int n) const;
  double Measured(int n) const;  // the same without scale and correction
  // draft_first, draft_step and catch_up times the scale: the head runs on
  // the same cores as the target, so what slows one slows the other.
  double DraftFirst() const { return draft_first * scale; }
  double DraftStep() const { return draft_step * scale; }
  double CatchUp() const { return catch_up * scale; }
  // What drafting a chain of `depth` costs beyond the target's forward
  // (0 for depth 0).
  double DraftCost(int depth) const {
    return depth > 0 ? DraftFirst() + (depth - 1) * DraftStep() : 0;
  }
  std::string Summary() const;  // "t(1) 1.20 ms, t(4) 1.90 ms (1.58x), ..."
  // A forward over n tokens just took `seconds`: moves scale and n's
  // correction towards it, so a start-up measurement disturbed by another
  // process (or a machine that got busier) corrects itself. Probes keep the
  // sizes that are not in use from staying wrong forever.
  void Observe(int n, double seconds);
  // A step that drafted `depth` tokens spent `seconds` outside the target's
  // forward (drafting, verification, feeding the head back): moves
  // DraftFirst() towards what of it, beyond plain_extra, DraftStep() does
  // not explain, so that DraftCost(depth) follows what steps of that depth
  // cost more than plain ones.
  void ObserveDraft(int depth, double seconds);
  // A plain step of a speculating sequence spent `seconds` besides its
  // forward and emitting: moves plain_extra towards it.
  void ObservePlain(double seconds);
};

// Per-depth acceptance of one sequence's drafts, as decayed counts so that
// it follows the text as it changes. Depth d's estimate starts from a prior
// and from depth d - 1's estimate (acceptance rarely rises with depth).
class AcceptanceModel {
 public:
  explicit AcceptanceModel(int max_depth = 16);
  // A verify step that drafted a chain of `depth` tokens accepted `accepted`
  // of them (the first `accepted`; a tree counts as its accepted path).
  void Observe(int depth, int accepted);
  // A step without a draft: the counts fade a little (the text moves on), so
  // a sequence that stopped drafting grows uncertain again and, with
  // optimism, tries a draft after a stretch the longer the more evidence it
  // had against drafting.
  void Age();
  double p(int d) const;              // d >= 1
  // The standard deviation of p(d)'s estimate (its counts and the prior's
  // as a Beta distribution's): large while a depth was rarely tried.
  double p_stddev(int d) const;
  // A copy whose counts weigh at most `steps` observations: the pooled
  // acceptance of earlier sequences as a new sequence's starting estimate.
  AcceptanceModel AsPrior(double steps) const;
  // E(k), E(0) = 1. optimism > 0: E(k >= 1) raised by that many standard
  // deviations of p(1)'s estimate (at most to k + 1), an upper estimate for
  // choices that explore.
  double ExpectedTokens(int k, double optimism = 0) const;
  // E(0), ..., E(k_max) in one pass: out->size() = k_max + 1.
  void ExpectedTokensUpTo(int k_max, double optimism, std::vector<double>* out) const;
  int max_depth() const { return static_cast<int>(tried_.size()); }
  int observations() const { return steps_; }  // Observe calls (not decayed)

  // The decayed counts per depth (index d - 1): what a later run may start
  // from (runtime/acceptance_cache.h).
  const std::vector<double>& tried() const { return tried_; }
  const std::vector<double>& accepted() const { return accepted_; }
  // A model of max_depth depths from such counts (deeper ones dropped,
  // missing ones untried). false, *out unchanged: the counts cannot be a
  // model's (lengths differ, a count negative or not finite, more accepted
  // than tried at a depth, or a depth tried more than the one before it).
  static bool FromCounts(const std::vector<double>& tried, const std::vector<double>& accepted,
                         int observations, int max_depth, AcceptanceModel* out);
  // This model with max_depth depths (deeper counts dropped, missing depths
  // untried), its observations kept.
  AcceptanceModel WithMaxDepth(int max_depth) const;

 private:
  // E(0..k_max) into out[0..k_max] (out may be null); returns E(k_max).
  double Walk(int k_max, double optimism, double* out) const;

  std::vector<double> tried_, accepted_;
  int steps_ = 0;
};

struct DepthChoice {
  std::vector<int> depth;     // per sequence
  double expected_tokens = 0; // Σ E_i(k_i)
  double step_s = 0;          // predicted step time
  double plain_step_s = 0;    // predicted time of the same batch all plain
  // Predicted tokens/s of this choice over all-plain's.
  double predicted_speedup() const;
};

// Coordinate search over the batch: from a start, each sequence in turn
// takes the depth in [0, max_depth[i]] that maximises the batch's expected
// tokens per second with the others fixed; two sweeps. It runs from all-plain
// and from the best uniform depth (every sequence at the same k), because
// t_target(n) is not concave (one token runs a GEMV, more a GEMM): where only
// a joint move pays, one sequence at a time never finds it. The best result
// stands only if it beats all-plain by 5 % (near break-even the estimates'
// errors decide). Every depth is tried, not only the next one. A batch of
// one is searched exhaustively. other_tokens: prompt tokens in the same
// step; the decode's time is then a plain step of the sequences alone plus
// what the draft tokens add to the step (the prompt's share is not theirs).
// optimism: where the plain estimates choose all-plain, the search runs again
// weighing ExpectedTokens(k, optimism) (every drafted depth raised by the
// same bonus), so that a sequence whose acceptance is still uncertain drafts
// while that might pay; each try narrows the estimate, so the exploration
// ends by itself where drafts do not pay. That choice stands only if the
// plain estimates predict it at most 5 % slower than plain: exploring is for
// drafts that are uncertain, not for those already known to lose; except
// that a sequence that has verified one or two drafts of its own explores
// regardless: the first drafts after a prompt are no evidence (on the demo
// pair the first one or two are rejected, on the demo prompt the later ones
// are accepted 65 % of the time, on bench's prompts over 90 %). The reported
// DepthChoice::expected_tokens is the plain estimate.
DepthChoice ChooseDepths(const StepCosts& costs, const std::vector<const AcceptanceModel*>& seqs,
                         const std::vector<int>& max_depth, int other_tokens = 0,
                         double optimism = 0);

// The optimism the scheduler chooses with (standard deviations). A plain
// step teaches nothing about acceptance, so a chooser without it stays plain
// wherever the prior (p = 0.5), or one early rejection, predicts about
// break-even, though drafts accepted more often would pay.
constexpr double kDraftOptimism = 1.5;

// What one sequence drafting a chain of `depth` tokens after a plain stretch
// (a probe) is expected to lose against its plain step, in seconds; 0 when
// the model expects it to pay. The step without the probe runs `step_tokens`
// tokens and yields `step_seqs` tokens (one per decoding sequence); the probe
// adds depth tokens to its forward, the head's catch-up (its first forward)
// and depth - 1 further draft-head steps, and E(depth) - 1 tokens, each worth
// a plain step's time per token.
double ProbeLoss(const StepCosts& costs, const AcceptanceModel& acceptance, int depth,
                 int step_tokens, int step_seqs);

}  // namespace specd
