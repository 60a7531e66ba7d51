#include "spec/draft_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace specd {
namespace {

// Prior pseudo-counts of the depth-1 estimate (mean 0.5) and the weight with
// which depth d leans on depth d - 1's estimate.
constexpr double kPriorWeight = 2.0;
// Each observation scales the older ones by this, so the estimate follows
// roughly the last 1 / (1 - kDecay) = 32 steps.
constexpr double kDecay = 0.97;
// Each plain step scales them by this: evidence of about 100 steps ago
// weighs a third.
constexpr double kPlainDecay = 0.99;
// How much better than the current choice a change must predict.
constexpr double kMargin = 0.05;
// How much an exploring choice may lose by the plain estimates: a draft that
// is hoped for, not one the estimates already call a loss.
constexpr double kExploreLoss = 0.05;
// Fewer verified drafts of a sequence's own than this are no evidence: the
// first drafts after a prompt are drafted from the prompt's text, the later
// ones from the target's own continuation, which a head predicts better.
constexpr int kThinEvidence = 3;

}  // namespace

double StepCosts::Measured(int n) const {
  const int m = static_cast<int>(target.size());
  if (n <= m) return target[std::max(1, n) - 1];
  if (m == 1) return target[0] * n;
  const double slope = std::max(0.0, target[m - 1] - target[m - 2]);
  return target[m - 1] + slope * (n - m);
}

double StepCosts::Target(int n) const {
  const size_t i = static_cast<size_t>(std::max(1, n) - 1);
  return Measured(n) * scale * (i < correction.size() ? correction[i] : 1.0);
}

void StepCosts::Observe(int n, double seconds) {
  // The scale follows roughly the last 10 steps; a size's correction the
  // last 20 steps of that size.
  constexpr double kScaleWeight = 0.1, kCorrectionWeight = 0.05;
  if (!learn || n < 1 || n > static_cast<int>(target.size()) || !(seconds > 0)) return;
  if (correction.size() < target.size()) correction.resize(target.size(), 1.0);
  double& corr = correction[n - 1];
  // Clamped: one step preempted by another process must not double every
  // estimate.
  const double ratio =
      std::clamp(seconds / Measured(n), 0.5 * scale * corr, 2.0 * scale * corr);
  scale += kScaleWeight * (ratio - scale);
  // What the common scale does not explain: this size against the others.
  corr += kCorrectionWeight * (ratio / scale - corr);
}

void StepCosts::ObserveDraft(int depth, double seconds) {
  constexpr double kWeight = 0.1;
  if (!learn || depth < 1 || !(seconds >= 0)) return;
  const double first = std::max(0.0, (seconds - plain_extra) / scale - (depth - 1) * draft_step);
  draft_first += kWeight * (first - draft_first);
}

void StepCosts::ObservePlain(double seconds) {
  constexpr double kWeight = 0.1;
  if (!learn || !(seconds >= 0)) return;
  plain_extra += kWeight * (seconds - plain_extra);
}

std::string StepCosts::Summary() const {
  std::string s;
  for (int n : {1, 2, 4, 8, 16}) {
    if (n > static_cast<int>(target.size())) break;
    s += fmt::format("{}t({}) {:.2f} ms", s.empty() ? "" : ", ", n, Target(n) * 1e3);
    if (n > 1) s += fmt::format(" ({:.2f}x)", Target(n) / Target(1));
  }
  if (draft_first > 0)
    s += fmt::format(", draft {:.2f} ms + {:.2f} ms per further token", DraftFirst() * 1e3,
                     DraftStep() * 1e3);
  if (catch_up > 0) s += fmt::format(", head catch-up {:.2f} ms", CatchUp() * 1e3);
  return s;
}

AcceptanceModel::AcceptanceModel(int max_depth)
    : tried_(std::max(1, max_depth), 0.0), accepted_(std::max(1, max_depth), 0.0) {}

void AcceptanceModel::Observe(int depth, int accepted) {
  ++steps_;
  for (size_t d = 0; d < tried_.size(); ++d) {
    tried_[d] *= kDecay;
    accepted_[d] *= kDecay;
  }
  depth = std::min(depth, max_depth());
  // Depths 1..accepted were accepted; depth accepted + 1 (if drafted) was
  // tried and rejected; deeper ones were never reached.
  for (int d = 1; d <= depth && d <= accepted + 1; ++d) {
    tried_[d - 1] += 1;
    if (d <= accepted) accepted_[d - 1] += 1;
  }
}

void AcceptanceModel::Age() {
  for (size_t d = 0; d < tried_.size(); ++d) {
    tried_[d] *= kPlainDecay;
    accepted_[d] *= kPlainDecay;
  }
}

bool AcceptanceModel::FromCounts(const std::vector<double>& tried,
                                 const std::vector<double>& accepted, int observations,
                                 int max_depth, AcceptanceModel* out) {
  if (tried.size() != accepted.size() || observations < 0) return false;
  // Slack for the rounding of counts written as decimal text.
  constexpr double kSlack = 1e-9;
  for (size_t d = 0; d < tried.size(); ++d) {
    const double t = tried[d], a = accepted[d];
    if (!std::isfinite(t) || !std::isfinite(a) || t < 0 || a < 0 || a > t + kSlack) return false;
    // A chain reaches depth d + 1 only through an accepted depth d.
    if (d > 0 && t > accepted[d - 1] + kSlack) return false;
  }
  AcceptanceModel m(static_cast<int>(tried.size()));
  for (size_t d = 0; d < tried.size(); ++d) {
    m.tried_[d] = tried[d];
    m.accepted_[d] = std::min(accepted[d], tried[d]);
  }
  m.steps_ = observations;
  *out = m.WithMaxDepth(max_depth);
  return true;
}

AcceptanceModel AcceptanceModel::WithMaxDepth(int max_depth) const {
  AcceptanceModel m(max_depth);
  for (size_t d = 0; d < tried_.size() && d < m.tried_.size(); ++d) {
    m.tried_[d] = tried_[d];
    m.accepted_[d] = accepted_[d];
  }
  m.steps_ = steps_;
  return m;
}

AcceptanceModel AcceptanceModel::AsPrior(double steps) const {
  AcceptanceModel m = *this;
  m.steps_ = 0;
  const double scale = tried_[0] > steps ? steps / tried_[0] : 1.0;
  for (size_t d = 0; d < tried_.size(); ++d) {
    m.tried_[d] *= scale;
    m.accepted_[d] *= scale;
  }
  return m;
}

double AcceptanceModel::p(int d) const {
  double prior = 0.5;
  double est = prior;
  for (int i = 1; i <= std::min(d, max_depth()); ++i) {
    est = (accepted_[i - 1] + kPriorWeight * prior) / (tried_[i - 1] + kPriorWeight);
    prior = est;
  }
  return est;
}

double AcceptanceModel::p_stddev(int d) const {
  d = std::clamp(d, 1, max_depth());
  const double p = this->p(d);
  return std::sqrt(p * (1 - p) / (tried_[d - 1] + kPriorWeight + 1));
}

double AcceptanceModel::ExpectedTokens(int k, double optimism) const {
  return Walk(k, optimism, nullptr);
}

double AcceptanceModel::Walk(int k_max, double optimism, double* out) const {
  // The bonus of a drafted depth: optimism standard deviations of p(1), the
  // same for every depth (a raised p(1) multiplied through a chain would make
  // deep chains look cheap to explore, and they are not), at most what a
  // chain can yield.
  const double bonus = optimism > 0 ? optimism * p_stddev(1) : 0;
  double e = 1, run = 1, prior = 0.5;  // run: Π p(j) so far; depth d's prior is p(d - 1)
  if (out) out[0] = 1;
  for (int d = 1; d <= k_max; ++d) {
    if (d <= max_depth()) {
      const double pd = (accepted_[d - 1] + kPriorWeight * prior) / (tried_[d - 1] + kPriorWeight);
      prior = pd;
      run *= pd;
      e += run;
    }
    if (out) out[d] = std::min(e + bonus, 1.0 + std::min(d, max_depth()));
  }
  return k_max >= 1 ? std::min(e + bonus, 1.0 + std::min(k_max, max_depth())) : 1.0;
}

void AcceptanceModel::ExpectedTokensUpTo(int k_max, double optimism,
                                         std::vector<double>* out) const {
  out->resize(std::max(0, k_max) + 1);
  Walk(k_max, optimism, out->data());
}

double DepthChoice::predicted_speedup() const {
  const size_t n = depth.size();
  if (n == 0 || step_s <= 0 || plain_step_s <= 0) return 1;
  return (expected_tokens / step_s) / (static_cast<double>(n) / plain_step_s);
}

namespace {

// ChooseDepths' search, with the sequences' E(k) at the given optimism.
// *best_draft: the best rate of a choice that drafts, among those the search
// weighed, over all-plain's (0 when none was weighed).
DepthChoice SearchDepths(const StepCosts& costs, const std::vector<const AcceptanceModel*>& seqs,
                         const std::vector<int>& max_depth, int other_tokens, double optimism,
                         double* best_draft) {
  const int n = static_cast<int>(seqs.size());
  DepthChoice c;
  c.depth.assign(n, 0);
  *best_draft = 0;
  if (n == 0 || costs.target.empty()) return c;
  double best_draft_rate = 0;
  // E_i(k) once per sequence and depth, and a choice's sums kept as running
  // totals: a step of 16 sequences searches 2 starts x 2 x 16 x 9
  // candidates, each O(1) (recomputing every sequence's E per candidate cost
  // more than the rest of a small model's step).
  std::vector<std::vector<double>> e(n);
  int deepest = 0;
  for (int i = 0; i < n; ++i) {
    seqs[i]->ExpectedTokensUpTo(max_depth[i], optimism, &e[i]);
    deepest = std::max(deepest, static_cast<int>(e[i].size()) - 1);
  }
  // A choice's rate: expected tokens over the time they cost. With prompt
  // tokens in the step (other_tokens > 0) the prompt's share is not the
  // decode's: the time is a plain step of the n sequences alone plus what
  // the draft tokens add to this step. (Over the whole step, a long prompt
  // chunk makes any draft look nearly free, while the tokens it may win are
  // worth only plain decode steps.) Without prompt tokens both are the step.
  const double plain_alone = costs.Target(n), plain_with_other = costs.Target(other_tokens + n);
  // drafted: Σ k_i; drafting: how many sequences draft (k_i > 0).
  auto rate = [&](double tokens, int fed_tokens, int drafted, int drafting, double* time) {
    const double forward = costs.Target(fed_tokens);
    const double draft = drafting * costs.DraftFirst() + (drafted - drafting) * costs.DraftStep();
    if (time) *time = forward + draft;
    if (other_tokens == 0) return tokens / (forward + draft);
    return tokens / (plain_alone + std::max(0.0, forward - plain_with_other) + draft);
  };
  // A choice and its running sums.
  struct Search {
    std::vector<int> depth;
    double sum_e = 0;
    int fed = 0, drafted = 0, drafting = 0;
    double rate = 0;
  };
  auto rate_of = [&](const Search& s, double* time) {
    return rate(s.sum_e, s.fed, s.drafted, s.drafting, time);
  };
  auto start_at = [&](const std::vector<int>& depth) {
    Search s{depth, 0, other_tokens, 0, 0, 0};
    for (int i = 0; i < n; ++i) {
      s.sum_e += e[i][depth[i]];
      s.fed += depth[i] + 1;
      s.drafted += depth[i];
      s.drafting += depth[i] > 0;
    }
    s.rate = rate_of(s, nullptr);
    return s;
  };
  // Coordinate search: each sequence in turn takes the depth that maximises
  // the batch's rate with the others fixed.
  auto improve = [&](Search s) {
    for (int sweep = 0; sweep < (n == 1 ? 1 : 2); ++sweep) {
      for (int i = 0; i < n; ++i) {
        const int keep = s.depth[i];
        // The sums without sequence i.
        const double e0 = s.sum_e - e[i][keep];
        const int fed0 = s.fed - (keep + 1), drafted0 = s.drafted - keep;
        const int drafting0 = s.drafting - (keep > 0);
        int best_k = keep;
        double best_r = s.rate;
        for (int k = 0; k < static_cast<int>(e[i].size()); ++k) {
          const double r =
              rate(e0 + e[i][k], fed0 + k + 1, drafted0 + k, drafting0 + (k > 0), nullptr);
          if (drafting0 + (k > 0) > 0) best_draft_rate = std::max(best_draft_rate, r);
          // Strictly better only: ties keep the shallower (cheaper to be wrong).
          if (r > best_r * (1 + 1e-9)) {
            best_r = r;
            best_k = k;
          }
        }
        s.rate = best_r;
        s.depth[i] = best_k;
        s.sum_e = e0 + e[i][best_k];
        s.fed = fed0 + best_k + 1;
        s.drafted = drafted0 + best_k;
        s.drafting = drafting0 + (best_k > 0);
      }
    }
    return s;
  };
  const Search plain = start_at(c.depth);
  c.expected_tokens = plain.sum_e;
  rate_of(plain, &c.plain_step_s);
  c.step_s = c.plain_step_s;
  Search best = improve(plain);
  // The search is local, and t(n) jumps where the kernels change (one token
  // runs a GEMV, a few a GEMV per row group, more a tiled GEMM): in a batch
  // where drafting pays only when every sequence drafts, any one sequence
  // drafting alone pays the jump and loses, so the search from all-plain
  // stays there. It also starts from the best uniform depth (every sequence
  // at k, capped by its own maximum).
  if (n > 1) {
    Search uniform = plain;
    std::vector<int> depth(n);
    for (int k = 1; k <= deepest; ++k) {
      for (int i = 0; i < n; ++i) depth[i] = std::min(k, static_cast<int>(e[i].size()) - 1);
      Search s = start_at(depth);
      best_draft_rate = std::max(best_draft_rate, s.rate);
      if (s.rate > uniform.rate) uniform = std::move(s);
    }
    if (uniform.rate > plain.rate) {
      Search s = improve(std::move(uniform));
      if (s.rate > best.rate) best = std::move(s);
    }
  }
  *best_draft = std::max(best_draft_rate, best.drafting > 0 ? best.rate : 0.0) / plain.rate;
  // Drafting must win by kMargin over all-plain: near break-even the
  // estimates' errors decide, and a wrong draft costs more than a missed one.
  // (Judged on the whole batch: one sequence's share of a gain may be small.)
  if (best.rate <= plain.rate * (1 + kMargin)) return c;
  c.depth = std::move(best.depth);
  c.expected_tokens = 0;
  for (int i = 0; i < n; ++i) c.expected_tokens += seqs[i]->ExpectedTokens(c.depth[i]);
  rate_of(best, &c.step_s);
  return c;
}

}  // namespace

DepthChoice ChooseDepths(const StepCosts& costs, const std::vector<const AcceptanceModel*>& seqs,
                         const std::vector<int>& max_depth, int other_tokens, double optimism) {
  double best_draft = 0;
  DepthChoice c = SearchDepths(costs, seqs, max_depth, other_tokens, 0, &best_draft);
  const auto drafts = [](const DepthChoice& d) {
    return std::any_of(d.depth.begin(), d.depth.end(), [](int k) { return k > 0; });
  };
  // Exploring: what the optimistic estimates choose, if the plain estimates
  // say it loses at most kExploreLoss against plain steps. Where no draft the
  // search weighed came that close, none will (a plain step, the common case
  // where drafts do not pay, runs one search).
  if (optimism <= 0 || drafts(c)) return c;
  // Thin evidence: one or two verified drafts of the sequence's own.
  const auto thin = [](const AcceptanceModel* m) {
    return m->observations() >= 1 && m->observations() < kThinEvidence;
  };
  if (best_draft < 1 - kExploreLoss && std::none_of(seqs.begin(), seqs.end(), thin)) return c;
  double unused;
  DepthChoice explore = SearchDepths(costs, seqs, max_depth, other_tokens, optimism, &unused);
  if (!drafts(explore)) return c;
  bool all_thin = true;  // every drafting sequence
  for (size_t i = 0; i < seqs.size(); ++i) all_thin &= explore.depth[i] == 0 || thin(seqs[i]);
  if (all_thin || explore.predicted_speedup() >= 1 - kExploreLoss) return explore;
  return c;
}

double ProbeLoss(const StepCosts& costs, const AcceptanceModel& acceptance, int depth,
                 int step_tokens, int step_seqs) {
  if (costs.target.empty() || depth < 1) return 0;
  step_tokens = std::max(1, step_tokens);
  const double plain = costs.Target(step_tokens);
  const double extra =
      costs.Target(step_tokens + depth) - plain +
      std::max(costs.CatchUp(), costs.DraftFirst()) + (depth - 1) * costs.DraftStep();
  const double gain = (acceptance.ExpectedTokens(depth) - 1) * plain / std::max(1, step_seqs);
  return std::max(0.0, extra - gain);
}

}  // namespace specd
