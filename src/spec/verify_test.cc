#include "spec/verify.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "spec/ngram.h"

namespace specd {
namespace {

// Root with children 2 and 3; node 1 (token 2) has child token 4.
DraftTree SmallTree() {
  DraftTree t;
  t.Add(7, -1, 0);
  int a = t.Add(2, 0, -0.1f);
  t.Add(3, 0, -0.5f);
  t.Add(4, a, -0.3f);
  return t;
}

TEST(DraftTreeTest, AncestorMaskSeesExactlyAncestors) {
  DraftTree t = SmallTree();
  auto m = t.AncestorMask();
  const int n = 4;
  std::vector<std::vector<int>> want = {{1, 0, 0, 0}, {1, 1, 0, 0}, {1, 0, 1, 0}, {1, 1, 0, 1}};
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) EXPECT_EQ(m[i * n + j], want[i][j]) << i << "," << j;
}

TEST(DraftTreeTest, SelectTreeKeepsBestAndIsAncestorClosed) {
  std::vector<DraftCandidate> c = {
      {10, -1, -0.1f, 1}, {11, -1, -2.0f, 1}, {12, 0, -0.3f, 2}, {13, 0, -3.0f, 2},
      {14, 2, -0.4f, 3},
  };
  DraftTree t = SelectTree(5, c, 3);
  ASSERT_EQ(t.size(), 4);
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{5, 10, 12, 14}));
  EXPECT_EQ(t.parents, (std::vector<int32_t>{-1, 0, 1, 2}));
  EXPECT_EQ(t.depth, (std::vector<int32_t>{0, 1, 2, 3}));
}

std::vector<float> Logits(int V, std::map<int, float> probs) {
  std::vector<float> l(V, -1e9f);
  for (auto [tok, p] : probs) l[tok] = std::log(p);
  return l;
}

TEST(VerifyTest, GreedyFollowsTargetArgmax) {
  DraftTree t = SmallTree();
  const int V = 8;
  std::vector<float> logits;
  auto add = [&](std::map<int, float> p) {
    auto l = Logits(V, p);
    logits.insert(logits.end(), l.begin(), l.end());
  };
  add({{2, 0.6f}, {3, 0.4f}});  // root: argmax 2 -> node 1
  add({{4, 0.9f}, {1, 0.1f}});  // node 1: argmax 4 -> node 3
  add({{0, 1.f}});              // node 2 (not on the path)
  add({{6, 0.7f}, {5, 0.3f}});  // node 3: leaf, bonus 6
  Sampler s(0);
  VerifyResult r;
  ASSERT_TRUE(VerifyTree(t, logits.data(), V, SamplingParams{}, &s, 0, &r).ok());
  EXPECT_EQ(r.path, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(r.emitted, (std::vector<int32_t>{2, 4, 6}));
  EXPECT_EQ(r.bonus_token, 6);
}

TEST(VerifyTest, GreedyRejectsAtRoot) {
  DraftTree t = SmallTree();
  const int V = 8;
  std::vector<float> logits(4 * V, 0.f);
  logits[5] = 3.f;  // root argmax 5: no child carries it
  Sampler s(0);
  VerifyResult r;
  ASSERT_TRUE(VerifyTree(t, logits.data(), V, SamplingParams{}, &s, 0, &r).ok());
  EXPECT_EQ(r.path, (std::vector<int>{0}));
  EXPECT_EQ(r.emitted, (std::vector<int32_t>{5}));
}

// Logits of the SmallTree walk of GreedyFollowsTargetArgmax: root -> node 1
// -> node 3, node 2 off the path.
std::vector<float> PathLogits(int V) {
  std::vector<float> logits;
  for (auto p : std::vector<std::map<int, float>>{
           {{2, 0.6f}, {3, 0.4f}}, {{4, 0.9f}, {1, 0.1f}}, {{0, 1.f}}, {{6, 0.7f}, {5, 0.3f}}}) {
    auto l = Logits(V, p);
    logits.insert(logits.end(), l.begin(), l.end());
  }
  return logits;
}

TEST(VerifyTest, NonFiniteRowOnThePathEndsVerification) {
  const DraftTree t = SmallTree();
  const int V = 8;
  SamplingParams sampled;
  sampled.temperature = 0.7f;
  for (const SamplingParams& sp : {SamplingParams{}, sampled}) {
    for (int node : {0, 1, 3}) {
      std::vector<float> logits = PathLogits(V);
      // A NaN that is not the row's maximum: argmax alone would not notice.
      logits[static_cast<size_t>(node) * V + 7] = std::numeric_limits<float>::quiet_NaN();
      Sampler s(3);
      VerifyResult r;
      const Status st = VerifyTree(t, logits.data(), V, sp, &s, 0, &r);
      if (!sp.greedy() && st.ok()) {
        // Sampling may leave the greedy path before reaching `node`: then
        // its row was never read.
        EXPECT_EQ(std::find(r.path.begin(), r.path.end(), node), r.path.end()) << node;
        continue;
      }
      ASSERT_FALSE(st.ok()) << "node " << node;
      EXPECT_EQ(st.message(), "contain NaN (token 7)");
      ASSERT_FALSE(r.path.empty());
      EXPECT_EQ(r.path.back(), node);
      EXPECT_TRUE(r.emitted.empty());
    }
  }
}

TEST(VerifyTest, RowsOffThePathAreNotRead) {
  const DraftTree t = SmallTree();
  const int V = 8;
  std::vector<float> logits = PathLogits(V);
  for (int i = 0; i < V; ++i) logits[2 * V + i] = std::numeric_limits<float>::quiet_NaN();
  Sampler s(0);
  VerifyResult r;
  ASSERT_TRUE(VerifyTree(t, logits.data(), V, SamplingParams{}, &s, 0, &r).ok());
  EXPECT_EQ(r.emitted, (std::vector<int32_t>{2, 4, 6}));
}

// Chi-square goodness of fit of the first emitted token against the target
// distribution. 5 categories (4 degrees of freedom): the 0.1% critical value
// is 18.47, so a correct sampler fails this fixed-seed test with p = 0.001.
TEST(VerifyTest, SamplingIsLosslessForFirstToken) {
  DraftTree t = SmallTree();  // proposes 2 and 3 at the root, 4 after 2
  const int V = 8;
  std::map<int, float> root_p = {{1, 0.15f}, {2, 0.3f}, {3, 0.05f}, {4, 0.2f}, {6, 0.3f}};
  std::vector<float> logits;
  for (int i = 0; i < 4; ++i) {
    auto l = Logits(V, i == 0 ? root_p : std::map<int, float>{{4, 0.5f}, {5, 0.5f}});
    logits.insert(logits.end(), l.begin(), l.end());
  }
  SamplingParams sp;
  sp.temperature = 1.f;
  Sampler s(1234);
  std::map<int, int> count;
  const int n = 40000;
  // Second token after an accepted 2: target at node 1 is {4: .5, 5: .5}.
  int after2 = 0, four_after2 = 0;
  for (int i = 0; i < n; ++i) {
    VerifyResult r;
    ASSERT_TRUE(VerifyTree(t, logits.data(), V, sp, &s, 10 * i, &r).ok());
    count[r.emitted[0]]++;
    if (r.emitted[0] == 2) {
      ++after2;
      four_after2 += r.emitted[1] == 4;
    }
  }
  double chi2 = 0;
  for (auto [tok, p] : root_p) {
    double e = p * n;
    chi2 += (count[tok] - e) * (count[tok] - e) / e;
  }
  EXPECT_LT(chi2, 18.47) << "first-token distribution differs from the target's";
  EXPECT_EQ(count[0] + count[5] + count[7], 0);
  // 1 degree of freedom, 0.1% critical value 10.83.
  double e = after2 * 0.5;
  double chi2b = 2 * (four_after2 - e) * (four_after2 - e) / e;
  EXPECT_LT(chi2b, 10.83);
}

TEST(NgramTest, ProposesContinuationOfLongestRecentMatch) {
  // ... 1 2 3 9 9 ... 1 2 3 4 5 ... 1 2 3  -> most recent "1 2 3" continues with 4 5
  std::vector<int32_t> h = {1, 2, 3, 9, 9, 1, 2, 3, 4, 5, 7, 1, 2, 3};
  DraftTree t = NgramDraft(h, 3);
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{3, 4, 5, 7}));
  EXPECT_EQ(t.parents, (std::vector<int32_t>{-1, 0, 1, 2}));
  DraftTree none = NgramDraft({1, 2, 3}, 4);
  EXPECT_EQ(none.size(), 1);
}

TEST(NgramTest, ContinuationPastTheHistoryRepeatsThePeriod) {
  // "7 7" last occurred one token back: the tail has period 1.
  EXPECT_EQ(NgramDraft({5, 7, 7, 7}, 4).tokens, (std::vector<int32_t>{7, 7, 7, 7, 7}));
  // "1 2" last occurred two tokens back: period 2, continued from the match.
  EXPECT_EQ(NgramDraft({9, 1, 2, 1, 2}, 5).tokens, (std::vector<int32_t>{2, 1, 2, 1, 2, 1}));
  // "1 2 3" matched 5 tokens back covers less than that period: no loop is
  // evident, so the draft stops at the end of the history.
  EXPECT_EQ(NgramDraft({1, 2, 3, 4, 5, 1, 2, 3}, 7).tokens,
            (std::vector<int32_t>{3, 4, 5, 1, 2, 3}));
  // Twice repeated, the same span is a loop ("1 2 3" matched 3 tokens back,
  // a whole period), and the draft goes on.
  EXPECT_EQ(NgramDraft({1, 2, 3, 1, 2, 3}, 5).tokens,
            (std::vector<int32_t>{3, 1, 2, 3, 1, 2}));
  // A period longer than the longest suffix tried (6 > max_ngram 4): "3 4 5 6"
  // matches 6 tokens back and the tokens before it agree over the whole
  // period, so the draft goes on.
  EXPECT_EQ(NgramDraft({1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}, 8).tokens,
            (std::vector<int32_t>{6, 1, 2, 3, 4, 5, 6, 1, 2}));
  // Agreeing over less than the period (5 of 6 tokens): no loop.
  EXPECT_EQ(NgramDraft({9, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}, 8).tokens,
            (std::vector<int32_t>{6, 1, 2, 3, 4, 5, 6}));
}

}  // namespace
}  // namespace specd
