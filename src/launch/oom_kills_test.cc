#include "launch/oom_kills.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace specd::launch {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(OomKillsTest, ReadsCgroupV2MemoryEvents) {
  const fs::path root = fs::temp_directory_path() / ("specd-cg2-" + std::to_string(::getpid()));
  Write(root / "job/memory.events", "low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\noom_group_kill 0\n");
  EXPECT_EQ(OomKillCount("0::/job\n", root.string()), 2);
  fs::remove_all(root);
}

TEST(OomKillsTest, ReadsCgroupV1OomControl) {
  const fs::path root = fs::temp_directory_path() / ("specd-cg1-" + std::to_string(::getpid()));
  Write(root / "memory/a/b/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 5\n");
  EXPECT_EQ(OomKillCount("9:pids:/\n4:memory:/a/b\n0::/\n", root.string()), 5);
  fs::remove_all(root);
}

TEST(OomKillsTest, UnreadableIsMinusOne) {
  EXPECT_EQ(OomKillCount("0::/nowhere\n", "/nonexistent-cgroup-root"), -1);
  EXPECT_EQ(OomKillCount("", "/sys/fs/cgroup"), -1);
  EXPECT_EQ(OomKillCount("garbage without colons", "/sys/fs/cgroup"), -1);
}

// On this machine the call never fails loudly: a count or -1.
TEST(OomKillsTest, LiveCallReturnsACountOrMinusOne) { EXPECT_GE(OomKillCount(), -1); }

}  // namespace
}  // namespace specd::launch
