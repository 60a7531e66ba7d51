// Transformer::Forward against a naive double-precision re-implementation of
// the Llama / Qwen2 / Qwen3 layer math (model/tiny_llama_test_util.h) on tiny
// random models, plus the equivalences the engine relies on: prefill then
// decode equals one forward, and a tree-masked row equals its branch alone.
#include "model/transformer.h"

#include <gtest/gtest.h>

#include "model/tiny_llama_test_util.h"

namespace specd {
namespace {

using model_test::MaxRelDiff;
using model_test::TinySpec;

// f32 kernels against a double reference over two layers of width 32.
constexpr double kTol = 2e-4;

struct Case {
  const char* name;
  TinySpec spec;
};

std::vector<Case> Cases() {
  TinySpec llama;  // GQA 4/2, untied, llama3 RoPE scaling over all three bands
  llama.rope_type = "llama3";
  TinySpec qwen2;  // q/k/v biases, tied embeddings, linear RoPE scaling
  qwen2.arch = "Qwen2ForCausalLM";
  qwen2.tie = true;
  qwen2.rope_type = "linear";
  qwen2.factor = 2.0;
  TinySpec qwen3;  // q/k norms, head_dim 16 != hidden / heads, MHA
  qwen3.arch = "Qwen3ForCausalLM";
  qwen3.head_dim = 16;
  qwen3.n_kv_heads = 4;
  return {{"llama", llama}, {"qwen2", qwen2}, {"qwen3", qwen3}};
}

class TransformerTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    spec_ = GetParam().spec;
    weights_ = model_test::RandomLlama(spec_, /*seed=*/42);
    std::string dir = tmp_.path() + "/model";
    ASSERT_TRUE(model_test::WriteModelDir(dir, model_test::ConfigJson(spec_), weights_).ok());
    auto ck = OpenCheckpoint(dir);
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    ckpt_ = std::move(ck).value();
    auto plan = ShardPlan::Create(ckpt_->config(), 0, 1, false);
    ASSERT_TRUE(plan.ok());
    comm_ = NewLocalCommunicator();
    auto t = Transformer::Create(*ckpt_, *plan, comm_.get(), &pool_);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    model_ = std::move(t).value();
    kv_ = std::make_unique<KvCache>(spec_.n_layers, model_->kv_dim_local(), /*page_size=*/4,
                                    /*n_pages=*/64);
  }

  // Runs `tokens` in a fresh sequence and returns the last row's logits.
  std::vector<float> LastLogitsAlone(const std::vector<int32_t>& tokens) {
    int seq = kv_->NewSequence();
    ForwardOutput out;
    Status s = model_->Forward({SeqInput{seq, tokens, {}, {}, false}}, kv_.get(), &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    kv_->FreeSequence(seq);
    return out.logits;
  }

  std::vector<int32_t> Tokens(int n, int salt) const {
    std::vector<int32_t> t(n);
    for (int i = 0; i < n; ++i) t[i] = (i * 7 + salt * 13 + 3) % spec_.vocab;
    return t;
  }

  model_test::TempDir tmp_;
  TinySpec spec_;
  model_test::TensorMap weights_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<Communicator> comm_;
  kernels::ThreadPool pool_{2};
  std::unique_ptr<Transformer> model_;
  std::unique_ptr<KvCache> kv_;
};

TEST_P(TransformerTest, EveryRowMatchesNaiveReference) {
  const int V = spec_.vocab;
  std::vector<int32_t> tokens = Tokens(9, 1);
  auto ref = model_test::NaiveLlamaForward(spec_, weights_, tokens);
  int seq = kv_->NewSequence();
  ForwardOutput out;
  ASSERT_TRUE(model_->Forward({SeqInput{seq, tokens, {}, {}, true}}, kv_.get(), &out).ok());
  ASSERT_EQ(out.logits.size(), tokens.size() * V);
  EXPECT_EQ(kv_->Length(seq), 9);
  double worst = 0, scale = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    worst = std::max(worst, MaxRelDiff(&out.logits[t * V], ref[t]));
    for (double r : ref[t]) scale = std::max(scale, std::abs(r));
  }
  std::printf("[ %s ] maxdiff %.3g over logits up to %.3g\n", GetParam().name, worst, scale);
  EXPECT_LT(worst, kTol);
  EXPECT_GT(scale, 0.5) << "logits too small for the comparison to mean anything";
}

TEST_P(TransformerTest, PrefillThenDecodeEqualsOneForward) {
  const int V = spec_.vocab;
  std::vector<int32_t> tokens = Tokens(12, 2);
  std::vector<float> whole = LastLogitsAlone(tokens);
  auto ref = model_test::NaiveLlamaForward(spec_, weights_, tokens);

  int seq = kv_->NewSequence();
  ForwardOutput out;
  std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 9);
  ASSERT_TRUE(model_->Forward({SeqInput{seq, prompt, {}, {}, false}}, kv_.get(), &out).ok());
  ASSERT_EQ(out.logits.size(), size_t(V)) << "only the last row without all_logits";
  EXPECT_LT(MaxRelDiff(out.logits.data(), ref[8]), kTol);
  for (int i = 9; i < 12; ++i) {
    ASSERT_TRUE(model_->Forward({SeqInput{seq, {tokens[i]}, {}, {}, false}}, kv_.get(), &out).ok());
    EXPECT_LT(MaxRelDiff(out.logits.data(), ref[i]), kTol) << "decode step " << i;
  }
  EXPECT_EQ(kv_->Length(seq), 12);
  EXPECT_LT(MaxRelDiff(out.logits.data(), whole.data(), V), kTol);
}

// A draft tree after a committed prefix, batched with another sequence's
// decode step: each tree row must equal its root-to-node path run alone.
TEST_P(TransformerTest, TreeMaskedRowsEqualTheirBranchAlone) {
  const int V = spec_.vocab;
  std::vector<int32_t> prefix = Tokens(5, 3);
  // Node 0 (root) has children 1 and 2; 1 has 3 and 4; 2 has 5.
  const std::vector<int> parent = {-1, 0, 0, 1, 1, 2};
  const std::vector<int32_t> node_tok = {11, 5, 17, 29, 2, 8};
  const int n = static_cast<int>(parent.size()), P = static_cast<int>(prefix.size());
  std::vector<uint8_t> mask(n * n, 0);
  std::vector<int32_t> pos(n);
  std::vector<std::vector<int32_t>> path(n);
  for (int i = 0; i < n; ++i) {
    int depth = 0;
    for (int a = i; a >= 0; a = parent[a], ++depth) {
      mask[i * n + a] = 1;
      path[i].insert(path[i].begin(), node_tok[a]);
    }
    pos[i] = P + depth - 1;
  }

  int tree_seq = kv_->NewSequence(), other = kv_->NewSequence();
  std::vector<int32_t> other_tok = Tokens(4, 4);
  ForwardOutput out;
  ASSERT_TRUE(model_->Forward({SeqInput{tree_seq, prefix, {}, {}, false},
                               SeqInput{other, {other_tok.begin(), other_tok.end() - 1}, {}, {}, false}},
                              kv_.get(), &out)
                  .ok());
  ASSERT_TRUE(model_->Forward({SeqInput{other, {other_tok.back()}, {}, {}, false},
                               SeqInput{tree_seq, node_tok, pos, mask, true}},
                              kv_.get(), &out)
                  .ok());
  ASSERT_EQ(out.seq_row, (std::vector<int>{0, 1}));
  ASSERT_EQ(out.logits.size(), size_t(1 + n) * V);
  EXPECT_LT(MaxRelDiff(out.logits.data(), LastLogitsAlone(other_tok).data(), V), kTol)
      << "the other sequence's decode row";
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> alone = prefix;
    alone.insert(alone.end(), path[i].begin(), path[i].end());
    const float* row = &out.logits[size_t(1 + i) * V];
    EXPECT_LT(MaxRelDiff(row, LastLogitsAlone(alone).data(), V), kTol) << "tree node " << i;
    EXPECT_LT(MaxRelDiff(row, model_test::NaiveLlamaForward(spec_, weights_, alone).back()), kTol)
        << "tree node " << i << " vs naive";
  }
}

TEST_P(TransformerTest, RejectsBadInputWithoutTouchingTheCache) {
  int seq = kv_->NewSequence();
  ForwardOutput out;
  Status s = model_->Forward({SeqInput{seq, {1, spec_.vocab}, {}, {}, false}}, kv_.get(), &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  s = model_->Forward({SeqInput{seq, {1, 2}, {}, {1, 1, 1}, false}}, kv_.get(), &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "3-entry mask for 2 tokens";
  EXPECT_EQ(kv_->Length(seq), 0);
  // 2 pages of 4 slots cannot take 9 tokens.
  KvCache small(spec_.n_layers, model_->kv_dim_local(), 4, 2);
  int s2 = small.NewSequence();
  s = model_->Forward({SeqInput{s2, Tokens(9, 5), {}, {}, false}}, &small, &out);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted) << s.ToString();
  EXPECT_EQ(small.Length(s2), 0);
  EXPECT_EQ(small.free_pages(), 2);
  s = model_->Forward({SeqInput{seq, Tokens(spec_.max_pos + 1, 6), {}, {}, false}}, kv_.get(), &out);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.ToString();
}

INSTANTIATE_TEST_SUITE_P(Archs, TransformerTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace specd
