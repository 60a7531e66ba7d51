// Eagle3Head::Forward against a naive double-precision implementation of the
// head's math (eagle3_head.h) on a tiny random head, causal and tree-masked.
// The comparison uses a tolerance, so it holds whichever attention code the
// head uses.
#include "spec/eagle3_head.h"

#include <gtest/gtest.h>

#include "model/tiny_llama_test_util.h"
#include "model/transformer.h"
#include "spec/speculator.h"

namespace specd {
namespace {

using model_test::HostTensor;
using model_test::MaxRelDiff;
using model_test::Vec;

constexpr int H = 32, kHeads = 4, kKvHeads = 2, kHeadDim = 8, kFfn = 48, kVocab = 40,
              kDraftVocab = 20;
constexpr double kEps = 1e-5, kTol = 2e-4;

const char kHeadConfig[] = R"({
  "architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 32, "intermediate_size": 48,
  "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1,
  "vocab_size": 40, "draft_vocab_size": 20, "target_hidden_size": 32, "rms_norm_eps": 1e-5,
  "rope_theta": 10000.0, "max_position_embeddings": 256,
  "eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 1, 1]}})";

model_test::TensorMap RandomHead(uint64_t seed) {
  model_test::TensorMap m =
      model_test::RandomEagle3Head(seed, H, kHeads, kKvHeads, kHeadDim, kFfn, kDraftVocab);
  HostTensor d2t{{kDraftVocab}, {}, std::vector<int64_t>(kDraftVocab)};
  for (int d = 0; d < kDraftVocab; ++d) d2t.i64[d] = d;  // draft d -> target 2d
  m["d2t"] = d2t;
  return m;
}

// The head's math, in double, with its own K/V list.
class NaiveHead {
 public:
  NaiveHead(const model_test::TensorMap* head, const HostTensor* embed) : w_(*head), embed_(*embed) {
    inv_ = model_test::NaiveInvFreq(kHeadDim, 10000, "", 1, 1, 4, 8192);
  }
  int length() const { return static_cast<int>(k_.size()); }
  void Truncate(int n) {
    k_.resize(n);
    v_.resize(n);
  }
  // Same contract as Eagle3Head::Forward; returns (hidden, logits) per row.
  void Forward(const std::vector<int32_t>& tokens, const std::vector<Vec>& in, bool from_aux,
               const std::vector<int32_t>& pos, int n_prefix,
               const std::vector<std::vector<int>>& visible, std::vector<Vec>* hid,
               std::vector<Vec>* logits) {
    const int n = static_cast<int>(tokens.size()), base = length();
    std::vector<Vec> h(n), q(n);
    for (int i = 0; i < n; ++i) {
      h[i] = from_aux ? model_test::MatVec(W("fc.weight"), in[i]) : in[i];
      Vec e = model_test::RmsNorm(model_test::Row(embed_, tokens[i]),
                                  W("midlayer.input_layernorm.weight"), kEps);
      Vec hn = model_test::RmsNorm(h[i], W("midlayer.hidden_norm.weight"), kEps);
      Vec x = e;
      x.insert(x.end(), hn.begin(), hn.end());
      q[i] = model_test::MatVec(W("midlayer.self_attn.q_proj.weight"), x);
      Vec k = model_test::MatVec(W("midlayer.self_attn.k_proj.weight"), x);
      Vec v = model_test::MatVec(W("midlayer.self_attn.v_proj.weight"), x);
      for (int hh = 0; hh < kHeads; ++hh) model_test::NaiveRopeHalf(&q[i][hh * kHeadDim], kHeadDim, pos[i], inv_);
      for (int hh = 0; hh < kKvHeads; ++hh) model_test::NaiveRopeHalf(&k[hh * kHeadDim], kHeadDim, pos[i], inv_);
      k_.push_back(k);
      v_.push_back(v);
    }
    hid->assign(n, {});
    logits->assign(n, {});
    for (int i = 0; i < n; ++i) {
      std::vector<int> slots;
      for (int s = 0; s < n_prefix; ++s) slots.push_back(s);
      if (visible.empty()) {
        for (int s = n_prefix; s <= base + i; ++s) slots.push_back(s);
      } else {
        for (int s : visible[i])
          if (s >= n_prefix) slots.push_back(s);
      }
      Vec att(kHeads * kHeadDim);
      for (int hh = 0; hh < kHeads; ++hh) {
        std::vector<const double*> ks, vs;
        for (int s : slots) {
          ks.push_back(&k_[s][(hh / (kHeads / kKvHeads)) * kHeadDim]);
          vs.push_back(&v_[s][(hh / (kHeads / kKvHeads)) * kHeadDim]);
        }
        model_test::NaiveAttendHead(&q[i][hh * kHeadDim], ks, vs, kHeadDim, &att[hh * kHeadDim]);
      }
      Vec o = model_test::MatVec(W("midlayer.self_attn.o_proj.weight"), att);
      for (int j = 0; j < H; ++j) h[i][j] += o[j];
      Vec pn = model_test::RmsNorm(h[i], W("midlayer.post_attention_layernorm.weight"), kEps);
      Vec g = model_test::MatVec(W("midlayer.mlp.gate_proj.weight"), pn);
      Vec u = model_test::MatVec(W("midlayer.mlp.up_proj.weight"), pn);
      for (size_t j = 0; j < g.size(); ++j) g[j] = model_test::Silu(g[j]) * u[j];
      Vec d = model_test::MatVec(W("midlayer.mlp.down_proj.weight"), g);
      for (int j = 0; j < H; ++j) h[i][j] += d[j];
      (*hid)[i] = h[i];
      (*logits)[i] = model_test::MatVec(W("lm_head.weight"),
                                        model_test::RmsNorm(h[i], W("norm.weight"), kEps));
    }
  }

 private:
  const HostTensor& W(const char* name) const { return w_.at(name); }
  const model_test::TensorMap& w_;
  const HostTensor& embed_;
  Vec inv_;
  std::vector<Vec> k_, v_;
};

class Eagle3HeadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    target_spec_.hidden = H;
    target_spec_.vocab = kVocab;
    target_weights_ = model_test::RandomLlama(target_spec_, 5);
    std::string tdir = tmp_.path() + "/target", hdir = tmp_.path() + "/head";
    ASSERT_TRUE(model_test::WriteModelDir(tdir, model_test::ConfigJson(target_spec_), target_weights_).ok());
    head_weights_ = RandomHead(9);
    ASSERT_TRUE(model_test::WriteModelDir(hdir, kHeadConfig, head_weights_).ok());
    auto ck = OpenCheckpoint(tdir);
    ASSERT_TRUE(ck.ok()) << ck.status().ToString();
    ckpt_ = std::move(ck).value();
    comm_ = NewLocalCommunicator();
    auto plan = ShardPlan::Create(ckpt_->config(), 0, 1, false);
    ASSERT_TRUE(plan.ok());
    auto t = Transformer::Create(*ckpt_, *plan, comm_.get(), &pool_);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    target_ = std::move(t).value();
    auto h = Eagle3Head::Create(hdir, *target_, LoadOptions{}, &pool_);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    head_ = std::move(h).value();
    naive_ = std::make_unique<NaiveHead>(&head_weights_,
                                         &target_weights_.at("model.embed_tokens.weight"));
  }

  std::vector<Vec> RandomRows(int n, int width, uint64_t seed) {
    model_test::Rng rng(seed);
    std::vector<Vec> rows(n, Vec(width));
    for (Vec& r : rows)
      for (double& x : r) x = static_cast<float>(2.0 * rng.Uniform());
    return rows;
  }
  static std::vector<float> Flat(const std::vector<Vec>& rows) {
    std::vector<float> f;
    for (const Vec& r : rows) f.insert(f.end(), r.begin(), r.end());
    return f;
  }
  // Runs both implementations and compares every row's hidden and logits.
  void RunBoth(Eagle3Head::State* st, NaiveHead* naive, const std::vector<int32_t>& tokens,
               const std::vector<Vec>& in, bool from_aux, const std::vector<int32_t>& pos,
               int n_prefix, const std::vector<std::vector<int>>& visible,
               std::vector<float>* hid = nullptr, std::vector<float>* logits = nullptr) {
    std::vector<float> h, l;
    std::vector<float> flat = Flat(in);
    Status s = head_->Forward(st, tokens, flat.data(), from_aux, pos, n_prefix, visible, &h, &l);
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::vector<Vec> rh, rl;
    naive->Forward(tokens, in, from_aux, pos, n_prefix, visible, &rh, &rl);
    ASSERT_EQ(h.size(), tokens.size() * H);
    ASSERT_EQ(l.size(), tokens.size() * kDraftVocab);
    for (size_t i = 0; i < tokens.size(); ++i) {
      EXPECT_LT(MaxRelDiff(&h[i * H], rh[i]), kTol) << "hidden of row " << i;
      EXPECT_LT(MaxRelDiff(&l[i * kDraftVocab], rl[i]), kTol) << "logits of row " << i;
    }
    EXPECT_EQ(st->length, naive->length());
    if (hid) *hid = h;
    if (logits) *logits = l;
  }

  model_test::TempDir tmp_;
  model_test::TinySpec target_spec_;
  model_test::TensorMap target_weights_, head_weights_;
  std::unique_ptr<Checkpoint> ckpt_;
  std::unique_ptr<Communicator> comm_;
  kernels::ThreadPool pool_{2};
  std::unique_ptr<Transformer> target_;
  std::unique_ptr<Eagle3Head> head_;
  std::unique_ptr<NaiveHead> naive_;
};

TEST_F(Eagle3HeadTest, LoadsShapesAndDraftVocabulary) {
  EXPECT_EQ(head_->hidden_dim(), H);
  EXPECT_EQ(head_->draft_vocab(), kDraftVocab);
  EXPECT_EQ(head_->aux_layers(), (std::vector<int>{0, 1, 1}));
  for (int d = 0; d < kDraftVocab; ++d) EXPECT_EQ(head_->ToTarget(d), 2 * d);
}

TEST_F(Eagle3HeadTest, CausalForwardDraftStepsAndTruncateMatchNaive) {
  Eagle3Head::State st;
  // Prefill from the target's fused states, positions 0..4.
  std::vector<float> hid;
  RunBoth(&st, naive_.get(), {3, 14, 15, 9, 26}, RandomRows(5, 3 * H, 1), true, {0, 1, 2, 3, 4},
          0, {}, &hid);
  // Two draft steps feeding back the head's own output hidden state.
  for (int step = 0; step < 2; ++step) {
    Vec last(hid.end() - H, hid.end());
    RunBoth(&st, naive_.get(), {static_cast<int32_t>(5 + step)}, {last}, false, {5 + step}, 5, {},
            &hid);
  }
  EXPECT_EQ(st.length, 7);
  // Drop the drafts and the last committed slot, then continue differently.
  head_->Truncate(&st, 4);
  naive_->Truncate(4);
  EXPECT_EQ(st.length, 4);
  RunBoth(&st, naive_.get(), {35, 8}, RandomRows(2, 3 * H, 2), true, {4, 5}, 0, {});
}

// A draft tree after 4 committed slots: node 0 (root) has children 1 and 2;
// 1 has 3 and 4; 2 has 5. Run all at once, or level by level as the drafter
// does (later levels see earlier calls' slots through `visible`); each row
// must match the naive head and its root-to-node branch run alone causally.
TEST_F(Eagle3HeadTest, TreeRowsMatchNaiveAndTheirBranchAlone) {
  const std::vector<int> parent = {-1, 0, 0, 1, 1, 2};
  const std::vector<int32_t> tok = {7, 1, 30, 12, 19, 2};
  const std::vector<int> level = {0, 1, 1, 2, 2, 2};
  const int n = static_cast<int>(parent.size()), P = 4;
  const std::vector<Vec> in = RandomRows(n, H, 3);
  std::vector<std::vector<int>> visible(n), path(n);
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) {
    for (int a = i; a >= 0; a = parent[a]) path[i].insert(path[i].begin(), a);
    for (int a : path[i]) visible[i].push_back(P + a);
    pos[i] = P + static_cast<int>(path[i].size()) - 1;
  }

  for (bool by_level : {false, true}) {
    SCOPED_TRACE(by_level ? "level by level" : "one call");
    Eagle3Head::State st;
    NaiveHead naive(&head_weights_, &target_weights_.at("model.embed_tokens.weight"));
    RunBoth(&st, &naive, {3, 14, 15, 9}, RandomRows(P, 3 * H, 4), true, {0, 1, 2, 3}, 0, {});
    const Eagle3Head::State committed = st;
    std::vector<float> tree_h(size_t(n) * H), tree_l(size_t(n) * kDraftVocab);
    for (int lv = 0; lv < (by_level ? 3 : 1); ++lv) {
      std::vector<int> rows;
      for (int i = 0; i < n; ++i)
        if (!by_level || level[i] == lv) rows.push_back(i);
      std::vector<int32_t> t, p;
      std::vector<Vec> x;
      std::vector<std::vector<int>> vis;
      for (int i : rows) {
        t.push_back(tok[i]);
        p.push_back(pos[i]);
        x.push_back(in[i]);
        vis.push_back(visible[i]);
      }
      std::vector<float> h, l;
      RunBoth(&st, &naive, t, x, false, p, P, vis, &h, &l);
      for (size_t r = 0; r < rows.size(); ++r) {
        std::copy(h.begin() + r * H, h.begin() + (r + 1) * H, tree_h.begin() + size_t(rows[r]) * H);
        std::copy(l.begin() + r * kDraftVocab, l.begin() + (r + 1) * kDraftVocab,
                  tree_l.begin() + size_t(rows[r]) * kDraftVocab);
      }
    }
    for (int i = 0; i < n; ++i) {
      Eagle3Head::State alone = committed;
      std::vector<int32_t> t, p;
      std::vector<float> x;
      for (int a : path[i]) {
        t.push_back(tok[a]);
        p.push_back(pos[a]);
        x.insert(x.end(), in[a].begin(), in[a].end());
      }
      std::vector<float> h, l;
      ASSERT_TRUE(head_->Forward(&alone, t, x.data(), false, p, P, {}, &h, &l).ok());
      EXPECT_LT(MaxRelDiff(&tree_h[size_t(i) * H], &h[h.size() - H], H), kTol) << "node " << i;
      EXPECT_LT(MaxRelDiff(&tree_l[size_t(i) * kDraftVocab], &l[l.size() - kDraftVocab],
                           kDraftVocab),
                kTol)
          << "node " << i;
    }
  }
}

// An auto-shaped plain step (Speculator::AcceptPlain, no draft tree or
// verification) leaves the draft head where a verified one-node step
// (ExtendAccepted) does: the next draft is the same, and differs from a head
// that was not fed the step's row.
TEST_F(Eagle3HeadTest, PlainStepFeedsTheHeadAsAVerifiedOneNodeStep) {
  SpecOptions o;
  o.algorithm = SpecAlgorithm::kEagle3;
  o.auto_shape = true;
  o.max_auto_depth = 3;
  const ModelConfig& config = target_->config();
  Speculator verified(o, head_.get(), config), plain(o, head_.get(), config),
      unfed(o, head_.get(), config);
  // Target rows of positions 0..5 (fused low/mid/high states).
  const std::vector<float> rows = Flat(RandomRows(6, 3 * H, 7));
  const size_t stride = 3 * H;
  std::vector<int32_t> history = {3, 14, 15, 9, 26, 11};  // 11: sampled after the prompt
  const std::vector<int32_t> next(history.begin() + 1, history.end());
  for (Speculator* s : {&verified, &plain, &unfed})
    ASSERT_TRUE(s->ExtendPrefill(rows.data(), next, 0).ok());
  // The step at L = 5 fed token 11 and sampled 30.
  VerifyResult one_node;
  one_node.path = {0};
  one_node.bonus_token = 30;
  one_node.emitted = {30};
  ASSERT_TRUE(verified.ExtendAccepted(one_node, rows.data() + 5 * stride, 5).ok());
  plain.AcceptPlain(rows.data() + 5 * stride, 30, 5);
  history.push_back(30);
  SeqInput a, b, c;
  ASSERT_TRUE(verified.Draft(history, 6, 0, &a, 3).ok());
  ASSERT_TRUE(plain.Draft(history, 6, 0, &b, 3).ok());
  ASSERT_TRUE(unfed.Draft(history, 6, 0, &c, 3).ok());
  ASSERT_EQ(a.tokens.size(), 4u);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.pos, b.pos);
  EXPECT_NE(a.tokens, c.tokens);
}

// What the cost model learns a draft's price from: a draft that first fed
// the head rows of the prompt or of plain steps is a catch-up; one fed only
// the rows accepted by the step before is not.
TEST_F(Eagle3HeadTest, ADraftAfterPlainStepsCatchesUpOneAfterADraftDoesNot) {
  SpecOptions o;
  o.algorithm = SpecAlgorithm::kEagle3;
  o.auto_shape = true;
  o.max_auto_depth = 3;
  Speculator s(o, head_.get(), target_->config());
  const std::vector<float> rows = Flat(RandomRows(8, 3 * H, 11));
  const size_t stride = 3 * H;
  std::vector<int32_t> history = {3, 14, 15, 9, 26, 11};
  ASSERT_TRUE(s.ExtendPrefill(rows.data(), {14, 15, 9, 26, 11}, 0).ok());
  SeqInput in;
  ASSERT_TRUE(s.Draft(history, 5, 0, &in, 2).ok());
  EXPECT_TRUE(s.last_draft_caught_up());  // the prompt's rows
  // The root and the first draft token were accepted, then token 29.
  VerifyResult vr;
  vr.path = {0, 1};
  vr.bonus_token = 29;
  vr.emitted = {s.tree().tokens[1], 29};
  ASSERT_TRUE(s.ExtendAccepted(vr, rows.data() + 5 * stride, 5).ok());
  history.insert(history.end(), vr.emitted.begin(), vr.emitted.end());
  ASSERT_TRUE(s.Draft(history, 7, 0, &in, 2).ok());
  EXPECT_FALSE(s.last_draft_caught_up());
  // A plain step: no draft, and the next draft catches up on its row.
  ASSERT_TRUE(s.Draft(history, 7, 0, &in, 0).ok());
  EXPECT_FALSE(s.last_draft_caught_up());
  s.AcceptPlain(rows.data() + 7 * stride, 28, 7);
  history.push_back(28);
  ASSERT_TRUE(s.Draft(history, 8, 0, &in, 1).ok());
  EXPECT_TRUE(s.last_draft_caught_up());
}

}  // namespace
}  // namespace specd
