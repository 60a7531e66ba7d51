#include "launch/failure_report.h"

#include <gtest/gtest.h>

#include <csignal>
#include <nlohmann/json.hpp>

namespace specd::launch {
namespace {

RankFailure Fail(int rank, double t, std::string code, std::string stage, std::string msg) {
  RankFailure f;
  f.rank = rank;
  f.time_s = t;
  f.status_code = std::move(code);
  f.stage = std::move(stage);
  f.message = std::move(msg);
  f.exit_code = 1;
  return f;
}

// Rank 1 cannot load its shard; ranks 0, 2, 3 time out waiting for it in comm init.
std::vector<RankFailure> LoadWeightsStory() {
  std::vector<RankFailure> v;
  const std::string wait = "waiting for rank 1 in barrier #1 after 30 s: missing ranks: 1";
  v.push_back(Fail(0, 31.0, "DeadlineExceeded", "comm init", wait));
  v.push_back(Fail(3, 31.2, "DeadlineExceeded", "comm init", wait));
  RankFailure r1 = Fail(1, 1.5, "NotFound", "load weights",
                        "model-00002.safetensors: tensor 'model.layers.17.mlp.down_proj.weight' not found");
  r1.hint = "re-download shard 2";
  r1.last_log_lines = {"INFO [load weights] opening model-00002.safetensors", "ERROR [load weights] NotFound: ..."};
  v.push_back(r1);
  v.push_back(Fail(2, 31.1, "DeadlineExceeded", "comm init", wait));
  return v;
}

TEST(FailureReportTest, RootCauseIsFirstNonConsequence) {
  FailureReport r = BuildFailureReport(LoadWeightsStory());
  ASSERT_FALSE(r.empty);
  EXPECT_FALSE(r.root_is_consequence);
  EXPECT_EQ(r.root.rank, 1);
  EXPECT_EQ(r.root.stage, "load weights");
  EXPECT_EQ(r.hint, "re-download shard 2");  // the rank's own hint wins
  EXPECT_EQ(r.signature, "weights_mismatch");
  EXPECT_TRUE(r.same_ranks.empty());
  ASSERT_EQ(r.consequences.size(), 1u);  // three ranks, one description
  EXPECT_EQ(r.consequences[0].ranks, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(r.consequences[0].stage, "comm init");
  EXPECT_FALSE(r.consequences[0].reason.empty());
  EXPECT_TRUE(r.other_failures.empty());
  EXPECT_EQ(r.missing_ranks, (std::vector<int>{1}));
}

TEST(FailureReportTest, ConsequenceObservedFirstIsStillAConsequence) {
  std::vector<RankFailure> v;
  v.push_back(Fail(0, 0.5, "Unavailable", "allreduce #812", "peer rank 2 died"));
  v.push_back(Fail(2, 0.9, "Internal", "allreduce #812", "epoch went backwards: 811 < 812"));
  FailureReport r = BuildFailureReport(v);
  EXPECT_EQ(r.root.rank, 2);
  ASSERT_EQ(r.consequences.size(), 1u);
  EXPECT_EQ(r.consequences[0].ranks, (std::vector<int>{0}));
}

TEST(FailureReportTest, SameFailureOnManyRanksIsGroupedWithRoot) {
  std::vector<RankFailure> v;
  for (int rank = 0; rank < 8; ++rank) {
    v.push_back(Fail(rank, 2.0 + 0.01 * (7 - rank), "Unsupported", "platform",
                     "rank " + std::to_string(rank) + ": no kernel for Q5_K"));
  }
  FailureReport r = BuildFailureReport(v);
  EXPECT_EQ(r.root.rank, 7);  // observed first
  EXPECT_EQ(r.same_ranks, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(r.consequences.empty());
  EXPECT_TRUE(r.other_failures.empty());
}

TEST(FailureReportTest, SilentKillGetsSignatureAndTeardownIsConsequence) {
  std::vector<RankFailure> v;
  RankFailure killed;
  killed.rank = 2;
  killed.time_s = 10;
  killed.signal = SIGKILL;
  killed.last_log_lines = {"INFO [load weights] mapped 14.2 GiB"};
  v.push_back(killed);
  for (int rank : {0, 1, 3}) {
    RankFailure t;
    t.rank = rank;
    t.time_s = 10.5;
    t.signal = SIGTERM;
    t.torn_down = true;
    v.push_back(t);
  }
  RankFailure late_term;  // SIGTERM after the root, not flagged by the supervisor
  late_term.rank = 4;
  late_term.time_s = 11;
  late_term.signal = SIGTERM;
  v.push_back(late_term);
  FailureReport r = BuildFailureReport(v);
  EXPECT_EQ(r.root.rank, 2);
  EXPECT_EQ(r.root_summary, "killed by signal 9 (SIGKILL)");
  // No OOM evidence: SIGKILL has other senders, and the hint says so.
  EXPECT_EQ(r.signature, "killed");
  EXPECT_NE(r.hint.find("the OOM killer or an operator"), std::string::npos) << r.hint;
  // With the cgroup's oom_kill counter risen it is the OOM killer's.
  for (RankFailure& f : v) {
    if (f.signal == SIGKILL) f.oom_kill_seen = true;
  }
  FailureReport oom = BuildFailureReport(v);
  EXPECT_EQ(oom.signature, "oom_killed");
  EXPECT_NE(oom.hint.find("OOM killer ended"), std::string::npos) << oom.hint;
  ASSERT_EQ(r.consequences.size(), 2u);
  EXPECT_EQ(r.consequences[0].ranks, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(r.consequences[0].reason, "stopped by teardown");
  EXPECT_EQ(r.consequences[1].ranks, (std::vector<int>{4}));
  EXPECT_TRUE(r.other_failures.empty());
}

TEST(FailureReportTest, HintFromSignatureTableWhenRankGivesNone) {
  std::vector<RankFailure> v;
  v.push_back(Fail(0, 1, "IoError", "http", "bind 0.0.0.0:8000: Address already in use"));
  FailureReport r = BuildFailureReport(v);
  EXPECT_EQ(r.signature, "address_in_use");
  EXPECT_NE(r.hint.find("port"), std::string::npos);
}

TEST(FailureReportTest, CrashSignalWithoutMessageGetsCrashHint) {
  RankFailure f;
  f.rank = 5;
  f.signal = SIGSEGV;
  FailureReport r = BuildFailureReport({f});
  EXPECT_EQ(r.root_summary, "killed by signal 11 (SIGSEGV)");
  EXPECT_NE(r.hint.find("SIGSEGV"), std::string::npos);
}

TEST(FailureReportTest, OnlyConsequencesFlagsUnknownRoot) {
  std::vector<RankFailure> v;
  v.push_back(Fail(1, 30.2, "DeadlineExceeded", "allreduce #3", "missing ranks: 2"));
  v.push_back(Fail(0, 30.1, "DeadlineExceeded", "allreduce #3", "missing ranks: 2"));
  FailureReport r = BuildFailureReport(v);
  EXPECT_TRUE(r.root_is_consequence);
  EXPECT_EQ(r.root.rank, 0);
  EXPECT_EQ(r.missing_ranks, (std::vector<int>{2}));
  EXPECT_NE(FormatFailureReportText(r).find("root cause unknown"), std::string::npos);
}

TEST(FailureReportTest, DifferentLaterFailureIsReportedAsOther) {
  std::vector<RankFailure> v;
  v.push_back(Fail(0, 1, "NotFound", "load weights", "tensor 'a' not found"));
  v.push_back(Fail(1, 2, "Corruption", "load weights", "header length 9e18 exceeds file size"));
  FailureReport r = BuildFailureReport(v);
  EXPECT_EQ(r.root.rank, 0);
  ASSERT_EQ(r.other_failures.size(), 1u);
  EXPECT_EQ(r.other_failures[0].ranks, (std::vector<int>{1}));
}

TEST(FailureReportTest, TextPutsRootBlockFirst) {
  std::string text = FormatFailureReportText(BuildFailureReport(LoadWeightsStory()));
  EXPECT_EQ(text.rfind("root cause: rank 1 [load weights] failed first\n", 0), 0u) << text;
  size_t hint = text.find("hint:      re-download shard 2");
  size_t last = text.find("last log lines of rank 1");
  size_t cons = text.find("consequences (not causes):\n  rank(s) 0, 2-3 [comm init]: DeadlineExceeded");
  EXPECT_NE(hint, std::string::npos) << text;
  EXPECT_NE(last, std::string::npos) << text;
  ASSERT_NE(cons, std::string::npos) << text;
  EXPECT_LT(hint, cons);
  EXPECT_LT(last, cons);
}

TEST(FailureReportTest, JsonRoundTrips) {
  nlohmann::json j = nlohmann::json::parse(FormatFailureReportJson(BuildFailureReport(LoadWeightsStory())));
  EXPECT_EQ(j["root_cause"]["rank"], 1);
  EXPECT_EQ(j["root_cause"]["status_code"], "NotFound");
  EXPECT_EQ(j["root_cause"]["stage"], "load weights");
  EXPECT_EQ(j["root_cause"]["signature"], "weights_mismatch");
  EXPECT_EQ(j["root_cause"]["last_log_lines"].size(), 2u);
  EXPECT_EQ(j["consequences"][0]["ranks"], nlohmann::json({0, 2, 3}));
  EXPECT_EQ(j["missing_ranks"], nlohmann::json({1}));
  EXPECT_FALSE(j["root_is_consequence"].get<bool>());
  nlohmann::json e = nlohmann::json::parse(FormatFailureReportJson(BuildFailureReport({})));
  EXPECT_TRUE(e["root_cause"].is_null());
}

TEST(FailureReportTest, RankList) {
  EXPECT_EQ(FormatRankList({}), "");
  EXPECT_EQ(FormatRankList({3}), "3");
  EXPECT_EQ(FormatRankList({7, 0, 2, 3, 4, 2}), "0, 2-4, 7");
}

}  // namespace
}  // namespace specd::launch
