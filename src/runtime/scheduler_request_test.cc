// RequestStream: the client/engine hand-off (run under TSan in CI).
#include "runtime/scheduler_request.h"

#include <gtest/gtest.h>

#include <thread>

namespace specd {
namespace {

OutputDelta Delta(std::vector<int32_t> ids, bool finished = false) {
  OutputDelta d;
  for (int32_t id : ids) d.text += "<" + std::to_string(id) + ">";
  d.token_ids = std::move(ids);
  d.finished = finished;
  return d;
}

TEST(RequestStreamTest, PendingDeltasCoalesceAndNothingFollowsTheEnd) {
  RequestStream s(3);
  OutputDelta out;
  EXPECT_FALSE(s.Next(&out, 0)) << "nothing pushed yet";
  s.Push(Delta({1, 2}));
  s.Push(Delta({3}));
  ASSERT_TRUE(s.Next(&out, 0));
  EXPECT_EQ(out.token_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(out.text, "<1><2><3>");
  EXPECT_FALSE(out.finished);
  EXPECT_FALSE(s.Next(&out, 0)) << "taken deltas are not returned twice";
  s.Push(Delta({4}, /*finished=*/true));
  s.Push(Delta({5}));  // after the end: dropped
  ASSERT_TRUE(s.Next(&out, 0));
  EXPECT_EQ(out.token_ids, (std::vector<int32_t>{4}));
  EXPECT_TRUE(out.finished);
  EXPECT_FALSE(s.Next(&out, 0));
  s.Push(Delta({6}));
  EXPECT_FALSE(s.Next(&out, 0)) << "a finished stream stays finished";
}

TEST(RequestStreamTest, ConcurrentProducerDeliversEveryTokenInOrder) {
  constexpr int kTokens = 2000;
  RequestStream s(1);
  std::thread engine([&] {
    for (int i = 0; i < kTokens; ++i) s.Push(Delta({i}, i == kTokens - 1));
  });
  std::vector<int32_t> got;
  OutputDelta out;
  bool finished = false;
  while (!finished) {
    // A long timeout: the producer always finishes, so this never expires.
    ASSERT_TRUE(s.Next(&out, 60.0));
    got.insert(got.end(), out.token_ids.begin(), out.token_ids.end());
    finished = out.finished;
  }
  engine.join();
  ASSERT_EQ(got.size(), size_t(kTokens));
  for (int i = 0; i < kTokens; ++i) ASSERT_EQ(got[i], i);
}

TEST(RequestStreamTest, CancelIsVisibleToTheEngine) {
  RequestStream s(1);
  EXPECT_FALSE(s.cancelled());
  std::thread client([&] { s.Cancel(); });
  client.join();
  EXPECT_TRUE(s.cancelled());
}

}  // namespace
}  // namespace specd
