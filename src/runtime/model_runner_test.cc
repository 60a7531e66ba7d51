// ModelRunner::Execute is what every rank runs on a step descriptor; Engine
// is rank 0's side. Steps that do not fit the rank's state are refused with
// an error, never applied halfway, and a descriptor that went through the
// wire format runs exactly as the one rank 0 built.
#include "runtime/model_runner.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "kernels/dispatch.h"
#include "kernels/kernel_paths_test_util.h"
#include "model/weight_binding.h"
#include "modelgen/fixture.h"
#include "runtime/engine.h"
#include "runtime/tiny_model_test_util.h"

namespace specd {
namespace {

class ModelRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RunnerOptions ro;
    ro.model_path = testing_util::TinyModelPath();
    auto r = ModelRunner::Create(ro, comm_.get());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runner_ = std::move(r).value();
  }
  StepDesc Step(std::vector<KvEdit> edits, int seq, std::vector<int32_t> tokens) {
    StepDesc d;
    d.kv_edits = std::move(edits);
    if (!tokens.empty()) d.batch.push_back(SeqInput{seq, std::move(tokens), {}, {}, false});
    return d;
  }
  std::unique_ptr<Communicator> comm_ = NewLocalCommunicator();
  std::unique_ptr<ModelRunner> runner_;
};

TEST_F(ModelRunnerTest, ForwardOnASequenceThatDoesNotExistIsRefused) {
  ForwardOutput out;
  Status s = runner_->Execute(Step({}, 3, {1, 2}), &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("sequence 3"), std::string::npos) << s.message();
  EXPECT_EQ(runner_->kv().used_pages(), 0);
}

TEST_F(ModelRunnerTest, ABadEditStopsTheStepBeforeItsForward) {
  ForwardOutput out;
  ASSERT_TRUE(runner_->Execute(Step({KvEdit::NewSequence(0)}, 0, {1, 2, 3}), &out).ok());
  ASSERT_EQ(runner_->kv().Length(0), 3);
  // Accepted path past the sequence's end: refused, and the batch does not run.
  Status s = runner_->Execute(Step({KvEdit::KeepPath(0, 2, {0, 5})}, 0, {4}), &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_EQ(runner_->kv().Length(0), 3);
}

TEST_F(ModelRunnerTest, WireFormatRunsLikeTheOriginalAndEngineMatchesExecute) {
  const int V = runner_->config().vocab_size;
  StepDesc d = Step({KvEdit::NewSequence(0)}, 0, {5, 6, 7, 8});
  auto wire = DeserializeStep(SerializeStep(d));
  ASSERT_TRUE(wire.ok()) << wire.status().ToString();
  ForwardOutput direct, via_wire;
  ASSERT_TRUE(runner_->Execute(d, &direct).ok());
  ASSERT_TRUE(runner_->Execute(Step({KvEdit::FreeSequence(0)}, 0, {}), &via_wire).ok());
  ASSERT_TRUE(runner_->Execute(*wire, &via_wire).ok());
  ASSERT_EQ(direct.logits.size(), static_cast<size_t>(V));
  EXPECT_EQ(direct.logits, via_wire.logits);
  ASSERT_TRUE(runner_->Execute(Step({KvEdit::FreeSequence(0)}, 0, {}), &via_wire).ok());

  // Rank 0's Engine: the same forward; an edit it refuses is not queued.
  Engine engine(runner_.get());
  const int seq = engine.NewSequence();
  ForwardOutput out;
  SeqInput in{seq, {5, 6, 7, 8}, {}, {}, false};
  ASSERT_TRUE(engine.Forward({in}, false, &out).ok());
  EXPECT_EQ(out.logits, direct.logits);
  EXPECT_FALSE(engine.Apply(KvEdit::Truncate(seq, 9)).ok());
  EXPECT_TRUE(engine.Apply(KvEdit::Truncate(seq, 2)).ok());
  EXPECT_EQ(engine.kv().Length(seq), 2);
  engine.FreeSequence(seq);
  EXPECT_EQ(engine.kv().used_pages(), 0);
}

// Q4_0 / Q8_0 and BF16 weights repacked at load (RepackForMatMul, forced on)
// give the logits of the file's layout bit for bit, on every kernel path of
// this CPU (kernel_paths_test_util.h); only the linear layers in anonymous
// memory are repacked, never the embedding table. What is repacked follows
// the contract of kernels::RepackEnabled: Q4_0 / Q8_0 on every path; BF16 on
// the AVX512-BF16 path, except matrices whose many-token products the
// AMX-BF16 tiles take in the file's rows (cols % 32 == 0 with AMX on).
TEST(ModelRunnerRepackTest, RepackedWeightsRunLikeTheFileLayout) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "specd-repack-XXXXXX").string();
  const std::string dir = ::mkdtemp(tmpl.data());
  kernels::SetRepack(true);
  std::unique_ptr<Communicator> comm = NewLocalCommunicator();
  for (DType dtype : {DType::kQ4_0, DType::kQ8_0, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    const bool bf16 = dtype == DType::kBF16;
    FixtureOptions fo;
    fo.preset = "tiny";
    fo.format = bf16 ? "safetensors" : "gguf";
    fo.dtype = dtype;
    fo.out = dir + "/tiny-" + DTypeName(dtype) + (bf16 ? "" : ".gguf");
    fo.seed = 11;
    ASSERT_TRUE(MakeFixture(fo).ok());
    for (const kernels::KernelPathCase& c : kernels::KernelPathCasesOfThisCpu()) {
      SCOPED_TRACE("path " + c.name);
      kernels::ScopedKernelPaths paths(c.paths);
      ASSERT_TRUE(paths.ok());
      const bool bf16_tiles = c.paths.amx_int8 && GetCpuFeatures().amx_bf16;
      auto run = [&](bool repack, bool mmap, int* n_repacked) {
        RunnerOptions ro;
        ro.model_path = fo.out;
        ro.load.use_mmap = mmap;
        ro.repack = repack;
        ro.amx = c.paths.amx_int8;
        auto r = ModelRunner::Create(ro, comm.get());
        EXPECT_TRUE(r.ok()) << r.status().ToString();
        EXPECT_EQ(kernels::AmxActive(), c.paths.amx_int8);
        *n_repacked = 0;
        for (const auto& [name, t] : (*r)->checkpoint().tensors()) {
          if (t.layout == WeightLayout::kRows) continue;
          ++*n_repacked;
          EXPECT_NE(name, "model.embed_tokens.weight");
          if (bf16) {
            EXPECT_EQ(c.paths.bf16, Bf16DotPath::kAvx512Bf16) << name;
            if (bf16_tiles) {
              EXPECT_NE(t.shape[1] % 32, 0) << name << ": the tiles read its rows";
            }
          }
        }
        StepDesc d;
        d.kv_edits = {KvEdit::NewSequence(0)};
        d.batch.push_back(SeqInput{0, {5, 6, 7, 8, 9}, {}, {}, false});
        d.batch.back().all_logits = true;
        ForwardOutput out;
        EXPECT_TRUE((*r)->Execute(d, &out).ok());
        return out.logits;
      };
      int n_file = 0, n_repacked = 0, n_mmap = 0;
      const std::vector<float> file = run(false, false, &n_file);
      const std::vector<float> repacked = run(true, false, &n_repacked);
      const std::vector<float> mmaped = run(true, true, &n_mmap);
      EXPECT_EQ(n_file, 0);
      if (!bf16 || (c.paths.bf16 == Bf16DotPath::kAvx512Bf16 && !bf16_tiles)) {
        EXPECT_GE(n_repacked, 7 * 2) << "every linear layer of both layers";
      }
      EXPECT_EQ(n_mmap, 0) << "mmap-ed bytes are read-only";
      ASSERT_FALSE(file.empty());
      EXPECT_EQ(repacked, file);
      EXPECT_EQ(mmaped, file);
    }
  }
  kernels::ResetRepack();
  std::filesystem::remove_all(dir);
}

// A repacked matrix holds whole rows of 16-row groups: binding a column slice
// of it (what a TP rank would ask) is refused with the tensor's name and the
// way out, not computed from misread bytes.
TEST(ModelRunnerRepackTest, SlicingARepackedMatrixIsRefused) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "specd-repack-XXXXXX").string();
  const std::string dir = ::mkdtemp(tmpl.data());
  FixtureOptions fo;
  fo.preset = "tiny";
  fo.format = "gguf";
  fo.dtype = DType::kQ4_0;
  fo.out = dir + "/tiny-q4_0.gguf";
  ASSERT_TRUE(MakeFixture(fo).ok());
  kernels::SetRepack(true);
  LoadOptions lo;
  lo.use_mmap = false;
  lo.repack_for_matmul = kernels::RepackForMatMul;
  auto ck = OpenCheckpoint(fo.out, lo);
  kernels::ResetRepack();
  ASSERT_TRUE(ck.ok()) << ck.status().ToString();
  const std::string name = "model.layers.0.self_attn.o_proj.weight";
  auto w = (*ck)->Get(name);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->layout, WeightLayout::kRows16);
  const int64_t rows = w->shape[0], cols = w->shape[1];
  Linear whole, slice;
  EXPECT_TRUE(BindLinear(**ck, name, rows, cols, 0, rows, 0, cols, &whole).ok());
  EXPECT_EQ(whole.w.layout, WeightLayout::kRows16);
  Status s = BindLinear(**ck, name, rows, cols, 0, rows, 0, cols / 2, &slice);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--no-repack"), std::string::npos) << s.message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace specd

namespace specd {
namespace {

// KvCacheTokens: the precedence of the sizing options, and the arithmetic
// of each (a page is 16 tokens; 1000 bytes per token).
TEST(KvCacheTokensTest, ExplicitTokensThenBytesThenRequestThenMemory) {
  const int64_t bpt = 1000;
  const std::optional<int64_t> avail = int64_t{400} * 1000 * 1000;  // 400 MB
  std::string why;
  RunnerOptions o;
  // Default: 25% of what is available, a whole number of pages, below 4 x context.
  EXPECT_EQ(KvCacheTokens(o, 1 << 20, bpt, avail, &why), 100000 / 16 * 16);
  EXPECT_NE(why.find("25% of"), std::string::npos) << why;
  // ... at most 4 x context.
  EXPECT_EQ(KvCacheTokens(o, 2048, bpt, avail, &why), 8192);
  EXPECT_NE(why.find("4 x context 2048"), std::string::npos) << why;
  // ... at least one page however little memory there is.
  EXPECT_EQ(KvCacheTokens(o, 2048, bpt, int64_t{1000}, &why), 16);
  // Unknown available memory: the old default.
  EXPECT_EQ(KvCacheTokens(o, 1 << 20, bpt, std::nullopt, &why), 32768);
  // One request: prompt + max tokens (at most the context) + tree rows, rounded up to a page.
  o.kv_request_tokens = 100;
  o.kv_request_extra = 7;
  EXPECT_EQ(KvCacheTokens(o, 2048, bpt, avail, &why), 112);
  EXPECT_EQ(why, "sized to the request");
  EXPECT_EQ(KvCacheTokens(o, 64, bpt, avail, &why), 80);  // 64 + 7 -> 80
  // A byte budget beats the request: as many whole pages as fit.
  o.kv_cache_bytes = 50000;
  EXPECT_EQ(KvCacheTokens(o, 2048, bpt, avail, &why), 48);
  EXPECT_NE(why.find("--kv-cache-memory"), std::string::npos) << why;
  // Explicit tokens beat everything, rounded up to a page.
  o.kv_cache_tokens = 33;
  EXPECT_EQ(KvCacheTokens(o, 2048, bpt, avail, &why), 48);
  EXPECT_EQ(why, "--kv-cache-tokens");
}

TEST(KvCacheTokensTest, RunnerBuildsTheCacheItSized) {
  auto comm = NewLocalCommunicator();
  RunnerOptions ro;
  ro.model_path = testing_util::TinyModelPath();
  ro.kv_request_tokens = 40;
  ro.kv_request_extra = 3;
  auto r = ModelRunner::Create(ro, comm.get());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->kv().n_pages() * (*r)->kv().page_size(), 48);
}

}  // namespace
}  // namespace specd
