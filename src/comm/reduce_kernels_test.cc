#include "comm/reduce_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "comm/comm_test_util.h"
#include "comm/communicator.h"

namespace specd {
namespace {

// The vectorized sum must equal the naive left-to-right sum bitwise, at every
// length around the block and vector boundaries.
TEST(ReduceKernels, SumRanksMatchesNaiveOrderedSum) {
  for (int n_src : {1, 2, 3, 8}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{511},
                     size_t{512}, size_t{513}, size_t{5000}}) {
      std::vector<std::vector<float>> f(n_src);
      std::vector<std::vector<uint16_t>> b(n_src);
      std::vector<const float*> fp(n_src);
      std::vector<const uint16_t*> bp(n_src);
      for (int r = 0; r < n_src; ++r) {
        f[r] = testing::RandomF32(n, r, n);
        b[r] = testing::RandomBF16(n, r, n);
        fp[r] = f[r].data();
        bp[r] = b[r].data();
      }
      std::vector<float> out(n);
      std::vector<uint16_t> bout(n);
      comm_internal::SumRanksF32(fp.data(), n_src, out.data(), n);
      comm_internal::SumRanksBF16(bp.data(), n_src, bout.data(), n);
      for (size_t i = 0; i < n; ++i) {
        float acc = f[0][i], bacc = comm_internal::BF16ToF32(b[0][i]);
        for (int r = 1; r < n_src; ++r) {
          acc += f[r][i];
          bacc += comm_internal::BF16ToF32(b[r][i]);
        }
        ASSERT_EQ(out[i], acc) << "n_src " << n_src << " n " << n << " i " << i;
        ASSERT_EQ(bout[i], comm_internal::F32ToBF16(bacc)) << "bf16 n_src " << n_src << " i " << i;
      }
    }
  }
}

TEST(ReduceKernels, ResidualRmsNormRowMatchesNaive) {
  for (int dim : {1, 15, 16, 33, 4096}) {
    std::vector<float> sum = testing::RandomF32(dim, 1, dim), res = testing::RandomF32(dim, 2, dim),
                       w = testing::RandomF32(dim, 3, dim), out(dim);
    std::vector<float> ref_res = res, ref_out;
    testing::ReferenceResidualRmsNorm(sum, ref_res, w, 1e-5f, 1, dim, ref_out);
    comm_internal::ResidualRmsNormRow(sum.data(), res.data(), w.data(), 1e-5f, dim, out.data());
    for (int i = 0; i < dim; ++i) {
      ASSERT_EQ(res[i], ref_res[i]) << dim << " " << i;
      ASSERT_NEAR(out[i], ref_out[i], 1e-5f * (1 + std::fabs(ref_out[i]))) << dim << " " << i;
    }
  }
}

TEST(ReduceKernels, Bf16RoundTripAndRounding) {
  EXPECT_EQ(comm_internal::F32ToBF16(1.0f), 0x3F80);
  EXPECT_EQ(comm_internal::BF16ToF32(0x3F80), 1.0f);
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even.
  EXPECT_EQ(comm_internal::F32ToBF16(1.0f + 1.0f / 256), 0x3F80);
  EXPECT_EQ(comm_internal::F32ToBF16(1.0f + 3.0f / 256), 0x3F82);
  EXPECT_TRUE(std::isnan(comm_internal::BF16ToF32(comm_internal::F32ToBF16(NAN))));
}

TEST(LocalCommunicator, IdentityCollectivesAndFusedTail) {
  auto c = NewLocalCommunicator();
  EXPECT_EQ(c->world_size(), 1);
  EXPECT_EQ(c->backend_name(), "local");
  std::vector<float> in = {1, 2, 3}, out(3);
  ASSERT_TRUE(c->AllReduce(in.data(), out.data(), 3, CommDType::kF32).ok());
  EXPECT_EQ(out, in);
  std::vector<float> x = testing::RandomF32(5, 0, 8), res = testing::RandomF32(5, 1, 8),
                     w = testing::RandomF32(5, 2, 4), o(8);
  std::vector<float> ref_res = res, ref_out;
  testing::ReferenceResidualRmsNorm(x, ref_res, w, 1e-6f, 2, 4, ref_out);
  ASSERT_TRUE(c->AllReduceResidualRmsNorm(x.data(), res.data(), w.data(), 1e-6f, 2, 4, o.data()).ok());
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(res[i], ref_res[i]);
    EXPECT_NEAR(o[i], ref_out[i], 1e-5f * (1 + std::fabs(ref_out[i])));
  }
  EXPECT_EQ(c->Broadcast(out.data(), 12, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(c->Barrier().ok());
  EXPECT_EQ(c->comm_calls(), 4u);
}

TEST(AllreduceAlgoNames, ParseRoundTrip) {
  for (AllreduceAlgo a : {AllreduceAlgo::kAuto, AllreduceAlgo::kOneShot, AllreduceAlgo::kTwoShot,
                          AllreduceAlgo::kMpi}) {
    auto p = ParseAllreduceAlgo(AllreduceAlgoName(a));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, a);
  }
  EXPECT_EQ(ParseAllreduceAlgo("ring").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace specd
