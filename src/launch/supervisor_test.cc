// Supervise with forked fake ranks: a group that fails after it was ready is
// replaced (max_restarts), the group events carry the root cause, restarts
// run out, and a group that fails before it is ready is not restarted.
#include "launch/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace specd {
namespace {

// Records the supervisor's events; `generation` counts the groups started
// (the forked ranks see the value at their fork).
struct Recorder {
  int generation = 0;
  std::vector<std::string> served;
  std::vector<std::string> failed;

  SupervisorOptions Options(int world, int max_restarts) {
    SupervisorOptions o;
    o.world = world;
    o.grace_s = 0.1;
    o.max_restarts = max_restarts;
    o.before_restart = [this] {
      ++generation;
      return Status::Ok();
    };
    o.on_rank_serving = [this](int rank, const std::string& address) {
      served.push_back(std::to_string(rank) + ":" + address);
    };
    o.on_group_failed = [this](const std::string& cause, bool restarting) {
      failed.push_back(cause + (restarting ? " [restarting]" : " [final]"));
    };
    return o;
  }
};

void SleepS(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

// Rank 1 of the groups listed in `kill_in` dies by SIGKILL once ready; rank 0
// of such a group waits to be stopped; every other group exits 0.
int RunRanks(Recorder& rec, int max_restarts, std::vector<int> kill_in, bool before_ready = false) {
  return Supervise(rec.Options(2, max_restarts), [&](int rank, RankReporter& rep) {
    const bool doomed =
        std::find(kill_in.begin(), kill_in.end(), rec.generation) != kill_in.end();
    if (doomed && before_ready && rank == 1) ::raise(SIGKILL);
    rep.Ready();
    if (rank == 0) rep.Serving("port" + std::to_string(rec.generation));
    if (!doomed) return 0;
    if (rank == 1) {
      SleepS(0.2);  // the supervisor has seen every rank ready
      ::raise(SIGKILL);
    }
    SleepS(10);  // rank 0: stopped by the teardown
    return 0;
  });
}

TEST(SupervisorTest, FailedGroupIsReplacedAndTheNewOneServes) {
  Recorder rec;
  EXPECT_EQ(RunRanks(rec, 1, {0}), 0);
  EXPECT_EQ(rec.generation, 1);
  EXPECT_EQ(rec.served, (std::vector<std::string>{"0:port0", "0:port1"}));
  ASSERT_EQ(rec.failed.size(), 1u);
  EXPECT_EQ(rec.failed[0].rfind("rank 1 died: killed by signal 9 (SIGKILL)", 0), 0u)
      << rec.failed[0];
  EXPECT_NE(rec.failed[0].find("[restarting]"), std::string::npos) << rec.failed[0];
}

TEST(SupervisorTest, RestartsRunOut) {
  Recorder rec;
  EXPECT_EQ(RunRanks(rec, 1, {0, 1}), 1);
  EXPECT_EQ(rec.generation, 1);
  ASSERT_EQ(rec.failed.size(), 2u);
  EXPECT_NE(rec.failed[0].find("[restarting]"), std::string::npos) << rec.failed[0];
  EXPECT_NE(rec.failed[1].find("[final]"), std::string::npos) << rec.failed[1];
}

TEST(SupervisorTest, GroupFailingBeforeReadyIsNotRestarted) {
  Recorder rec;
  EXPECT_EQ(RunRanks(rec, 3, {0}, /*before_ready=*/true), 1);
  EXPECT_EQ(rec.generation, 0);
  ASSERT_EQ(rec.failed.size(), 1u);
  EXPECT_EQ(rec.failed[0].rfind("rank 1 died: killed by signal 9 (SIGKILL)", 0), 0u)
      << rec.failed[0];
  EXPECT_NE(rec.failed[0].find("[final]"), std::string::npos) << rec.failed[0];
}

TEST(SupervisorTest, WithoutRestartsAFailureEndsSupervision) {
  Recorder rec;
  EXPECT_EQ(RunRanks(rec, 0, {0}), 1);
  EXPECT_EQ(rec.generation, 0);
  ASSERT_EQ(rec.failed.size(), 1u);
  EXPECT_NE(rec.failed[0].find("[final]"), std::string::npos) << rec.failed[0];
}

}  // namespace
}  // namespace specd
