// MPI backend tests. The driver tests run this same binary under
// `mpirun -np N` with --gtest_filter=MpiWorker.*; the worker test only runs
// when started by mpirun and checks every collective against the serial
// reference on each rank.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "base/test_reference.h"
#include "comm/comm_test_util.h"
#include "comm/mpi_communicator.h"

namespace specd {
namespace {

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : std::string();
}

// Runs `mpirun -np <np> <extra> <self> --gtest_filter=MpiWorker.*`; returns
// the exit status and the combined output.
int RunMpirun(int np, const std::string& extra, std::string* output) {
  // Leak checks stay off in the ranks (sanitizer builds): Open MPI's plugins
  // keep allocations that LeakSanitizer cannot attribute once unloaded.
  std::string cmd = "LSAN_OPTIONS=detect_leaks=0 timeout 120 mpirun -np " + std::to_string(np) +
                    " --oversubscribe --bind-to none";
  if (geteuid() == 0) cmd += " --allow-run-as-root";
  cmd += " --mca btl_base_warn_component_unused 0 " + extra + " " + SelfExe() +
         " --gtest_color=no --gtest_filter=MpiWorker.* 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) output->append(buf, n);
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool HaveMpirun() { return std::system("command -v mpirun >/dev/null 2>&1") == 0; }

TEST(MpiBackend, TwoRanksSharedMemoryHost) {
  if (!HaveMpirun()) SPECD_REFERENCE_MISSING("mpirun not installed (Open MPI)");
  std::string out;
  int rc = RunMpirun(2, "-x SPECD_TEST_EXPECT_BACKEND=shm", &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
}

// btl tcp,self: MPI traffic goes through TCP as between separate hosts.
TEST(MpiBackend, TwoRanksPlainMpiOverTcp) {
  if (!HaveMpirun()) SPECD_REFERENCE_MISSING("mpirun not installed (Open MPI)");
  std::string out;
  int rc = RunMpirun(2,
                     "--mca btl tcp,self -x SPECD_ALLREDUCE_ALGO=mpi "
                     "-x SPECD_TEST_EXPECT_BACKEND=mpi",
                     &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
}

// Two fake hosts of two ranks each: shm inside, MPI between leaders.
TEST(MpiBackend, FourRanksHierarchical) {
  if (!HaveMpirun()) SPECD_REFERENCE_MISSING("mpirun not installed (Open MPI)");
  std::string out;
  int rc = RunMpirun(4,
                     "--mca btl tcp,self -x SPECD_MPI_FAKE_HOST_SIZE=2 "
                     "-x SPECD_TEST_EXPECT_BACKEND=hier",
                     &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("[  PASSED  ] 1 test"), std::string::npos) << out;
}

TEST(MpiWorker, CollectivesMatchSerialReference) {
  if (!RunningUnderMpirun()) GTEST_SKIP() << "runs only under mpirun (see MpiBackend.*)";
  MpiOptions o = MpiOptionsFromEnv();
  o.shm.timeout_s = 30;
  auto c = NewMpiCommunicator(o);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  Communicator& comm = **c;
  const int world = comm.world_size(), rank = comm.rank();
  if (const char* want = std::getenv("SPECD_TEST_EXPECT_BACKEND")) {
    EXPECT_EQ(comm.backend_name(), want);
  }
  uint64_t seed = 7;
  for (size_t n : {size_t{1}, size_t{33}, size_t{4097}, size_t{300001}}) {
    ++seed;
    std::vector<float> in = testing::RandomF32(seed, rank, n), out(n);
    ASSERT_TRUE(comm.AllReduce(in.data(), out.data(), n, CommDType::kF32).ok());
    std::vector<float> ref = testing::ReferenceSumF32(seed, world, n);
    for (size_t i = 0; i < n; ++i) {
      // MPI may sum in another order than 0..N-1: allow rounding differences.
      ASSERT_NEAR(out[i], ref[i], 1e-5f * world) << "n=" << n << " i=" << i;
    }
    // Every rank holds bitwise the same result.
    uint64_t h = testing::Fnv1a(out.data(), n * 4);
    std::vector<uint64_t> all(world);
    ASSERT_TRUE(comm.AllGather(&h, all.data(), 4, CommDType::kBF16).ok());
    for (int r = 0; r < world; ++r) EXPECT_EQ(all[r], h) << "rank " << r << " differs, n=" << n;

    std::vector<uint16_t> bin = testing::RandomBF16(seed, rank, n), bout(n);
    ASSERT_TRUE(comm.AllReduce(bin.data(), bout.data(), n, CommDType::kBF16).ok());
    std::vector<uint16_t> bref = testing::ReferenceSumBF16(seed, world, n);
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(comm_internal::BF16ToF32(bout[i]), comm_internal::BF16ToF32(bref[i]),
                  0.02f * world) << "bf16 n=" << n << " i=" << i;
    }
  }
  // Fused RMSNorm vs the unfused reference.
  const int rows = 3, dim = 96;
  std::vector<float> x = testing::RandomF32(99, rank, rows * dim);
  std::vector<float> residual = testing::RandomF32(99, 1000, rows * dim);
  std::vector<float> weight = testing::RandomF32(99, 2000, dim), out(rows * dim);
  ASSERT_TRUE(comm.AllReduceResidualRmsNorm(x.data(), residual.data(), weight.data(), 1e-6f, rows,
                                            dim, out.data()).ok());
  std::vector<float> ref_res = testing::RandomF32(99, 1000, rows * dim), ref_out;
  testing::ReferenceResidualRmsNorm(testing::ReferenceSumF32(99, world, rows * dim), ref_res,
                                    weight, 1e-6f, rows, dim, ref_out);
  for (int i = 0; i < rows * dim; ++i) ASSERT_NEAR(out[i], ref_out[i], 1e-4f) << i;
  // AllGather, Broadcast, Barrier.
  std::vector<float> piece(1000, static_cast<float>(rank)), gathered(1000 * world);
  ASSERT_TRUE(comm.AllGather(piece.data(), gathered.data(), 1000, CommDType::kF32).ok());
  for (int r = 0; r < world; ++r) ASSERT_EQ(gathered[r * 1000 + 999], static_cast<float>(r));
  std::vector<char> msg(5000, rank == world - 1 ? 'x' : 'o');
  ASSERT_TRUE(comm.Broadcast(msg.data(), msg.size(), world - 1).ok());
  EXPECT_EQ(std::string(msg.begin(), msg.end()), std::string(5000, 'x'));
  EXPECT_TRUE(comm.Barrier().ok());
  EXPECT_EQ(comm.Broadcast(msg.data(), 1, world).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specd
