#include "base/meminfo.h"

#include <gtest/gtest.h>

namespace specd {
namespace {

TEST(MemInfoTest, ParsesMemAvailableInKiB) {
  const std::string text =
      "MemTotal:       24576000 kB\n"
      "MemFree:         1000000 kB\n"
      "MemAvailable:   20000000 kB\n"
      "Buffers:            4096 kB\n";
  EXPECT_EQ(ParseMemAvailable(text), int64_t{20000000} * 1024);
  EXPECT_EQ(ParseMemAvailable("MemTotal: 1 kB\n"), std::nullopt);
  EXPECT_EQ(ParseMemAvailable("MemAvailable: x kB\n"), std::nullopt);
}

TEST(MemInfoTest, ThisMachineReportsSomeAvailableMemory) {
  const auto v = AvailableMemoryBytes();
  ASSERT_TRUE(v.has_value());
  EXPECT_GT(*v, 0);
}

TEST(MemInfoTest, MemorySizesInMiBAndGiB) {
  EXPECT_EQ(*ParseMemorySize("512", "--x"), int64_t{512} << 20);
  EXPECT_EQ(*ParseMemorySize("512M", "--x"), int64_t{512} << 20);
  EXPECT_EQ(*ParseMemorySize("512MiB", "--x"), int64_t{512} << 20);
  EXPECT_EQ(*ParseMemorySize("2g", "--x"), int64_t{2} << 30);
  EXPECT_EQ(*ParseMemorySize("2GiB", "--x"), int64_t{2} << 30);
  EXPECT_EQ(*ParseMemorySize("1.5G", "--x"), int64_t{3} << 29);
  for (const char* bad : {"", "0", "-1G", "2T", "G", "1.5 G", "nan"}) {
    auto r = ParseMemorySize(bad, "--kv-cache-memory");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("--kv-cache-memory"), std::string::npos);
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos);
  }
}

}  // namespace
}  // namespace specd
