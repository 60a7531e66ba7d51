#include "base/status.h"

#include <gtest/gtest.h>

namespace specd {
namespace {

StatusOr<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("x: expected even, got " + std::to_string(x));
  return x / 2;
}

Status Quarter(int x, int* out) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(*out, Half(h));
  return Status::Ok();
}

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ContextKeepsInnermostValues) {
  Status s = CorruptionError("bad header");
  s.WithStage("load weights").WithRank(1).WithStage("outer").WithRank(3);
  EXPECT_EQ(s.stage(), "load weights");
  EXPECT_EQ(s.rank(), 1);
  s.Prepend("model.safetensors");
  EXPECT_EQ(s.ToString(), "Corruption: model.safetensors: bad header [stage: load weights, rank 1]");
}

TEST(StatusTest, CopyIsDeep) {
  Status a = NotFoundError("x");
  Status b = a;
  b.Prepend("y");
  EXPECT_EQ(a.message(), "x");
  EXPECT_EQ(b.message(), "y: x");
}

TEST(StatusOrTest, PropagatesErrors) {
  int out = 0;
  EXPECT_TRUE(Quarter(8, &out).ok());
  EXPECT_EQ(out, 2);
  Status s = Quarter(6, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "x: expected even, got 3");
}

TEST(StatusOrTest, OkStatusBecomesInternalError) {
  StatusOr<int> v{Status::Ok()};
  EXPECT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace specd
