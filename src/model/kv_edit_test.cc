#include "model/kv_edit.h"

#include <gtest/gtest.h>

namespace specd {
namespace {

constexpr int kLayers = 2, kDim = 3, kPage = 4;

// Slot s of `seq` holds K = V = 100 * seq + s in every element and layer.
void Fill(KvCache& kv, int seq, int n) {
  ASSERT_TRUE(kv.Reserve(seq, n).ok());
  for (int s = 0; s < n; ++s)
    for (int l = 0; l < kLayers; ++l)
      for (int i = 0; i < kDim; ++i) kv.K(l, seq, s)[i] = kv.V(l, seq, s)[i] = 100.f * seq + s;
  kv.Advance(seq, n);
}

std::vector<float> Slots(KvCache& kv, int seq) {
  std::vector<float> out;
  for (int s = 0; s < kv.Length(seq); ++s) {
    for (int l = 0; l < kLayers; ++l) EXPECT_EQ(kv.K(l, seq, s)[0], kv.V(l, seq, s)[kDim - 1]);
    out.push_back(kv.K(kLayers - 1, seq, s)[0]);
  }
  return out;
}

TEST(KvEditTest, KeepPathMovesTheAcceptedNodesBehindTheBaseAndDropsTheRest) {
  KvCache kv(kLayers, kDim, kPage, 8);
  ASSERT_TRUE(ApplyKvEdit(&kv, KvEdit::NewSequence(0)).ok());
  // 5 committed slots, then a 6-node tree in slots 5..10.
  Fill(kv, 0, 11);
  // Accepted path: root (node 0), node 2, node 5.
  ASSERT_TRUE(ApplyKvEdit(&kv, KvEdit::KeepPath(0, 5, {0, 2, 5})).ok());
  EXPECT_EQ(Slots(kv, 0), (std::vector<float>{0, 1, 2, 3, 4, 5, 7, 10}));
  EXPECT_EQ(kv.used_pages(), 2);  // 8 slots in pages of 4
}

TEST(KvEditTest, TruncateNewAndFreeAsOnEveryRank) {
  KvCache a(kLayers, kDim, kPage, 8), b(kLayers, kDim, kPage, 8);
  const std::vector<KvEdit> edits = {KvEdit::NewSequence(0), KvEdit::NewSequence(1),
                                     KvEdit::FreeSequence(0), KvEdit::NewSequence(0),
                                     KvEdit::FreeSequence(7)};  // not live: ignored
  for (const KvEdit& e : edits) {
    ASSERT_TRUE(ApplyKvEdit(&a, e).ok());
    ASSERT_TRUE(ApplyKvEdit(&b, e).ok());
  }
  EXPECT_TRUE(a.IsLive(0) && a.IsLive(1) && b.IsLive(0) && b.IsLive(1));
  Fill(a, 1, 6);
  ASSERT_TRUE(ApplyKvEdit(&a, KvEdit::Truncate(1, 2)).ok());
  EXPECT_EQ(Slots(a, 1), (std::vector<float>{100, 101}));
}

TEST(KvEditTest, EditsThatDoNotFitAreRefusedAndChangeNothing) {
  KvCache kv(kLayers, kDim, kPage, 8);
  ASSERT_TRUE(ApplyKvEdit(&kv, KvEdit::NewSequence(0)).ok());
  Fill(kv, 0, 6);
  const std::vector<float> before = Slots(kv, 0);
  const std::vector<KvEdit> bad = {
      KvEdit::NewSequence(0),          // already live
      KvEdit::NewSequence(5),          // the cache would hand out id 1
      KvEdit::Truncate(3, 1),          // no such sequence
      KvEdit::Truncate(0, 7),          // longer than the sequence
      KvEdit::Truncate(0, -1),
      KvEdit::KeepPath(0, 2, {}),      // no root
      KvEdit::KeepPath(0, 2, {1, 2}),  // does not start at the root
      KvEdit::KeepPath(0, 2, {0, 3, 3}),  // not increasing
      KvEdit::KeepPath(0, 2, {0, 4}),  // node 4 after 2 slots is slot 6: outside
      KvEdit{static_cast<KvEdit::Kind>(9), 0, 0, {}},
  };
  for (const KvEdit& e : bad) {
    Status s = ApplyKvEdit(&kv, e);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("KV edit"), std::string::npos) << s.message();
  }
  EXPECT_EQ(Slots(kv, 0), before);
  EXPECT_FALSE(kv.IsLive(1));
}

}  // namespace
}  // namespace specd
