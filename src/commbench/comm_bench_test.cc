#include "commbench/comm_bench.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "base/test_reference.h"

namespace specd {
namespace {

TEST(CommBenchSizes, RangesAndLists) {
  auto r = ParseSizeList("1K:64K");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<size_t>{1024, 2048, 4096, 8192, 16384, 32768, 65536}));
  auto l = ParseSizeList("8K,64K,1M,100");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(*l, (std::vector<size_t>{8192, 65536, 1 << 20, 100}));
  EXPECT_FALSE(ParseSizeList("64K:1K").ok());
  EXPECT_FALSE(ParseSizeList("8X").ok());
  EXPECT_FALSE(ParseSizeList("8K,,1M").ok());
  EXPECT_FALSE(ParseSizeList("0").ok());
}

TEST(CommBenchRows, JsonRoundTrip) {
  CommBenchRow a{"shm", "allreduce", "f32", 8192, "one-shot", 1.5, 2.5, 3.25};
  auto back = CommBenchRowsFromJson(CommBenchRowsToJson({a}));
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].algo, "one-shot");
  EXPECT_EQ((*back)[0].bytes, 8192u);
  EXPECT_EQ((*back)[0].p99_us, 2.5);
  EXPECT_FALSE(CommBenchRowsFromJson("{}").ok());
  EXPECT_FALSE(CommBenchRowsFromJson("[{\"x\":1}]").ok());
}

// A short real run: rows for every size, busbw consistent with nccl-tests'
// formula, p99 >= median, and a floor row per size.
TEST(CommBenchRun, ShmTwoRanks) {
  CommBenchOptions o;
  o.ranks = 2;
  o.sizes = {1024, 65536};
  o.iters = 5;
  o.warmup = 1;
  auto rows = RunCommBench(o);
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  int shm = 0, floor = 0;
  for (const auto& r : *rows) {
    EXPECT_GT(r.median_us, 0) << r.backend;
    EXPECT_GE(r.p99_us, r.median_us) << r.backend;
    const double expect = r.bytes / (r.median_us * 1e-6) / 1e9 * 2.0 * (2 - 1) / 2;
    EXPECT_NEAR(r.busbw_gbs, expect, 1e-6 * expect + 1e-9);
    shm += r.backend == "shm";
    floor += r.backend == "floor";
  }
  EXPECT_EQ(shm, 2);
  EXPECT_EQ(floor, 2);
  EXPECT_NE(FormatCommBench(o, *rows).find("median_us"), std::string::npos);
}

TEST(CommBenchRun, VerifyWorkloadThroughSpecdAndMpirun) {
  const std::string specd = std::string(SPECD_BINARY_DIR) + "/specd";
  if (access(specd.c_str(), X_OK) != 0) SPECD_REFERENCE_MISSING(specd << " not built");
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) SPECD_REFERENCE_MISSING("no mpirun (Open MPI)");
  CommBenchOptions o;
  o.backends = {"shm", "mpi"};
  o.ranks = 2;
  o.workload = "verify";
  o.hidden = 256;
  o.iters = 3;
  o.warmup = 1;
  o.self_exe = specd;
  // Leak checks off in the mpirun-started ranks (sanitizer builds): Open MPI's
  // unloaded plugins keep allocations LeakSanitizer cannot attribute. Only
  // the children read it (the variable is read at process start).
  const char* old_lsan = std::getenv("LSAN_OPTIONS");
  const std::string saved = old_lsan ? old_lsan : "";
  setenv("LSAN_OPTIONS", "detect_leaks=0", 1);
  auto rows = RunCommBench(o);
  if (old_lsan) {
    setenv("LSAN_OPTIONS", saved.c_str(), 1);
  } else {
    unsetenv("LSAN_OPTIONS");
  }
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  int mpi = 0;
  for (const auto& r : *rows) {
    EXPECT_EQ(r.op, "verify-step");
    if (r.backend == "mpi") {
      ++mpi;
      EXPECT_EQ(r.algo, "mpi");
    }
  }
  EXPECT_EQ(mpi, 2);  // T = 4 and 8
  EXPECT_NE(FormatCommBench(o, *rows).find("mpi/shm"), std::string::npos);
}

TEST(CommBenchRun, BadOptionsAreErrors) {
  CommBenchOptions o;
  o.sizes = {1024};
  o.op = "reduce";
  EXPECT_EQ(RunCommBench(o).status().code(), StatusCode::kInvalidArgument);
  o.op = "allreduce";
  o.backends = {"nccl"};
  EXPECT_EQ(RunCommBench(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specd
