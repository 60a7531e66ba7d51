#include "launch/oom_kills.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

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

// The live call reads this process's own counter: where /sys/fs/cgroup holds
// a counter file for a cgroup of /proc/self/cgroup, the count is that file's
// "oom_kill" value (found here by a plain text search, not the parser), and
// -1 only where there is none.
TEST(OomKillsTest, LiveCallReadsThisProcessCounter) {
  std::ifstream self("/proc/self/cgroup");
  std::vector<fs::path> files;
  for (std::string line; std::getline(self, line);) {
    const std::string path = line.substr(line.rfind(':') + 1);
    if (line.find(":memory:") != std::string::npos) {
      files.push_back("/sys/fs/cgroup/memory" + path + "/memory.oom_control");
    }
    if (line.rfind("0::", 0) == 0) {
      files.push_back("/sys/fs/cgroup" + path + "/memory.events");
      files.push_back("/sys/fs/cgroup/unified" + path + "/memory.events");
    }
  }
  int64_t want = -1;
  for (const fs::path& p : files) {
    std::ifstream in(p);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find("\noom_kill ") != std::string::npos ? text.find("\noom_kill ") + 1
                      : text.rfind("oom_kill ", 0) == 0                ? 0
                                                                      : std::string::npos;
    if (at == std::string::npos) continue;
    want = std::stoll(text.substr(at + 9));
    break;
  }
  const int64_t got = OomKillCount();
  EXPECT_EQ(got, want) << "cgroup files tried: " << files.size();
}

}  // namespace
}  // namespace specd::launch
