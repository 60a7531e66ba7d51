// Lossless speculative decoding: greedy output with speculation (n-gram and a
// random-weight EAGLE-3 head, where acceptance is near zero) is token for
// token the output of plain greedy decoding; sampled output has the plain
// sampler's distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "base/mapped_file.h"
#include "comm/communicator.h"
#include "kernels/kernel_paths_test_util.h"
#include "modelgen/fixture.h"
#include "modelgen/safetensors_writer.h"
#include "runtime/generate.h"
#include "runtime/reference_decode.h"
#include "test_util.h"

namespace specd {
namespace {

// Writes a random EAGLE-3 head for the "tiny" preset (hidden 64, vocab 256,
// 2 layers) with a 128-token draft vocabulary mapping draft id d to target
// id 2d, in the published tensor layout.
Status WriteRandomHead(const std::string& dir) {
  std::filesystem::create_directories(dir);
  RETURN_IF_ERROR(WriteStringToFile(dir + "/config.json", R"({
    "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama",
    "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
    "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 256,
    "draft_vocab_size": 128, "target_hidden_size": 64, "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0, "max_position_embeddings": 512, "tie_word_embeddings": false,
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 1, 1]}})"));
  SafetensorsWriter w;
  auto random = [](uint64_t seed, int64_t cols) {
    return [seed, cols](int64_t row, float* out) {
      std::mt19937 rng(static_cast<uint32_t>(seed * 7919 + row));
      std::normal_distribution<float> d(0.f, 0.1f);
      for (int64_t i = 0; i < cols; ++i) out[i] = d(rng);
    };
  };
  auto ones = [](int64_t, float* out) {
    for (int i = 0; i < 64; ++i) out[i] = 1.f;
  };
  struct T {
    const char* name;
    std::vector<int64_t> shape;
  };
  uint64_t seed = 1;
  for (const T& t : std::vector<T>{{"fc.weight", {64, 192}},
                                   {"midlayer.self_attn.q_proj.weight", {64, 128}},
                                   {"midlayer.self_attn.k_proj.weight", {32, 128}},
                                   {"midlayer.self_attn.v_proj.weight", {32, 128}},
                                   {"midlayer.self_attn.o_proj.weight", {64, 64}},
                                   {"midlayer.mlp.gate_proj.weight", {128, 64}},
                                   {"midlayer.mlp.up_proj.weight", {128, 64}},
                                   {"midlayer.mlp.down_proj.weight", {64, 128}},
                                   {"lm_head.weight", {128, 64}}})
    RETURN_IF_ERROR(w.AddTensor(t.name, DType::kF32, t.shape, random(seed++, t.shape.back())));
  for (const char* n : {"midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight",
                        "midlayer.post_attention_layernorm.weight", "norm.weight"})
    RETURN_IF_ERROR(w.AddTensor(n, DType::kF32, {64}, ones));
  static std::vector<int64_t> d2t(128);
  for (int d = 0; d < 128; ++d) d2t[d] = d;  // target id = d + d2t[d] = 2d
  static std::vector<uint8_t> t2d(256);
  for (int t = 0; t < 256; t += 2) t2d[t] = 1;
  RETURN_IF_ERROR(w.AddRawTensor("d2t", DType::kI64, {128}, d2t.data(), d2t.size() * 8));
  RETURN_IF_ERROR(w.AddRawTensor("t2d", DType::kBool, {256}, t2d.data(), t2d.size()));
  return w.Write(dir + "/model.safetensors");
}

class SpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FixtureOptions fo;
    fo.preset = "tiny";
    fo.out = dir_.path() + "/target";
    fo.seed = 3;
    ASSERT_TRUE(MakeFixture(fo).ok());
    comm_ = NewLocalCommunicator();
    RunnerOptions ro;
    ro.model_path = fo.out;
    ro.threads = 1;
    auto r = ModelRunner::Create(ro, comm_.get());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    runner_ = std::move(r).value();
    engine_ = std::make_unique<Engine>(runner_.get());
  }

  std::vector<int32_t> Run(SpecAlgorithm algo, Eagle3Head* head, const GenerateRequest& req,
                           GenerateResult* res_out = nullptr, int topk = 4) {
    SpecOptions so;
    so.algorithm = algo;
    so.tree.topk = topk;
    GenerateResult res;
    Status s = Generate(*engine_, req, [](int32_t) { return true; }, &res, so, head);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(engine_->kv().used_pages(), 0) << "KV pages leaked";
    if (algo == SpecAlgorithm::kNone && req.stop_ids.empty() && req.sampling.temperature == 0) {
      EXPECT_EQ(res.tokens, ReferenceDecode(*engine_, req.prompt, req.max_tokens));
    }
    if (res_out) *res_out = res;
    return res.tokens;
  }

  static std::vector<GenerateRequest> Requests() {
    std::vector<GenerateRequest> reqs;
    std::vector<std::vector<int32_t>> prompts = {
        {1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3},  // repetitive: n-gram drafts get accepted
        {7},
        {10, 20, 30, 40, 50, 60, 70, 80, 90, 100, 110, 120},
    };
    for (const auto& p : prompts) {
      for (int max_tokens : {1, 7, 40}) {
        GenerateRequest r;
        r.prompt = p;
        r.max_tokens = max_tokens;
        reqs.push_back(r);
      }
    }
    return reqs;
  }

  testing::TempDir dir_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(SpecTest, NgramGreedyEqualsPlainGreedy) {
  int accepted_steps = 0;
  for (const GenerateRequest& req : Requests()) {
    std::vector<int32_t> plain = Run(SpecAlgorithm::kNone, nullptr, req);
    GenerateResult res;
    EXPECT_EQ(Run(SpecAlgorithm::kNgram, nullptr, req, &res), plain);
    for (size_t i = 1; i < res.stats.accept_hist.size(); ++i) accepted_steps += res.stats.accept_hist[i];
  }
  EXPECT_GT(accepted_steps, 0) << "no draft token was ever accepted: the test exercises nothing";
}

TEST_F(SpecTest, StopTokenInsideAcceptedRunEndsThere) {
  GenerateRequest req = Requests()[2];
  std::vector<int32_t> plain = Run(SpecAlgorithm::kNone, nullptr, req);
  ASSERT_GE(plain.size(), 10u);
  req.stop_ids = {plain[5]};
  std::vector<int32_t> want(plain.begin(),
                            std::find(plain.begin(), plain.end(), plain[5]) + 1);
  EXPECT_EQ(Run(SpecAlgorithm::kNgram, nullptr, req), want);
  EXPECT_EQ(Run(SpecAlgorithm::kNone, nullptr, req), want);
}

TEST_F(SpecTest, RandomEagle3HeadGreedyEqualsPlainGreedy) {
  std::string head_dir = dir_.path() + "/head";
  ASSERT_TRUE(WriteRandomHead(head_dir).ok());
  auto head = Eagle3Head::Create(head_dir, runner_->model(), LoadOptions{}, runner_->pool());
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  runner_->SetCaptureLayers((*head)->aux_layers());
  for (int topk : {1, 4}) {
    for (const GenerateRequest& req : Requests()) {
      std::vector<int32_t> plain = Run(SpecAlgorithm::kNone, nullptr, req);
      GenerateResult res;
      EXPECT_EQ(Run(SpecAlgorithm::kEagle3, head->get(), req, &res, topk), plain)
          << "topk " << topk;
      EXPECT_GE(res.stats.accept_length_mean(), req.max_tokens > 1 ? 1.0 : 0.0);
    }
  }
}

TEST_F(SpecTest, EagleHeadFormatErrorsNameTheTensor) {
  std::string head_dir = dir_.path() + "/head";
  ASSERT_TRUE(WriteRandomHead(head_dir).ok());
  // A head whose fc expects a different target width.
  auto cfg = ReadFileToString(head_dir + "/config.json");
  ASSERT_TRUE(cfg.ok());
  std::string bad = *cfg;
  bad.replace(bad.find("\"target_hidden_size\": 64"), 24, "\"target_hidden_size\": 96");
  ASSERT_TRUE(WriteStringToFile(head_dir + "/config.json", bad).ok());
  auto head = Eagle3Head::Create(head_dir, runner_->model(), LoadOptions{}, runner_->pool());
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.status().message().find("target_hidden_size"), std::string::npos)
      << head.status().ToString();
}

// A head made for a model with another vocabulary is refused, naming both
// sizes (the config's vocab_size, and the t2d tensor's length).
TEST_F(SpecTest, EagleHeadForAnotherVocabularyIsRefused) {
  std::string head_dir = dir_.path() + "/head";
  ASSERT_TRUE(WriteRandomHead(head_dir).ok());
  auto cfg = ReadFileToString(head_dir + "/config.json");
  ASSERT_TRUE(cfg.ok());
  std::string bad = *cfg;
  const std::string vocab = "\"vocab_size\": 256";
  bad.replace(bad.find(vocab), vocab.size(), "\"vocab_size\": 512");
  ASSERT_TRUE(WriteStringToFile(head_dir + "/config.json", bad).ok());
  auto head = Eagle3Head::Create(head_dir, runner_->model(), LoadOptions{}, runner_->pool());
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.status().message().find("512"), std::string::npos) << head.status().ToString();
  EXPECT_NE(head.status().message().find("256"), std::string::npos) << head.status().ToString();

  // The config agrees but t2d was written for a 300-token target.
  ASSERT_TRUE(WriteStringToFile(head_dir + "/config.json", *cfg).ok());
  SafetensorsWriter w;
  auto reread = OpenCheckpoint(head_dir);
  ASSERT_TRUE(reread.ok());
  for (const auto& [name, t] : (*reread)->tensors()) {
    if (name == "t2d") continue;
    ASSERT_TRUE(w.AddRawTensor(name, t.dtype, t.shape, t.data, t.nbytes).ok());
  }
  std::vector<uint8_t> t2d(300, 1);
  ASSERT_TRUE(w.AddRawTensor("t2d", DType::kBool, {300}, t2d.data(), t2d.size()).ok());
  ASSERT_TRUE(w.Write(dir_.path() + "/model.safetensors.tmp").ok());
  reread->reset();
  std::filesystem::rename(dir_.path() + "/model.safetensors.tmp", head_dir + "/model.safetensors");
  head = Eagle3Head::Create(head_dir, runner_->model(), LoadOptions{}, runner_->pool());
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.status().message().find("t2d"), std::string::npos) << head.status().ToString();
  EXPECT_NE(head.status().message().find("300"), std::string::npos) << head.status().ToString();
}

// The second generated token comes from the first verify step. Its
// distribution over many seeds must match plain sampling: a two-sample
// chi-square test over the tokens seen, pooled below 5 expected counts,
// at significance 0.001 (critical values from the chi-square table).
// Quantized weights take other kernels for the multi-token verify pass than
// for one-token decoding (the AMX tile kernels where the CPU has them, else
// the AVX512-VNNI / AVX2 / scalar multi-token ones): greedy output must still
// match, on every kernel path of this CPU.
TEST_F(SpecTest, QuantizedNgramGreedyEqualsPlainGreedy) {
  for (DType dtype : {DType::kQ8_0, DType::kQ4_0}) {
    for (const kernels::KernelPathCase& path : kernels::KernelPathCasesOfThisCpu()) {
      const kernels::ScopedKernelPaths paths(path.paths);
      SCOPED_TRACE(std::string(DTypeName(dtype)) + " path " + path.name);
      RunnerOptions ro;
      ro.model_path = dir_.path() + "/target";
      ro.threads = 1;
      ro.load.quantize = dtype;
      ro.amx = path.paths.amx_int8;
      auto r = ModelRunner::Create(ro, comm_.get());
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      Engine engine(r->get());
      int accepted_steps = 0;
      for (const GenerateRequest& req : Requests()) {
        std::vector<int32_t> plain, spec;
        for (SpecAlgorithm algo : {SpecAlgorithm::kNone, SpecAlgorithm::kNgram}) {
          SpecOptions so;
          so.algorithm = algo;
          GenerateResult res;
          Status st = Generate(engine, req, [](int32_t) { return true; }, &res, so);
          ASSERT_TRUE(st.ok()) << st.ToString();
          (algo == SpecAlgorithm::kNone ? plain : spec) = res.tokens;
          for (size_t i = 1; i < res.stats.accept_hist.size(); ++i) accepted_steps += res.stats.accept_hist[i];
        }
        EXPECT_EQ(spec, plain);
      }
      EXPECT_GT(accepted_steps, 0) << "no draft token was ever accepted";
    }
  }
}

TEST_F(SpecTest, NgramSamplingMatchesPlainDistribution) {
  GenerateRequest req;
  req.prompt = {1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3};
  req.max_tokens = 2;
  req.sampling.temperature = 1.5f;
  const int n = 1500;
  std::map<int32_t, int> a, b;
  for (int i = 0; i < n; ++i) {
    req.sampling.seed = 1000 + i;
    auto p = Run(SpecAlgorithm::kNone, nullptr, req);
    req.sampling.seed = 900000 + i;
    auto s = Run(SpecAlgorithm::kNgram, nullptr, req);
    ASSERT_EQ(p.size(), 2u);
    ASSERT_EQ(s.size(), 2u);
    a[p[1]]++;
    b[s[1]]++;
  }
  std::map<int32_t, int> all;
  for (auto [t, c] : a) all[t] += c;
  for (auto [t, c] : b) all[t] += c;
  double chi2 = 0;
  int df = -1;
  int pool_a = 0, pool_b = 0;
  for (auto [t, c] : all) {
    if (c < 10) {
      pool_a += a[t];
      pool_b += b[t];
      continue;
    }
    double e = c / 2.0;
    chi2 += (a[t] - e) * (a[t] - e) / e + (b[t] - e) * (b[t] - e) / e;
    ++df;
  }
  if (pool_a + pool_b > 0) {
    double e = (pool_a + pool_b) / 2.0;
    chi2 += (pool_a - e) * (pool_a - e) / e + (pool_b - e) * (pool_b - e) / e;
    ++df;
  }
  ASSERT_GE(df, 1);
  // Wilson-Hilferty approximation of the 0.999 quantile of chi-square(df).
  double z = 3.090;
  double crit = df * std::pow(1 - 2.0 / (9 * df) + z * std::sqrt(2.0 / (9 * df)), 3);
  EXPECT_LT(chi2, crit) << "df " << df;
}

}  // namespace
}  // namespace specd
