// `specd make-model --preset eagle3-head --target M` through the binary: the
// head loads against its target and speculative greedy output with it equals
// plain greedy output (acceptance is near zero: the head is random); targets
// it cannot serve are refused with the reason.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace specd {
namespace {

using testing::RunCommand;
using testing::SpecdBinary;
using testing::TempDir;

std::string TokenIds(const std::string& json_out) {
  const size_t brace = json_out.find('{');
  if (brace == std::string::npos) return "no JSON in: " + json_out;
  return nlohmann::json::parse(json_out.substr(brace))["token_ids"].dump();
}

TEST(Eagle3FixtureE2eTest, RandomHeadLoadsAndSpeculativeGreedyEqualsPlain) {
  TempDir dir;
  const std::string model = dir.path() + "/tiny", head = dir.path() + "/head";
  int st = 0;
  std::string out = RunCommand(SpecdBinary() + " make-model --preset tiny --out " + model + " 2>&1", &st);
  ASSERT_EQ(st, 0) << out;
  // A draft vocabulary smaller than the target's (the head maps it by d2t).
  out = RunCommand(SpecdBinary() + " make-model --preset eagle3-head --dtype f32 --target " + model +
                       " --out " + head + "-small --draft-vocab 100 2>&1",
                   &st);
  ASSERT_EQ(st, 0) << out;
  out = RunCommand(SpecdBinary() + " make-model --preset eagle3-head --dtype f32 --target " + model +
                       " --out " + head + " 2>&1",
                   &st);
  ASSERT_EQ(st, 0) << out;
  const std::string gen = SpecdBinary() + " generate --model " + model +
                          " --prompt-ids 1,2,3,4,5,6,7,8 --max-tokens 40 --threads 1 --json";
  const std::string plain = RunCommand(gen + " 2>/dev/null", &st);
  ASSERT_EQ(st, 0) << plain;
  for (const char* shape : {"--speculative-num-steps 3",
                            "--speculative-num-steps 3 --speculative-eagle-topk 2 "
                            "--speculative-num-draft-tokens 6",
                            ""}) {
    const std::string spec = RunCommand(gen + " --speculative-algorithm EAGLE3 --draft-model " +
                                            head + " " + shape + " 2>/dev/null",
                                        &st);
    ASSERT_EQ(st, 0) << spec;
    EXPECT_EQ(TokenIds(spec), TokenIds(plain)) << "shape: " << shape;
  }
  const std::string small = RunCommand(gen + " --speculative-algorithm EAGLE3 --draft-model " +
                                           head + "-small --speculative-num-steps 3 2>/dev/null",
                                       &st);
  ASSERT_EQ(st, 0) << small;
  EXPECT_EQ(TokenIds(small), TokenIds(plain));
}

TEST(Eagle3FixtureE2eTest, RefusesAnMlaTargetAndAMissingTarget) {
  TempDir dir;
  const std::string model = dir.path() + "/dsv3";
  int st = 0;
  std::string out = RunCommand(
      SpecdBinary() + " make-model --preset deepseek-v3-tiny --out " + model + " 2>&1", &st);
  ASSERT_EQ(st, 0) << out;
  out = RunCommand(SpecdBinary() + " make-model --preset eagle3-head --target " + model +
                       " --out " + dir.path() + "/head 2>&1",
                   &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("architecture 'deepseek_v3'"), std::string::npos) << out;
  out = RunCommand(SpecdBinary() + " make-model --preset eagle3-head --out " + dir.path() +
                       "/head 2>&1",
                   &st);
  EXPECT_NE(st, 0);
  EXPECT_NE(out.find("needs --target"), std::string::npos) << out;
}

}  // namespace
}  // namespace specd
