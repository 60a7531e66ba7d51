// ChooseDepths over whole generations: each step's choice is replayed
// against a recorded string of verify outcomes, with fixed step costs, and
// the generation's tokens per second compared with plain decoding and with
// every fixed chain. This is the chooser's contract ("never slower than
// plain, close to the best fixed shape") without the noise of a timed run.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "spec/draft_cost.h"

namespace specd {
namespace {

// Accept strings of the demo pair (models/demo and its EAGLE-3 head), one
// character per verified draft of a fixed chain of 1 (1 = accepted), from
// `specd generate --speculative-num-steps 1 --speculative-eagle-topk 1
// --speculative-num-draft-tokens 2 --threads 1`: on `specd bench`'s random-id
// prompt, its repeated-phrase prompt, and the demo's own prompt. On bench's
// prompts the first drafts are rejected and nearly every later one accepted.
constexpr char kBenchRandom[] =
    "001111011111111101110111111010111111111111111111111111111111111111111111111111111111111111111"
    "111111";
constexpr char kBenchPhrase[] =
    "001101010001111111101111111111111111111111111111111111111111111111111111111111111111111111111"
    "1111111";
constexpr char kDemoPrompt[] =
    "011111011011101001111111011101110100010101111111010010011111000111011010011101110110100111011"
    "101101001110111011010011111";

// Costs in units of a one-token forward. The demo's (measured at start-up on
// a Zen 4 core): a 2-token forward 1.15x, a head step 0.25, and the head's
// catch-up after plain steps 1.5. A repacked Q4_0 model's: a 2-token forward
// costs what one does.
StepCosts DemoCosts() {
  StepCosts c;
  c.target = {1, 1.15, 1.55, 2.0, 2.4};
  c.draft_first = c.draft_step = 0.25;
  c.catch_up = 1.5;
  c.learn = false;
  return c;
}

StepCosts FreeVerifyCosts() {
  StepCosts c;
  c.target = {1, 1.0, 1.1, 1.21, 1.4};
  c.draft_first = 0.25;
  c.draft_step = 0.2;
  c.catch_up = 0.5;
  c.learn = false;
  return c;
}

// The outcome of a draft at each position: the string's characters laid out
// where a chain of 1 verified them (an accepted draft also covers the next
// position); positions between take the outcome before them.
std::vector<int> OutcomeByPosition(const std::string& accepts, int n) {
  std::vector<int> o(static_cast<size_t>(n), -1);
  int pos = 0;
  for (char ch : accepts) {
    if (pos >= n) break;
    o[pos] = ch - '0';
    pos += 1 + (ch - '0');
  }
  int last = 0;
  for (int& x : o) last = x = x < 0 ? last : x;
  return o;
}

constexpr int kAuto = -1;

// Tokens per unit time of generating n tokens: chain = 0 plain, > 0 a fixed
// chain of that depth every step, kAuto the chooser (depths up to 4). A
// draft after plain steps pays the head's catch-up instead of its first step.
// pooled (may be null): the scheduler's pooled acceptance, which the run
// starts from (weighed as 8 drafts, as the scheduler does) and adds its
// verified drafts to.
double Replay(const StepCosts& c, const std::string& accepts, int chain, int n,
              AcceptanceModel* pooled = nullptr) {
  const std::vector<int> outcome = OutcomeByPosition(accepts, n + 8);
  AcceptanceModel m(4);
  if (pooled != nullptr && pooled->observations() > 0) m = pooled->AsPrior(8);
  double time = 0;
  bool after_plain = false;
  for (int pos = 0; pos < n;) {
    const int k = chain == kAuto ? ChooseDepths(c, {&m}, {4}, 0, kDraftOptimism).depth[0] : chain;
    if (k == 0) {
      time += c.Target(1);
      m.Age();
      after_plain = true;
      ++pos;
      continue;
    }
    int accepted = 0;
    while (accepted < k && outcome[pos + accepted] == 1) ++accepted;
    time += c.Target(k + 1) + c.DraftCost(k);
    if (after_plain) time += std::max(0.0, c.CatchUp() - c.DraftFirst());
    m.Observe(k, accepted);
    if (pooled != nullptr) pooled->Observe(k, accepted);
    pos += 1 + accepted;
    after_plain = false;
  }
  return n / time;
}

double BestFixed(const StepCosts& c, const std::string& accepts, int n) {
  double best = 0;
  for (int k = 1; k <= 4; ++k) best = std::max(best, Replay(c, accepts, k, n));
  return best;
}

TEST(DraftReplayTest, DemoPairAutoIsNearTheBestChainOnEveryPrompt) {
  const StepCosts c = DemoCosts();
  for (const char* accepts : {kBenchRandom, kBenchPhrase, kDemoPrompt}) {
    for (int n : {64, 96, 256}) {
      const double auto_rate = Replay(c, accepts, kAuto, n);
      EXPECT_GE(auto_rate / Replay(c, accepts, 0, n), 1.1) << accepts << " n " << n;
      EXPECT_GE(auto_rate / BestFixed(c, accepts, n), 0.95) << accepts << " n " << n;
    }
  }
}

// Short requests: a run that starts from what earlier runs of the pair
// learned (runtime/acceptance_cache.h) drafts from its first steps, where a
// blind start spends them learning; a head that is never right, remembered,
// is not drafted at all. Costs as the demo's steps take in use (a chain of
// one 1.57x a plain step; at start-up they measure 1.4x), under which a blind
// start on bench's prompts reaches 0.85 of the best chain, as bench measures.
TEST(DraftReplayTest, RememberedAcceptanceHelpsShortRequests) {
  StepCosts c = DemoCosts();
  c.target = {1, 1.25, 1.6, 2.0, 2.4};
  c.draft_first = c.draft_step = 0.32;
  for (const char* accepts : {kBenchRandom, kBenchPhrase, kDemoPrompt}) {
    for (int n : {32, 64}) {
      const double best = BestFixed(c, accepts, n);
      AcceptanceModel pooled(4);
      const double blind = Replay(c, accepts, kAuto, n, &pooled);
      // Remembering what a blind run learned never makes the next one slower.
      EXPECT_GE(Replay(c, accepts, kAuto, n, &pooled), blind * (1 - 1e-9)) << accepts << " n " << n;
      // After runs that drafted (a chain of one each step), near the best.
      AcceptanceModel drafted(4);
      Replay(c, accepts, 1, n, &drafted);
      const double remembered = Replay(c, accepts, kAuto, n, &drafted);
      EXPECT_GE(remembered / best, 0.93) << accepts << " n " << n;
    }
  }
  // On bench's random-id prompt the difference is the first steps' learning.
  AcceptanceModel drafted(4);
  Replay(c, kBenchRandom, 1, 64, &drafted);
  EXPECT_GT(Replay(c, kBenchRandom, kAuto, 64, &drafted) / Replay(c, kBenchRandom, kAuto, 64),
            1.1);

  const std::string never(300, '0');
  for (const StepCosts& cc : {DemoCosts(), FreeVerifyCosts()}) {
    for (int n : {32, 64, 256}) {
      AcceptanceModel pooled(4);
      const double plain = Replay(cc, never, 0, n);
      const double blind = Replay(cc, never, kAuto, n, &pooled);
      const double remembered = Replay(cc, never, kAuto, n, &pooled);
      EXPECT_GE(remembered / plain, 0.98) << "n " << n;
      EXPECT_GE(remembered, blind) << "n " << n;
    }
  }
}

TEST(DraftReplayTest, AHeadThatIsNeverRightCostsAtMostFivePercent) {
  const std::string never(300, '0');
  for (const StepCosts& c : {DemoCosts(), FreeVerifyCosts()}) {
    for (int n : {64, 96, 256}) {
      const double plain = Replay(c, never, 0, n);
      EXPECT_GE(Replay(c, never, kAuto, n) / plain, 0.95) << "n " << n;
      // The replay itself: a chain that is never accepted loses.
      EXPECT_LT(Replay(c, never, 1, n) / plain, 0.9) << "n " << n;
    }
  }
}

}  // namespace
}  // namespace specd
