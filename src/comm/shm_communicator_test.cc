// Multi-rank tests of the shm backend: forked ranks (and threads, for TSan)
// against naive serial references.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/clock.h"
#include "comm/comm_test_util.h"
#include "comm/multi_rank_harness.h"
#include "comm/shm_group.h"

namespace specd {
namespace {

using testing::RankContext;
using testing::RunForked;
using testing::RunOptions;
using testing::RunThreads;

ShmOptions TestOptions(size_t buffer_bytes = 4u << 20, double timeout_s = 20.0) {
  ShmOptions o;
  o.buffer_bytes = buffer_bytes;
  o.timeout_s = timeout_s;
  o.platform_key = "x86-avx512bf16";
  return o;
}

std::unique_ptr<ShmGroup> MustCreate(int world, const ShmOptions& o) {
  auto g = CreateShmGroup(world, o);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? std::move(g).value() : nullptr;
}

// Joins in the child; reports and returns null on failure.
std::unique_ptr<Communicator> MustJoin(RankContext& ctx, const ShmGroup& g, const ShmOptions& o) {
  auto c = JoinShmGroup(g, ctx.rank, o);
  if (!c.ok()) {
    ctx.Fail("join: " + c.status().ToString());
    return nullptr;
  }
  return std::move(c).value();
}

int CountMemfds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (dirent* e = readdir(d)) {
    char link[256] = {};
    std::string p = std::string("/proc/self/fd/") + e->d_name;
    ssize_t len = readlink(p.c_str(), link, sizeof(link) - 1);
    if (len > 0 && std::strstr(link, "memfd:specd-comm") != nullptr) ++n;
  }
  closedir(d);
  return n;
}

struct SizeCase {
  size_t count;
};

// Every (size, dtype, algo) case in one child per rank, checked bitwise
// against the serial reference; each rank also stores a hash of all its
// results so the parent can check that ranks agree bitwise.
void AllReduceSweep(int world, size_t buffer_bytes, const std::vector<size_t>& counts) {
  ShmOptions o = TestOptions(buffer_bytes);
  auto g = MustCreate(world, o);
  ASSERT_NE(g, nullptr);
  RunOptions ro;
  ro.shared_bytes = sizeof(uint64_t);
  auto res = RunForked(
      world,
      [&](RankContext& ctx) {
        auto comm = MustJoin(ctx, *g, o);
        if (!comm) return;
        uint64_t hash = 0;
        uint64_t seed = 1;
        for (size_t n : counts) {
          // Inputs and references once per size; every algorithm must match.
          ++seed;
          const std::vector<float> ref = testing::ReferenceSumF32(seed, world, n);
          const std::vector<uint16_t> bref = testing::ReferenceSumBF16(seed, world, n);
          const std::vector<float> fin = testing::RandomF32(seed, ctx.rank, n);
          const std::vector<uint16_t> bin = testing::RandomBF16(seed, ctx.rank, n);
          for (AllreduceAlgo algo : {AllreduceAlgo::kOneShot, AllreduceAlgo::kTwoShot,
                                     AllreduceAlgo::kAuto}) {
            comm->SetAllreduceAlgo(algo);
            const std::string what = "n=" + std::to_string(n) + " " + AllreduceAlgoName(algo);
            {
              std::vector<float> in = fin, out(n, -7.0f);
              Status st = comm->AllReduce(in.data(), out.data(), n, CommDType::kF32);
              if (!st.ok()) return ctx.Fail(what + " f32: " + st.ToString());
              std::string d = testing::FirstDiff(out.data(), ref.data(), n, what + " f32");
              if (!d.empty()) return ctx.Fail(d);
              hash ^= testing::Fnv1a(out.data(), n * 4) + seed;
              // In place.
              st = comm->AllReduce(in.data(), in.data(), n, CommDType::kF32);
              if (!st.ok()) return ctx.Fail(what + " f32 in place: " + st.ToString());
              d = testing::FirstDiff(in.data(), ref.data(), n, what + " f32 in place");
              if (!d.empty()) return ctx.Fail(d);
            }
            {
              std::vector<uint16_t> out(n, 0xFFFF);
              Status st = comm->AllReduce(bin.data(), out.data(), n, CommDType::kBF16);
              if (!st.ok()) return ctx.Fail(what + " bf16: " + st.ToString());
              std::string d = testing::FirstDiff(out.data(), bref.data(), n, what + " bf16");
              if (!d.empty()) return ctx.Fail(d);
              hash ^= testing::Fnv1a(out.data(), n * 2) + 3 * seed;
            }
          }
        }
        std::memcpy(ctx.shared, &hash, sizeof(hash));
      },
      ro);
  ASSERT_TRUE(res.ok()) << res.Summary();
  uint64_t h0;
  std::memcpy(&h0, res.shared.data(), 8);
  for (int r = 1; r < world; ++r) {
    uint64_t h;
    std::memcpy(&h, res.shared.data() + r * 8, 8);
    EXPECT_EQ(h, h0) << "rank " << r << "'s results differ bitwise from rank 0's";
  }
}

TEST(ShmAllReduce, MatchesSerialSumWorlds1To4) {
  const std::vector<size_t> counts = {1, 2, 7, 33, 1000, 4097, 65537, (3u << 20) / 4 + 5};
  for (int world : {1, 2, 3, 4}) {
    SCOPED_TRACE("world " + std::to_string(world));
    AllReduceSweep(world, 4u << 20, counts);
  }
}

TEST(ShmAllReduce, MatchesSerialSumWorlds5To8) {
  const std::vector<size_t> counts = {1, 5, 31, 1023, 20001, 200003};
  for (int world : {5, 6, 7, 8}) {
    SCOPED_TRACE("world " + std::to_string(world));
    AllReduceSweep(world, 1u << 20, counts);
  }
}

// A 64 KiB staging buffer forces many chunks (and both parities many times
// within one call) at multi-MiB sizes.
TEST(ShmAllReduce, ChunkedThroughSmallBuffer) {
  AllReduceSweep(3, 64 << 10, {16383, 16384 + 1, (5u << 20) / 4 + 3});
}

TEST(ShmFusedRmsNorm, MatchesUnfusedReference) {
  for (int world : {1, 2, 3, 4}) {
    ShmOptions o = TestOptions(256 << 10);  // small: dim 7168 rows get chunked
    auto g = MustCreate(world, o);
    ASSERT_NE(g, nullptr);
    RunOptions ro;
    ro.shared_bytes = sizeof(uint64_t);
    auto res = RunForked(
        world,
        [&](RankContext& ctx) {
          auto comm = MustJoin(ctx, *g, o);
          if (!comm) return;
          uint64_t hash = 0, seed = 100;
          const float eps = 1e-6f;
          for (int dim : {7, 64, 7168}) {
            for (int rows : {1, 3, 8, 17}) {
              for (AllreduceAlgo algo : {AllreduceAlgo::kOneShot, AllreduceAlgo::kTwoShot}) {
                comm->SetAllreduceAlgo(algo);
                ++seed;
                const size_t n = static_cast<size_t>(rows) * dim;
                const std::string what = "rows=" + std::to_string(rows) + " dim=" +
                                         std::to_string(dim) + " " + AllreduceAlgoName(algo);
                std::vector<float> x = testing::RandomF32(seed, ctx.rank, n);
                // Residual and weight are replicated: the same on every rank.
                std::vector<float> residual = testing::RandomF32(seed, 1000, n);
                std::vector<float> weight = testing::RandomF32(seed, 2000, dim);
                std::vector<float> out(n, 0.0f);
                Status st = comm->AllReduceResidualRmsNorm(x.data(), residual.data(), weight.data(),
                                                           eps, rows, dim, out.data());
                if (!st.ok()) return ctx.Fail(what + ": " + st.ToString());
                std::vector<float> ref_res = testing::RandomF32(seed, 1000, n), ref_out;
                testing::ReferenceResidualRmsNorm(testing::ReferenceSumF32(seed, world, n), ref_res,
                                                  weight, eps, rows, dim, ref_out);
                std::string d = testing::FirstDiff(residual.data(), ref_res.data(), n,
                                                   what + " residual");
                if (!d.empty()) return ctx.Fail(d);
                for (size_t i = 0; i < n; ++i) {
                  const float tol = 1e-5f * (1.0f + std::fabs(ref_out[i]));
                  if (!(std::fabs(out[i] - ref_out[i]) <= tol)) {
                    return ctx.Fail(what + ": out[" + std::to_string(i) + "] = " +
                                    std::to_string(out[i]) + ", reference " +
                                    std::to_string(ref_out[i]));
                  }
                }
                hash ^= testing::Fnv1a(out.data(), n * 4) + seed;
                // out aliasing x is allowed.
                std::vector<float> x2 = testing::RandomF32(seed, ctx.rank, n);
                std::vector<float> res2 = testing::RandomF32(seed, 1000, n);
                st = comm->AllReduceResidualRmsNorm(x2.data(), res2.data(), weight.data(), eps, rows,
                                                    dim, x2.data());
                if (!st.ok()) return ctx.Fail(what + " aliased: " + st.ToString());
                d = testing::FirstDiff(x2.data(), out.data(), n, what + " out aliasing x");
                if (!d.empty()) return ctx.Fail(d);
              }
            }
          }
          std::memcpy(ctx.shared, &hash, 8);
        },
        ro);
    ASSERT_TRUE(res.ok()) << "world " << world << "\n" << res.Summary();
    for (int r = 1; r < world; ++r) {
      EXPECT_EQ(0, std::memcmp(res.shared.data(), res.shared.data() + r * 8, 8))
          << "world " << world << ": rank " << r << " differs bitwise from rank 0";
    }
  }
}

TEST(ShmCollectives, AllGatherBroadcastBarrier) {
  const int world = 3;
  ShmOptions o = TestOptions(64 << 10);
  auto g = MustCreate(world, o);
  ASSERT_NE(g, nullptr);
  auto res = RunForked(world, [&](RankContext& ctx) {
    auto comm = MustJoin(ctx, *g, o);
    if (!comm) return;
    for (size_t n : {size_t{1}, size_t{999}, size_t{50000}}) {
      std::vector<float> in = testing::RandomF32(n, ctx.rank, n), out(n * world);
      Status st = comm->AllGather(in.data(), out.data(), n, CommDType::kF32);
      if (!st.ok()) return ctx.Fail("allgather: " + st.ToString());
      for (int r = 0; r < world; ++r) {
        auto ref = testing::RandomF32(n, r, n);
        std::string d = testing::FirstDiff(out.data() + r * n, ref.data(), n,
                                           "allgather n=" + std::to_string(n) + " piece " +
                                               std::to_string(r));
        if (!d.empty()) return ctx.Fail(d);
      }
      for (int root = 0; root < world; ++root) {
        std::vector<float> buf = ctx.rank == root ? testing::RandomF32(n, 50 + root, n)
                                                  : std::vector<float>(n, 0.0f);
        st = comm->Broadcast(buf.data(), n * 4, root);
        if (!st.ok()) return ctx.Fail("broadcast: " + st.ToString());
        auto ref = testing::RandomF32(n, 50 + root, n);
        std::string d = testing::FirstDiff(buf.data(), ref.data(), n, "broadcast");
        if (!d.empty()) return ctx.Fail(d);
      }
      st = comm->Barrier();
      if (!st.ok()) return ctx.Fail("barrier: " + st.ToString());
    }
    Status st = comm->Broadcast(nullptr, 4, world);
    if (st.code() != StatusCode::kInvalidArgument) ctx.Fail("bad root accepted: " + st.ToString());
  });
  ASSERT_TRUE(res.ok()) << res.Summary();
}

// Closed-form inputs make the check cheap enough for 10,000 calls:
// rank r sends (r + 1) * ((i + iter) % 5), so the sum is T * ((i + iter) % 5)
// with T = world * (world + 1) / 2, exact in f32.
void BackToBack(RankContext& ctx, Communicator& comm, int world, int iters) {
  const size_t sizes[] = {1, 4096, 70001, 3, 30000};
  std::vector<float> buf(70001);
  const float t = world * (world + 1) / 2.0f;
  for (int it = 0; it < iters; ++it) {
    const size_t n = sizes[it % 5];
    for (size_t i = 0; i < n; ++i) buf[i] = (ctx.rank + 1) * static_cast<float>((i + it) % 5);
    Status st = comm.AllReduce(buf.data(), buf.data(), n, CommDType::kF32);
    if (!st.ok()) return ctx.Fail("iteration " + std::to_string(it) + ": " + st.ToString());
    for (size_t i = 0; i < n; ++i) {
      if (buf[i] != t * static_cast<float>((i + it) % 5)) {
        return ctx.Fail("iteration " + std::to_string(it) + " n=" + std::to_string(n) +
                        ": element " + std::to_string(i) + " = " + std::to_string(buf[i]));
      }
    }
  }
}

TEST(ShmAllReduce, TenThousandBackToBackAlternatingSizes) {
  const int world = 2;
  ShmOptions o = TestOptions(256 << 10);
  auto g = MustCreate(world, o);
  ASSERT_NE(g, nullptr);
  auto res = RunForked(world, [&](RankContext& ctx) {
    auto comm = MustJoin(ctx, *g, o);
    if (comm) BackToBack(ctx, *comm, world, 10000);
  });
  ASSERT_TRUE(res.ok()) << res.Summary();
}

// More ranks than cores: every rank pinned to CPU 0 (so this holds on any
// machine); the waits must yield instead of spinning the CPU away.
TEST(ShmAllReduce, EightRanksOnOneCore) {
  const int world = 8;
  ShmOptions o = TestOptions(256 << 10);
  auto g = MustCreate(world, o);
  ASSERT_NE(g, nullptr);
  auto res = RunForked(world, [&](RankContext& ctx) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    sched_setaffinity(0, sizeof(set), &set);
    auto comm = MustJoin(ctx, *g, o);
    if (comm) BackToBack(ctx, *comm, world, 300);
  });
  ASSERT_TRUE(res.ok()) << res.Summary();
}

TEST(ShmErrors, MismatchedSizesFailOnAllRanks) {
  const int world = 3;
  ShmOptions o = TestOptions();
  auto g = MustCreate(world, o);
  ASSERT_NE(g, nullptr);
  auto res = RunForked(world, [&](RankContext& ctx) {
    auto comm = MustJoin(ctx, *g, o);
    if (!comm) return;
    comm->SetAllreduceAlgo(AllreduceAlgo::kOneShot);
    std::vector<float> buf(200, 1.0f);
    Status st = comm->AllReduce(buf.data(), buf.data(), 100, CommDType::kF32);
    if (!st.ok()) return ctx.Fail("first call: " + st.ToString());
    const size_t n = ctx.rank == 1 ? 200 : 100;
    st = comm->AllReduce(buf.data(), buf.data(), n, CommDType::kF32);
    if (st.code() != StatusCode::kInvalidArgument) {
      return ctx.Fail("expected InvalidArgument, got " + st.ToString());
    }
    const std::string& m = st.message();
    if (m.find("allreduce #2 (epoch 2)") == std::string::npos ||
        m.find("count=100") == std::string::npos || m.find("count=200") == std::string::npos) {
      return ctx.Fail("message does not name both calls: " + m);
    }
    // The communicator stays failed.
    Status again = comm->Barrier();
    if (again.ok()) ctx.Fail("barrier after a mismatch succeeded");
  });
  ASSERT_TRUE(res.ok()) << res.Summary();
}

TEST(ShmErrors, PeerThatNeverArrivesHitsTheDeadline) {
  const int world = 3;
  ShmOptions o = TestOptions(4u << 20, 0.5);
  auto g = MustCreate(world, o);
  ASSERT_NE(g, nullptr);
  auto res = RunForked(world, [&](RankContext& ctx) {
    auto comm = MustJoin(ctx, *g, o);
    if (!comm) return;
    if (ctx.rank == 2) {
      usleep(1500 * 1000);  // alive but absent
      return;
    }
    float v = 1.0f;
    Status st = comm->AllReduce(&v, &v, 1, CommDType::kF32);
    if (st.code() != StatusCode::kDeadlineExceeded) {
      return ctx.Fail("expected DeadlineExceeded, got " + st.ToString());
    }
    if (st.message() != "allreduce #1 (epoch 1): rank 2 never arrived within 0.5 s") {
      ctx.Fail("unexpected message: " + st.message());
    }
  });
  ASSERT_TRUE(res.ok()) << res.Summary();
}

TEST(ShmErrors, KilledPeerGivesEverySurvivorACleanErrorAndNoLeak) {
  const int world = 4;
  const int memfds_before = CountMemfds();
  {
    ShmOptions o = TestOptions(256 << 10, 10.0);
    auto g = MustCreate(world, o);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(CountMemfds(), memfds_before + 1);
    RunOptions ro;
    ro.kill_rank = 2;
    ro.kill_after_s = 0.3;
    ro.timeout_s = 30;
    auto res = RunForked(
        world,
        [&](RankContext& ctx) {
          auto comm = MustJoin(ctx, *g, o);
          if (!comm) return;
          std::vector<float> buf(5000, 1.0f);
          for (int it = 0;; ++it) {
            Status st = comm->AllReduce(buf.data(), buf.data(), 1 + it % 5000, CommDType::kF32);
            if (!st.ok()) {
              if (st.code() != StatusCode::kUnavailable) ctx.Fail("not Unavailable: " + st.ToString());
              if (st.message().find("died") == std::string::npos &&
                  st.message().find("stopped after an error") == std::string::npos) {
                ctx.Fail("message names neither a death nor a failed peer: " + st.message());
              }
              return;
            }
            std::fill(buf.begin(), buf.end(), 1.0f);
          }
        },
        ro);
    ASSERT_FALSE(res.timed_out) << res.Summary();
    EXPECT_TRUE(res.ok()) << res.Summary();
    EXPECT_EQ(res.exit_codes[2], -SIGKILL);
  }
  // The group is destroyed and every child is gone: no memfd remains.
  EXPECT_EQ(CountMemfds(), memfds_before);
}

TEST(ShmErrors, NamedGroupLeavesNothingInDevShm) {
  const std::string name = "/specd-comm-test-" + std::to_string(getpid());
  const std::string path = "/dev/shm" + name;
  ShmOptions o = TestOptions(64 << 10);
  {
    auto g = CreateNamedShmGroup(2, name, o);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_EQ(access(path.c_str(), F_OK), 0);
    auto res = RunForked(2, [&](RankContext& ctx) {
      auto c = JoinShmGroupFromSpec((*g)->HandoffSpec(), ctx.rank, o);
      if (!c.ok()) return ctx.Fail(c.status().ToString());
      float v = ctx.rank + 1.0f;
      Status st = (*c)->AllReduce(&v, &v, 1, CommDType::kF32);
      if (!st.ok() || v != 3.0f) ctx.Fail("allreduce: " + st.ToString());
    });
    EXPECT_TRUE(res.ok()) << res.Summary();
    ASSERT_TRUE((*g)->Unlink().ok());
    EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " still exists after Unlink";
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

// The re-exec hand-off: a rank joins through "fd:N" only (it maps the memfd
// itself and closes the fd).
TEST(ShmGroupHandoff, JoinThroughFdSpec) {
  ShmOptions o = TestOptions(64 << 10);
  auto g = MustCreate(2, o);
  ASSERT_NE(g, nullptr);
  ASSERT_TRUE(g->PrepareForExec().ok());
  EXPECT_EQ(g->HandoffSpec(), "fd:" + std::to_string(g->fd()));
  auto res = RunForked(2, [&](RankContext& ctx) {
    const std::string spec = "fd:" + std::to_string(dup(g->fd()));
    auto c = JoinShmGroupFromSpec(spec, ctx.rank, o);
    if (!c.ok()) return ctx.Fail(c.status().ToString());
    std::vector<float> v(1000, ctx.rank + 1.0f);
    Status st = (*c)->AllReduce(v.data(), v.data(), v.size(), CommDType::kF32);
    if (!st.ok() || v[999] != 3.0f) ctx.Fail("allreduce: " + st.ToString());
  });
  EXPECT_TRUE(res.ok()) << res.Summary();
}

TEST(ShmGroupHandoff, BadSpecsAndDoubleJoinAreErrors) {
  ShmOptions o = TestOptions(64 << 10);
  EXPECT_EQ(JoinShmGroupFromSpec("fd:abc", 0, o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(JoinShmGroupFromSpec("bogus", 0, o).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(JoinShmGroupFromSpec("fd:987", 0, o).ok());
  EXPECT_FALSE(JoinShmGroupFromSpec("name:/specd-does-not-exist", 0, o).ok());
  int fd = memfd_create("not-a-group", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(fd, 8192), 0);
  auto bad = JoinShmGroupFromSpec("fd:" + std::to_string(fd), 0, o);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().ToString();
  EXPECT_FALSE(CreateShmGroup(0, o).ok());
  EXPECT_FALSE(CreateShmGroup(65, o).ok());

  auto g = MustCreate(2, o);
  ASSERT_NE(g, nullptr);
  EXPECT_FALSE(JoinShmGroup(*g, 2, o).ok());
  auto first = JoinShmGroup(*g, 0, o);
  ASSERT_TRUE(first.ok());
  auto second = JoinShmGroup(*g, 0, o);
  EXPECT_EQ(second.status().code(), StatusCode::kInvalidArgument) << second.status().ToString();
}

// Ranks as threads of one process: the same protocol, visible to TSan.
TEST(ShmThreads, MixedCollectivesAsThreads) {
  const int world = 4;
  ShmOptions o = TestOptions(64 << 10);
  auto g = MustCreate(world, o);
  ASSERT_NE(g, nullptr);
  auto res = RunThreads(world, [&](RankContext& ctx) {
    auto comm = MustJoin(ctx, *g, o);
    if (!comm) return;
    BackToBack(ctx, *comm, world, 400);
    comm->SetAllreduceAlgo(AllreduceAlgo::kTwoShot);
    BackToBack(ctx, *comm, world, 100);
    std::vector<float> in(3000, ctx.rank * 1.0f), out(3000 * world);
    for (int i = 0; i < 50; ++i) {
      Status st = comm->AllGather(in.data(), out.data(), in.size(), CommDType::kF32);
      if (!st.ok() || out[2999 + 3000 * (world - 1)] != world - 1.0f) {
        return ctx.Fail("allgather: " + st.ToString());
      }
      if (!(st = comm->Barrier()).ok()) return ctx.Fail("barrier: " + st.ToString());
    }
  });
  ASSERT_TRUE(res.ok()) << res.Summary();
}

}  // namespace
}  // namespace specd
