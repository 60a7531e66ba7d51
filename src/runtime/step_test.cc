// SerializeStep / DeserializeStep: round trips, and every malformed input
// (truncations, bad magic, bad lengths, trailing bytes, random corruption)
// is a Corruption error, never a crash or a huge allocation (run under ASan
// in CI). Only NewSequence and FreeSequence edits are built here (the
// other kinds' semantics are tested with ApplyKvEdit).
#include "runtime/step.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace specd {
namespace {

StepDesc Sample() {
  StepDesc d;
  d.capture_aux = true;
  d.kv_edits = {KvEdit::NewSequence(3), KvEdit::FreeSequence(1), KvEdit::NewSequence(1)};
  SeqInput tree;
  tree.seq = 3;
  tree.tokens = {7, 8, 9};
  tree.pos = {10, 11, 11};
  tree.tree_mask = {1, 0, 0, 1, 1, 0, 1, 0, 1};
  tree.all_logits = true;
  SeqInput decode;
  decode.seq = 1;
  decode.tokens = {123456};
  d.batch = {tree, decode};
  return d;
}

void ExpectSame(const StepDesc& a, const StepDesc& b) {
  EXPECT_EQ(a.shutdown, b.shutdown);
  EXPECT_EQ(a.capture_aux, b.capture_aux);
  ASSERT_EQ(a.kv_edits.size(), b.kv_edits.size());
  for (size_t i = 0; i < a.kv_edits.size(); ++i) {
    EXPECT_EQ(a.kv_edits[i].kind, b.kv_edits[i].kind);
    EXPECT_EQ(a.kv_edits[i].seq, b.kv_edits[i].seq);
    EXPECT_EQ(a.kv_edits[i].length, b.kv_edits[i].length);
    EXPECT_EQ(a.kv_edits[i].path, b.kv_edits[i].path);
  }
  ASSERT_EQ(a.batch.size(), b.batch.size());
  for (size_t i = 0; i < a.batch.size(); ++i) {
    EXPECT_EQ(a.batch[i].seq, b.batch[i].seq);
    EXPECT_EQ(a.batch[i].tokens, b.batch[i].tokens);
    EXPECT_EQ(a.batch[i].pos, b.batch[i].pos);
    EXPECT_EQ(a.batch[i].tree_mask, b.batch[i].tree_mask);
    EXPECT_EQ(a.batch[i].all_logits, b.batch[i].all_logits);
  }
}

void ExpectCorruption(const std::string& bytes, const std::string& what) {
  StatusOr<StepDesc> d = DeserializeStep(bytes);
  ASSERT_FALSE(d.ok()) << what;
  EXPECT_EQ(d.status().code(), StatusCode::kCorruption) << what << ": " << d.status().ToString();
}

void PutI32(std::string* s, size_t offset, int32_t v) { std::memcpy(s->data() + offset, &v, 4); }

// Byte offsets in Sample()'s encoding: magic, shutdown, capture_aux, the
// edit count then per edit kind, seq, length and an empty path (16 bytes),
// the batch count, then per sequence
// seq, all_logits and the tokens / pos / tree_mask counts each followed by
// their elements.
constexpr size_t kEditsCount = 12;
constexpr size_t kFirstKind = kEditsCount + 4;
constexpr size_t kFirstPathCount = kFirstKind + 12;
constexpr size_t kBatchCount = kEditsCount + 4 + 3 * 16;
constexpr size_t kTokensCount = kBatchCount + 4 + 8;
constexpr size_t kPosCount = kTokensCount + 4 + 3 * 4;
constexpr size_t kMaskCount = kPosCount + 4 + 3 * 4;

TEST(StepTest, RoundTrips) {
  StepDesc d = Sample();
  std::string bytes = SerializeStep(d);
  auto back = DeserializeStep(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSame(d, *back);
  EXPECT_EQ(SerializeStep(*back), bytes);

  StepDesc stop;
  stop.shutdown = true;
  auto stop_back = DeserializeStep(SerializeStep(stop));
  ASSERT_TRUE(stop_back.ok());
  ExpectSame(stop, *stop_back);
  EXPECT_TRUE(stop_back->batch.empty());
}

TEST(StepTest, OffsetsUsedBelowMatchTheEncoding) {
  // Guards the hand-computed offsets: they must point at the counts.
  std::string b = SerializeStep(Sample());
  auto at = [&](size_t off) {
    int32_t v;
    std::memcpy(&v, b.data() + off, 4);
    return v;
  };
  EXPECT_EQ(at(kEditsCount), 3);
  EXPECT_EQ(at(kFirstKind), KvEdit::kNewSequence);
  EXPECT_EQ(at(kFirstPathCount), 0);
  EXPECT_EQ(at(kBatchCount), 2);
  EXPECT_EQ(at(kTokensCount), 3);
  EXPECT_EQ(at(kPosCount), 3);
  EXPECT_EQ(at(kMaskCount), 9);
}

TEST(StepTest, EveryTruncationIsCorruption) {
  std::string bytes = SerializeStep(Sample());
  for (size_t n = 0; n < bytes.size(); ++n)
    ExpectCorruption(bytes.substr(0, n), "first " + std::to_string(n) + " bytes");
}

TEST(StepTest, BadMagicAndTrailingBytesAreCorruption) {
  std::string bytes = SerializeStep(Sample());
  for (int bit = 0; bit < 32; ++bit) {
    std::string b = bytes;
    b[bit / 8] = static_cast<char>(b[bit / 8] ^ (1 << (bit % 8)));
    ExpectCorruption(b, "magic bit " + std::to_string(bit));
  }
  ExpectCorruption(bytes + '\0', "one trailing byte");
  ExpectCorruption(bytes + SerializeStep(Sample()), "two messages back to back");
}

TEST(StepTest, NegativeAndHugeLengthsAreCorruption) {
  const std::string bytes = SerializeStep(Sample());
  for (size_t off : {kEditsCount, kFirstPathCount, kBatchCount, kTokensCount, kPosCount, kMaskCount}) {
    for (int32_t v : {-1, -2147483647 - 1, 2147483647, 1 << 28, 1 << 20}) {
      std::string b = bytes;
      PutI32(&b, off, v);
      ExpectCorruption(b, "count at offset " + std::to_string(off) + " = " + std::to_string(v));
    }
  }
}

TEST(StepTest, UnknownEditKindIsCorruption) {
  for (int32_t kind : {-1, 4, 1000}) {
    std::string b = SerializeStep(Sample());
    PutI32(&b, kFirstKind, kind);
    ExpectCorruption(b, "edit kind " + std::to_string(kind));
  }
}

TEST(StepTest, RandomByteFlipsNeverCrash) {
  const std::string bytes = SerializeStep(Sample());
  std::mt19937 rng(20240611);
  int ok = 0, corrupt = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string b = bytes;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<char>(rng());
    StatusOr<StepDesc> d = DeserializeStep(b);
    if (d.ok()) {
      ++ok;
      // A message that parses re-encodes to one that parses the same.
      auto again = DeserializeStep(SerializeStep(*d));
      ASSERT_TRUE(again.ok());
      ExpectSame(*d, *again);
    } else {
      ASSERT_EQ(d.status().code(), StatusCode::kCorruption) << d.status().ToString();
      ++corrupt;
    }
  }
  // Both outcomes occur: flips inside token values parse, flips in counts do not.
  EXPECT_GT(ok, 0);
  EXPECT_GT(corrupt, 0);
}

}  // namespace
}  // namespace specd
