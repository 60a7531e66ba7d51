#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <set>

namespace specd {
namespace {

// A value unique to (layer, seq, slot, k/v, element), to detect aliasing.
float Tag(int layer, int seq, int slot, bool v, int i) {
  return static_cast<float>(((layer * 16 + seq) * 1000 + slot) * 4 + (v ? 2 : 0)) + i * 0.001f;
}

void Fill(KvCache& kv, int n_layers, int seq, int begin, int end) {
  for (int l = 0; l < n_layers; ++l)
    for (int s = begin; s < end; ++s)
      for (int i = 0; i < kv.kv_dim(); ++i) {
        kv.K(l, seq, s)[i] = Tag(l, seq, s, false, i);
        kv.V(l, seq, s)[i] = Tag(l, seq, s, true, i);
      }
}

// Counts the slots of [begin, end) whose K and V still hold their own tag.
int Intact(KvCache& kv, int n_layers, int seq, int begin, int end) {
  int ok = 0;
  for (int s = begin; s < end; ++s) {
    bool good = true;
    for (int l = 0; l < n_layers; ++l)
      for (int i = 0; i < kv.kv_dim(); ++i)
        good = good && kv.K(l, seq, s)[i] == Tag(l, seq, s, false, i) &&
               kv.V(l, seq, s)[i] == Tag(l, seq, s, true, i);
    ok += good;
  }
  return ok;
}

constexpr int kLayers = 3, kDim = 6, kPage = 4;

TEST(KvCacheTest, ReserveAllocatesCeilPagesAndSequencesNeverAlias) {
  KvCache kv(kLayers, kDim, kPage, /*n_pages=*/8);
  EXPECT_EQ(kv.free_pages(), 8);
  int a = kv.NewSequence(), b = kv.NewSequence();
  EXPECT_NE(a, b);
  EXPECT_TRUE(kv.IsLive(a));
  EXPECT_TRUE(kv.IsLive(b));
  EXPECT_FALSE(kv.IsLive(b + 1));
  EXPECT_FALSE(kv.IsLive(-1));

  ASSERT_TRUE(kv.Reserve(a, 9).ok());  // ceil(9/4) = 3 pages
  EXPECT_EQ(kv.used_pages(), 3);
  EXPECT_EQ(kv.Length(a), 0) << "Reserve must not change the length";
  kv.Advance(a, 9);
  ASSERT_TRUE(kv.Reserve(a, 3).ok());  // 12 slots still fit in 3 pages
  EXPECT_EQ(kv.used_pages(), 3);
  ASSERT_TRUE(kv.Reserve(a, 4).ok());  // 13 slots: a 4th page
  EXPECT_EQ(kv.used_pages(), 4);
  ASSERT_TRUE(kv.Reserve(b, 5).ok());
  kv.Advance(b, 5);
  EXPECT_EQ(kv.used_pages() + kv.free_pages(), kv.n_pages());
  EXPECT_EQ(kv.used_pages(), 6);

  Fill(kv, kLayers, a, 0, 13);
  Fill(kv, kLayers, b, 0, 5);
  EXPECT_EQ(Intact(kv, kLayers, a, 0, 13), 13);
  EXPECT_EQ(Intact(kv, kLayers, b, 0, 5), 5);

  // Pages() describes the same memory as K()/V().
  for (int l = 0; l < kLayers; ++l) {
    kernels::KvPages p = kv.Pages(l, a);
    EXPECT_EQ(p.page_size, kPage);
    for (int s = 0; s < 13; ++s) {
      EXPECT_EQ(p.k_pages[s / kPage] + (s % kPage) * kDim, kv.K(l, a, s));
      EXPECT_EQ(p.v_pages[s / kPage] + (s % kPage) * kDim, kv.V(l, a, s));
    }
  }
}

TEST(KvCacheTest, ReserveFailsWithoutAllocatingWhenOutOfPages) {
  KvCache kv(kLayers, kDim, kPage, /*n_pages=*/4);
  int a = kv.NewSequence(), b = kv.NewSequence();
  ASSERT_TRUE(kv.Reserve(a, 12).ok());
  kv.Advance(a, 12);
  EXPECT_EQ(kv.free_pages(), 1);
  Status s = kv.Reserve(b, 5);  // needs 2 pages, 1 free
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_NE(s.message().find("1 of 4 free"), std::string::npos) << s.message();
  EXPECT_EQ(kv.free_pages(), 1) << "a failed Reserve must allocate nothing";
  EXPECT_EQ(kv.Length(b), 0);
  EXPECT_EQ(kv.Reserve(a, 5).code(), StatusCode::kResourceExhausted);  // 17 slots: 2 more pages
  EXPECT_EQ(kv.free_pages(), 1);
  EXPECT_TRUE(kv.Reserve(b, 4).ok());
  EXPECT_EQ(kv.free_pages(), 0);
}

TEST(KvCacheTest, TruncateKeepsPrefixAndFreesWholePagesOnly) {
  KvCache kv(kLayers, kDim, kPage, 8);
  int a = kv.NewSequence();
  ASSERT_TRUE(kv.Reserve(a, 10).ok());
  kv.Advance(a, 10);
  Fill(kv, kLayers, a, 0, 10);
  EXPECT_EQ(kv.used_pages(), 3);

  kv.Truncate(a, 9);  // still 3 pages
  EXPECT_EQ(kv.Length(a), 9);
  EXPECT_EQ(kv.used_pages(), 3);
  kv.Truncate(a, 5);  // 2 pages
  EXPECT_EQ(kv.Length(a), 5);
  EXPECT_EQ(kv.used_pages(), 2);
  EXPECT_EQ(Intact(kv, kLayers, a, 0, 5), 5);
  kv.Truncate(a, 7);  // beyond the length: nothing changes
  EXPECT_EQ(kv.Length(a), 5);
  EXPECT_EQ(kv.used_pages(), 2);
  kv.Truncate(a, 0);
  EXPECT_EQ(kv.Length(a), 0);
  EXPECT_EQ(kv.used_pages(), 0);
  EXPECT_EQ(kv.free_pages(), 8);
}

TEST(KvCacheTest, MoveSlotCopiesEveryLayerAndTouchesNothingElse) {
  KvCache kv(kLayers, kDim, kPage, 8);
  int a = kv.NewSequence(), b = kv.NewSequence();
  ASSERT_TRUE(kv.Reserve(a, 11).ok());
  ASSERT_TRUE(kv.Reserve(b, 11).ok());
  kv.Advance(a, 11);
  kv.Advance(b, 11);
  Fill(kv, kLayers, a, 0, 11);
  Fill(kv, kLayers, b, 0, 11);
  kv.MoveSlot(a, /*src=*/9, /*dst=*/2);  // across pages
  kv.MoveSlot(a, 10, 10);                // no-op
  for (int l = 0; l < kLayers; ++l)
    for (int i = 0; i < kDim; ++i) {
      EXPECT_EQ(kv.K(l, a, 2)[i], Tag(l, a, 9, false, i));
      EXPECT_EQ(kv.V(l, a, 2)[i], Tag(l, a, 9, true, i));
    }
  EXPECT_EQ(Intact(kv, kLayers, a, 0, 2), 2);
  EXPECT_EQ(Intact(kv, kLayers, a, 3, 11), 8);
  EXPECT_EQ(Intact(kv, kLayers, b, 0, 11), 11);
}

TEST(KvCacheTest, ASequenceAfterAFreedOneGetsAscendingPages) {
  KvCache kv(1, 4, 2, 8);
  const int a = kv.NewSequence();
  ASSERT_TRUE(kv.Reserve(a, 8).ok());
  kv.FreeSequence(a);
  const int b = kv.NewSequence();
  ASSERT_TRUE(kv.Reserve(b, 8).ok());
  for (int slot = 2; slot < 8; slot += 2)
    EXPECT_GT(kv.K(0, b, slot), kv.K(0, b, slot - 2)) << "page of slot " << slot;
}

TEST(KvCacheTest, FreedIdsAreReusedEmptyAndPagesReturnToThePool) {
  KvCache kv(kLayers, kDim, kPage, 6);
  int a = kv.NewSequence(), b = kv.NewSequence(), c = kv.NewSequence();
  ASSERT_TRUE(kv.Reserve(a, 8).ok());
  ASSERT_TRUE(kv.Reserve(b, 8).ok());
  kv.Advance(b, 8);
  ASSERT_TRUE(kv.Reserve(c, 8).ok());
  EXPECT_EQ(kv.free_pages(), 0);
  kv.FreeSequence(b);
  EXPECT_FALSE(kv.IsLive(b));
  EXPECT_EQ(kv.free_pages(), 2);
  int d = kv.NewSequence();
  EXPECT_EQ(d, b) << "the lowest free id is reused";
  EXPECT_TRUE(kv.IsLive(d));
  EXPECT_EQ(kv.Length(d), 0);
  EXPECT_EQ(kv.free_pages(), 2) << "a reused id starts with no pages";
  ASSERT_TRUE(kv.Reserve(d, 8).ok());
  kv.Advance(d, 8);
  Fill(kv, kLayers, d, 0, 8);
  kv.FreeSequence(a);
  kv.FreeSequence(c);
  EXPECT_EQ(kv.free_pages(), 4);
  EXPECT_EQ(Intact(kv, kLayers, d, 0, 8), 8);
  // Every page is handed out once: taking the whole pool gives 6 distinct
  // page bases.
  kv.FreeSequence(d);
  int e = kv.NewSequence();
  ASSERT_TRUE(kv.Reserve(e, 6 * kPage).ok());
  std::set<float*> bases;
  for (int s = 0; s < 6 * kPage; s += kPage) bases.insert(kv.K(0, e, s));
  EXPECT_EQ(bases.size(), 6u);
  EXPECT_EQ(kv.free_pages(), 0);
}

}  // namespace
}  // namespace specd
